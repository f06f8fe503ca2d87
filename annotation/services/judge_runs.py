"""Run a VLM judge over a study through the platform (issue 25, "Run").

The researcher saves the endpoint (``judge_endpoints.judge_endpoint_save``: base URL,
model, API key, repeats, prices and the rest) and edits the prompt template
(``judge_prompt_save``: every save is a new version, the first one the mode's
``Judging.default_prompt``). ``judge_run_request`` queues a job; the job
(``judge_run``, through ``services/runner.py``) asks every question of the study
(``Judging.units``) with ``annotation.judges.client.run_batch`` and stores what came back
in one transaction: a ``Judge`` (kind VLM, its model and prompt version) with its
``JudgeAnswer`` rows, a ``JudgeFailure`` per question without a usable answer (with the
reason and the raw reply), and the cache rows that make a rerun free.

The key. Stored only as a Fernet token (``annotation/secrets.py``) plus its masked form;
decrypted in the job just before the batch starts, held by ``client.Endpoint`` (whose
repr hides it, and which scrubs it from every error and raw reply before anything is cut,
stored or logged), and never returned by anything here.

Validation. A reply is read by ``Judging.read_reply`` inside the batch: the mode's
``parse_reply`` behind the checks of stored text every mode's replies pass (a NUL, a JSON
object nested too deep). A malformed reply is that item's error, with the reply kept (what
stored text may not hold written as an escape). It is checked by ``clean_answer`` after
it, with the unit's captions (span offsets need the caption's text); a reply refused there
is a failure too and is not cached, so a rerun asks again.
"""

from __future__ import annotations

import logging
import mimetypes
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation import secrets, storage
from annotation.errors import Conflict, Forbidden, InvalidInput, NotFound, ServiceError
from annotation.judges.client import NOT_ASKED, Endpoint, JudgeItem, RunResult, run_batch
from annotation.models import (
    Caption,
    Image,
    Job,
    Judge,
    JudgeAnswer,
    JudgeCacheEntry,
    JudgeEndpoint,
    JudgeFailure,
    JudgePrompt,
    Study,
    User,
)
from annotation.modes import get_mode
from annotation.modes.base import Mode, fill_prompt
from annotation.modes.judging import Judging
from annotation.services.jobs import job_create
from annotation.services.judge_endpoints import (
    check_key_spender,
    judge_address_policy,
    judge_endpoint_view,
    judge_key_drop_unless_saver,
)
from annotation.text import clean_text, shown

Progress = Callable[..., None]
logger = logging.getLogger(__name__)

MAX_PROMPT = 20_000
#: Most questions one run asks (units x repeats x 2 with swap): the job's time limit and
#: one transaction's rows stay bounded.
MAX_QUESTIONS = 200_000
#: Failures listed in the job's result (all are in ``JudgeFailure``).
LISTED_FAILURES = 50
#: Seconds between progress writes while the batch runs.
PROGRESS_EVERY = 0.5

# ------------------------------------------------------------------------------ prompts


def judge_prompt_current(study: Study) -> JudgePrompt | None:
    return JudgePrompt.objects.filter(study=study).first()


def _placeholders(unit: str) -> tuple[str, ...]:
    return ("{caption}",) if unit == "caption" else ("{caption_a}", "{caption_b}")


