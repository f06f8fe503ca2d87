"""The contract every protocol implements, and the pieces modes share.

A mode is a package under ``annotation/modes/`` (see ``docs/architecture.md``, "How to add
a mode"): ``protocol.py`` holds a ``Mode`` subclass answering protocol questions about its
own items and participants, ``pages.py``, ``report.py``, ``export.py`` (and ``plan.py``)
hold the components below, and the package's ``__init__`` wires them together and
registers the mode by name (``annotation/registry.py``, which is also ``Study.mode``'s list
of choices). Every per-mode fact the platform needs is a method or attribute here, with a
default, so a new mode touches nothing outside its package. Modes never write to the
database: they return what should change (the unsaved items ``build_items`` makes, the
``Outcome`` of a submission) and the services write it; a test checks no module here calls
a write method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.db.models import Model, Q, QuerySet

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study, User
from annotation.modes import guidelines as task_guidelines
from annotation.modes import settings as study_settings
from annotation.modes.browsing import Browse, CaptionNote  # noqa: F401 (the contract's)
from annotation.modes.caption_columns import CaptionsMode
from annotation.modes.dashboarding import Dashboard, Panel  # noqa: F401 (the contract's)
from annotation.modes.exporting import (  # noqa: F401 (the contract's export names)
    EXPORT_TYPES,
    JUDGMENT_FROM,
    JUDGMENT_SELECT,
    JUDGMENT_TRAILING,
    Export,
    ExportColumn,
    ExportSql,
    ExportTable,
    judgment_export_columns,
    judgment_trailing_columns,
)
from annotation.modes.importing import ImportingMode
from annotation.modes.judging import (  # noqa: F401 (the contract's judge names)
    Judging,
    fill_prompt,
    json_object,
)
from annotation.modes.reporting import Progress, Report  # noqa: F401 (the contract's)
from annotation.modes.settings import CrowdSettings
from annotation.registry import get_mode, register  # noqa: F401 (the contract's)


def parse_choice(value: Any, *, low: int, high: int, field: str, message: str) -> int:
    """Read one whole-number choice from a form or JSON value; ServiceError if not in range.

    Booleans, blanks, signs, decimals and text are refused with ``message``.
    """
    if isinstance(value, bool) or value is None:
        raise ServiceError(message, field=field)
    if isinstance(value, int):
        choice = value
    else:
        text = str(value).strip()
        # str.isdigit() is also true of "²", "٣" and "３": only ASCII digits are choices.
        if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
            raise ServiceError(message, field=field)
        choice = int(text)
    if not low <= choice <= high:
        raise ServiceError(message, field=field)
    return choice


@dataclass(frozen=True)
class Outcome:
    """What a stored submission changes besides the judgment itself; the service writes it.

    ``after_submit`` returns one. The submission service then stores the judgment with
    ``result`` merged into its result and, when ``exclusion`` is set, flagged with that
    reason together with every earlier judgment of the same lease; it writes the
    participant's ``state`` and ``status`` (``None``: unchanged) in one UPDATE, and creates
    ``new_items`` (unsaved ``Item`` rows of the same study). ``flags`` are integrity events
    (``{"kind", "detail"}``) appended to ``Participant.flags`` with the time; when
    ``exclude_participant`` is set, every judgment of the participant in the study, this one
    included, is flagged excluded with that reason (nothing is deleted).
    ``item_target`` (``None``: unchanged) becomes the judged item's ``target``: a mode that
    stops an item early (VICR's adaptive stopping) sets it to the item's stored judgments
    plus its open leases, so no new lease is given and the leases out may still be answered.
    ``screen_out`` (a reason; "": none) says the participant failed the mode's entry check
    (VICR's gates, HUMANr's first attention check, early catch trials): a crowd worker who
    has not earned the completion code is then screened out for good (a ``screened_out``
    flag with the reason; their judgments are kept), is served nothing more and is shown
    the study's screen-out code instead of ever earning the completion code.
    ``hold`` (a sentence the worker reads; "": none) withholds a crowd worker's completion
    code until the researcher reviews them (VICR's replayed gate, issue 45): a
    ``review_hold`` flag, decided on the crowd review page (``services/crowd/holds.py``).
    """

    state: dict[str, Any] | None = None
    status: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    exclusion: str = ""
    new_items: tuple[Item, ...] = ()
    flags: tuple[dict[str, str], ...] = ()
    exclude_participant: str = ""
    item_target: int | None = None
    screen_out: str = ""
    hold: str = ""


@dataclass(frozen=True)
class CompletionProgress:
    """How far a crowd worker is toward the completion code: ``done`` of ``needed``
    ``unit`` (plural words, e.g. "images"); ``note`` says what else the code needs, if
    anything ("after the tutorial"). The item pages show it as a line and a bar."""

    done: int
    needed: int
    unit: str
    note: str = ""

    @property
    def shown(self) -> int:
        """``done``, at most ``needed`` (the bar's value)."""
        return min(max(self.done, 0), self.needed)


@dataclass(frozen=True)
class WorkersNeeded:
    """How many more distinct workers, new to the study, its remaining items need at least
    (``needed``), and why in a plain sentence (``reason``), for the dashboard's "cannot
    finish" warning and the planner. A lower bound (``rubrics.capacity``): the workers
    already in the study are counted where they can still take the work."""

    needed: int
    reason: str


#: The flag kind of a screened-out participant (``Outcome.screen_out``); its detail is why.
SCREEN_OUT_FLAG = "screened_out"


def screen_out_reason(flags: list[dict[str, Any]] | None) -> str:
    """Why a participant with these ``flags`` was screened out, "" if never."""
    for flag in flags or []:
        if isinstance(flag, dict) and flag.get("kind") == SCREEN_OUT_FLAG:
            return str(flag.get("detail") or "failed the entry check")
    return ""


#: A crowd worker whose completion code waits for the researcher's review
#: (``Outcome.hold``), and the flags of the two decisions on it (``services/crowd/holds.py``).
HOLD_FLAG = "review_hold"
HOLD_RELEASED_FLAG = "hold_released"
HOLD_RETURNED_FLAG = "hold_returned"
HELD, RELEASED, RETURNED = "held", "released", "returned"


def hold_state(flags: list[dict[str, Any]] | None) -> tuple[str, str]:
    """(``HELD``, ``RELEASED``, ``RETURNED`` or "", the hold's sentence) of these flags:
    held from the hold flag until a decision flag follows it."""
    state, detail = "", ""
    for flag in flags or []:
        kind = flag.get("kind") if isinstance(flag, dict) else None
        if kind == HOLD_FLAG and not state:
            state, detail = HELD, str(flag.get("detail") or "")
        elif kind == HOLD_RELEASED_FLAG and state == HELD:
            state = RELEASED
        elif kind == HOLD_RETURNED_FLAG and state == HELD:
            state = RETURNED
    return state, detail


class Pages:
    """How a mode's participation pages look; the generic views in ``views/participate.py``
    render these templates with these contexts. Child classes set ``item_template`` and
    implement ``item_context``; the rest has defaults.
    """

    intro_template: ClassVar[str] = "participate/intro.html"
    item_template: ClassVar[str] = ""
    feedback_template: ClassVar[str] = ""  # empty: straight on to the next item
    finished_template: ClassVar[str] = ""  # included in participate/finished.html if set
    #: True: ``item_context`` accepts ``answers=`` (``parse_form`` of a refused submission),
    #: so a refused page shows what was sent instead of empty fields.
    keeps_answers: ClassVar[bool] = False

    def __init__(self, mode: Mode):
        self.mode = mode

    def intro_context(self, study: Study) -> dict[str, Any]:
        """What the intro template needs besides the study and its settings (``config``)."""
        return {}

    def item_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        """What the item template needs to show one part of an assignment.

        ``assignment.item`` and ``assignment.participant`` (freshly read, with its study) are
        loaded by the caller.
        """
        raise NotImplementedError

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        """Turn the submitted form into the data ``Mode.validate`` checks (no checking here)."""
        return dict(post.items())

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        """What the feedback template shows after a stored judgment."""
        return {}

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        """What the page shows when nothing is left for the participant."""
        return {}


class Planner:
    """How the planner (``services/planning.py``) predicts a study of this mode by
    simulation (``rubrics.planner``). The default has no model: ``plan`` refuses.
    """

    #: What the planner's sizes count (the page's column heading, in the plural).
    unit: ClassVar[str] = "images"
    #: Judgments per item when the form leaves it empty, and the least the mode accepts.
    default_judgments: ClassVar[int] = 1
    min_judgments: ClassVar[int] = 1
    #: Why fewer than ``min_judgments`` are refused (shown beside the form's field).
    min_judgments_reason: ClassVar[str] = ""
    #: Appended to the page's note on interval half-widths (how to read this mode's).
    width_note: ClassVar[str] = ""
    #: Seconds per judgment when the form leaves it empty and the study has no timed
    #: judgments (an imported study's have no dwell): a stated assumption, shown as such.
    default_seconds: ClassVar[float] = 30.0
    #: CPU of one unit of ``rubrics.planner.check_budget`` relative to HUMANr's (a THumB
    #: simulation's 1,000 bootstrap resamples cost more per image).
    budget_weight: ClassVar[float] = 1.0
    #: The planner form's assumption fields (``services/planning.py:ASSUMPTIONS``) this
    #: mode reads, with the label its page shows: the page offers only these (issue 26).
    fields: ClassVar[dict[str, str]] = {}
    #: The help beside "Judgments per item": what one item is in this mode.
    judgments_help: ClassVar[str] = ""
    #: What the page calls the pilot when ``plan`` took the study's own judgments for it.
    pilot_note: ClassVar[str] = "this study's own judgments"
    #: Appended to the help of the target half-width: what else the recommendation needs.
    target_note: ClassVar[str] = ""
    #: Whether the simulated systems are the study's own (``systems``): False where the
    #: planner models raters, not systems (VICR).
    uses_systems: ClassVar[bool] = False

    def __init__(self, mode: Mode):
        self.mode = mode

    def systems(self, study: Study) -> list[str]:
        """The study's systems from its captions, Human first then by name; the planner
        simulates these instead of hypothetical ones (issue 26) when the study has any."""
        names = set(
            Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
            .order_by()
            .values_list("system", flat=True)
            .distinct()
        )
        return sorted(names, key=lambda name: (name != Caption.HUMAN, name))

    def plan(
        self,
        study: Study,
        *,
        sizes: list[int],
        judgments_per_item: int,
        assumptions: dict[str, float],
        common: dict[str, Any],
    ) -> tuple[Any, str]:
        """``(rubrics.planner result, pilot)`` for ``sizes``: ``pilot`` is ``"study"`` when
        the study's own judgments were the pilot, else ``"assumptions"``.

        ``assumptions`` are the form's ``mean``, ``difference``, ``spread``, ``exact`` and
        ``adjacent``; ``common`` the keyword arguments every ``rubrics.planner.plan_*``
        takes. ValueError (shown to the researcher) for what the planner refuses.
        """
        raise ValueError(f"the planner has no model of the {self.mode.name!r} mode")


@dataclass(frozen=True)
class WorkerChecks:
    """Which judgments check the worker, and which of those the worker failed: filters on
    ``Participant`` (through ``judgments__``) for the dashboard's per-worker table."""

    label: str
    counted: Q
    failed: Q


@dataclass(frozen=True)
class SimulatedAnswer:
    """One answer of a simulated worker: the form data of ``part``, sent ``seconds`` after
    the lease was served (first part) or after the previous answer."""

    part: int
    data: dict[str, Any]
    seconds: float


@dataclass(frozen=True)
class Demo:
    """What ``manage.py load_demo`` makes of a mode with the demo's photographs and captions.

    ``live``: the name of a live study to try; ``finished``: the name of a study answered by
    ``finished_workers`` simulated crowd workers, then closed with its report ("": none).
    ``settings`` apply to both, ``finished_settings`` to the finished one on top;
    ``item_words`` says what one item is; ``captions`` is the caption file under
    ``annotation/demo/`` the studies are built from (the spans mode's detailed captions);
    ``extra_captions`` are further caption files there, each imported with its purpose (e.g.
    VICR's tutorial pool). ``annotator_rows(user, number)`` gives the unsaved rows the mode
    keeps about the demo's registered annotator ``annotator<number>`` when load_demo
    creates it (THumB: who is a native English speaker).
    """

    live: str
    finished: str = ""
    finished_workers: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    finished_settings: dict[str, Any] = field(default_factory=dict)
    item_words: str = "items"
    captions: str = "captions.csv"
    extra_captions: tuple[tuple[str, str], ...] = ()
    annotator_rows: Callable[[User, int], list[Model]] = lambda user, number: []


class Mode(ImportingMode, CaptionsMode):
    """A protocol: which items exist, who may get which now, what a submission is worth.

    Methods child classes must implement:

    * ``build_items(study)``: the study's items, built from its captions and unsaved.
    * ``validate(assignment, part, data)``: the clean payload, or ServiceError.
    * ``after_submit(participant, judgment)``: the ``Outcome`` of a submission.

    Methods with a default child classes may override: ``eligible_items``,
    ``current_round``, ``parts``, ``min_seconds``, ``score``, ``completion_earned``,
    ``completion_withheld``, ``completion_progress`` and ``completion_exhausted``.
    Every method is called by a service, which owns the transaction and every write.

    Facts the rest of the platform asks of a mode (each has a default): ``kind_labels``,
    ``worker_checks``, ``completion_reach`` and ``workers_needed`` (the dashboard and the
    planner), ``dataset_notes`` (an export's datasheet and card),
    ``simulate`` (the simulated crowd), and through the components ``planner`` (the
    planner), ``report.human_scores`` and ``report.human_pairs`` (the metric lab),
    ``report.summary`` (an export's datasheet), ``judging`` (automatic judges' answers),
    ``dashboard`` (the mode's panel of the live dashboard and its words there),
    ``browse`` (the data browser: which captions a judgment is about, in words),
    ``demo`` (``manage.py load_demo``).
    No code outside ``annotation/modes/`` asks which mode a study has.

    Attributes: ``name`` (the registry key), ``label``, ``settings_class`` (a dataclass
    declared with ``annotation.modes.settings``), ``crowd_lease_seconds``, and the component
    classes ``pages_class``, ``report_class``, ``export_class`` and ``planner_class``, whose
    instances are ``mode.pages``, ``mode.report``, ``mode.export`` and ``mode.planner``.
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    #: Where pages list the mode among the others (lower first; ties by name).
    menu_order: ClassVar[int] = 100
    #: The demo studies of the mode (``manage.py load_demo``); None: the demo has none.
    demo: ClassVar[Demo | None] = None
    settings_class: ClassVar[type] = CrowdSettings
    #: How long a crowd worker may hold one lease unless ``crowd_lease_seconds`` says
    #: otherwise; registered annotators keep ``CAPEVAL_LEASE_SECONDS``.
    crowd_lease_seconds: ClassVar[int] = 10 * 60
    pages_class: ClassVar[type[Pages]] = Pages
    report_class: ClassVar[type[Report]] = Report
    export_class: ClassVar[type[Export]] = Export
    planner_class: ClassVar[type[Planner]] = Planner
    judging_class: ClassVar[type[Judging]] = Judging
    #: The data browser's reading of judgments (``annotation/modes/browsing.py``).
    browse_class: ClassVar[type[Browse]] = Browse
    #: The mode's panel of the live dashboard (``annotation/modes/dashboarding.py``).
    dashboard_class: ClassVar[type[Dashboard]] = Dashboard
    #: What the dashboard calls each item kind (a kind not listed shows as stored).
    kind_labels: ClassVar[dict[str, str]] = {}
    #: The judgments that check the worker, for the dashboard's per-worker table; None: the
    #: mode checks no worker (the table shows no check column).
    worker_checks: ClassVar[WorkerChecks | None] = None
    #: Serve equally taken items in an order drawn per worker (False: by position, the protocol's).
    order_per_worker: ClassVar[bool] = False
    #: Whether participants are asked their vision and screen-reader use (once, with
    #: consent) before their first item: a mode whose items differ for blind, low-vision
    #: and sighted raters sets True. Default False, so no other study asks a sensitive
    #: question it has no use for.
    asks_vision: ClassVar[bool] = False

    def __init__(self):
        self.pages = self.pages_class(self)
        self.report = self.report_class(self)
        self.export = self.export_class(self)
        self.planner = self.planner_class(self)
        self.judging = self.judging_class(self)
        self.browse = self.browse_class(self)
        self.dashboard = self.dashboard_class(self)

    # Settings: declared by ``settings_class``, checked by one validator.

    def clean_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The settings JSON to store for ``raw`` over the defaults; ServiceError if invalid."""
        return study_settings.clean(self.settings_class, raw)

    def settings(self, study: Study) -> Any:
        """The study's typed settings (an instance of ``settings_class``)."""
        return study_settings.load(self.settings_class, study.settings)

    def default_guidelines(self) -> str:
        """The Markdown task guidelines of a study that sets none (``modes/guidelines.py``):
        ``guidelines.md`` in the mode's package. Default: none."""
        return task_guidelines.package_default(type(self))

    def guidelines(self, study: Study) -> task_guidelines.Guidelines:
        """What the pages show and the judge's default prompt holds: the study's own
        guidelines, else ``default_guidelines``, with its HTML and version."""
        return task_guidelines.of_study(study.guidelines, self.default_guidelines())

    # The protocol.

    def build_items(self, study: Study) -> list[Item]:
        """The study's items, built from its captions and unsaved: ``study_open`` writes
        them (``bulk_create``), then ``item_links`` of the saved items."""
        raise NotImplementedError

    def caption_notes(self, study: Study) -> list[str]:
        """Sentences on imported study captions ``build_items`` will not ask about (THumB's
        second caption of a system on one image), shown after an import and on the study
        page, so nothing is dropped silently. Default: none."""
        return []

    def item_links(self, items: list[Item]) -> list[Any]:
        """Unsaved rows that link the saved ``items`` to other rows (HUMANr's image links),
        written by ``study_open`` right after the items. Default: none."""
        return []

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        """Items this participant may be given now (the service filters capacity and repeats)."""
        return Item.objects.filter(study_id=participant.study_id)

    def fresh_items(self, participant: Participant) -> QuerySet[Item]:
        """The items ``assignment_next``'s common case, one claim statement, may lease:
        ``eligible_items`` unless the mode can decide its rule inside that statement where
        ``eligible_items`` would read first (HUMANr's exposure rule). Either all of
        ``eligible_items``' items or none of them: when nothing is claimed from these, the
        service takes its full path, which asks ``eligible_items``."""
        return self.eligible_items(participant)

    def current_round(self, participant: Participant) -> int:
        """Which pass over the items the participant is in (a new round may serve one again)."""
        return 0

    def parts(self, item: Item) -> int:
        """How many judgments complete one assignment of this item."""
        return 1

    def min_seconds(self, assignment: Assignment) -> float:
        """Submissions faster than this (from when the part was shown) are refused."""
        return 0.0

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """Return the clean payload or raise ServiceError naming the field.

        Like ``min_seconds`` and ``score``, called with ``assignment.item`` and
        ``assignment.participant`` (as locked, with its study) loaded.
        """
        raise NotImplementedError

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """Compute the server's result; called with the item row locked."""
        return {}

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        """What the submission changes: the participant's protocol state, flags, new items.

        Called inside the submission's transaction with the participant's row locked, before
        the judgment is stored: ``judgment`` is complete (payload, result, item, assignment)
        but has no ``pk`` yet, and earlier parts of its lease are in the database.
        ``participant`` carries the state as locked and its study. Write nothing: return it.
        """
        raise NotImplementedError

    def completion_earned(self, participant: Participant) -> bool:
        """Whether a crowd worker has done the work that earns the completion code.

        Called after the judgment is stored, with ``participant`` carrying the state of the
        outcome; the first time it answers True the service stamps ``completed_at``.
        The default: never (a mode without a crowd completion step).
        """
        return False

    def completion_withheld(self, participant: Participant) -> str:
        """Why the study's own checks keep a crowd worker from the completion code, as a
        sentence the worker reads ("" when they do not).

        The rule of every mode (issue 45): work the study's checks exclude does not earn the
        code, and the worker is told why. Called for a crowd worker who has not earned it
        and was not screened out; the pages show the sentence with the study's
        ``failed_check_code`` (Prolific's "failed attention check" code) when it has one.
        The catch-trial flag (``modes/catch.py``) is read by the caller for every mode.
        Default: "" (nothing of the mode's own withholds it).
        """
        return ""

    def completion_progress(self, participant: Participant) -> CompletionProgress | None:
        """How far a crowd worker is toward ``completion_earned``, for the item pages.

        Default: None (a mode without a crowd completion step shows no progress line).
        """
        return None

    def completion_reach(self, study: Study) -> str:
        """Why no crowd worker can be served the code's count, with the numbers ("": one can)."""
        return ""

    def completion_exhausted(self, participant: Participant) -> Outcome | None:
        """What pays a crowd worker the study has nothing more to serve (None: nothing)."""
        return None

    def dataset_notes(self, study: Study) -> list[str]:
        """Sentences an export's datasheet and dataset card state about this study's own
        protocol, beside its settings (HUMANr: the real group sizes, issue 26 row 20).
        Default: none."""
        return []

    def workers_needed(self, study: Study) -> WorkersNeeded | None:
        """How many more distinct workers the study's remaining items need at least, when
        the protocol keeps one worker from taking all of them (HUMANr: nobody meets an
        image twice; VICR: one rating per player and pair). None (the default): no such
        constraint, any worker may take any remaining item."""
        return None

    def simulated_vision(self, worker: Any) -> str:
        """The vision ("blind", "low_vision", "sighted") a simulated worker of a mode that
        ``asks_vision`` declares before its first item, so a simulated crowd can hold both
        groups. Default "sighted": the simulated crowd of a mode that does not split its
        raters by vision stays one group."""
        return "sighted"

    def simulate(self, lease: Assignment, worker: Any, context: dict[str, Any]):
        """The answers a simulated crowd worker gives to ``lease`` (``SimulatedAnswer``s).

        ``worker`` is an ``annotation.modes.simulated.SimulatedWorker`` (a seeded bias, noise
        and pace); ``context`` holds the study's ``systems`` by caption id, the ``specs``
        (``Caption.spec``, the mode's data) of the captions that have any, and its typed
        ``settings``. ``services/simulation.py`` submits the answers through the
        real services. Default: the mode has no simulated crowd (NotImplementedError).
        """
        raise NotImplementedError(f"the {self.name!r} mode has no simulated crowd")
