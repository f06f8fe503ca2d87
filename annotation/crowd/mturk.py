"""Amazon Mechanical Turk's requester API through boto3, at ``CAPEVAL_MTURK_ENDPOINT`` (live)
or ``CAPEVAL_MTURK_SANDBOX_ENDPOINT`` (sandbox), so tests point it at a local server.

``SendBonus`` carries ``UniqueRequestToken`` (the ledger row's key): MTurk refuses a second
bonus with the same token, so a retry after a timeout cannot pay twice.
"""

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
                connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 1}
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
