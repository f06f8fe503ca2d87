"""Reads of the live study dashboard (``templates/studies/_dashboard.html``): progress per
item kind, rates and ETA, the per-worker table, agreement from the latest report, and the
mode's own panel (``mode.dashboard``, ``annotation/modes/dashboarding.py``), whose contents
this module does not know.

Every number is one aggregate query over the study's rows (grouped in SQL), so the
dashboard costs the same number of queries for 200 items as for 20,000 (see
tests/annotation/test_dashboard.py and bench/pages.py). Who may see a study is decided
before, by ``annotation/selectors.py``.
"""

import statistics
from datetime import timedelta

from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    F,
    FloatField,
    IntegerField,
    Max,
    Q,
    Sum,
    Value,
)
from django.utils import timezone

from annotation.models import (
    Item,
    Judgment,
    Participant,
    Study,
)
from annotation.modes import get_mode
from annotation.modes.base import Mode, screen_out_reason
from annotation.modes.catch import CATCH
from annotation.selectors import crowd_integrity, open_leases, report_latest

#: Kinds shown but not counted in the overall progress and the ETA: catch trials are made
#: for one participant as they go (``annotation/modes/catch.py``), not study data to finish.
UNCOUNTED_KINDS = {CATCH: "Catch trials (planted captions)"}
#: Items with this target or more are open-ended (VICR's tutorial and probation pools,
#: which every player rates): they have no "done".
OPEN_ENDED_TARGET = 2**31 - 1
#: The per-worker table shows this many rows a page.
WORKERS_PER_PAGE = 50
#: Hours of the judgments-per-hour chart.
RATE_HOURS = 12


def study_progress(study: Study, mode: Mode) -> dict:
    """Done against needed, per item kind and overall (one grouped query over the items).

    "Done" counts finished leases (``Item.judgment_count``: a participant who answered every
    part of an item), "needed" the items' targets. Open-ended kinds count what was done only.
    ``mode`` (here and below) is the study's mode, looked up once by the page.
    """
    labels = mode.kind_labels
    rows = (
        Item.objects.filter(study=study)
        .values("kind")
        .annotate(
            items=Count("id"),
            done=Sum("judgment_count"),
            needed=Sum("target"),
            widest=Max("target"),
        )
        .order_by("kind")
    )
    kinds, done, needed = [], 0, 0
    for row in rows:
        bounded = row["widest"] < OPEN_ENDED_TARGET
        kinds.append(
            {
                "kind": row["kind"],
                "label": labels.get(row["kind"])
                or UNCOUNTED_KINDS.get(row["kind"])
                or row["kind"].replace("_", " ").capitalize(),
                "items": row["items"],
                "done": row["done"],
                "needed": row["needed"] if bounded else None,
                "percent": _percent(row["done"], row["needed"]) if bounded else None,
            }
        )
        if bounded and row["kind"] not in UNCOUNTED_KINDS:
            done += row["done"]
            needed += row["needed"]
    order = list(labels)
    kinds.sort(key=lambda k: order.index(k["kind"]) if k["kind"] in order else len(order))
    return {
        "kinds": kinds,
        "done": done,
        "needed": needed,
        "remaining": needed - done,
        "percent": _percent(done, needed) if needed else None,
    }


def _percent(part: int, whole: int) -> int:
    """Whole percent, rounded down: 100 only when everything is done."""
    return 100 * part // whole if whole else 0


