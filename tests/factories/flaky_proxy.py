"""A TCP proxy on the loopback that makes the network flaky: seeded resets and delays.

Used by ``bench/client_faults.py`` (30% of requests' connections cut, the others
delayed) and by ``tests/e2e/test_server_restart.py`` (no random faults; one submission held
in flight while the server is killed). Plain asyncio streams: the faults are TCP resets,
which is what a phone losing its signal or a café's access point does to a browser; an
HTTP-aware proxy (mitmproxy and the like) would answer requests itself and hide exactly that.

The proxy reads only each request's first line (a browser keeps a connection open for many
requests, so a fate per connection would spare every request after the first). Each request
draws its fate from one ``random.Random(seed)`` in the order the requests arrive (a run is
reproducible up to the browsers' own scheduling):

- ``drop_before`` (half of the ``drop`` share): the browser's connection is reset
  (``SO_LINGER`` 0, an RST) before the request is forwarded: the server never sees it;
- ``drop_after`` (the other half): the request is forwarded and, when the server's answer
  starts to come back, the browser's connection is reset: the server did the work, the
  browser never learns it;
- otherwise the request is forwarded after a delay of up to ``max_delay_s``.

Requests for paths under ``spare`` (``/static/``) are forwarded untouched: in production a
browser keeps the scripts and styles in its cache (whitenoise's far-future headers) and
does not ask again on every page, while ``runserver`` has it revalidate them each time; cut,
they would measure that difference, not the pages' handling of a lost answer.

``hold_next_post(marker)`` makes the proxy keep the next request whose first line is a POST
containing ``marker`` instead of forwarding it, sets ``held`` and waits for ``release()``;
the test kills the server meanwhile, so the held submission is one truly in flight (sent by
the browser, unanswered) when the server dies. The proxy runs its own event loop in a
daemon thread; ``stop()`` closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field

REQUEST_LINE = re.compile(r"^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) \S+ HTTP/1\.[01]$")


@dataclass
class ProxyCounts:
    connections: int = 0
    requests: int = 0
    fates: Counter = field(default_factory=Counter)
    #: First request lines of connections reset, by fate (what the browser lost).
    dropped_lines: list[tuple[str, str]] = field(default_factory=list)


class FlakyProxy:
    def __init__(
        self,
        upstream_port: int,
        *,
        drop: float = 0.0,
        max_delay_s: float = 0.0,
        seed: int = 42,
        listen_port: int = 0,
        spare: tuple[str, ...] = ("/static/",),
    ):
        self.upstream_port = upstream_port
        self.drop = drop
        self.max_delay_s = max_delay_s
        self.spare = spare
        self.rng = random.Random(seed)
        self.counts = ProxyCounts()
        self.faults = True  # off: forward everything undelayed (the baseline's path)
        self.held = threading.Event()
        self._hold_marker: str | None = None
        self._release: asyncio.Event | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(listen_port,), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")

    # ------------------------------------------------------------------ control (any thread)

    def hold_next_post(self, marker: str) -> None:
        """Keep the next POST whose request line contains ``marker`` until ``release()``."""
        self.held.clear()
        self._hold_marker = marker

    def release(self) -> None:
        self._hold_marker = None
        if self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def stop(self) -> None:
        self.release()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # ------------------------------------------------------------------ the loop's thread

    def _run(self, listen_port: int) -> None:
        asyncio.set_event_loop(self._loop)
        self._release = asyncio.Event()
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", listen_port, backlog=512)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            # Connections still open (a browser's idle keep-alive) end with the proxy.
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()

    def _fate(self, line: str) -> tuple[str, float]:
        if not self.faults:
            return "forward", 0.0
        if line.split(" ", 2)[1].startswith(self.spare):
            return "spared", 0.0
        draw, side, delay = self.rng.random(), self.rng.random(), self.rng.random()
        if draw < self.drop:
            return ("drop_before" if side < 0.5 else "drop_after"), 0.0
        return "forward", delay * self.max_delay_s

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter):
        self.counts.connections += 1
        upstream_w = None
        try:
            first = await asyncio.wait_for(client_r.read(65536), timeout=60)
            if not first:
                return
            try:
                upstream_r, upstream_w = await asyncio.open_connection(
                    "127.0.0.1", self.upstream_port
                )
            except OSError:
                # The server is down: the browser sees the connection cut.
                _reset(client_w)
                return
            cut = asyncio.Event()  # set: reset the browser at the server's next bytes
            await asyncio.gather(
                self._requests(first, client_r, upstream_w, cut),
                self._answers(upstream_r, client_w, cut),
            )
        except (OSError, TimeoutError, asyncio.IncompleteReadError, _Reset):
            _reset(client_w)
        finally:
            for writer in (upstream_w, client_w):
                if writer is not None:
                    with contextlib.suppress(Exception):
                        writer.close()

    async def _requests(self, chunk, client_r, upstream_w, cut) -> None:
        """Browser to server: each new request's fate is drawn as its first line passes."""
        while chunk:
            line = chunk.split(b"\r\n", 1)[0].decode("latin-1")
            if REQUEST_LINE.match(line):
                fate, delay = self._fate(line)
                self.counts.requests += 1
                self.counts.fates[fate] += 1
                if fate == "drop_before":
                    self.counts.dropped_lines.append((fate, line))
                    raise _Reset
                marker = self._hold_marker
                if marker and line.startswith("POST ") and marker in line:
                    self._hold_marker = None
                    self._release.clear()
                    self.held.set()
                    await self._release.wait()
                    if not self.upstream_alive():
                        self.counts.dropped_lines.append(("held", line))
                        raise _Reset
                if delay:
                    await asyncio.sleep(delay)
                if fate == "drop_after":
                    self.counts.dropped_lines.append((fate, line))
                    cut.set()
            upstream_w.write(chunk)
            await upstream_w.drain()
            chunk = await client_r.read(65536)
        with contextlib.suppress(Exception):
            upstream_w.write_eof()

    async def _answers(self, upstream_r, client_w, cut) -> None:
        """Server to browser; a request drawn ``drop_after`` is answered with a reset."""
        while chunk := await upstream_r.read(65536):
            if cut.is_set():
                raise _Reset
            client_w.write(chunk)
            await client_w.drain()
        with contextlib.suppress(Exception):
            client_w.write_eof()

    def upstream_alive(self) -> bool:
        """Whether the server accepts a connection now (a blocking probe, under a second)."""
        try:
            socket.create_connection(("127.0.0.1", self.upstream_port), timeout=1).close()
        except OSError:
            return False
        return True


class _Reset(Exception):
    """Cut the browser's connection now."""


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST, not a FIN: what a cut network looks like to the browser."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()