def judge_prompt_save(
    *, study: Study, text: str, by: User | None = None, mode: Mode | None = None
) -> JudgePrompt:
    """Save ``text`` as the study's next prompt version (the current one when unchanged).
    A new version saved by anyone but the key's saver drops the stored key
    (``judge_endpoints.judge_key_drop_unless_saver``). ``mode``: the study's, if the
    caller has it."""
    mode = mode or get_mode(study.mode)
    judging = mode.judging
    if not judging.unit:
        raise InvalidInput(f"The {mode.label} mode takes no judge.")
    text = clean_text((text or "").replace("\r\n", "\n"), field="text", max_length=MAX_PROMPT,
                      multiline=True)  # fmt: skip
    missing = [p for p in _placeholders(judging.unit) if p not in text]
    if not text.strip() or missing:
        raise InvalidInput(
            f"text: the template must contain {' and '.join(_placeholders(judging.unit))} "
            "(where the caption text goes).",
            field="text",
        )
    with transaction.atomic():
        # The study row serialises two saves of the same study (versions stay 1, 2, 3...).
        Study.objects.select_for_update().filter(pk=study.pk).first()
        current = judge_prompt_current(study)
        if current is not None and current.text == text:
            return current
        version = current.version + 1 if current else 1
        judge_key_drop_unless_saver(study=study, by=by)
        # Which guidelines the judge is asked with: the study's, when the text holds them
        # (the default prompt does); the alignment report compares it with the people's.
        guide = mode.guidelines(study)
        held = guide.version if guide.text and guide.text in text else ""
        return JudgePrompt.objects.create(
            study=study, version=version, text=text, created_by=by, guidelines_version=held
        )


def judge_prompt_for_run(study: Study, by: User | None, mode: Mode | None = None) -> JudgePrompt:
    """The current version, the mode's default saved as v1 when there is none."""
    current = judge_prompt_current(study)
    if current is not None:
        return current
    mode = mode or get_mode(study.mode)
    return judge_prompt_save(study=study, text=mode.judging.default_prompt(study), by=by, mode=mode)


# ------------------------------------------------------------------------------ the run


def judge_run_request(*, study: Study, by: User | None) -> Job:
    """Queue a judge run of the study with its endpoint and current prompt; the caller
    enqueues the job (``annotation.tasks.enqueue``). Refused at once, each a conflict with
    the study's state (409, the request itself is fine): no endpoint, a mode without
    judges, a study with no question, a run already queued or running."""
    mode = get_mode(study.mode)
    judging = mode.judging
    if not judging.unit:
        raise Conflict(f"The {mode.label} mode takes no judge.")
    endpoint = JudgeEndpoint.objects.filter(study=study).first()
    if endpoint is None:
        raise Conflict("Save the judge's endpoint settings first.", field="base_url")
    if not judging.units(study):
        raise Conflict("The study has no question for a judge yet (import its captions).")
    if judge_run_pending(study) is not None:
        raise Conflict("A judge run of this study is already queued or running.")
    check_key_spender(endpoint, by)
    prompt = judge_prompt_for_run(study, by, mode)
    snapshot = judge_endpoint_view(study) or {}
    snapshot.pop("api_key", None)
    snapshot.pop("key_saved_by", None)
    params = {"prompt": prompt.pk, "prompt_version": prompt.label, "settings": snapshot}
    return job_create(kind=Job.Kind.JUDGE, study=study, created_by=by, params=params)


def judge_run_pending(study: Study) -> Job | None:
    return study.jobs.filter(
        kind=Job.Kind.JUDGE, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
    ).first()


def judge_runs_list(study: Study, limit: int = 20) -> list[Job]:
    return list(study.jobs.filter(kind=Job.Kind.JUDGE).order_by("-created_at", "-id")[:limit])


def judge_run_stop(*, study: Study, job_id: int, by: User) -> Job:
    """Ask a queued or running judge run to stop. The run sends no new question from its
    next progress tick (half a second), lets those in flight finish, and stores what was
    answered; a rerun of the same prompt version asks only the rest.

    Only the researcher who started the run, or whose key it spends, may stop it: another
    member of a shared study could otherwise stop every run of a rival (Forbidden). A run
    that has ended is a Conflict; asking twice keeps the first request.
    """
    job = study.jobs.filter(pk=job_id, kind=Job.Kind.JUDGE).first()
    if job is None:
        raise NotFound("No such judge run.")
    if not judge_run_may_stop(job, by):
        raise Forbidden("Only the researcher who started this run, or whose key it spends, "
                        "may stop it.")  # fmt: skip
    if job.is_finished:
        raise Conflict("This run has already ended.")
    Job.objects.filter(pk=job.pk, stop_requested_at__isnull=True).update(
        stop_requested_at=timezone.now(), stop_requested_by=by
    )
    job.refresh_from_db()
    return job


