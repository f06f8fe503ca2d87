"""A local stand-in for Prolific's and MTurk's APIs on the loopback, for the crowd tests.

It speaks the documented shapes CapEval uses (annotation/crowd/prolific.py, mturk.py) and
records every request, so a test asserts what reached "the platform": ids, bodies, and how
many times a bonus was paid. ``pay_delay`` makes the pay answer arrive after the client's
timeout (the payment is counted first, as a real platform would have made it).

``faults`` makes an operation fail the way a real one can when its outcome is unknown: a
5xx from the platform or a gateway in front of it ("500", "502", "503", "504"), a
connection reset after the request arrived ("reset"), or an answer later than the client
waits ("hang", ``hang_seconds``). With ``fault_acts`` (the default, the worst case) the
platform has acted before the fault: the bonus is paid, the submission approved.
"""

import json
import socket
import struct
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
    faults: dict = field(default_factory=dict)  # operation -> "500" ... "504", "reset", "hang"
    fault_acts: bool = True  # whether the platform acted before answering with the fault
    hang_seconds: float = 2.5
    statuses: dict = field(default_factory=dict)  # Prolific submission id -> status
    assignment_status: dict = field(default_factory=dict)  # MTurk assignment id -> status
    bonus_records: list = field(default_factory=list)  # MTurk bonuses as ListBonusPayments

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
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up waiting ("hang"): nobody hears the answer
            self.close_connection = True

    def _fault(self, operation: str, before: bool) -> bool:
        """Answer with the operation's fault, if any: True when the request is answered."""
        fault = self.state.faults.get(operation)
        if not fault or self.state.fault_acts == before:
            return False
        if fault == "hang":
            time.sleep(self.state.hang_seconds)  # the client has given up by now
            # Before acting: nothing done, nothing answered. After: the real answer, to nobody.
            return before
        if fault == "reset":
            # RST instead of an answer: the request arrived, the client hears nothing back.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return True
        page = f"<html><body><h1>{fault} Gateway</h1></body></html>".encode()
        self.send_response(int(fault))
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
        return True

    def _prolific_auth(self) -> bool:
        if self.headers.get("Authorization") != f"Token {self.state.prolific_token}":
            self._send(401, {"error": {"detail": "Invalid token."}})
            return False
        return True

    def do_GET(self):
        state = self.state
        parts = self.path.strip("/").split("/")
        one = parts[:3] == ["api", "v1", "submissions"] and len(parts) == 4
        operation = "get_submission" if one else "GET"
        state.requests.append(("prolific", operation, self.path, {}, dict(self.headers)))
        if not self._prolific_auth():
            return
        if self._fault(operation, before=True) or self._fault(operation, before=False):
            return
        if parts[:3] == ["api", "v1", "studies"] and parts[-1] == "submissions":
            rows = [s for s in state.submissions if s.get("study_id") == parts[3]]
            return self._send(200, {"results": rows, "_links": {"next": {"href": None}}})
        if one:
            status = state.statuses.get(parts[3], "AWAITING REVIEW")
            return self._send(200, {"id": parts[3], "status": status})
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
        if self._fault(operation, before=True):
            return
        answered = self._prolific_act(operation, body, parts)
        if not self._fault(operation, before=False):
            self._send(*answered)

    def _prolific_act(self, operation: str, body: dict, parts: list) -> tuple[int, dict]:
        state = self.state
        if operation.startswith("transition:"):
            if body.get("action") == "REJECT" and len(body.get("message") or "") < 100:
                return 400, {"error": {"message": ["at least 100 characters"]}}
            status = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(body.get("action"), "?")
            # Idempotent, as Prolific documents it; a submission already decided the other
            # way is refused.
            if state.statuses.get(parts[3], status) != status:
                return 400, {"error": {"detail": f"submission is {state.statuses[parts[3]]}"}}
            state.statuses[parts[3]] = status
            return 200, {"id": parts[3], "status": status}
        if operation == "bonus_set_up":
            state.set_ups += 1
            return 201, {
                "id": f"bonus-{state.set_ups}",
                "study": body.get("study_id"),
                "amount": body.get("csv_bonuses"),
            }
        if operation == "bonus_pay":
            set_up = parts[3]
            state.pays[set_up] = state.pays.get(set_up, 0) + 1
            if state.pay_delay:
                time.sleep(state.pay_delay)
            return 202, {}
        return 404, {"error": "not found"}

    def _mturk(self, operation: str) -> None:
        state = self.state
        body = self._body()
        state.requests.append(("mturk", operation, self.path, body, dict(self.headers)))
        kind = "application/x-amz-json-1.1"
        if "Credential=" not in self.headers.get("Authorization", ""):
            return self._send(400, {"__type": "RequestError", "Message": "unsigned"}, kind)
        if self._fault(operation, before=True):
            return
        status, answer = self._mturk_act(operation, body)
        if not self._fault(operation, before=False):
            self._send(status, answer, kind)

    def _mturk_act(self, operation: str, body: dict) -> tuple[int, dict]:
        state = self.state
        if operation == "ListAssignmentsForHIT":
            rows = state.assignments.get(body.get("HITId"), [])
            return 200, {"Assignments": rows, "NumResults": len(rows)}
        if operation == "GetHIT":
            hit = {"HITId": body["HITId"], "AssignmentDurationInSeconds": state.assignment_seconds}
            return 200, {"HIT": hit}
        if operation in {"ApproveAssignment", "RejectAssignment"}:
            wanted = "Approved" if operation == "ApproveAssignment" else "Rejected"
            current = state.assignment_status.get(body["AssignmentId"], "Submitted")
            if current != "Submitted":  # MTurk refuses a second decision
                message = f"This operation can be called with a status of: Submitted ({current})"
                return 400, {"__type": "RequestError", "Message": message}
            state.assignment_status[body["AssignmentId"]] = wanted
            return 200, {}
        if operation == "GetAssignment":
            assignment_id = body["AssignmentId"]
            status = state.assignment_status.get(assignment_id, "Submitted")
            row = {"AssignmentId": assignment_id, "AssignmentStatus": status}
            return 200, {"Assignment": row, "HIT": {"HITId": "?"}}
        if operation == "ListBonusPayments":
            rows = [r for r in state.bonus_records if r["AssignmentId"] == body.get("AssignmentId")]
            return 200, {"BonusPayments": rows, "NumResults": len(rows)}
        if operation == "SendBonus":
            token = body.get("UniqueRequestToken", "")
            state.bonus_tokens[token] = state.bonus_tokens.get(token, 0) + 1
            if state.bonus_tokens[token] > 1:
                message = f"The UniqueRequestToken {token} has already been used."
                return 400, {"__type": "RequestError", "Message": message}
            state.bonuses_paid.append((body["WorkerId"], body["BonusAmount"]))
            record = {key: body[key] for key in ("WorkerId", "BonusAmount", "AssignmentId")}
            state.bonus_records.append({**record, "Reason": body["Reason"], "GrantTime": 0})
            return 200, {}
        return 400, {"__type": "RequestError", "Message": f"unknown {operation}"}


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
