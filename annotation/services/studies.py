"""Studies: create, open (build the mode's items), close."""

from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.models import Study, User
from annotation.modes import get_mode


def study_create(
    *,
    owner: User,
    name: str,
    mode: str,
    settings: dict[str, Any] | None = None,
    description: str = "",
    seed: int = 0,
) -> Study:
    """Create a draft study; settings are checked against the mode's defaults."""
    if not (owner.is_researcher or owner.is_staff):
        raise PermissionError("Only researchers create studies.")
    if not name.strip():
        raise ValueError("A study needs a name.")
    try:
        chosen = get_mode(mode)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from exc
    clean = chosen.clean_settings(settings or {})
    return Study.objects.create(
        owner=owner,
        name=name.strip(),
        mode=mode,
        settings=clean,
        description=description,
        seed=seed,
    )


def study_open(*, study: Study) -> int:
    """Build the study's items (once) and make it live; return the number of items built.

    Raises ValueError, and changes nothing, for a closed study or one with nothing to serve.
    """
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        if locked.status == Study.Status.CLOSED:
            raise ValueError("A closed study cannot be reopened.")
        built = 0
        if not locked.items.exists():
            built = get_mode(locked.mode).build_items(locked)
            if not built:
                raise ValueError("There is nothing to annotate yet: import captions first.")
        locked.status = Study.Status.LIVE
        locked.save(update_fields=["status", "updated_at"])
    study.status = locked.status
    return built


def study_close(*, study: Study) -> None:
    """Stop serving the study; stored judgments stay, open leases can no longer be answered."""
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED, updated_at=timezone.now())
    study.status = Study.Status.CLOSED


def study_set_people(
    *, study: Study, changed_by: User, annotators: list[str], members: list[str] | None = None
) -> None:
    """Set who annotates the study and which researchers share it, by user name.

    Unknown names are refused as a whole (ValueError listing them). Only the owner or staff
    change the members; members must be researchers.
    """
    annotator_users = _users_named(annotators)
    member_users = None
    if members is not None:
        if not (changed_by.is_staff or changed_by.pk == study.owner_id):
            raise PermissionError("Only the study's owner changes who shares it.")
        member_users = _users_named(members)
        not_researchers = sorted(u.username for u in member_users if not u.is_researcher)
        if not_researchers:
            raise ValueError(f"Not researchers: {', '.join(not_researchers)}.")
    with transaction.atomic():
        study.annotators.set(annotator_users)
        if member_users is not None:
            study.members.set(member_users)


def _users_named(names: list[str]) -> list[User]:
    wanted = {name.strip() for name in names if name.strip()}
    users = list(User.objects.filter(username__in=wanted, is_active=True))
    unknown = sorted(wanted - {u.username for u in users})
    if unknown:
        raise ValueError(f"No such user: {', '.join(unknown)}.")
    return users
