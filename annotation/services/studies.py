"""Studies: create, open (build the mode's items), close."""

from typing import Any

from django.db import transaction

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
    clean = get_mode(mode).clean_settings(settings or {})
    return Study.objects.create(
        owner=owner, name=name.strip(), mode=mode, settings=clean, description=description,
        seed=seed,
    )


def study_open(*, study: Study) -> int:
    """Build the study's items (once) and make it live; return the number of items built."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.status == Study.Status.CLOSED:
            raise ValueError("A closed study cannot be reopened.")
        built = 0
        if not study.items.exists():
            built = get_mode(study.mode).build_items(study)
        study.status = Study.Status.LIVE
        study.save(update_fields=["status", "updated_at"])
    return built


def study_close(*, study: Study) -> None:
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
