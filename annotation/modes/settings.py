"""Typed study settings, declared once per mode and checked by one validator.

A mode's settings are a frozen dataclass whose fields are made with the helpers below
(``whole``, ``number``, ``flag``, ``text``, ``https_url``); each helper records the
default and the bounds, so the declaration is the whole specification::

    @dataclass(frozen=True)
    class ThumbSettings(CrowdSettings):
        n_images: int | None = whole(None, low=1, high=100_000, optional=True)
        stage2: bool = flag(True)

``clean(ThumbSettings, raw)`` checks what a researcher typed and returns the JSON the study
stores; ``load(ThumbSettings, stored)`` turns stored JSON back into the dataclass. A check
across fields is a ``check(self)`` method on the dataclass that raises ``ServiceError``.
Every mode's settings extend ``CrowdSettings``, the settings of crowd arrivals.

Every number has an upper bound, declared next to it with the reason: a setting is work a
researcher asks of the server (a THumB study asking for 10^12 bootstrap resamples was
gigabytes of memory), so ``whole`` has no default for ``high`` and ``number`` takes finite
bounds only. Text goes through ``annotation.text``, the check of every text field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from django.conf import settings as django_settings

from annotation.errors import ServiceError
from annotation.text import clean_text

S = TypeVar("S")

#: Longest URL setting: browsers and proxies handle about 2,000 characters; a Prolific
#: completion URL is under 100.
MAX_URL_CHARS = 2000
#: Resamples, random splits or repetitions of one report. A paired bootstrap holds about
#: 20 bytes per resample and image (10,000 resamples of a 5,000-image study: about 1 GB
#: and a few seconds), and percentile intervals are stable to the displayed digits after
#: a few thousand (Efron and Tibshirani suggest 1,000-2,000); 10,000 is the usual
#: generous choice, and where the bound stops.
MAX_RESAMPLES = 10_000
#: Images a study may sample: only imported images are sampled, so this refuses typing
#: mistakes; human evaluations judge hundreds to a few thousand images.
MAX_SAMPLED_IMAGES = 100_000


#: The groups of the settings form, in the order a researcher reads them (issue 26, row
#: 14): what the study asks about first, the crowd's arrival settings last.
JUDGED = "What is judged"
CHECKS = "Who judges and checks"
REPORT = "The report"
CROWD = "Crowd workers (Prolific, MTurk)"
#: Issue 40: the settings of people and a judge together, shared by every mode (declared
#: on ``CrowdSettings`` beside the crowd's, and like them after the mode's own).
PEOPLE_JUDGE = "People and a judge together"
GROUPS = (JUDGED, CHECKS, REPORT, CROWD, PEOPLE_JUDGE)


def _meta(kind: str, *, label: str, group: str, doc: str, report: bool | None = None, **rest):
    """The metadata every helper records. ``label`` is what the form shows (plain words, not
    the code name); ``group`` one of ``GROUPS`` (default: ``REPORT`` for a report setting,
    else ``JUDGED``). ``report`` (None: whether ``group`` is ``REPORT``): only the report
    reads it, so it may change at any time, on a live or closed study too
    (``live_settings``); a setting shown with the report's that must not says ``False``.

    Derived from the group so that a setting cannot sit under "The report" in the form and
    still be frozen once the study opens: an imported (closed) arena log's anchor and a
    spans campaign's error weights were, and could only be changed in the shell."""
    if group and group not in GROUPS:
        raise TypeError(f"setting group {group!r} is not one of {GROUPS}")
    if report is None:
        report = group == REPORT
    group = group or (REPORT if report else JUDGED)
    return {"kind": kind, "label": label, "group": group, "doc": doc, "report": report, **rest}


def whole(
    default: int | None,
    *,
    low: int,
    high: int,
    optional=False,
    label="",
    group="",
    doc="",
    report=None,
):
    """A whole number from ``low`` to ``high`` (``optional``: also ``None``).

    ``high`` is required: say why a larger value is never needed next to the field.
    ``report``, ``label`` and ``group``: see ``_meta``.
    """
    metadata = _meta("whole", label=label, group=group, doc=doc, report=report, low=low, high=high)
    return field(default=default, metadata={**metadata, "optional": optional})