def judge_run_may_stop(job: Job, user: User) -> bool:
    """Whether ``user`` may stop the run: they started it, or it spends their key."""
    endpoint = JudgeEndpoint.objects.filter(study_id=job.study_id).first()
    payer = endpoint.api_key_saved_by_id if endpoint and endpoint.api_key_token else None
    return user.pk in (job.created_by_id, payer)


def _stop_requested(job: Job) -> bool:
    return Job.objects.filter(pk=job.pk, stop_requested_at__isnull=False).exists()


class _Question:
    __slots__ = ("item", "first", "second", "run", "key", "image")

    def __init__(self, item, first, second, run, key, image):
        self.item, self.first, self.second, self.run = item, first, second, run
        self.key, self.image = key, image


def _questions(study: Study, units, repeats: int, swap: bool) -> list[_Question]:
    """Every (unit in the order shown, repeat) once: with ``swap`` a pair is also asked
    the other way round (a unit the study already holds both ways is asked once each)."""
    out: dict[str, _Question] = {}
    for item, first, second in units:
        orders = [(first, second)]
        if swap and second is not None:
            orders.append((second, first))
        for a, b in orders:
            base = f"c{a}" if b is None else f"p{a}-{b}"
            for run in range(repeats):
                key = base + (f"#r{run + 1}" if run else "")
                out.setdefault(key, _Question(item, a, b, run, key, None))
    return list(out.values())


def _images(study: Study, caption_ids: set[int]) -> dict[int, tuple[bytes, str] | str]:
    """Caption id -> (image bytes, media type), or the reason there is none. Each image
    file is read once (a study's captions share images); the display rendition is sent,
    the size a judge needs."""
    rows = Caption.objects.filter(pk__in=caption_ids).values_list("pk", "image_id")
    images = dict(Image.objects.filter(study=study).values_list("pk", "display").order_by("pk"))
    files: dict[int, tuple[bytes, str] | str] = {}
    out: dict[int, tuple[bytes, str] | str] = {}
    for caption, image in rows:
        if image not in files:
            path = images.get(image) or ""
            try:
                data = storage.read_bytes(path) if path else None
            except OSError:
                data = None
            media = mimetypes.guess_type(path)[0] or "image/jpeg"
            files[image] = (data, media) if data else "the image file is missing"
        out[caption] = files[image]
    return out


@dataclass(frozen=True)
class _Run:
    """What every step of one run reads: the job, its study, the mode's judging, the saved
    endpoint settings (``row``) and prompt, and the client's endpoint (holding the key)."""

    job: Job
    study: Study
    judging: Judging
    row: JudgeEndpoint
    prompt: JudgePrompt
    endpoint: Endpoint