def study_capacity(
    study: Study, *, with_crowd: bool = False, mode: Mode | None = None
) -> dict | None:
    """Whether the remaining items can get the distinct workers they need (issue 26, row 6).

    ``Mode.workers_needed`` says how many more distinct workers, new to the study, the
    remaining items need at least (None: the mode has no such constraint). Against it: the
    registered annotators of the study who have not started (``waiting``). With no crowd
    worker in the study (the crowd link not in use), a study needing more than ``waiting``
    cannot finish: ``cannot_finish``, with ``short`` the annotators to add. None when the
    study is not live (a draft has no items; a closed one serves nobody) or nothing binds.
    A few queries whatever the study's size.

    The dashboard (polled every few seconds) asks only while no crowd worker is in the
    study: then the study can get more workers anyway, and a large crowd study's poll
    does not pay for the bound (``bench/capacity.py``). The planner passes
    ``with_crowd=True`` to show the number in every case.
    """
    if study.status != Study.Status.LIVE:
        return None
    crowd = Participant.objects.filter(study=study).exclude(source=Participant.Source.ACCOUNT)
    crowd_in_use = crowd.exists()
    if crowd_in_use and not with_crowd:
        return None
    need = (mode or get_mode(study.mode)).workers_needed(study)
    if need is None or need.needed <= 0:
        return None
    started = Participant.objects.filter(study=study, user__isnull=False).values("user_id")
    waiting = study.annotators.exclude(pk__in=started).count()
    return {
        "needed": need.needed,
        "reason": need.reason,
        "waiting": waiting,
        "short": max(0, need.needed - waiting),
        "crowd_in_use": crowd_in_use,
        "cannot_finish": need.needed > waiting and not crowd_in_use,
    }


def study_rates(study: Study, *, remaining: int, now=None, can_finish: bool = True) -> dict:
    """Judgments in the last hour and per hour over ``RATE_HOURS``, and an ETA.

    The ETA divides what remains by the answers (finished leases, the unit of
    ``study_progress``) of the last hour; without any, there is no estimate. A study that
    is not live serves nobody, so it has no estimate either (a closed study must not promise
    an end), nor does one that cannot finish with the workers it can get
    (``can_finish=False``, ``study_capacity``: issue 26 row 6). One query.
    """
    now = now or timezone.now()
    hour_ago = now - timedelta(hours=1)
    since = (now - timedelta(hours=RATE_HOURS - 1)).replace(minute=0, second=0, microsecond=0)
    hours = [since + timedelta(hours=k) for k in range(RATE_HOURS)]
    # One pass over the study's judgments with plain comparisons per hour: SQLite's
    # TruncHour is a Python function called per row, many times slower.
    buckets = {
        f"h{k}": Count(
            "id", filter=Q(created_at__gte=start, created_at__lt=start + timedelta(hours=1))
        )
        for k, start in enumerate(hours)
    }
    # A lease finishes with its last judgment, stored at the lease's submitted_at; the joins
    # (to-one, so they change no count) read only the window's rows.
    finished = Q(
        created_at__gte=hour_ago,
        assignment__submitted_at=F("created_at"),
        item__target__lt=OPEN_ENDED_TARGET,
    ) & ~Q(item__kind__in=list(UNCOUNTED_KINDS))
    counts = Judgment.objects.filter(study=study, created_at__gte=since).aggregate(
        last_hour=Count("id", filter=Q(created_at__gte=hour_ago)),
        finished_last_hour=Count("id", filter=finished),
        **buckets,
    )
    finished_last_hour = counts["finished_last_hour"]
    series = [{"hour": hour, "n": counts[f"h{k}"]} for k, hour in enumerate(hours)]
    eta = None
    live = study.status == Study.Status.LIVE
    if remaining > 0 and finished_last_hour and live and can_finish:
        eta = now + timedelta(hours=remaining / finished_last_hour)
    return {
        "last_hour": counts["last_hour"],
        "finished_last_hour": finished_last_hour,
        "per_hour": series,
        "peak": max([row["n"] for row in series] + [1]),
        "eta": eta,
    }


class Median(Aggregate):
    """The median of a column per group, computed by the database.

    PostgreSQL has ``percentile_cont``; SQLite has no median, so ``_sqlite_median`` adds one
    to the connection (a Python aggregate) before the query runs.
    """

    function = "CAPEVAL_MEDIAN"
    name = "Median"
    output_field = FloatField()
    allow_distinct = False

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler,
            connection,
            function="PERCENTILE_CONT",
            template="%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)",
            **extra,
        )


class _SqliteMedian:
    """SQLite's side of ``Median``: collect a group's values, return their median."""

    def __init__(self):
        self.values: list[float] = []

    def step(self, value):
        if value is not None:
            self.values.append(value)

    def finalize(self):
        return statistics.median(self.values) if self.values else None