def number(
    default: float,
    *,
    low: float,
    high: float,
    open_ends=False,
    label="",
    group="",
    doc="",
    report=None,
):
    """Any real number from ``low`` to ``high`` (``open_ends``: strictly between them).

    The bounds are finite, and so must the value be: Python's json reads ``Infinity`` and
    ``NaN``, which PostgreSQL's jsonb refuses to store. ``report`` as for ``whole``.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        raise TypeError("number settings need finite bounds")
    metadata = _meta("number", label=label, group=group, doc=doc, report=report, low=low, high=high)
    return field(default=default, metadata={**metadata, "open": open_ends})


def flag(default: bool, *, label="", group="", doc="", report=None):
    """true or false. ``report`` as for ``whole``."""
    metadata = _meta("flag", label=label, group=group, doc=doc, report=report)
    return field(default=default, metadata=metadata)


def text(
    default: str = "",
    *,
    max_length: int = 64,
    choices: tuple[str, ...] = (),
    label="",
    group="",
    doc="",
    report=None,
):
    """One line of text of at most ``max_length`` characters (see ``annotation.text``);
    ``choices``, when given, the only values taken. ``report`` as for ``whole``."""
    metadata = _meta(
        "text", label=label, group=group, doc=doc, report=report, max=max_length, choices=choices
    )
    return field(default=default, metadata=metadata)


def https_url(
    default: str = "", *, max_length: int = MAX_URL_CHARS, hosts=None, label="", group="", doc=""
):
    """Empty, or an https:// URL with a host, of at most ``max_length`` characters.

    ``hosts``, when given, is a function returning the hosts the URL may name (read when
    the value is checked, so a deployment's setting applies without a restart of the
    declaration); the URL must then name one of them and nothing else in its authority.
    """
    metadata = _meta("url", label=label, group=group, doc=doc, max=max_length, hosts=hosts)
    return field(default=default, metadata=metadata)


def ordered_fields(cls: type) -> list[dataclasses.Field]:
    """The settings of ``cls`` in the order the form shows them: by group (``GROUPS``), and
    within a group the mode's own settings before those it inherits (catch trials, crowd
    arrivals), each class's in declaration order.

    A dataclass lists inherited fields first, which put the catch-trial settings at the
    top of every form; the class that declares a field last (a mode may redeclare one) is
    the first in ``__mro__`` whose own annotations name it.
    """

    def owner(name: str) -> int:
        return next(
            depth
            for depth, klass in enumerate(cls.__mro__)
            if name in klass.__dict__.get("__annotations__", {})
        )

    fields = list(dataclasses.fields(cls))
    return sorted(
        fields,
        key=lambda spec: (
            GROUPS.index(spec.metadata.get("group") or JUDGED),
            owner(spec.name),
            fields.index(spec),
        ),
    )


def completion_hosts() -> tuple[str, ...]:
    """Where a finished crowd worker may be sent: Prolific, and hosts the admin adds in
    ``CAPEVAL_COMPLETION_HOSTS``. A study's completion URL is typed by a researcher and
    shown to every worker; a foreign host there is a phishing page for the whole crowd."""
    extra = getattr(django_settings, "CAPEVAL_COMPLETION_HOSTS", ()) or ()
    return (PROLIFIC_HOST, *(host.strip().lower() for host in extra if host.strip()))


#: The host of Prolific's completion URLs (selectors.PROLIFIC_COMPLETE).
PROLIFIC_HOST = "app.prolific.com"


def url_on_hosts(value: str, hosts: tuple[str, ...]) -> bool:
    """True if the https URL ``value`` names exactly one of ``hosts`` as its whole authority.

    The whole authority, not just ``hostname``: ``https://evil.example\\@app.prolific.com``
    has Python's hostname ``app.prolific.com`` while a browser goes to ``evil.example``, and
    a user name or port has no place in a completion link.
    """
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and "\\" not in value
        and bool(parts.hostname)
        and parts.netloc.lower() == parts.hostname
        and parts.hostname in hosts
    )


def _check(name: str, spec: dict[str, Any], value: Any) -> None:
    kind = spec["kind"]
    if kind == "whole":
        if spec["optional"] and value is None:
            return
        low, high = spec["low"], spec["high"]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            empty = "empty or " if spec["optional"] else ""
            raise ServiceError(
                f"{name} must be {empty}a whole number from {low} to {high}", field=name
            )
    elif kind == "number":
        low, high = spec["low"], spec["high"]
        ok = not isinstance(value, bool) and isinstance(value, int | float)
        # NaN fails every comparison; infinity is above every (finite) high.
        inside = ok and (low < value < high if spec["open"] else low <= value <= high)
        if not inside:
            if spec["open"]:
                bounds = f"between {low:g} and {high:g}"
            else:
                bounds = f"from {low:g} to {high:g}"
            raise ServiceError(f"{name} must be a number {bounds}", field=name)
    elif kind == "flag":
        if not isinstance(value, bool):
            raise ServiceError(f"{name} must be true or false", field=name)
    elif kind == "text":
        clean_text(value, field=name, max_length=spec["max"])
        choices = spec.get("choices") or ()
        if choices and value not in choices:
            listed = ", ".join(repr(choice) for choice in choices)
            raise ServiceError(f"{name} must be one of {listed}", field=name)
    elif kind == "url":
        clean_text(value, field=name, max_length=spec["max"])
        try:
            parts = urlsplit(value) if isinstance(value, str) else None
        except ValueError:  # urlsplit refuses some hosts, e.g. "https://[x" (bad IPv6)
            parts = None
        if parts is None or (value and (parts.scheme != "https" or not parts.netloc)):
            raise ServiceError(f"{name} must be an https:// URL", field=name)
        hosts = spec.get("hosts")
        if value and hosts is not None and not url_on_hosts(value, allowed := hosts()):
            raise ServiceError(
                f"{name} must be a link to {' or '.join(allowed)} (no user name or port); "
                "an administrator can allow more hosts in CAPEVAL_COMPLETION_HOSTS",
                field=name,
            )
    else:  # pragma: no cover - a field declared without the helpers above
        raise TypeError(f"setting {name} has no kind; declare it with whole/number/flag/...")


@functools.cache
def _declared_defaults(cls: type) -> dict[str, Any]:
    # A settings class does not change once imported, and every crowd request loads its
    # study's settings several times (issue 48: walking the fields was about 4% of a
    # rating page's CPU); callers get copies, so the cached dict is never changed.
    return {f.name: f.default for f in dataclasses.fields(cls)}


def defaults(cls: type) -> dict[str, Any]:
    """Every setting's default, as the JSON a study stores."""
    return dict(_declared_defaults(cls))


