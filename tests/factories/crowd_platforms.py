"""A local stand-in for Prolific's and MTurk's APIs on the loopback, for the crowd tests.

It speaks the documented shapes CapEval uses (annotation/crowd/prolific.py, mturk.py) and
records every request, so a test asserts what reached "the platform": ids, bodies, and how
many times a bonus was paid. ``pay_delay`` makes the pay answer arrive after the client's
timeout (the payment is counted first, as a real platform would have made it).
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MTURK_PREFIX = "MTurkRequesterServiceV20170117."


@dataclass
class PlatformState:
    prolific_token: str = ""
    submissions: list = field(default_factory=list)
    assignments: dict = field(default_factory=dict)  # HIT id -> list of assignments
    assignment_seconds: int = 600
    requests: list = field(default_factory=list)  # (platform, operation, path, body, headers)
    pays: dict = field(default_factory=dict)  # set-up id -> times paid
    bonus_tokens: dict = field(default_factory=dict)  # MTurk UniqueRequestToken -> times
    bonuses_paid: list = field(default_factory=list)  # MTurk bonuses actually paid
    pay_delay: float = 0.0
    set_ups: int = 0

    def calls(self, operation: str) -> list:
        return [r for r in self.requests if r[1] == operation]


class _Handler(BaseHTTPRequestHandler):
    state: PlatformState

    def log_message(self, *args):  # keep test output clean
        pass

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _send(self, status: int, payload: dict, content_type="application/json") -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _prolific_auth(self) -> bool:
        if self.headers.get("Authorization") != f"Token {self.state.prolific_token}":
            self._send(401, {"error": {"detail": "Invalid token."}})
            return False
        return True

    def do_GET(self):
        state = self.state
        parts = self.path.strip("/").split("/")
        state.requests.append(("prolific", "GET", self.path, {}, dict(self.headers)))
        if not self._prolific_auth():
            return
        if parts[:3] == ["api", "v1", "studies"] and parts[-1] == "submissions":
            rows = [s for s in state.submissions if s.get("study_id") == parts[3]]
            return self._send(200, {"results": rows, "_links": {"next": {"href": None}}})
        self._send(404, {"error": "not found"})

    def do_POST(self):
        target = self.headers.get("X-Amz-Target", "")
        if target.startswith(MTURK_PREFIX):
            return self._mturk(target[len(MTURK_PREFIX) :])
        state = self.state
        body = self._body()
        parts = self.path.strip("/").split("/")
        if parts[-1] == "transition":
            operation = f"transition:{body.get('action')}"
        elif parts[-1] == "bonus-payments":
            operation = "bonus_set_up"
        elif parts[-1] == "pay":
            operation = "bonus_pay"
        else:
            operation = "?"
        state.requests.append(("prolific", operation, self.path, body, dict(self.headers)))
        if not self._prolific_auth():
            return
        if operation.startswith("transition:"):
            if body.get("action") == "REJECT" and len(body.get("message") or "") < 100:
                return self._send(400, {"error": {"message": ["at least 100 characters"]}})
            status = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(body.get("action"), "?")
            return self._send(200, {"id": parts[3], "status": status})
        if operation == "bonus_set_up":
            state.set_ups += 1
            return self._send(
                201,
                {
                    "id": f"bonus-{state.set_ups}",
                    "study": body.get("study_id"),
                    "amount": body.get("csv_bonuses"),
                },
            )
        if operation == "bonus_pay":
            set_up = parts[3]
            state.pays[set_up] = state.pays.get(set_up, 0) + 1
            if state.pay_delay:
                time.sleep(state.pay_delay)
            return self._send(202, {})
        self._send(404, {"error": "not found"})

    def _mturk(self, operation: str) -> None:
        state = self.state
        body = self._body()
        state.requests.append(("mturk", operation, self.path, body, dict(self.headers)))
        kind = "application/x-amz-json-1.1"
        if "Credential=" not in self.headers.get("Authorization", ""):
            return self._send(400, {"__type": "RequestError", "Message": "unsigned"}, kind)
        if operation == "ListAssignmentsForHIT":
            rows = state.assignments.get(body.get("HITId"), [])
            return self._send(200, {"Assignments": rows, "NumResults": len(rows)}, kind)
        if operation == "GetHIT":
            hit = {"HITId": body["HITId"], "AssignmentDurationInSeconds": state.assignment_seconds}
            return self._send(200, {"HIT": hit}, kind)
        if operation in {"ApproveAssignment", "RejectAssignment"}:
            return self._send(200, {}, kind)
        if operation == "SendBonus":
            token = body.get("UniqueRequestToken", "")
            state.bonus_tokens[token] = state.bonus_tokens.get(token, 0) + 1
            if state.bonus_tokens[token] > 1:
                message = f"The UniqueRequestToken {token} has already been used."
                return self._send(400, {"__type": "RequestError", "Message": message}, kind)
            state.bonuses_paid.append((body["WorkerId"], body["BonusAmount"]))
            return self._send(200, {}, kind)
        self._send(400, {"__type": "RequestError", "Message": f"unknown {operation}"}, kind)


class PlatformServer:
    """Start with ``with PlatformServer() as server:``; ``server.url`` is its base URL."""

    def __init__(self):
        self.state = PlatformState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "PlatformServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
