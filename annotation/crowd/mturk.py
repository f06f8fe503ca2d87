"""Amazon Mechanical Turk's requester API through boto3, at ``CAPEVAL_MTURK_ENDPOINT`` (live)
or ``CAPEVAL_MTURK_SANDBOX_ENDPOINT`` (sandbox), so tests point it at a local server.

``SendBonus`` carries ``UniqueRequestToken`` (the ledger row's key): MTurk refuses a second
bonus with the same token for 24 hours. A call whose outcome is unknown is checked against
MTurk's records before anything is sent again: ``ListBonusPayments`` for a bonus,
``GetAssignment`` for an approval or rejection. boto3 never retries on its own
(``total_max_attempts=1``): its retry of a 5xx or a timeout would be a second send the
ledger never saw.
"""

from decimal import Decimal, InvalidOperation
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from annotation.crowd import PlatformError

#: Listed assignment statuses after which the worker's open leases are given back.
#: ListAssignmentsForHIT lists Submitted, Approved and Rejected assignments only: a returned
#: or abandoned one is simply absent, so the sync treats a worker whose assignment is absent
#: once the HIT's assignment duration has passed since they arrived as gone.
RECLAIM_STATUSES = frozenset({"Rejected"})


class MTurkClient:
    def __init__(self, *, key_id: str, secret: str, endpoint: str, timeout: float):
        self._client = boto3.client(
            "mturk",
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                # One attempt: botocore's "max_attempts" counts retries, so 1 meant two sends.
                retries={"total_max_attempts": 1},
            ),
        )

    def _call(self, name: str, **kwargs) -> dict[str, Any]:
        try:
            answer = getattr(self._client, name)(**kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise PlatformError(
                f"MTurk answered {error.get('Code', '?')}: {error.get('Message', '')[:400]}",
                status=exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
                sent=True,
                code=str(error.get("Code", "")),
            ) from None
        except (ConnectTimeoutError, EndpointConnectionError) as exc:
            raise PlatformError(
                f"MTurk could not be reached ({type(exc).__name__})", sent=False
            ) from None
        except BotoCoreError as exc:
            raise PlatformError(f"no answer from MTurk ({type(exc).__name__})", sent=True) from None
        answer.pop("ResponseMetadata", None)
        return answer

    def assignments(self, hit_id: str) -> list[dict[str, Any]]:
        """Every assignment of the HIT (``ListAssignmentsForHIT``, following ``NextToken``)."""
        found: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"HITId": hit_id, "MaxResults": 100}
        while True:
            page = self._call("list_assignments_for_hit", **kwargs)
            found.extend(page.get("Assignments") or [])
            if not page.get("NextToken") or not page.get("Assignments"):
                return found
            kwargs["NextToken"] = page["NextToken"]

    def assignment_seconds(self, hit_id: str) -> int:
        """How long a worker may hold an assignment of the HIT (``GetHIT``)."""
        hit = self._call("get_hit", HITId=hit_id).get("HIT") or {}
        return int(hit.get("AssignmentDurationInSeconds") or 0)

    def assignment_status(self, assignment_id: str) -> str:
        """``Submitted``, ``Approved`` or ``Rejected``, as MTurk has it now (``GetAssignment``)."""
        answer = self._call("get_assignment", AssignmentId=assignment_id)
        return str((answer.get("Assignment") or {}).get("AssignmentStatus") or "")

    def bonus_paid(self, *, worker_id: str, assignment_id: str, amount: str, reason: str) -> bool:
        """Whether ``ListBonusPayments`` of the assignment holds this bonus (worker, amount and
        reason: the ledger allows one bonus per participant and reason)."""
        kwargs: dict[str, Any] = {"AssignmentId": assignment_id, "MaxResults": 100}
        while True:
            page = self._call("list_bonus_payments", **kwargs)
            for row in page.get("BonusPayments") or []:
                if (
                    row.get("WorkerId") == worker_id
                    and row.get("Reason") == reason[:1024]
                    and _same_amount(row.get("BonusAmount"), amount)
                ):
                    return True
            if not page.get("NextToken") or not page.get("BonusPayments"):
                return False
            kwargs["NextToken"] = page["NextToken"]

    def approve(self, assignment_id: str) -> dict[str, Any]:
        return self._call("approve_assignment", AssignmentId=assignment_id)

    def reject(self, assignment_id: str, *, message: str) -> dict[str, Any]:
        return self._call(
            "reject_assignment", AssignmentId=assignment_id, RequesterFeedback=message[:1024]
        )

    def bonus(
        self, *, worker_id: str, assignment_id: str, amount: str, reason: str, token: str
    ) -> dict[str, Any]:
        return self._call(
            "send_bonus",
            WorkerId=worker_id,
            AssignmentId=assignment_id,
            BonusAmount=amount,
            Reason=reason[:1024],
            UniqueRequestToken=token[:64],
        )


def _same_amount(listed, amount: str) -> bool:
    try:
        return Decimal(str(listed)) == Decimal(amount)
    except InvalidOperation:
        return False