def clean(cls: type[S], raw: dict[str, Any]) -> dict[str, Any]:
    """Check ``raw`` over the defaults and return the JSON to store; ServiceError if invalid.

    Unknown keys are refused by name (a typo must not silently fall back to a default).
    """
    if not isinstance(raw, dict):
        raise ServiceError("Settings must be a JSON object.", field="settings")
    declared = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        raise ServiceError(f"unknown settings: {', '.join(unknown)}", field="settings")
    merged = {**defaults(cls), **raw}
    for name, spec in declared.items():
        _check(name, dict(spec.metadata), merged[name])
    instance = cls(**merged)
    check = getattr(instance, "check", None)
    if check is not None:
        check()
    return merged


def load(cls: type[S], stored: dict[str, Any] | None) -> S:
    """The typed settings of a study from its stored (already clean) JSON over the defaults.

    Keys no longer declared (a setting removed since the study was made) are ignored.
    """
    declared = _declared_defaults(cls)
    return cls(**{**declared, **{k: v for k, v in (stored or {}).items() if k in declared}})


@dataclass(frozen=True)
class CrowdSettings:
    """How crowd workers arrive, how long they may hold a lease, and how they are sent back."""

    # Empty: the study's random secret (Study.completion_code), else the cc= of the URL below.
    completion_code: str = text(
        "",
        label="Code a finished worker reports",
        group=CROWD,
        doc="The code crowd workers report; empty: Prolific's cc=, else the study's secret.",
    )
    # e.g. https://app.prolific.com/submissions/complete?cc=XXXX
    prolific_completion_url: str = https_url(
        "",
        hosts=completion_hosts,
        label="Prolific completion link",
        group=CROWD,
        doc="Prolific's completion URL (on app.prolific.com); finished workers go there.",
    )
    # A worker who fails the mode's entry check (``Outcome.screen_out``) is sent here
    # instead: Prolific pays a screened-out submission its screen-out fee when it carries
    # this code. Empty: the cc= of the URL below; both empty: the worker is asked to return
    # the submission (nothing is paid, as before screen-outs existed).
    screen_out_code: str = text(
        "",
        label="Screen-out code",
        group=CROWD,
        doc="The code a worker who fails the entry check reports (Prolific's screen-out "
        "code); empty: the cc= of the screen-out URL.",
    )
    # e.g. https://app.prolific.com/submissions/complete?cc=SCREENED; checked like the
    # completion URL, for the same reason (a foreign host would phish every screened worker).
    prolific_screen_out_url: str = https_url(
        "",
        hosts=completion_hosts,
        label="Prolific screen-out link",
        group=CROWD,
        doc="Prolific's screen-out URL (on app.prolific.com); workers who fail the entry "
        "check go there.",
    )
    # Prolific's "failed attention check" completion code (a code of that type in the
    # Prolific study, usually with the "request a return" action): a worker whose work the
    # study's own checks excluded reports it instead of the completion code, which that work
    # does not earn (issue 45). Empty: such a worker is asked to return the submission.
    failed_check_code: str = text(
        "",
        label="Failed attention check code",
        group=CROWD,
        doc="The code a worker whose work the study's checks excluded reports (Prolific's "
        "failed attention check code); empty: they are asked to return the submission.",
    )
    # Prolific's STUDY_ID; when set, an arrival naming another study is refused.
    prolific_study_id: str = text(
        "",
        label="Prolific study ID",
        group=CROWD,
        doc="Prolific's STUDY_ID; an arrival naming another study is refused.",
    )
    # MTurk HIT ids of the study (comma-separated), read by the crowd sync (docs/crowd.md).
    mturk_hit_ids: str = text(
        "",
        max_length=500,
        label="MTurk HIT IDs",
        group=CROWD,
        doc="MTurk HIT ids of this study, comma-separated (crowd sync).",
    )
    # None: the mode's own default (Mode.crowd_lease_seconds). A lease holds an item back
    # from everyone else; a day is longer than any item takes.
    crowd_lease_seconds: int | None = whole(
        None,
        low=30,
        high=24 * 3600,
        optional=True,
        label="Seconds a worker may hold an item",
        group=CROWD,
        doc="Seconds a crowd worker holds an item; empty: the mode's own default.",
    )
    # From one client address: new crowd participants per hour, and open leases at once.
    # Limits, not work: 100,000 is "no limit" for any lab or campus behind one address.
    crowd_arrivals_per_address_per_hour: int = whole(
        3,
        low=1,
        high=100_000,
        label="New workers per hour from one network address",
        group=CROWD,
        doc="New crowd participants per hour from one address.",
    )
    crowd_open_leases_per_address: int = whole(
        3,
        low=1,
        high=100_000,
        label="Items held at once from one network address",
        group=CROWD,
        doc="Items held at once by the crowd behind one address.",
    )

    # -- people and a judge together (issue 40; services/people_judges.py, people_design.py)
    # Which judge's answers the report's "people + judge" estimate combines with people's,
    # and which human score it predicts: read by the report only, so changeable any time.
    # A judge id, not a name: 0 takes the study's first judge (Judge's ordering). Judges
    # are a few rows per study: a million ids is decades of any deployment.
    people_judge: int = whole(
        0,
        low=0,
        high=999_999,
        label="Judge combined with people in the report",
        group=PEOPLE_JUDGE,
        doc="The judge (its id) whose answers the people + judge estimate uses; 0: the "
        "study's first judge.",
        report=True,
    )
    people_judge_score: str = text(
        "",
        max_length=100,
        label="Human score the judge predicts",
        group=PEOPLE_JUDGE,
        doc="The human score the people + judge estimate is of; empty: the mode's first.",
        report=True,
    )
    # The design that decides which units people answer (people_design_apply draws it
    # before the first judgment): every unit, a uniform share, or a share weighted to where
    # the judge is unsure. Not a report setting: it describes how items were drawn.
    people_design: str = text(
        "",
        max_length=16,
        choices=("", "uniform", "uncertainty"),
        label="Which units people answer",
        group=PEOPLE_JUDGE,
        doc="Empty: every unit; uniform: a random share; uncertainty: a share drawn with "
        "probabilities that grow with the judge's uncertainty (active inference).",
    )
    # A share of the units: below 5% a study's people-only estimate rests on too few units
    # to check the judge against.
    people_share: float = number(
        0.5,
        low=0.05,
        high=1.0,
        label="Share of units people answer",
        group=PEOPLE_JUDGE,
        doc="Under a design, the expected share of the judged units sent to people.",
    )
    # The least probability of any unit: inverse-probability weights are at most 1/floor,
    # and a floor near 0 gives a few units huge weights and a wide interval.
    people_floor: float = number(
        0.1,
        low=0.01,
        high=1.0,
        label="Least chance a unit goes to people",
        group=PEOPLE_JUDGE,
        doc="Under the uncertainty design, every unit's least probability of going to "
        "people (weights are at most its inverse).",
    )
    people_judge_second: int = whole(
        0,
        low=0,
        high=999_999,
        label="Second judge for the uncertainty",
        group=PEOPLE_JUDGE,
        doc="A second judge (its id) whose disagreement with the first is the uncertainty; "
        "0: none (the judge's own spread over runs or swapped orders).",
    )

    def completion_code_for(self, study) -> str:
        """The code a crowd worker reports: the setting, else Prolific's cc=, else the secret.

        Never derived from anything public (the crowd link carries the study's public id).
        """
        if self.completion_code:
            return self.completion_code
        from_url = parse_qs(urlsplit(self.prolific_completion_url).query).get("cc")
        return from_url[0] if from_url and from_url[0] else study.completion_code

    def screen_out_code_for(self) -> str:
        """The code a screened-out worker reports: the setting, else the screen-out URL's
        cc=, else "" (the study has no screen-out code: the worker returns the submission)."""
        if self.screen_out_code:
            return self.screen_out_code
        from_url = parse_qs(urlsplit(self.prolific_screen_out_url).query).get("cc")
        return from_url[0] if from_url and from_url[0] else ""

    @property
    def screens_out(self) -> bool:
        """Whether the study pays screen-outs (a screen-out code or URL is set)."""
        return bool(self.screen_out_code or self.prolific_screen_out_url)


