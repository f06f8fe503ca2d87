"""Who works on a study: the People form's list, invitations, and their answers.

Nobody joins a study without consent (issue 45, row 12): naming someone invites them, and
they become an annotator or a member when they accept on their start page. Removing needs
no consent and takes effect at once (``tests/annotation/test_hardening.py``).

The form and the API give the same answer to every well-formed name, whether an account
has it, which role that account has, or nobody (row 11): the invitation of a name that fits
no account is stored like any other and is never answered.
"""

import re
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from annotation.errors import Forbidden, NotFound, ServiceError
from annotation.models import Study, StudyInvitation, User
from annotation.models.invitations import PENDING
from annotation.text import shown

Role = StudyInvitation.Role
#: A user name (Django's letters, digits and ``@.+-_``) or an e-mail address: one token.
#: The API's schema states the same pattern, so a generated client sends only such names.
NAME_PATTERN = r"^[\w.@+-]+$"
NAME = re.compile(r"[\w.@+-]+")
NAME_MAX_CHARS = 254  # an e-mail address's longest; user names stop at 150


@dataclass(frozen=True)
class PeopleChange:
    """What a save of the People form did: names newly invited, per role."""

    invited: dict[str, list[str]] = field(default_factory=dict)


def study_set_people(
    *, study: Study, changed_by: User, annotators: list[str], members: list[str] | None = None
) -> PeopleChange:
    """Make the study's people the ones named, by user name or e-mail address.

    A name already an annotator (or member), or already invited as one, stays; a name not
    among them is invited; an annotator, member or pending invitation whose name is left
    out is removed or withdrawn. A name that is not shaped like a user name or an address
    refuses the whole save (ServiceError naming the field). Only the owner or staff change
    the members (``members=None`` leaves them). A researcher naming themselves joins at once.
    """
    wanted = {Role.ANNOTATOR: _clean_names(annotators, field="annotators")}
    if members is not None:
        if not (changed_by.is_staff or changed_by.pk == study.owner_id):
            raise Forbidden("Only the study's owner changes who shares it.", field="members")
        wanted[Role.MEMBER] = _clean_names(members, field="members")
    change = PeopleChange()
    with transaction.atomic():
        # One save at a time per study: two concurrent saves must not both invite a name.
        # NO KEY UPDATE: an acceptance adding a person (a row whose key refers to the
        # study, which takes KEY SHARE on it) must not wait for this save while this save
        # waits for its invitation: that was a deadlock.
        Study.objects.select_for_update(no_key=True).filter(pk=study.pk).first()
        for role, names in wanted.items():
            change.invited[role] = _set_role(study, role, names, changed_by)
    return change


def study_people_names(study: Study, role: str) -> list[str]:
    """The names the People form shows for ``role``: the people, then pending invitations."""
    people = list(_people(study, role).order_by("username").values_list("username", flat=True))
    pending = study.invitations.filter(PENDING, role=role).values_list("name", flat=True)
    return people + [name for name in pending if name not in people]


def invitation_accept(*, invitation_id: int, user: User) -> StudyInvitation:
    """``user`` accepts their pending invitation: they become its role in its study."""
    with transaction.atomic():
        invitation = _own_pending(invitation_id, user)
        if invitation.role == Role.MEMBER and not (user.is_researcher or user.is_staff):
            # Checked again here: the account may have lost the role since it was invited.
            raise Forbidden("Only researchers can share a study.")
        invitation.accepted_at = timezone.now()
        invitation.save(update_fields=["accepted_at"])
        _people(invitation.study, invitation.role).add(user)
    return invitation


def invitation_decline(*, invitation_id: int, user: User) -> StudyInvitation:
    """``user`` declines their pending invitation; nothing else changes."""
    with transaction.atomic():
        invitation = _own_pending(invitation_id, user)
        invitation.declined_at = timezone.now()
        invitation.save(update_fields=["declined_at"])
    return invitation


def _own_pending(invitation_id: int, user: User) -> StudyInvitation:
    """The pending invitation to ``user``, locked; anyone else's (or none) is NotFound, so
    invitation ids tell a stranger nothing."""
    invitation = (
        StudyInvitation.objects.select_for_update(of=("self",))  # not the joined study row
        .select_related("study")
        .filter(PENDING, pk=invitation_id, invitee=user, invitee__is_active=True)
        .first()
    )
    if invitation is None:
        raise NotFound("No such invitation, or it was answered already.")
    return invitation


def _clean_names(names: list[str], *, field: str) -> list[str]:
    cleaned = list(dict.fromkeys(name.strip() for name in names if name.strip()))
    bad = [name for name in cleaned if len(name) > NAME_MAX_CHARS or not NAME.fullmatch(name)]
    if bad:
        raise ServiceError(
            f"Not a user name or e-mail address: {', '.join(shown(name) for name in bad)}.",
            field=field,
        )
    return cleaned


def _people(study: Study, role: str):
    return study.members if role == Role.MEMBER else study.annotators


def _set_role(study: Study, role: str, names: list[str], changed_by: User) -> list[str]:
    """Remove, withdraw and invite so that ``role``'s people and invitations are ``names``;
    return the names newly invited."""
    people = _people(study, role)
    pending = study.invitations.filter(PENDING, role=role)
    # Lock the pending invitations first: an acceptance under way then either committed
    # already (its person is among ``people`` and removed if left out) or waits and finds
    # its invitation withdrawn, never adding someone this save just left out.
    list(pending.select_for_update())
    people.remove(*people.exclude(username__in=names))
    pending.exclude(name__in=names).delete()
    known = set(people.values_list("username", flat=True))
    known |= set(pending.values_list("name", flat=True))
    invited = []
    for name in names:
        if name in known:
            continue
        invitee = _account_for(name, role)
        invitation = StudyInvitation.objects.create(
            study=study, role=role, name=name, invitee=invitee, invited_by=changed_by
        )
        if invitee is not None and invitee.pk == changed_by.pk:
            # Naming oneself (a researcher piloting their own study) is one's own consent.
            invitation.accepted_at = invitation.created_at
            invitation.save(update_fields=["accepted_at"])
            people.add(invitee)
        else:
            invited.append(name)
    return invited


def _account_for(name: str, role: str) -> User | None:
    """The one active account ``name`` names, if it may take ``role``: by exact user name,
    else by e-mail address (case-insensitive, and only if a single account has it)."""
    eligible = User.objects.filter(is_active=True)
    if role == Role.MEMBER:
        eligible = eligible.filter(is_researcher=True)
    user = eligible.filter(username=name).first()
    if user is None and "@" in name:
        matches = list(eligible.filter(email__iexact=name)[:2])
        user = matches[0] if len(matches) == 1 else None
    return user
