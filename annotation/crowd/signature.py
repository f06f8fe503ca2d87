"""Prolific's webhook signature, as Prolific documents it (docs.prolific.com, API reference,
"Webhooks: verifying"): the ``X-Prolific-Request-Signature`` header is the base64 of the
HMAC-SHA256, keyed with the subscription's secret, of the ``X-Prolific-Request-Timestamp``
header (UNIX seconds, as text) followed by the request body. Pure: no Django.
"""

import base64
import hashlib
import hmac


def prolific_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """The signature Prolific sends for ``body`` at ``timestamp``."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + body, hashlib.sha256)
    return base64.b64encode(digest.digest()).decode("ascii")


def prolific_refusal(
    *, secrets: list[str], timestamp: str, signature: str, body: bytes, now: float, max_age: int
) -> str:
    """Why a webhook request is refused ("" when one of ``secrets`` signed it and it is fresh).

    A timestamp further than ``max_age`` seconds from ``now`` (either way) is refused even with
    a good signature, so a captured request cannot be replayed later.
    """
    if not timestamp.isascii() or not timestamp.isdigit():
        return "missing or malformed timestamp"
    if abs(now - int(timestamp)) > max_age:
        return "stale timestamp"
    for secret in secrets:
        expected = prolific_signature(secret=secret, timestamp=timestamp, body=body)
        if hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace")):
            return ""
    return "bad signature"
