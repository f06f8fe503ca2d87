"""Reads: who may see what. Anything a user may not see answers 404, never 403, so that
another researcher's study ids reveal nothing."""

import statistics
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    F,
    FloatField,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from annotation.models import (
    Assignment,
    Caption,
    CrowdRefusal,
    Image,
    Item,
    Job,
    Judgment,
    Participant,
    Study,
    User,
)
from annotation.modes import get_mode
from annotation.modes.humanr.protocol import adaptive_summary as humanr_adaptive_summary
from rubrics import adaptive, planner

#: Prolific's completion URL; ``?cc=CODE`` records the code for the worker.
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete"


def studies_for_researcher(user: User) -> QuerySet[Study]:
    """Studies the user owns or was added to; every study for staff."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    if not user.is_researcher:
        return Study.objects.none()
    return Study.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def study_for_researcher(user: User, study_id: int) -> Study:
    """The study if the user may manage it, else Http404."""
    study = studies_for_researcher(user).filter(pk=study_id).select_related("owner").first()
    if study is None:
        raise Http404("No such study.")
    return study


def studies_for_annotator(user: User) -> QuerySet[Study]:
    """Live studies open to this registered annotator."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(status=Study.Status.LIVE, annotators=user)


def job_for_user(user: User, job_id: int) -> Job:
    """The job if the user may manage its study (or, for a job of no study, started it).

    Starting a study's job is not enough: a researcher removed from the study must not
    keep reading its exports. Anything else is Http404.
    """
    if not user.is_authenticated:
        raise Http404("No such job.")
    job = Job.objects.select_related("study").filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    if user.is_staff:
        return job
    if job.study_id is None:
        if job.created_by_id == user.pk:
            return job
    elif studies_for_researcher(user).filter(pk=job.study_id).exists() and not (
        # A raw-id export is the owner's alone: a member reaching it by URL is told no more
        # than a stranger would be (404, not 403, so ids cannot be probed).
        _raw_ids(job) and job.study.owner_id != user.pk
    ):
        return job
    raise Http404("No such job.")


def _raw_ids(job: Job) -> bool:
    return isinstance(job.params, dict) and bool(job.params.get("raw_ids"))


def study_jobs_for_user(user: User, study: Study) -> QuerySet[Job]:
    """The study's jobs this user may see: all for its owner and staff; for a member, all
    but the exports carrying raw Prolific/MTurk ids (only the owner may ask for those, so
    only the owner reads them)."""
    jobs = study.jobs.all()
    if user.is_staff or study.owner_id == user.pk:
        return jobs
    # Through a subquery: excluding on a JSON key directly would also drop jobs whose
    # params lack the key (NULL comparisons) on some databases.
    return jobs.exclude(pk__in=study.jobs.filter(params__raw_ids=True).values("pk"))


def study_counts(study: Study) -> dict[str, int]:
    """Headline numbers of a study's detail page."""
    return {
        "images": Image.objects.filter(study=study).count(),
        "captions": Caption.objects.filter(study=study).count(),
        # Systems of the captions under study: VICR's tutorial and probation captions are
        # training material (their "system" is a placeholder), not a system compared.
        "systems": Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
        .values("system")
        .distinct()
        .count(),
        "items": Item.objects.filter(study=study).count(),
        "participants": Participant.objects.filter(study=study).count(),
        "judgments": Judgment.objects.filter(study=study).count(),
    }


def studies_with_counts(studies: QuerySet[Study]) -> QuerySet[Study]:
    """``studies`` with ``n_judgments`` and ``n_participants``, in the one query of the list.

    Counted in correlated subqueries, not ``Count`` over two joins (which would multiply
    judgments by participants), so the home page costs one query however many studies.
    """

    def count_of(model) -> Coalesce:
        per_study = (
            model.objects.filter(study=OuterRef("pk"))
            .order_by()
            .values("study")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(per_study), 0)

    return studies.annotate(n_judgments=count_of(Judgment), n_participants=count_of(Participant))


OPEN_LEASES_SHOWN = 50


def open_leases(study: Study, *, now=None) -> dict:
    """The study's open leases for its page: the first ``OPEN_LEASES_SHOWN`` and the count.

    Lapsed ones are listed too (they hold capacity until the next claim or beat gives them
    back), marked as such.
    """
    now = now or timezone.now()
    leases = Assignment.objects.filter(
        item__study=study, status=Assignment.Status.OPEN
    ).select_related("participant", "item")
    rows = [
        {
            "id": lease.pk,
            "pseudonym": lease.participant.pseudonym,
            "source": lease.participant.get_source_display(),
            "item": f"{lease.item.kind} #{lease.item.position}",
            "served_at": lease.served_at,
            "expires_at": lease.expires_at,
            "lapsed": lease.expires_at <= now,
        }
        for lease in leases.order_by("served_at", "id")[:OPEN_LEASES_SHOWN]
    ]
    return {"rows": rows, "count": leases.count()}