def judge_run(*, job: Job, progress: Progress) -> dict[str, Any]:
    """The job runner's entry: ask every question, store the answers (see the module)."""
    run = _start(job)
    study, row = run.study, run.row
    progress(2, "Reading the study's questions")
    units = run.judging.units(study)  # a caption's context (context_units) is no pair:
    swap = row.swap and not run.judging.context_units
    questions = _questions(study, units, row.repeats, swap)
    if len(questions) > MAX_QUESTIONS:
        raise ServiceError(
            f"The run would ask {len(questions):,} questions; at most {MAX_QUESTIONS:,}."
        )
    caption_ids = {q.first for q in questions} | {q.second for q in questions if q.second}
    texts = dict(Caption.objects.filter(pk__in=caption_ids).values_list("pk", "text"))
    images = _images(study, caption_ids)
    judge = Judge.objects.filter(
        study=study, name=row.name, model=row.model, prompt_version=run.prompt.label
    ).first()
    stored = set()
    if judge is not None:
        stored = set(judge.answers.values_list("caption_id", "caption_b_id", "run"))
    fields = run.judging.prompt_fields(study, units)
    ask, items, failures, skipped = _to_ask(run, questions, stored, texts, images, fields)
    cache = {
        (entry.prompt_version, entry.model, entry.item_key, entry.image_hash): {
            "raw": entry.raw_reply
        }
        for entry in JudgeCacheEntry.objects.filter(
            study=study, prompt_version=run.prompt.label, model=row.model
        )
    }
    before = set(cache)
    progress(5, f"Asking {len(items):,} questions")
    result = _ask(run, items, progress, cache)
    progress(95, "Storing the answers")
    answers, fresh, stale = _read_outcomes(run, ask, items, result, texts, before, failures)
    if result.fatal and not answers:
        # A wrong key or a refused address fails every question alike: one clear reason,
        # nothing stored.
        raise ServiceError(result.fatal[:1].upper() + result.fatal[1:] + ".")
    judge = _store_run(run, judge, answers, failures, fresh, stale)
    return _summary(run, judge, len(questions), skipped, len(answers), failures, result)


def _start(job: Job) -> _Run:
    """The run's settings, prompt and endpoint, with the key decrypted. Its own step: every
    reason to refuse the run before a question is read."""
    study = job.study
    judging = get_mode(study.mode).judging
    row = JudgeEndpoint.objects.filter(study=study).first()
    prompt = JudgePrompt.objects.filter(pk=job.params.get("prompt"), study=study).first()
    if row is None or prompt is None:
        raise ServiceError("The judge's settings or prompt were removed; request a new run.")
    # Again here: the key may have been replaced since the run was requested.
    check_key_spender(row, job.created_by)
    try:
        key = secrets.decrypt(row.api_key_token) if row.api_key_token else ""
    except secrets.SecretError as exc:
        raise ServiceError(str(exc)) from None
    endpoint = Endpoint(row.base_url, row.model, key)
    return _Run(job, study, judging, row, prompt, endpoint)


def _to_ask(
    run: _Run,
    questions: list[_Question],
    stored: set[tuple[int, int | None, int]],
    texts: dict[int, str],
    images: dict[int, tuple[bytes, str] | str],
    fields: dict[tuple[int, int | None], dict[str, str]],
) -> tuple[list[_Question], list[JudgeItem], list[JudgeFailure], int]:
    """The questions to ask and their filled prompts (with the mode's ``prompt_fields``),
    the failures of those without an image, and how many an earlier run answered. Its
    own step: it decides what is paid for."""
    failures: list[JudgeFailure] = []
    ask: list[_Question] = []
    items: list[JudgeItem] = []
    skipped = 0
    for q in questions:
        if (q.first, q.second, q.run) in stored:
            skipped += 1
            continue  # answered by an earlier run of this judge: nothing to ask
        image = images[q.first]
        if isinstance(image, str):
            failures.append(_failure(run.job, q, image))
            continue
        values = (
            {"caption": texts[q.first]}
            if run.judging.unit == "caption"
            else {"caption_a": texts[q.first], "caption_b": texts[q.second]}
        )
        values = {**fields.get((q.first, q.second), {}), **values}  # filled in one pass
        ask.append(q)
        items.append(
            JudgeItem(q.key, fill_prompt(run.prompt.text, values), image[0], media_type=image[1])
        )
    return ask, items, failures, skipped


def _ask(
    run: _Run, items: list[JudgeItem], progress: Progress, cache: dict[Any, dict[str, str]]
) -> RunResult:
    """Ask the questions; any error but the time limit is the run's, with the key scrubbed.
    Its own step: the one call that leaves the machine."""
    job, endpoint = run.job, run.endpoint
    try:
        return _run_with_progress(
            items,
            progress,
            endpoint,
            run.row,
            run.prompt.label,
            cache,
            run.judging.read_reply,
            lambda: _stop_requested(job),
        )
    except SoftTimeLimitExceeded:
        raise
    except Exception as exc:
        # A bug's message may quote a reply, and a reply may quote the key: the job's error
        # and the log get it scrubbed (the runner would show and log it as it is).
        message = endpoint.scrub(f"{type(exc).__name__}: {exc}")
        logger.error("judge run of job %s failed: %s", job.pk, message)
        raise ServiceError(f"The judge run failed: {message}") from None


