"""Studies: create, change a draft's settings, open (build the mode's items), close, reopen."""

import dataclasses
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.errors import Conflict, Forbidden, ServiceError
from annotation.models import Item, Judgment, Study, User
from annotation.modes import get_mode
from annotation.modes import guidelines as task_guidelines
from annotation.modes import settings as study_settings
from annotation.modes.base import Mode
from annotation.text import DESCRIPTION_MAX_CHARS, clean_text

# Seeds are stored in a signed 64-bit column (SQLite INTEGER, PostgreSQL bigint).
MAX_SEED = 2**63 - 1
# Mode settings are flat objects of numbers and strings; anything deeper than this is not
# settings, and a deep enough value would exhaust the recursion of whatever walks it next.
MAX_SETTINGS_DEPTH = 20
SETTINGS_TOO_DEEP = "nested too deeply; settings are flat JSON objects of numbers and strings."


def settings_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_SETTINGS_DEPTH:  # one level past the limit is enough to refuse
            stack.extend((child, depth + 1) for child in children)
    return deepest


def study_create(
    *,
    owner: User,
    name: str,
    mode: str,
    settings: dict[str, Any] | None = None,
    description: str = "",
    seed: int = 0,
    guidelines: str = "",
) -> Study:
    """Create a draft study; settings are checked against the mode's defaults.

    Raises ServiceError naming the field for bad input; nothing is written then.
    """
    if not (owner.is_researcher or owner.is_staff):
        raise Forbidden("Only researchers create studies.")
    if not name.strip():
        raise ServiceError("A study needs a name.", field="name")
    # The form and the API check these too (inline errors); commands reach only this one.
    clean_text(name.strip(), field="name", max_length=Study._meta.get_field("name").max_length)
    clean_text(description, field="description", max_length=DESCRIPTION_MAX_CHARS, multiline=True)
    guidelines = _clean_guidelines(guidelines)
    if not 0 <= seed <= MAX_SEED:
        raise ServiceError(f"The seed must be between 0 and {MAX_SEED}.", field="seed")
    if settings_depth(settings) > MAX_SETTINGS_DEPTH:
        raise ServiceError(f"Settings are {SETTINGS_TOO_DEEP}", field="settings")
    try:
        chosen = get_mode(mode)
    except KeyError as exc:
        raise ServiceError(exc.args[0], field="mode") from exc
    try:
        clean = chosen.clean_settings(settings or {})
    except ServiceError as exc:
        # The input is the settings object (the form field, the API key); the message and
        # details name the setting inside it.
        raise ServiceError(exc.message, field="settings", details={"setting": exc.field}) from exc
    return Study.objects.create(
        owner=owner,
        name=name.strip(),
        mode=mode,
        settings=clean,
        description=description,
        seed=seed,
        # The mode's default text is stored as "" (the study follows the default).
        guidelines="" if guidelines == _default_guidelines(chosen) else guidelines,
    )


def _clean_guidelines(text: str) -> str:
    """Guidelines as stored (line ends LF, trimmed); ServiceError naming the field."""
    text = task_guidelines.normalised(text)
    clean_text(text, field="guidelines", max_length=task_guidelines.MAX_CHARS, multiline=True)
    return text


def _default_guidelines(mode: Mode) -> str:
    return task_guidelines.normalised(mode.default_guidelines())


def study_set_guidelines(*, study: Study, text: str, mode: Mode | None = None) -> Study:
    """Set the study's task guidelines (Markdown, ``modes/guidelines.py``) at any time: the
    version each judgment and judge prompt was given is stored with it, so a change shows
    in the judges' report. Empty, or the mode's default text: the study follows the mode's
    default. ServiceError (field ``guidelines``) for text ``annotation.text`` refuses.
    ``mode``: the study's, if the caller has looked it up."""
    text = _clean_guidelines(text)
    if text == _default_guidelines(mode or get_mode(study.mode)):
        text = ""
    Study.objects.filter(pk=study.pk).update(guidelines=text, updated_at=timezone.now())
    study.guidelines = text
    return study


