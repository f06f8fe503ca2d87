"""Invitations to join a study: nobody becomes a member or an annotator without consent."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models import Study

#: A pending invitation: neither accepted nor declined.
PENDING = Q(accepted_at__isnull=True, declined_at__isnull=True)


class StudyInvitation(models.Model):
    """A researcher's invitation to ``invitee`` to join ``study`` as a member or annotator.

    ``name`` is what the researcher typed (a user name or an e-mail address) and is all the
    People page shows of a pending invitation. ``invitee`` is the account it reached, or
    null when no account fits (no such name or address, an inactive account, or, for a
    member, an account that is not a researcher's). The researcher gets the same answer
    either way, so the form tells nobody which accounts exist or what they are (issue 45,
    row 11); an invitation with no invitee is simply never answered.
    """

    class Role(models.TextChoices):
        ANNOTATOR = "annotator", "Annotator"
        MEMBER = "member", "Member"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices)
    name = models.CharField(max_length=254, help_text="The user name or e-mail address typed.")
    invitee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="study_invitations",
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    accepted_at = models.DateTimeField(null=True, blank=True)
    declined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # Typing a pending name again changes nothing (the form resends the whole list).
            models.UniqueConstraint(
                fields=["study", "role", "name"],
                condition=PENDING,
                name="one_pending_invitation_per_name",
            ),
            models.CheckConstraint(
                condition=Q(accepted_at__isnull=True) | Q(declined_at__isnull=True),
                name="invitation_accepted_or_declined_not_both",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} as {self.role} of study {self.study_id}"

    @property
    def pending(self) -> bool:
        return self.accepted_at is None and self.declined_at is None