def crowd_integrity(study: Study) -> dict:
    """Counts of refused arrivals by reason and of flagged participants, for the study page."""
    refusals = dict(
        CrowdRefusal.objects.filter(study=study)
        .values_list("reason")
        .annotate(n=Count("id"))
        .values_list("reason", "n")
    )
    flagged = (
        Participant.objects.filter(study=study)
        .exclude(flags=[])
        .order_by("pk")
        .values_list("pseudonym", "flags")[:OPEN_LEASES_SHOWN]
    )
    completed = Participant.objects.filter(study=study, completed_at__isnull=False).count()
    return {
        "refusals": sorted(refusals.items()),
        "flagged": [
            {"pseudonym": pseudonym, "kinds": sorted({flag["kind"] for flag in flags})}
            for pseudonym, flags in flagged
        ],
        "completed": completed,
    }


def completion_code(study: Study) -> str:
    """The code a crowd worker of ``study`` reports (see ``CrowdSettings.completion_code_for``)."""
    return get_mode(study.mode).settings(study).completion_code_for(study)


def crowd_setup(study: Study) -> dict:
    """What the researcher enters on Prolific: the completion code and completion URL."""
    code = completion_code(study)
    url = get_mode(study.mode).settings(study).prolific_completion_url
    return {
        "completion_code": code,
        "prolific_completion_url": url or PROLIFIC_COMPLETE + "?" + urlencode({"cc": code}),
    }


def report_latest(study: Study) -> Job | None:
    """The newest finished report job of the study, if any."""
    return study.jobs.filter(kind=Job.Kind.REPORT, status=Job.Status.DONE).first()


def report_pending(study: Study) -> Job | None:
    """A report job of the study that is queued or running, if any."""
    return study.jobs.filter(
        kind=Job.Kind.REPORT, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
    ).first()


def job_file_path(job: Job) -> Path:
    """The job's result file, which must lie inside the export folder."""
    root = Path(settings.CAPEVAL_EXPORT_DIR).resolve()
    path = (root / job.result_file).resolve()
    if root not in path.parents or not path.is_file():
        raise Http404("The file is gone; run the export again.")
    return path


#: The folder of display renditions under MEDIA_ROOT (``services/imports/images.py``).
MEDIA_DISPLAY_FOLDER = "display"


def media_file_kind(user: User, path: str) -> str:
    """Which file of MEDIA_ROOT ``path`` is, if ``user`` may read it; Http404 otherwise.

    ``"display"``: a display rendition, for anyone. Crowd workers have no account and see
    them on every item, exports ship them; they carry no metadata and their names are
    content hashes. ``"original"``: an uploaded original (camera EXIF, GPS included), only
    for researchers of a study holding an image stored in that file (``Image.file``; one
    file may back images of several studies) and for staff. Everything else under
    MEDIA_ROOT (staging folders, stray files) is never served. A stranger gets the same 404
    for an existing original as for a missing one, before the file system is looked at.
    """
    parts = path.split("/")
    # No empty, relative or hidden segment (".staging"), no backslash or NUL: the path must
    # name a file inside MEDIA_ROOT as written; serve() confines it again with safe_join.
    if any(not part or part.startswith(".") or "\\" in part or "\x00" in part for part in parts):
        raise Http404("No such file.")
    if parts[0] == MEDIA_DISPLAY_FOLDER and len(parts) > 1:
        return "display"
    if Image.objects.filter(file=path, study__in=studies_for_researcher(user)).exists():
        return "original"
    raise Http404("No such file.")


# --- The live study dashboard (templates/studies/_dashboard.html) -------------------------
#
# Every number below is one aggregate query over the study's rows (grouped in SQL), so the
# dashboard costs the same number of queries for 200 items as for 20,000 (see
# tests/annotation/test_dashboard.py and bench/pages.py).

#: What each mode's item kinds are called on the dashboard (unknown kinds show as stored).
KIND_LABELS: dict[str, dict[str, str]] = {
    "thumb": {
        "stage1": "Stage 1: first scores",
        "stage2": "Stage 2: second annotator's review",
        "fluency": "Fluency round (native speaker)",
        "check": "Third annotator's check",
    },
    "vicr": {"tutorial": "Tutorial", "probation": "Probation", "game": "Game pairs"},
    "humanr": {"group": "Groups of comparisons"},
}