def _read_outcomes(
    run: _Run,
    ask: list[_Question],
    items: list[JudgeItem],
    result: RunResult,
    texts: dict[int, str],
    before: set[Any],
    failures: list[JudgeFailure],
) -> tuple[list[JudgeAnswer], list[JudgeCacheEntry], list[str]]:
    """The usable replies as unsaved answers, the new cache rows, and the keys of cached
    replies the mode now refuses; every other reply is appended to ``failures``. Its own
    step: each reply is checked by the mode's rules before anything is written."""
    study, row, label = run.study, run.row, run.prompt.label
    answers, fresh, stale = [], [], []
    for q, item, outcome in zip(ask, items, result.results, strict=True):
        ck = (label, row.model, item.key, item.image_hash)
        if outcome.error == NOT_ASKED:
            continue  # the run was stopped first: a rerun asks it
        if not outcome.ok:
            failures.append(_failure(run.job, q, outcome.error, outcome.raw))
            continue
        shown = [Caption(pk=pk, text=texts[pk]) for pk in (q.first, q.second) if pk]
        try:
            clean = run.judging.clean_answer(study, shown, outcome.answer)
        except ServiceError as exc:
            failures.append(_failure(run.job, q, f"unusable reply: {exc.message}", outcome.raw))
            if ck in before:
                stale.append(item.key)  # cached under rules since made stricter: ask again
            continue
        answers.append(
            JudgeAnswer(
                item_id=q.item,
                caption_id=q.first,
                caption_b_id=q.second,
                run=q.run,
                answer=clean,
                scores=run.judging.scores(clean),
                raw_reply=outcome.raw,
            )
        )
        if ck not in before:
            fresh.append(
                JudgeCacheEntry(
                    study=study,
                    prompt_version=label,
                    model=row.model,
                    item_key=item.key,
                    image_hash=item.image_hash,
                    raw_reply=outcome.raw,
                )
            )
    return answers, fresh, stale


def _store_run(
    run: _Run,
    judge: Judge | None,
    answers: list[JudgeAnswer],
    failures: list[JudgeFailure],
    fresh: list[JudgeCacheEntry],
    stale: list[str],
) -> Judge | None:
    """Write the judge (if new, and only with answers), its answers, the failures and the
    cache in one transaction; return the judge. Its own step: the run's one write."""
    study, row, label = run.study, run.row, run.prompt.label
    with transaction.atomic():
        if answers and judge is None:
            judge, _ = Judge.objects.get_or_create(
                study=study,
                name=row.name,
                model=row.model,
                prompt_version=label,
                defaults={"kind": Judge.Kind.VLM},
            )
        for answer in answers:
            answer.judge = judge
        JudgeAnswer.objects.bulk_create(answers, batch_size=2000)
        JudgeFailure.objects.bulk_create(failures, batch_size=2000)
        JudgeCacheEntry.objects.bulk_create(fresh, batch_size=2000, ignore_conflicts=True)
        if stale:
            JudgeCacheEntry.objects.filter(
                study=study, prompt_version=label, model=row.model, item_key__in=stale
            ).delete()
    return judge


