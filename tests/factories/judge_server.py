"""A loopback OpenAI-compatible chat-completions server for judge-run tests.

It speaks the API's shapes (request: ``model``, ``messages`` with a text part and an
``image_url`` data URL, ``temperature``; response: ``choices[0].message.content`` and
``usage``), checks the bearer key, and answers each request with what the test's
``script(prompt, n)`` says, ``n`` being how many times that prompt was asked: a reply
text, or ``(status, body, headers)``, or ``("sleep", seconds, reply)``. It records every
request body and counts the requests.

It listens on the loopback, which judge runs refuse unless the deployment lists it in
``CAPEVAL_JUDGE_ALLOWED_HOSTS`` (``annotation/judges/network.py``): a test module that
runs a judge through the platform uses the ``judge_on_loopback`` fixture, as a deployment
with a local vLLM server sets the same.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

KEY = "sk-test-Very5ecretKey-0123456789abcdef"
USAGE = {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def _send(self, status: int, body: Any, headers=()) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (timeouts)
            self.wfile.write(data)

    def do_POST(self) -> None:
        server: FakeJudge = self.server.owner  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"][0]["text"]
        with server.lock:
            server.requests[prompt] += 1
            n = server.requests[prompt]
            server.bodies.append(body)
            server.headers.append(dict(self.headers))
        if self.path != "/v1/chat/completions":
            return self._send(404, {"error": {"message": "no such route"}})
        if self.headers.get("Authorization") != f"Bearer {server.key}":
            # Real APIs echo part of a wrong key; this one echoes all of it.
            sent = self.headers.get("Authorization", "")
            return self._send(401, {"error": {"message": f"Incorrect API key provided: {sent}"}})
        answer = server.script(prompt, n)
        if isinstance(answer, tuple) and answer[0] == "sleep":
            time.sleep(answer[1])
            answer = answer[2]
        if isinstance(answer, tuple):
            return self._send(*answer)
        return self._send(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer},
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            },
        )


class FakeJudge:
    def __init__(self, script: Callable[[str, int], Any], key: str = KEY):
        self.script, self.key = script, key
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bodies.clear()
            self.headers.clear()


@contextlib.contextmanager
def fake_judge(script: Callable[[str, int], Any], key: str = KEY) -> Iterator[FakeJudge]:
    server = FakeJudge(script, key)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.fixture
def judge_on_loopback(settings):
    """The deployment's allow-list naming the loopback, where these servers listen."""
    settings.CAPEVAL_JUDGE_ALLOWED_HOSTS = ["127.0.0.1"]