def study_open(*, study: Study) -> int:
    """Build the study's items (once) and make it live; return the number of items built.

    Raises ServiceError, and changes nothing, for a closed study or one with nothing to serve.
    """
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        if locked.status == Study.Status.CLOSED:
            raise Conflict("A closed study cannot be reopened by opening it; use Reopen.")
        built = 0
        if not locked.items.exists():
            mode = get_mode(locked.mode)
            items = mode.build_items(locked)
            if not items:
                raise Conflict("There is nothing to annotate yet: import captions first.")
            # The mode builds, the service writes (modes never write): items first, then the
            # rows that link them (their ids come back from the INSERT on both databases).
            Item.objects.bulk_create(items, batch_size=1000)
            links: dict[type, list[Any]] = {}
            for row in mode.item_links(items):
                links.setdefault(type(row), []).append(row)
            for model, rows in links.items():
                model.objects.bulk_create(rows, batch_size=5000)
            built = len(items)
        locked.status = Study.Status.LIVE
        locked.save(update_fields=["status", "updated_at"])
    study.status = locked.status
    return built


def study_close(*, study: Study) -> None:
    """Stop serving the study; stored judgments stay, open leases can no longer be answered."""
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED, updated_at=timezone.now())
    study.status = Study.Status.CLOSED


def study_reopen(*, study: Study) -> None:
    """Serve a closed study again, with the items, judgments and crowd link it had.

    A study closed before it was ever opened has no items, so it goes back to draft (to
    import and open); one with items goes live. ServiceError for a study that is not closed.
    """
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        if locked.status != Study.Status.CLOSED:
            raise Conflict(
                f"Only a closed study can be reopened; this one is {locked.get_status_display()}.",
            )
        has_items = locked.items.exists()
        locked.status = Study.Status.LIVE if has_items else Study.Status.DRAFT
        locked.save(update_fields=["status", "updated_at"])
    study.status = locked.status


def study_update_settings(
    *, study: Study, settings: dict[str, Any], changed_by: User | None = None
) -> Study:
    """Replace a study's settings, checked as at creation (``Mode.clean_settings``).

    A draft may change any setting. Once opened, only the crowd settings (``CrowdSettings``:
    completion code and URL, Prolific study id, leases, arrival limits) and those only the
    report reads (resamples, confidence level) change (``settings.live_settings``): Prolific
    gives its completion URL after the study exists, while the mode's other settings were
    built into the items and describe the judgments. ServiceError (``details["setting"]``
    names the setting) for a bad value or a frozen one; nothing is written then.

    Only the study's owner (or staff) changes the crowd settings: they decide where every
    worker is sent and what code they report, so a researcher the study is shared with
    must not redirect the owner's crowd; nor the people + judge design, which decides
    what people answer (``settings.owner_setting_names``). ``changed_by`` None is a
    command or a loader.
    """
    if settings_depth(settings) > MAX_SETTINGS_DEPTH:
        raise ServiceError(f"Settings are {SETTINGS_TOO_DEEP}", field="settings")
    # A study's mode never changes: the one looked up for the check serves the locked row.
    mode = get_mode(study.mode)
    try:
        clean = mode.clean_settings(settings)
    except ServiceError as exc:
        raise ServiceError(exc.message, field="settings", details={"setting": exc.field}) from exc
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        before = study_settings.load(mode.settings_class, locked.settings)
        after = study_settings.load(mode.settings_class, clean)
        owner_only = study_settings.owner_setting_names()
        if changed_by is not None and not (changed_by.is_staff or changed_by.pk == locked.owner_id):
            touched = sorted(n for n in owner_only if getattr(before, n) != getattr(after, n))
            if touched:
                raise Forbidden(
                    f"Only the study's owner changes these settings ({', '.join(touched)}).",
                    field="settings",
                    details={"setting": touched[0]},
                )
        if locked.status != Study.Status.DRAFT:
            live = study_settings.live_settings(mode.settings_class)
            if not Judgment.objects.filter(study=locked).exists():
                live |= study_settings.design_setting_names()
            frozen = [
                f.name
                for f in dataclasses.fields(mode.settings_class)
                if f.name not in live and getattr(before, f.name) != getattr(after, f.name)
            ]
            if frozen:
                raise Conflict(
                    f"{', '.join(frozen)} change only while the study is a draft: its items "
                    "were built with them. The crowd settings and the report's settings "
                    "can change at any time, the people + judge design until the first "
                    "judgment.",
                    field="settings",
                    details={"setting": frozen[0]},
                )
        locked.settings = clean
        locked.save(update_fields=["settings", "updated_at"])
    study.settings = clean
    return study