def _summary(
    run: _Run,
    judge: Judge | None,
    questions: int,
    skipped: int,
    answered: int,
    failures: list[JudgeFailure],
    result: RunResult,
) -> dict[str, Any]:
    """The job's result and message. Its own step: what the researcher reads, including
    who stopped a run cut short."""
    summary = {
        "judge": judge.pk if judge else None,
        "judge_name": run.row.name,
        "model": run.row.model,
        "prompt_version": run.prompt.label,
        "questions": questions,
        "already_stored": skipped,
        "answered": answered,
        "failed": len(failures),
        "failures": [_listed(f) for f in failures[:LISTED_FAILURES]],
        "requests_sent": result.requests_sent,
        "cached": result.cached,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cost": round(result.cost, 6),
        "seconds": round(result.seconds, 3),
        "not_asked": result.not_asked,
    }
    message = f"{answered:,} answered, {len(failures):,} failed"
    if result.not_asked:
        job = run.job
        job.refresh_from_db(fields=["stop_requested_by"])
        who = job.stop_requested_by.get_username() if job.stop_requested_by else "a researcher"
        summary["stopped_by"] = who
        message = f"Stopped by {who}: {message}, {result.not_asked:,} not asked"
    return {"result": summary, "message": message}


def _failure(job: Job, q: _Question, error: str, raw: str = "") -> JudgeFailure:
    # The error may quote a server's message and the raw reply is the judge's own text
    # (both scrubbed of the key already): what stored text may not hold (a NUL, half a
    # surrogate pair) is written as an escape, so the failure can be stored and read.
    return JudgeFailure(
        job=job,
        item_id=q.item,
        caption_id=q.first,
        caption_b_id=q.second,
        run=q.run,
        error=shown(error, None, multiline=True)[:2000],
        raw_reply=shown(raw, None, multiline=True)[:20_000],
    )


def _listed(failure: JudgeFailure) -> dict[str, Any]:
    unit = (
        {"caption": failure.caption_id}
        if failure.caption_b_id is None
        else {"caption_a": failure.caption_id, "caption_b": failure.caption_b_id}
    )
    return {**unit, "run": failure.run, "error": failure.error}


def _run_with_progress(items, progress, endpoint, row, version, cache, parse, stop_requested):
    """``run_batch`` in a thread while this one writes the progress every
    ``PROGRESS_EVERY`` seconds: the batch's event loop must not wait on the database (and
    Django refuses ORM calls from inside a running loop).

    At each tick it also asks ``stop_requested()`` (a researcher's stop, ``judge_run_stop``)
    and tells the batch to stop. If this thread leaves early (the soft time limit
    interrupts it), the job fails and the batch's answers will never be stored: the batch
    is told to stop too, so it sends no new request (only those in flight finish) instead
    of paying for every question left."""
    state = {"done": 0, "total": len(items)}
    lock = threading.Lock()
    stopping = threading.Event()

    def seen(done: int, total: int) -> None:
        with lock:
            state["done"], state["total"] = done, total

    options = {
        "endpoint": endpoint,
        "parse": parse,
        "prompt_version": version,
        "temperature": row.temperature,
        "concurrency": row.concurrency,
        "timeout": row.timeout,
        "max_retries": row.max_retries,
        "price_prompt_per_1k": row.price_prompt_per_1k,
        "price_completion_per_1k": row.price_completion_per_1k,
        "cache": cache,
        "progress": seen,
        "stop": stopping.is_set,
        "allowed": judge_address_policy(),
        "max_reply_bytes": settings.CAPEVAL_JUDGE_MAX_REPLY_BYTES,
    }
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-run")
    if stop_requested():
        stopping.set()  # stopped while queued: nothing is asked
    try:
        future = pool.submit(run_batch, items, **options)
        shown = -1
        while not wait_for([future], timeout=PROGRESS_EVERY).done:
            if not stopping.is_set() and stop_requested():
                stopping.set()
            with lock:
                done, total = state["done"], state["total"]
            if done != shown:
                shown = done
                progress(5 + int(90 * done / max(total, 1)), f"{done:,} of {total:,} asked")
        return future.result()
    finally:
        # Not waiting: when the soft time limit interrupts this thread, the job fails now;
        # the batch thread finishes the requests in flight, sends no other, and its result
        # is dropped unwritten.
        stopping.set()
        pool.shutdown(wait=False)