#: Per mode: which judgments are a check of the worker, and which of those the worker
#: failed. HUMANr: the attention check of each group (``result.check_failed``); VICR: the
#: end of a tutorial, of a probation attempt and the first-game check (``result.transition``,
#: failed when it leads anywhere but the game). THumB checks captions, not workers (the
#: third annotator re-scores stage 2), so it has none.
WORKER_CHECKS: dict[str, tuple[str, Q, Q]] = {
    "humanr": (
        "attention checks",
        Q(judgments__result__check_failed=True) | Q(judgments__result__check_failed=False),
        Q(judgments__result__check_failed=True),
    ),
    "vicr": (
        "tutorial, probation and first-game checks",
        Q(judgments__result__has_key="transition"),
        Q(judgments__result__transition__to__in=["probation", "excluded"]),
    ),
}

#: Kinds shown but not counted in the overall progress and the ETA: catch trials are made
#: for one participant as they go (``annotation/modes/catch.py``), not study data to finish.
UNCOUNTED_KINDS = {"catch": "Catch trials (planted captions)"}
#: Items with this target or more are open-ended (VICR's tutorial and probation pools,
#: which every player rates): they have no "done".
OPEN_ENDED_TARGET = 2**31 - 1
#: The per-worker table shows this many rows a page.
WORKERS_PER_PAGE = 50
#: Hours of the judgments-per-hour chart.
RATE_HOURS = 12


def study_progress(study: Study) -> dict:
    """Done against needed, per item kind and overall (one grouped query over the items).

    "Done" counts finished leases (``Item.judgment_count``: a participant who answered every
    part of an item), "needed" the items' targets. Open-ended kinds count what was done only.
    """
    labels = KIND_LABELS.get(study.mode, {})
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


