"""A helper server of a test (s3rver, PgBouncer) as a subprocess on the loopback, and a
free port for one. Imports nothing of Django, so the benchmarks use it before setup."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator


def free_port() -> int:
    """A TCP port of the loopback that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def loopback_server(command: list[str], port: int, name: str) -> Iterator[subprocess.Popen]:
    """Start ``command``, wait until it accepts connections on 127.0.0.1:``port``, yield
    the process, and stop it when the block ends (RuntimeError, with what it printed, if
    it exits before)."""
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        for _ in range(300):  # a hang guard, not a speed limit
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited: {process.stderr.read().decode()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"{name} did not start")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
