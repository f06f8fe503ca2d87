"""Crowd services (docs/crowd.md): credentials, webhooks and sync (reclaim), review and pay.

- ``credentials``: store a researcher's platform credentials encrypted; build clients.
- ``reclaim``: match platform submissions to participants; give back the open leases of
  workers who returned, timed out or were rejected (judgments kept, flagged).
- ``webhooks``: Prolific's signed webhook, each event once.
- ``sync``: the same reclaim from the platforms' submission lists (``crowd_sync``).
- ``review``: approve, reject and bonus through the ledger, so nothing is paid twice.
"""
