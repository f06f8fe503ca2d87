"""The interface every protocol implements; one module per mode, registered by name.

The services own every write and the transactions; a mode answers protocol questions
about its own items and participants (which items a participant may get now, whether a
submission is valid, what it scores) and builds its report and export columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from django.conf import settings as django_settings
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
        # str.isdigit() is also true of "²", "٣" and "３": only ASCII digits are choices.
        if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
            raise SubmissionError(message, field=field)
        choice = int(text)
    if not low <= choice <= high:
        raise SubmissionError(message, field=field)
    return choice


#: Settings every mode accepts: how crowd workers arrive, how long they may hold a lease, and
#: how they are sent back. ``None`` for ``crowd_lease_seconds`` means the mode's own default.
CROWD_DEFAULTS: dict[str, Any] = {
    # Empty: the study's random secret (Study.completion_code), else the cc= of the URL below.
    "completion_code": "",
    # e.g. https://app.prolific.com/submissions/complete?cc=XXXX
    "prolific_completion_url": "",
    # Prolific's STUDY_ID; when set, an arrival naming another study is refused.
    "prolific_study_id": "",
    "crowd_lease_seconds": None,
    # From one client address: new crowd participants per hour, and open leases at once.
    "crowd_arrivals_per_address_per_hour": 3,
    "crowd_open_leases_per_address": 3,
}
_CROWD_INT_BOUNDS = {
    "crowd_lease_seconds": (30, 24 * 3600),
    "crowd_arrivals_per_address_per_hour": (1, 100_000),
    "crowd_open_leases_per_address": (1, 100_000),
}


def check_int(settings: dict[str, Any], key: str, low: int, high: int, *, optional=False) -> None:
    """Raise ValueError naming ``key`` unless it is a whole number from low to high."""
    value = settings[key]
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        empty = "empty or " if optional else ""
        raise ValueError(f"{key} must be {empty}a whole number from {low} to {high}")


def _clean_crowd_settings(merged: dict[str, Any]) -> None:
    for key, (low, high) in _CROWD_INT_BOUNDS.items():
        check_int(merged, key, low, high, optional=key == "crowd_lease_seconds")
    for key in ("completion_code", "prolific_study_id"):
        value = merged[key]
        if not isinstance(value, str) or len(value) > 64 or not value.isprintable():
            raise ValueError(f"{key} must be text of at most 64 printable characters")
    url = merged["prolific_completion_url"]
    if not isinstance(url, str):
        raise ValueError("prolific_completion_url must be a URL")
    if url and (urlsplit(url).scheme != "https" or not urlsplit(url).netloc):
        raise ValueError("prolific_completion_url must be an https:// URL")


#: Types an export column may have; the export service maps them onto Arrow types.
EXPORT_TYPES = ("int", "float", "str", "bool", "timestamp")
_JSON_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ExportColumn:
    """One typed column of a mode's export table; ``description`` goes into the datasheet.

    ``counts`` names what the datasheet counts with the column's distinct values
    (``"participants"``, ``"images"`` or ``"captions"``), empty for none.
    """

    name: str
    type: str
    description: str
    counts: str = ""

    def __post_init__(self):
        if self.type not in EXPORT_TYPES:
            raise ValueError(f"export column {self.name}: unknown type {self.type!r}")


class ExportSql:
    """SQL snippets a mode's export query needs on PostgreSQL and on SQLite.

    The export streams the query's rows without building a model instance (that cost the
    old export 0.03x COPY's speed), so every cell is computed by the database; only JSON
    access differs between the two databases. Keys are code constants (checked), never input.
    """

    def __init__(self, vendor: str):
        self.postgresql = vendor == "postgresql"

    @staticmethod
    def _keys(keys: tuple[str, ...]) -> tuple[str, ...]:
        if not keys or not all(_JSON_KEY.match(key) for key in keys):
            raise ValueError(f"JSON keys must be identifiers: {keys!r}")
        return keys

    def text(self, doc: str, *keys: str) -> str:
        """The JSON value at ``keys`` of the JSON column ``doc``, as text."""
        keys = self._keys(keys)
        if self.postgresql:
            steps = "".join(f" -> '{key}'" for key in keys[:-1])
            return f"({doc}{steps} ->> '{keys[-1]}')"
        return f"json_extract({doc}, '$.{'.'.join(keys)}')"

    def int(self, doc: str, *keys: str) -> str:
        value = self.text(doc, *keys)
        return f"{value}::bigint" if self.postgresql else f"CAST({value} AS INTEGER)"

    def float(self, doc: str, *keys: str) -> str:
        value = self.text(doc, *keys)
        return f"{value}::float8" if self.postgresql else f"CAST({value} AS REAL)"

    def bool(self, doc: str, *keys: str) -> str:
        # SQLite's json_extract already gives 1/0 for JSON true/false.
        value = self.text(doc, *keys)
        return f"{value}::boolean" if self.postgresql else value

    def json(self, doc: str) -> str:
        """A JSON column as JSON text."""
        return f"{doc}::text" if self.postgresql else doc


def judgment_export_columns() -> list[ExportColumn]:
    """The columns every judgment table starts with; ``JUDGMENT_SELECT`` computes them."""
    return [
        ExportColumn("judgment_id", "int", "Id of the judgment; rows are in this order."),
        ExportColumn(
            "participant",
            "str",
            "Pseudonym of the participant (never a user name or crowd worker id; the "
            "participants table maps pseudonyms to crowd ids when the owner asks for them).",
            counts="participants",
        ),
    ]


def judgment_trailing_columns() -> list[ExportColumn]:
    """Timing and exclusion columns every judgment table ends with (``JUDGMENT_TRAILING``)."""
    return [
        ExportColumn("created_at", "timestamp", "When the judgment was stored (UTC)."),
        ExportColumn("dwell_ms", "int", "Server-measured time from showing to answer, in ms."),
        ExportColumn("excluded", "bool", "Excluded from the scores (kept here, flagged)."),
        ExportColumn("exclusion_reason", "str", "Why it is excluded; empty if not."),
    ]


#: Select-list SQL of ``judgment_export_columns`` and ``judgment_trailing_columns`` over
#: ``annotation_judgment j`` joined with ``annotation_participant p``.
JUDGMENT_SELECT = "j.id, p.pseudonym"
JUDGMENT_TRAILING = "j.created_at, j.dwell_ms, j.excluded, j.exclusion_reason"
JUDGMENT_FROM = "annotation_judgment j JOIN annotation_participant p ON p.id = j.participant_id"


class Mode:
    """Default behaviour: one judgment per assignment, no minimum time, no scoring."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    default_settings: ClassVar[dict[str, Any]] = {}
    exclusion_rules: ClassVar[str] = ""  # written into the export's datasheet
    #: How long a crowd worker may hold one lease unless ``crowd_lease_seconds`` says
    #: otherwise; registered annotators keep ``CAPEVAL_LEASE_SECONDS``.
    crowd_lease_seconds: ClassVar[int] = 10 * 60

    def clean_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Return the study settings merged over the defaults; raise ValueError if invalid.

        Child classes extend this (call super) to check their own keys.
        """
        unknown = set(raw) - set(self.default_settings) - set(CROWD_DEFAULTS)
        if unknown:
            raise ValueError(f"unknown settings for {self.name}: {', '.join(sorted(unknown))}")
        merged = {**CROWD_DEFAULTS, **self.default_settings, **raw}
        _clean_crowd_settings(merged)
        return merged

    def settings_for(self, study: Study) -> dict[str, Any]:
        """The study's stored (already clean) settings over every default."""
        return {**CROWD_DEFAULTS, **self.default_settings, **(study.settings or {})}

    def lease_seconds(self, participant: Participant) -> int:
        """How long a lease of this participant lasts (crowd workers: the mode's default)."""
        if participant.source == Participant.Source.ACCOUNT:
            return django_settings.CAPEVAL_LEASE_SECONDS
        configured = self.settings_for(participant.study)["crowd_lease_seconds"]
        return configured or self.crowd_lease_seconds

    def completion_code(self, study: Study) -> str:
        """The code a crowd worker reports: the setting, else Prolific's cc=, else the secret.

        Never derived from anything public (the crowd link carries the study's public id).
        """
        config = self.settings_for(study)
        if config["completion_code"]:
            return config["completion_code"]
        from_url = parse_qs(urlsplit(config["prolific_completion_url"]).query).get("cc")
        return from_url[0] if from_url and from_url[0] else study.completion_code

    def completion_earned(self, participant: Participant) -> bool:
        """Whether a crowd worker has done the work that earns the completion code.

        Called by the submission service after ``after_submit``, with the state as updated;
        the first time it answers True, the service stamps ``participant.completed_at``.
        The default: never (a mode without a crowd completion step).
        """
        return False

    def build_items(self, study: Study) -> int:
        """Create the study's items from its captions; return how many were created."""
        raise NotImplementedError

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        """Items this participant may be given now (the service filters capacity and repeats)."""
        return Item.objects.filter(study_id=participant.study_id)

    def current_round(self, participant: Participant) -> int:
        """Which pass over the items the participant is in (a new round may serve one again)."""
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

    #: What one row of the mode's export table is (the datasheet says it).
    export_row_unit: ClassVar[str] = "judgment"

    def export_columns(self) -> list[ExportColumn]:
        """The mode's export table: typed, described columns, in file order.

        The default, for a mode that declares no table of its own: the common judgment
        columns with the payload and the server's result as JSON text.
        """
        return [
            *judgment_export_columns(),
            ExportColumn("item_id", "int", "Id of the item judged."),
            ExportColumn("part", "int", "Part of the assignment this answers."),
            ExportColumn("phase", "str", "Phase of the participant, defined by the mode."),
            ExportColumn("payload", "str", "What the participant submitted (JSON)."),
            ExportColumn("result", "str", "What the server computed (JSON)."),
            *judgment_trailing_columns(),
        ]

    def export_query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        """SQL and parameters of the export rows: one value per ``export_columns`` column,
        in order, ordered by judgment id.

        The export streams these rows as they come (``COPY`` on PostgreSQL): the database
        computes every cell, so write joins rather than anything per row in Python.
        """
        return (
            f"SELECT {JUDGMENT_SELECT}, j.item_id, j.part, j.phase, {sql.json('j.payload')}, "
            f"{sql.json('j.result')}, {JUDGMENT_TRAILING} FROM {JUDGMENT_FROM} "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )


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