def live_settings(cls: type) -> set[str]:
    """The settings of ``cls`` that may change once a study is open: the crowd settings
    (Prolific gives its completion URL after the study exists) and those only the report
    reads (``report=True``: resamples, confidence level, weights of a total). The mode's
    other settings were built into the items and describe the judgments, so they stay."""
    crowd = crowd_setting_names()
    return crowd | {spec.name for spec in dataclasses.fields(cls) if spec.metadata.get("report")}


def crowd_setting_names() -> set[str]:
    """The crowd's own settings (group ``CROWD``): where workers are sent, what code they
    report, leases and arrival limits. ``CrowdSettings`` also declares the people + judge
    settings every mode shares (issue 40), which are not the crowd's."""
    return {
        spec.name
        for spec in dataclasses.fields(CrowdSettings)
        if spec.metadata.get("group") == CROWD
    }


def owner_setting_names() -> set[str]:
    """The shared settings only the study's owner (or staff) changes: the crowd's (they
    decide where workers are sent and what they are paid against) and the people + judge
    design's (which items people answer; ``services/people_design.py`` is owner-only too).
    The report's choices (``report=True``: which judge the report combines with people)
    are any researcher's of the study, as the mode's own report settings are."""
    return {
        spec.name for spec in dataclasses.fields(CrowdSettings) if not spec.metadata.get("report")
    }


def design_setting_names() -> set[str]:
    """The people + judge design's settings (which items people answer): they change on an
    open study until its first judgment, because a judge can only be run once the study's
    items exist; after it the stored sampling probabilities would no longer be the ones
    people were drawn with (``services/people_design.py``)."""
    return {
        spec.name
        for spec in dataclasses.fields(CrowdSettings)
        if spec.metadata.get("group") == PEOPLE_JUDGE and not spec.metadata.get("report")
    }