def study_rates(study: Study, *, remaining: int, now=None) -> dict:
    """Judgments in the last hour and per hour over ``RATE_HOURS``, and an ETA.

    The ETA divides what remains by the answers (finished leases, the unit of
    ``study_progress``) of the last hour; without any, there is no estimate. One query.
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
    if remaining > 0 and finished_last_hour:
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
    study: Study, *, sort: str = WORKER_SORT_DEFAULT, page: int = 1, raw_ids: bool = False
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
    checks = WORKER_CHECKS.get(study.mode)
    missed = Q(judgments__result__catch__caught=False)
    columns = {
        "n_judgments": Count("judgments"),
        "median_ms": Median("judgments__dwell_ms"),
        "catches": Count("judgments", filter=Q(judgments__result__catch__caught=True) | missed),
        "catch_failures": Count("judgments", filter=missed),
        "checks": Count("judgments", filter=checks[1]) if checks else Value(None, IntegerField()),
        "check_failures": (
            Count("judgments", filter=checks[2]) if checks else Value(None, IntegerField())
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
        row["flag_kinds"] = sorted({flag.get("kind", "?") for flag in row.pop("flags") or []})
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
        "check_label": checks[0] if checks else "",
    }


def report_agreement(study: Study) -> dict:
    """Per-worker agreement and reliability from the latest finished report, by pseudonym.

    ``reliability`` (the reliability model's ``workers``: competence, flagged and reason) and
    VICR's per-player agreement with the consensus of the others (``players``: exact). An
    empty ``by_pseudonym`` when there is no report or it has neither.
    """
    job = report_latest(study)
    if job is None:
        return {"at": None, "method": "", "note": "", "by_pseudonym": {}}
    result = job.result or {}
    by_pseudonym: dict[str, dict] = {}
    for player in result.get("players") or []:
        if isinstance(player, dict) and player.get("pseudonym"):
            by_pseudonym.setdefault(player["pseudonym"], {})["exact"] = player.get("exact")
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
    study: Study, *, sort: str = WORKER_SORT_DEFAULT, page: int = 1, raw_ids: bool = False
) -> dict:
    """Everything the live dashboard shows, in a number of queries independent of the study."""
    progress = study_progress(study)
    workers = study_workers(study, sort=sort, page=page, raw_ids=raw_ids)
    agreement = report_agreement(study)
    for row in workers["rows"]:
        found = agreement["by_pseudonym"].get(row["pseudonym"], {})
        exact = found.get("exact")
        row["agreement_percent"] = None if exact is None else round(100 * exact)
        row["competence"] = found.get("competence")
        row["reliability_flagged"] = found.get("flagged", False)
        row["reliability_reason"] = found.get("reason", "")
    return {
        "progress": progress,
        "rates": study_rates(study, remaining=progress["remaining"]),
        "workers": workers,
        "agreement": {key: agreement[key] for key in ("at", "method", "note")},
        "leases": open_leases(study),
        "integrity": crowd_integrity(study),
        "adaptive": study_adaptive_saving(study),
        # HUMANr's adaptive allocation: which systems are settled, groups no longer served.
        "allocation": humanr_adaptive_summary(study) if study.mode == "humanr" else None,
    }


def study_adaptive_saving(study: Study) -> dict | None:
    """What VICR's adaptive stopping saved (issue 15); None when the setting is off.

    A pair stopped early has its ``target`` lowered below ``max_ratings`` by the submission
    that settled it; the ratings it will never collect are ``max_ratings - target``
    (``target`` counts the leases that were out when it stopped, which may still be
    answered). ``ratings_fixed``: what every game pair at ``max_ratings`` would have cost.
    """
    config = get_mode(study.mode).settings(study)
    if not getattr(config, "adaptive_stopping", False):
        return None
    cap = config.max_ratings
    totals = Item.objects.filter(study=study, kind="game").aggregate(
        pairs=Count("id"),
        stopped=Count("id", filter=Q(target__lt=cap)),
        below=Coalesce(Sum(cap - F("target"), filter=Q(target__lt=cap)), 0),
    )
    return {
        "pairs_stopped": totals["stopped"],
        "ratings_saved": totals["below"],
        "ratings_fixed": totals["pairs"] * cap,
    }


#: The planner's pilot: at least this many VICR pairs with 2+ kept game ratings, else the
#: stated rater model (``rubrics.adaptive.fit_rater_model`` needs a few pairs per level).
PLAN_PILOT_MIN_PAIRS = 10


def study_plan(
    study: Study,
    *,
    sizes: list[int],
    judgments_per_item: int,
    price_per_judgment: float | None,
    seconds_per_judgment: float | None,
    target_half_width: float | None,
    simulations: int,
    mean: float,
    difference: float,
    spread: float,
    exact: float,
    adjacent: float,
) -> dict:
    """The planner's curve for the study's mode (``rubrics.planner``), as JSON.

    Pilot: a VICR study with ``PLAN_PILOT_MIN_PAIRS`` pairs of 2+ kept game ratings is its
    own pilot (the rater model is fitted to them); otherwise, and for THumB and HUMANr
    (whose pilots would need the report's whole assembly of stages and groups), the stated
    assumptions: THumB two systems with a mean Total of ``mean`` and ``difference`` between
    them; HUMANr the Human baseline at 0 and a model at ``-difference``, slider spread
    ``spread``; VICR ``RaterModel.symmetric(exact, adjacent)``. Seconds per judgment: given,
    else the median dwell of the study's kept judgments (None when it has none).
    ValueError from the planner for a combination it refuses.
    """
    if seconds_per_judgment is None:
        dwell = list(
            Judgment.objects.filter(study=study, excluded=False)
            .order_by("-id")
            .values_list("dwell_ms", flat=True)[:10_000]
        )
        if dwell:
            seconds_per_judgment = statistics.median(dwell) / 1000
    common = {
        "target_half_width": target_half_width,
        "n_simulations": simulations,
        "price_per_judgment": price_per_judgment,
        "seconds_per_judgment": seconds_per_judgment,
        "seed": study.seed % 2**32,
    }
    pilot = "assumptions"
    if study.mode == "thumb":
        plan = planner.plan_thumb(
            n_images=sizes,
            assumptions=planner.ThumbAssumptions.two_systems(mean, difference),
            compare=("A", "B"),
            judgments_per_caption=judgments_per_item,
            n_resamples=100,
            **common,
        )
    elif study.mode == "humanr":
        plan = planner.plan_humanr(
            n_images=sizes,
            assumptions=planner.HumanrAssumptions(
                {
                    "Human": planner.slider_pmf(0.0, spread),
                    "Model": planner.slider_pmf(-difference, spread),
                }
            ),
            judgments_per_item=[judgments_per_item],
            compare="Model",
            n_permutations=200,
            **common,
        )
    elif study.mode == "vicr":
        levels = get_mode("vicr").settings(study).scale_levels
        ratings: dict[int, list[int]] = {}
        for item_id, rating in (
            Judgment.objects.filter(study=study, item__kind="game", excluded=False)
            .order_by("-id")
            .values_list("item_id", "payload__rating")[:20_000]
        ):
            ratings.setdefault(item_id, []).append(int(rating))
        rated = [r for r in ratings.values() if len(r) >= 2]
        source: dict = {}
        if len(rated) >= PLAN_PILOT_MIN_PAIRS:
            pilot, source = "study", {"pilot": rated}
        else:
            model = adaptive.RaterModel.symmetric(levels, exact=exact, adjacent=adjacent)
            source = {"model": model}
        plan = planner.plan_vicr(
            n_pairs=sizes,
            ratings_per_pair=[judgments_per_item],
            levels=levels,
            repetitions=10,
            **source,
            **common,
        )
    else:
        raise ValueError(f"the planner has no model of the {study.mode!r} mode")
    return {
        **plan.as_dict(),
        "pilot": pilot,
        "seconds_per_judgment": seconds_per_judgment,
        "price_per_judgment": price_per_judgment,
    }
