"""The interface every protocol implements; one module per mode, registered by name.

The services own every write and the transactions; a mode answers protocol questions
about its own items and participants (which items a participant may get now, whether a
submission is valid, what it scores) and builds its report and export columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db.models import QuerySet

from annotation.models import Assignment, Item, Judgment, Participant, Study

Progress = Callable[[int, str], None]


class SubmissionError(Exception):
    """A submission the protocol refuses; ``message`` is shown to the participant as is."""

    def __init__(self, message: str, *, field: str = "", status: int = 400):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


def parse_choice(value: Any, *, low: int, high: int, field: str, message: str) -> int:
    """Read one whole-number choice from a form or JSON value; SubmissionError if not in range.

    Booleans, blanks, signs, decimals and text are refused with ``message``.
    """
    if isinstance(value, bool) or value is None:
        raise SubmissionError(message, field=field)
    if isinstance(value, int):
        choice = value
    else:
        text = str(value).strip()
        if not text.isdigit() or len(text) > len(str(high)):
            raise SubmissionError(message, field=field)
        choice = int(text)
    if not low <= choice <= high:
        raise SubmissionError(message, field=field)
    return choice


@dataclass(frozen=True)
class ExportColumn:
    """A mode's export column; ``description`` goes into the export's datasheet."""

    name: str
    value: Callable[[Judgment], Any]
    description: str = ""


class Mode:
    """Default behaviour: one judgment per assignment, no minimum time, no scoring."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    default_settings: ClassVar[dict[str, Any]] = {}
    exclusion_rules: ClassVar[str] = ""  # written into the export's datasheet

    def clean_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Return the study settings merged over the defaults; raise ValueError if invalid."""
        unknown = set(raw) - set(self.default_settings)
        if unknown:
            raise ValueError(f"unknown settings for {self.name}: {', '.join(sorted(unknown))}")
        return {**self.default_settings, **raw}

    def build_items(self, study: Study) -> int:
        """Create the study's items from its captions; return how many were created."""
        raise NotImplementedError

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        """Items this participant may be given now (the service filters capacity and repeats)."""
        return Item.objects.filter(study_id=participant.study_id)

    def current_round(self, participant: Participant) -> int:
        """Which pass over the items the participant is in (a repeated probation is round 2)."""
        return 0

    def parts(self, item: Item) -> int:
        """How many judgments complete one assignment of this item."""
        return 1

    def served_at(self, assignment: Assignment, part: int) -> datetime:
        """When the part was shown, by the server's own record.

        The first part is shown when the lease starts; a later part when the previous one was
        answered. A reopened lease restarts the clock.
        """
        if part == 0:
            return assignment.served_at
        previous = (
            Judgment.objects.filter(assignment_id=assignment.pk, part=part - 1)
            .values_list("created_at", flat=True)
            .first()
        )
        return max(previous, assignment.served_at) if previous else assignment.served_at

    def min_seconds(self, assignment: Assignment) -> float:
        """Submissions faster than this are refused."""
        return 0.0

    def phase(self, assignment: Assignment) -> str:
        return assignment.item.kind

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """Return the clean payload or raise SubmissionError naming the field.

        Like ``min_seconds`` and ``score``, called with ``assignment.item`` and
        ``assignment.participant`` (as locked, with its study) loaded.
        """
        raise NotImplementedError

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """Compute the server's result; called with the item row locked."""
        return {}

    def after_submit(self, participant: Participant, judgment: Judgment) -> None:
        """Update the participant's protocol state (phase, score) after a stored judgment.

        Called inside the submission's transaction with the participant's row locked;
        ``participant`` carries the state as locked (no need to read it again), its study
        is loaded, and it is ``judgment.participant`` and ``judgment.assignment.participant``.
        """

    # Pages. The generic participation views render these templates with the context below.
    intro_template: ClassVar[str] = "participate/intro.html"
    item_template: ClassVar[str] = ""
    feedback_template: ClassVar[str] = ""
    report_template: ClassVar[str] = ""
    finished_template: ClassVar[str] = ""  # included in participate/finished.html if set

    def page_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        """What the item template needs to show one part of an assignment.

        ``assignment.item`` and ``assignment.participant`` (freshly read, with its study) are
        loaded by the caller.
        """
        return {}

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        """Turn the submitted form into the data ``validate`` checks (no validation here)."""
        return dict(post.items())

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        """What the feedback template shows after a stored judgment (empty: go to next)."""
        return {}

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        """What the page shows when nothing is left for the participant (e.g. a code)."""
        return {}

    def report(self, study: Study, progress: Progress) -> dict[str, Any]:
        """Aggregate the study's judgments into the report the page renders."""
        raise NotImplementedError

    figure_names: ClassVar[tuple[str, ...]] = ()

    def report_context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """Extra context for the report page (e.g. a re-weighted total from query values)."""
        return {}

    def figure(self, name: str, result: dict[str, Any]):
        """Draw one of ``figure_names`` from a stored report as a matplotlib Figure."""
        raise KeyError(name)

    def export_columns(self) -> Iterable[ExportColumn]:
        """Mode-specific columns appended to the common export columns."""
        return ()

    def export_rows(self, judgment: Judgment) -> list[dict[str, Any]]:
        """The mode's cells of the export rows one judgment gives (THumB: one per caption).

        The exporter repeats the common columns on each row.
        """
        return [{column.name: column.value(judgment) for column in self.export_columns()}]


_REGISTRY: dict[str, Mode] = {}


def register(mode_class: type[Mode]) -> type[Mode]:
    """Class decorator: make a mode available by its ``name``."""
    _REGISTRY[mode_class.name] = mode_class()
    return mode_class


def get_mode(name: str) -> Mode:
    """Return the registered mode called ``name``; KeyError names the known modes."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"unknown mode {name!r} (registered: {known})") from None