def _sqlite_median() -> None:
    """Register ``CAPEVAL_MEDIAN`` on this SQLite connection (cheap; replaces itself)."""
    connection.ensure_connection()
    connection.connection.create_aggregate("CAPEVAL_MEDIAN", 1, _SqliteMedian)


#: The ``?sort=`` keys of the per-worker table and what they order by (anything else is
#: ignored: the key never reaches SQL). A leading "-" sorts descending.
WORKER_SORTS = {
    "pseudonym": "pseudonym",
    "source": "source",
    "judgments": "n_judgments",
    "median": "median_ms",
    "checks": "check_failures",
    "catch": "catch_failures",
    "completed": "completed_at",
    "arrived": "created_at",
}
#: Newest participants first: who is working now, and the cheapest order (no aggregate over
#: every judgment of the study on each poll).
WORKER_SORT_DEFAULT = "-arrived"


def worker_sort(raw: str | None) -> str:
    """The ``?sort=`` value if it names a ``WORKER_SORTS`` key (with one optional "-")."""
    raw = raw or ""
    key = raw[1:] if raw.startswith("-") else raw
    return raw if key in WORKER_SORTS else WORKER_SORT_DEFAULT


def study_workers(
    study: Study,
    *,
    sort: str = WORKER_SORT_DEFAULT,
    page: int = 1,
    raw_ids: bool = False,
    mode: Mode,
) -> dict:
    """One page of the per-worker table, sorted in SQL, with the number of workers.

    Per worker: judgments, median server dwell, the mode's check failures, catch-trial
    failures, flags, completion; with ``raw_ids`` (the study's owner and staff only) the
    crowd platform's worker and submission ids, so a submission can be approved or rejected.
    Agreement and reliability come from the latest finished report (``report_agreement``).

    Two queries whatever the study's size: the page's participant ids in the chosen order
    (aggregating only the sort column over every worker), then every column for those ids
    alone, so the JSON lookups and the median read one page's judgments, not the study's.
    """
    sort = worker_sort(sort)
    checks = mode.worker_checks
    missed = Q(judgments__result__catch__caught=False)
    columns = {
        "n_judgments": Count("judgments"),
        "median_ms": Median("judgments__dwell_ms"),
        "catches": Count("judgments", filter=Q(judgments__result__catch__caught=True) | missed),
        "catch_failures": Count("judgments", filter=missed),
        "checks": (
            Count("judgments", filter=checks.counted) if checks else Value(None, IntegerField())
        ),
        "check_failures": (
            Count("judgments", filter=checks.failed) if checks else Value(None, IntegerField())
        ),
    }
    people = Participant.objects.filter(study=study)
    total = people.count()
    pages = max(1, -(-total // WORKERS_PER_PAGE))
    page = min(max(1, page), pages)
    start = (page - 1) * WORKERS_PER_PAGE
    field = WORKER_SORTS[sort.lstrip("-")]
    if sort.startswith("-"):
        order, tie = F(field).desc(nulls_last=True), "-id"
    else:
        order, tie = F(field).asc(nulls_last=True), "id"
    if connection.vendor == "sqlite":
        _sqlite_median()
    ordered = people.annotate(**{field: columns[field]}) if field in columns else people
    ids = list(
        ordered.order_by(order, tie).values_list("id", flat=True)[start : start + WORKERS_PER_PAGE]
    )
    fields = [
        "id", "pseudonym", "source", "external_id", "external_meta", "flags", "completed_at",
        "status", "created_at", *columns,
    ]  # fmt: skip
    found = {
        row["id"]: row for row in people.filter(id__in=ids).annotate(**columns).values(*fields)
    }
    rows = [found[pk] for pk in ids]
    source_names = dict(Participant.Source.choices)
    for row in rows:
        row["source_label"] = source_names.get(row["source"], row["source"])
        flags = row.pop("flags") or []
        row["flag_kinds"] = sorted({flag.get("kind", "?") for flag in flags})
        row["screened_out"] = screen_out_reason(flags)
        meta = row.pop("external_meta") or {}
        external = row.pop("external_id")
        if raw_ids and row["source"] != Participant.Source.ACCOUNT:
            row["raw_id"] = external
            row["submission"] = meta.get("SESSION_ID") or meta.get("assignmentId") or ""
        median = row.pop("median_ms")
        row["median_s"] = None if median is None else median / 1000
    return {
        "rows": rows,
        "total": total,
        "page": page,
        "pages": pages,
        "sort": sort,
        "first": start + 1 if rows else 0,
        "last": start + len(rows),
        "check_label": checks.label if checks else "",
        "no_checks_note": mode.dashboard.no_checks_note,
        "catch_trials": mode.dashboard.catch_trials,
    }


def report_agreement(study: Study, mode: Mode) -> dict:
    """Per-worker agreement and reliability from the latest finished report, by pseudonym.

    ``reliability`` (the reliability model's ``workers``: competence, flagged and reason) and
    the agreement the mode reads from its own report (``mode.dashboard.worker_agreement``:
    exact). An empty ``by_pseudonym`` when there is no report or it has neither.
    """
    job = report_latest(study)
    if job is None:
        return {"at": None, "method": "", "note": "", "by_pseudonym": {}}
    result = job.result or {}
    by_pseudonym: dict[str, dict] = {}
    agreement = mode.dashboard.worker_agreement(result)
    for pseudonym, exact in agreement.items():
        by_pseudonym.setdefault(pseudonym, {})["exact"] = exact
    reliability = result.get("reliability") or {}
    for worker in reliability.get("workers") or []:
        if isinstance(worker, dict) and worker.get("participant"):
            by_pseudonym.setdefault(worker["participant"], {}).update(
                competence=worker.get("competence"),
                flagged=bool(worker.get("flagged")),
                reason=worker.get("reason") or "",
            )
    return {
        "at": job.finished_at or job.created_at,
        "method": reliability.get("method", ""),
        "note": reliability.get("note", ""),
        "by_pseudonym": by_pseudonym,
    }


def study_dashboard(
    study: Study,
    *,
    sort: str = WORKER_SORT_DEFAULT,
    page: int = 1,
    raw_ids: bool = False,
    mode: Mode,
) -> dict:
    """Everything the live dashboard shows, in a number of queries independent of the study:
    the shared sections, and the mode's own panel (``mode.dashboard``) with its words.
    ``mode`` is the study's, looked up once by the view and handed to every section."""
    progress = study_progress(study, mode)
    capacity = study_capacity(study, mode=mode) if progress["remaining"] > 0 else None
    can_finish = not (capacity and capacity["cannot_finish"])
    workers = study_workers(study, sort=sort, page=page, raw_ids=raw_ids, mode=mode)
    agreement = report_agreement(study, mode)
    for row in workers["rows"]:
        found = agreement["by_pseudonym"].get(row["pseudonym"], {})
        exact = found.get("exact")
        row["agreement_percent"] = None if exact is None else round(100 * exact)
        row["competence"] = found.get("competence")
        row["reliability_flagged"] = found.get("flagged", False)
        row["reliability_reason"] = found.get("reason", "")
    return {
        "progress": progress,
        "rates": study_rates(study, remaining=progress["remaining"], can_finish=can_finish),
        # The distinct workers the remaining items need (Mode.workers_needed), and whether
        # the study can get them.
        "capacity": capacity,
        "workers": workers,
        "agreement": {key: agreement[key] for key in ("at", "method", "note")},
        "leases": open_leases(study),
        "integrity": crowd_integrity(study),
        "completion_reach": study_completion_reach(study, mode),
        # What only this mode shows (a template and its context), and its words.
        "panel": mode.dashboard.panel(study),
        "item_words": mode.dashboard.item_words,
    }


def study_completion_reach(study: Study, mode: Mode | None = None) -> str:
    """Why a crowd worker cannot be served the completion code's count, with the numbers
    (``Mode.completion_reach``; issue 46, row 2), "" when one can or the study is not live.
    Said when the study opens and on the dashboard, as the "cannot finish" box is."""
    if study.status != Study.Status.LIVE:
        return ""
    return (mode or get_mode(study.mode)).completion_reach(study)
