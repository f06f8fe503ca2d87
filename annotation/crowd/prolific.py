"""Prolific's researcher API over httpx (api-docs: submissions, transition, bonus payments).

Endpoints used (relative to ``CAPEVAL_PROLIFIC_API_URL``), with ``Authorization: Token <t>``:

- ``GET /api/v1/studies/{study}/submissions/``: ``{"results": [...], "_links": {"next":
  {"href": ...}}}``, each result with ``id``, ``participant_id`` and ``status``;
- ``GET /api/v1/submissions/{id}/``: one submission, with its ``status``: how an approval or
  rejection whose answer was lost is checked before anything is sent again;
- ``POST /api/v1/submissions/{id}/transition/``: ``{"action": "APPROVE"}`` or
  ``{"action": "REJECT", "message": ..., "rejection_category": ...}`` (idempotent, Prolific
  says: a repeat is ignored);
- ``POST /api/v1/submissions/bonus-payments/``: ``{"study_id", "csv_bonuses":
  "<participant id>,<amount in pounds/dollars>"}`` answers the set-up with its ``id``;
- ``POST /api/v1/bulk-bonus-payments/{id}/pay/``: pays it. Not idempotent: a second call
  pays again, and the API lists no bonus payments to check against, so a pay whose outcome
  is unknown (``PlatformError.outcome_unknown``) is never repeated: the owner checks on
  Prolific and says what happened.
"""

from typing import Any

import httpx

from annotation.crowd import PlatformError

#: Prolific refuses a rejection message shorter than this.
REJECT_MIN_CHARS = 100
#: Submission statuses after which the participant's open leases are given back.
RECLAIM_STATUSES = frozenset({"RETURNED", "TIMED-OUT", "REJECTED"})
#: Pages of submissions read at most (100 per page): a bound, not a real limit.
MAX_PAGES = 200


class ProlificClient:
    def __init__(self, *, token: str, base_url: str, timeout: float):
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Token {token}"},
            timeout=timeout,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, url: str, **kwargs) -> dict[str, Any]:
        try:
            response = self._client.request(method, url, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise PlatformError(
                f"Prolific could not be reached ({type(exc).__name__})", sent=False
            ) from None
        except httpx.HTTPError as exc:
            # Sent, but no answer: whether Prolific acted on it is unknown.
            raise PlatformError(
                f"no answer from Prolific ({type(exc).__name__})", sent=True
            ) from None
        if response.status_code >= 400:
            raise PlatformError(
                f"Prolific answered {response.status_code}: {response.text[:500]}",
                status=response.status_code,
                sent=True,
            )
        try:
            return response.json() if response.content else {}
        except ValueError:
            return {"text": response.text[:500]}

    def submissions(self, study_id: str) -> list[dict[str, Any]]:
        """Every submission of the Prolific study (following ``_links.next``)."""
        found: list[dict[str, Any]] = []
        url: str | None = f"/api/v1/studies/{study_id}/submissions/"
        for _ in range(MAX_PAGES):
            if not url:
                break
            page = self._call("GET", url)
            found.extend(row for row in page.get("results") or [] if isinstance(row, dict))
            url = ((page.get("_links") or {}).get("next") or {}).get("href")
        return found

    def submission_status(self, submission_id: str) -> str:
        """The submission's status as Prolific has it now (e.g. ``APPROVED``)."""
        return str(self._call("GET", f"/api/v1/submissions/{submission_id}/").get("status") or "")

    def approve(self, submission_id: str) -> dict[str, Any]:
        return self._call(
            "POST", f"/api/v1/submissions/{submission_id}/transition/", json={"action": "APPROVE"}
        )

    def reject(self, submission_id: str, *, message: str, category: str) -> dict[str, Any]:
        body = {"action": "REJECT", "message": message, "rejection_category": category}
        return self._call("POST", f"/api/v1/submissions/{submission_id}/transition/", json=body)

    def bonus_set_up(self, *, study_id: str, participant_id: str, amount: str) -> str:
        """Set a bonus up; returns its id (nothing is paid yet)."""
        answer = self._call(
            "POST",
            "/api/v1/submissions/bonus-payments/",
            json={"study_id": study_id, "csv_bonuses": f"{participant_id},{amount}"},
        )
        if not answer.get("id"):
            raise PlatformError("Prolific's bonus set-up answer has no id", sent=True)
        return str(answer["id"])

    def bonus_pay(self, set_up_id: str) -> dict[str, Any]:
        return self._call("POST", f"/api/v1/bulk-bonus-payments/{set_up_id}/pay/")
