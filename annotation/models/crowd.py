"""Paid-crowd models: a researcher's platform credentials, the webhook events received, and
the ledger of every approve, reject and bonus call (docs/crowd.md).

Credentials are stored encrypted (``annotation/secrets.py``); no field here holds a token in
plain text. Ledger rows and events are never deleted.
"""

from django.conf import settings as django_settings
from django.db import models

#: The participant flag a reclaim adds (the worker returned, timed out or was rejected on the
#: platform): their leases are given back and ``assignment_next`` serves them nothing more.
CROWD_LEFT_FLAG = "crowd_left"


def crowd_left(flags: list[dict] | None) -> bool:
    """Whether a participant's flags say they left the study on the crowd platform."""
    return any(flag.get("kind") == CROWD_LEFT_FLAG for flag in flags or [])


class CrowdCredential(models.Model):
    """One researcher's crowd platform credentials, each a Fernet token (never plain text)."""

    user = models.OneToOneField(
        django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="crowd_credential"
    )
    prolific_token = models.TextField(blank=True, help_text="Encrypted Prolific API token.")
    prolific_webhook_secret = models.TextField(
        blank=True, help_text="Encrypted secret of the Prolific webhook subscription."
    )
    mturk_access_key_id = models.TextField(blank=True, help_text="Encrypted AWS access key id.")
    mturk_secret_access_key = models.TextField(blank=True, help_text="Encrypted AWS secret key.")
    mturk_sandbox = models.BooleanField(
        default=True, help_text="Use MTurk's sandbox (no money moves) instead of live."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"crowd credentials of user {self.user_id}"


class CrowdEvent(models.Model):
    """A platform event (webhook or sync) processed once: ``key`` is unique."""

    platform = models.CharField(max_length=10)
    key = models.CharField(max_length=128, unique=True, help_text="The event's id, or its digest.")
    kind = models.CharField(max_length=64)
    status = models.CharField(max_length=32, blank=True)
    study = models.ForeignKey(
        "annotation.Study", on_delete=models.CASCADE, null=True, related_name="crowd_events"
    )
    participant = models.ForeignKey(
        "annotation.Participant", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    outcome = models.CharField(max_length=200, blank=True, help_text="What CapEval did.")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"{self.platform} {self.kind} {self.status}"


class CrowdLedgerEntry(models.Model):
    """One approve, reject or bonus of one participant, claimed before the platform call.

    The unique (participant, action, reason) key is what makes a retry, a double click or two
    researchers at once call the platform once: the second claim finds the row.
    """

    class Action(models.TextChoices):
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"
        BONUS = "bonus", "Bonus"

    class Status(models.TextChoices):
        CLAIMED = "claimed", "Claimed (call under way)"
        SET_UP = "set_up", "Bonus set up, not paid yet"
        DONE = "done", "Done"
        FAILED = "failed", "Failed (may be retried)"
        # Sent, and no answer tells what the platform did (a timeout, a reset, a 5xx): never
        # sent again until the platform's own records or the owner say what happened.
        UNCERTAIN = "uncertain", "Outcome unknown (not sent again until checked)"

    study = models.ForeignKey(
        "annotation.Study", on_delete=models.CASCADE, related_name="crowd_ledger"
    )
    participant = models.ForeignKey(
        "annotation.Participant", on_delete=models.PROTECT, related_name="crowd_ledger"
    )
    action = models.CharField(max_length=8, choices=Action.choices)
    reason = models.CharField(max_length=200, blank=True, help_text="What the bonus is for.")
    amount_cents = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True, help_text="The rejection reason sent.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CLAIMED)
    platform_ref = models.CharField(
        max_length=128, blank=True, help_text="Prolific's bonus set-up id (paid with it)."
    )
    answer = models.TextField(blank=True, help_text="The platform's answer (or error).")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "action", "reason"], name="crowd_ledger_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.participant_id} {self.status}"
