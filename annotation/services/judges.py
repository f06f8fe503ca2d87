"""Automatic judges beside the humans: import their answers, report their alignment.

``judge_import`` reads a JSON Lines file of one judge's answers (``docs/judges.md``), checks
every line with the study mode's own rules (``Mode.judging``) and writes all of them in one
transaction, or nothing with every bad line listed. ``judges_report`` lays the answers and
the humans' judgments out for ``rubrics.judge_alignment`` and returns the report the page,
the API and the export show. Judges' answers live in ``JudgeAnswer``, never in
``Judgment``: nothing here writes a human judgment or reads a judge into a human score.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import IntegrityError, transaction

from annotation.errors import Conflict, InvalidInput, ServiceError
from annotation.filelimits import loads
from annotation.models import Caption, Item, Judge, JudgeAnswer, Participant, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.modes.reliability import reliability_section
from annotation.services.judges_guidelines import guidelines_versions
from annotation.text import json_problem
from rubrics import judge_alignment

#: Most lines one import reads (a judge over a 100k-caption study is split in files).
MAX_LINES = 200_000
#: Most problems listed back: the rest are counted.
MAX_PROBLEMS = 50
MAX_RAW_REPLY = 20_000
#: Bootstrap resamples of the report's intervals on the page and by default in the API.
#: The report is computed on request: 1,000 resamples cost about 30 s per judge and score
#: on 1,000 captions x 3 ratings (rubrics' cluster bootstrap, a loaded 2-core machine);
#: 200 keep that near 6 s. The API takes ``?resamples=`` up to ``MAX_RESAMPLES``.
RESAMPLES = 200
MAX_RESAMPLES = 1000


def _text_field(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidInput(f"{name}: give a name of 1 to {limit} characters.", field=name)
    return value.strip()


class _Captions:
    """The study's captions by id and by (image name, system), read once."""

    def __init__(self, study: Study, judging: Any):
        self.study, self.judging = study, judging
        self.items: dict[int, tuple[int, int | None] | None] | None = None
        rows = Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY).values_list(
            "pk", "image__name", "system", "text"
        )
        self.by_id: dict[int, tuple[str, str]] = {}
        self.by_name: dict[tuple[str, str], int] = {}
        self.texts: dict[int, str] = {}
        for pk, image, system, text in rows.order_by("id"):
            self.by_id[pk] = (image, system)
            self.texts[pk] = text
            # The first caption of a system for an image, as the modes show one per system.
            self.by_name.setdefault((image, system), pk)

    def item(self, value: Any) -> tuple[int, int | None]:
        """The unit of one of the study's items (``Judging.item_unit``), read once."""
        if self.items is None:
            items = Item.objects.filter(study=self.study)
            self.items = {item.pk: self.judging.item_unit(item) for item in items}
        if isinstance(value, bool) or not isinstance(value, int) or value not in self.items:
            raise ValueError(f"item_id {value!r} is not an item of this study")
        unit = self.items[value]
        if unit is None:
            raise ValueError(f"item {value} is not a question a judge answers in this mode")
        return unit

    def one(self, row: dict[str, Any], id_key: str, system_key: str) -> int:
        if id_key in row:
            value = row[id_key]
            if isinstance(value, bool) or not isinstance(value, int) or value not in self.by_id:
                raise ValueError(f"{id_key} {value!r} is not a caption of this study")
            return value
        image, system = row.get("image"), row.get(system_key)
        if not isinstance(image, str) or not isinstance(system, str):
            raise ValueError(f"give {id_key}, or image and {system_key}")
        pk = self.by_name.get((image, system))
        if pk is None:
            raise ValueError(f"no caption of system {system!r} for image {image!r}")
        return pk


def _unit(row: dict[str, Any], unit: str, captions: _Captions) -> tuple[int, int | None]:
    """(caption, None) or (caption shown first, caption shown second) of one line."""
    if "item_id" in row:
        return captions.item(row["item_id"])
    if unit == "caption":
        return captions.one(row, "caption_id", "system"), None
    first = captions.one(row, "caption_a", "system_a")
    second = captions.one(row, "caption_b", "system_b")
    if first == second:
        raise ValueError("caption_a and caption_b are the same caption")
    if captions.by_id[first][0] != captions.by_id[second][0]:
        raise ValueError("caption_a and caption_b describe different images")
    return first, second


def judge_import(
    *,
    study: Study,
    text: str,
    name: str,
    model: str = "",
    prompt_version: str = "",
    kind: str = Judge.Kind.IMPORTED,
    mode: Mode | None = None,
) -> dict[str, Any]:
    """Import one judge's answers from JSON Lines ``text``; all lines or none.

    Each line: the unit (``item_id``, ``caption_id``, or ``image`` + ``system``; for a pair mode
    ``caption_a`` + ``caption_b`` or ``image`` + ``system_a`` + ``system_b``, a shown first),
    ``answer`` (what the mode's judging checks), optional ``raw_reply`` and ``run`` (repeat
    number, default 0). Returns ``{"judge": id, "answers": n, "created": bool}``.
    InvalidInput lists every bad line (``details["errors"]``) and nothing is written.
    ``mode``: the study's, if the caller (a view) has looked it up.
    """
    name = _text_field(name, "judge", 100)
    model = model.strip()[:200] if isinstance(model, str) else ""
    prompt_version = prompt_version.strip()[:50] if isinstance(prompt_version, str) else ""
    if kind not in Judge.Kind.values:
        raise InvalidInput(f"kind: one of {', '.join(Judge.Kind.values)}.", field="kind")
    mode = mode or get_mode(study.mode)
    judging = mode.judging
    if not judging.unit:  # the study's mode refuses any answer: 409, not the input's fault
        raise Conflict(f"The {mode.label} mode takes no judge answers.")
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise InvalidInput(f"The file has {len(lines):,} lines; at most {MAX_LINES:,} a file.")
    captions = _Captions(study, judging)
    existing = Judge.objects.filter(
        study=study, name=name, model=model, prompt_version=prompt_version
    ).first()
    seen: set[tuple[int, int | None, int]] = set()
    if existing is not None:
        seen = set(existing.answers.values_list("caption_id", "caption_b_id", "run"))
    rows: list[JudgeAnswer] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = _checked_answer(line, number, study, judging, captions, seen)
        except ServiceError as exc:
            problems.append(f"line {number}: {exc.message}")
            continue
        except ValueError as exc:
            message = str(exc)
            problems.append(message if message.startswith("line ") else f"line {number}: {message}")
            continue
        row.scores = judging.scores(row.answer)
        rows.append(row)
    _refuse_problems(problems)
    if not rows:
        raise InvalidInput("The file holds no answers; nothing was imported.", field="file")
    judge, created = _store_answers(
        study, rows, name=name, model=model, prompt_version=prompt_version, kind=kind
    )
    return {"judge": judge.pk, "answers": len(rows), "created": created}


def _checked_answer(
    line: str,
    number: int,
    study: Study,
    judging: Any,
    captions: _Captions,
    seen: set[tuple[int, int | None, int]],
) -> JudgeAnswer:
    """One line as an unsaved answer without its scores (the caller adds them), its unit
    added to ``seen``; ValueError or ServiceError says what is wrong with it. Its own step:
    every check of one line, so that the caller can list every bad line."""
    row = loads(line, first_line=number)
    if not isinstance(row, dict):
        raise ValueError("a line must be a JSON object")
    first, second = _unit(row, judging.unit, captions)
    run = row.get("run", 0)
    if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run <= 1000:
        raise ValueError("run must be a whole number from 0 to 1000")
    raw = row.get("raw_reply", "")
    if not isinstance(raw, str) or len(raw) > MAX_RAW_REPLY:
        raise ValueError(f"raw_reply must be text of at most {MAX_RAW_REPLY} characters")
    # Stored as text and the answer as jsonb: no NUL, no half surrogate (issue 45).
    problem = json_problem(raw, "raw_reply")
    if problem:
        raise ValueError(problem)
    if "answer" not in row:
        raise ValueError("no answer")
    # A context unit's second id is a caption of another purpose, with no text here.
    shown = [Caption(pk=pk, text=captions.texts.get(pk, "")) for pk in (first, second) if pk]
    answer = judging.clean_answer(study, shown, row["answer"])
    problem = json_problem(answer, "answer")
    if problem:
        raise ValueError(problem)
    if (first, second, run) in seen:
        raise ValueError("this judge already answered this unit in this run")
    seen.add((first, second, run))
    return JudgeAnswer(
        item_id=row.get("item_id"),  # checked by _unit when given
        caption_id=first,
        caption_b_id=second,
        run=run,
        answer=answer,
        raw_reply=raw,
        line=number,
    )


def _refuse_problems(problems: list[str]) -> None:
    """InvalidInput listing the first ``MAX_PROBLEMS`` bad lines, if any. Its own step: a
    file is imported whole or not at all."""
    if problems:
        listed = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            listed.append(f"... and {len(problems) - MAX_PROBLEMS} more")
        raise InvalidInput(
            f"{len(problems)} line(s) refused; nothing was imported.",
            field="file",
            details={"errors": listed},
        )


def _store_answers(
    study: Study,
    rows: list[JudgeAnswer],
    *,
    name: str,
    model: str,
    prompt_version: str,
    kind: str,
) -> tuple[Judge, bool]:
    """Write the judge (if new) and its answers in one transaction; return the judge and
    whether it was created. Its own step: the import's one write, and the race it loses."""
    try:
        with transaction.atomic():
            judge, created = Judge.objects.get_or_create(
                study=study,
                name=name,
                model=model,
                prompt_version=prompt_version,
                defaults={"kind": kind},
            )
            for row in rows:
                row.judge = judge
            JudgeAnswer.objects.bulk_create(rows, batch_size=2000)
    except IntegrityError:
        # Another import of the same judge stored some of these units between
        # judge_import's check of ``seen`` and this write; the unique constraints refused
        # them, so nothing was written.
        raise Conflict(
            "Another import of this judge's answers ran at the same time; nothing was "
            "imported from this file. Import it again to see which lines repeat."
        ) from None
    return judge, created


# ---------------------------------------------------------------------------- the report


def _judge_runs(
    judge: Judge, unit: str, context: bool = False
) -> dict[int, dict[Any, dict[str, float]]]:
    """run -> unit -> scores, a unit being a caption id or (first, second): a pair, or a
    caption and its context (``context``, ``Judging.context_units``)."""
    runs: dict[int, dict[Any, dict[str, float]]] = defaultdict(dict)
    for first, second, run, scores in judge.answers.values_list(
        "caption_id", "caption_b_id", "run", "scores"
    ):
        keyed = unit == "caption" and not context
        runs[run][first if keyed else (first, second)] = scores
    return dict(runs)


def _describe(judge: Judge, runs: dict[int, Any]) -> dict[str, Any]:
    return {
        "id": judge.pk,
        "name": judge.name,
        "model": judge.model,
        "prompt_version": judge.prompt_version,
        "kind": judge.kind,
        "answers": sum(len(r) for r in runs.values()),
        "runs": len(runs),
    }


def judges_report(
    study: Study, *, resamples: int = RESAMPLES, mode: Mode | None = None
) -> dict[str, Any]:
    """Every judge of the study against its humans (``rubrics.judge_alignment``).

    ``{"unit", "judges": [{id, name, model, prompt_version, kind, answers, runs, and per
    human score "scores": {name: caption report}} or "pairs": pair report, and
    guidelines_version}], "drift": [{name, model, score, versions: [...]}], "tie_rule",
    "guidelines": ``judges_guidelines.guidelines_versions``}``. Humans are the kept judgments
    of the mode's report; judges never enter them. ``mode``: the study's, if the caller
    (an export job) has it.
    """
    mode = mode or get_mode(study.mode)
    judging = mode.judging
    unit = judging.unit
    judges = list(Judge.objects.filter(study=study))
    out: dict[str, Any] = {"unit": unit, "judges": [], "drift": [], "reliability": None}
    if not unit or not judges:
        return out
    captions = Caption.objects.filter(study=study).values_list("pk", "system", "text")
    systems: dict[Any, str] = {pk: system for pk, system, _ in captions}
    lengths = {pk: len(text.split()) for pk, _, text in captions}
    all_runs = {judge.pk: _judge_runs(judge, unit, judging.context_units) for judge in judges}
    if unit == "caption":
        human: dict[str, dict[Any, list[float]]] = {}
        for score, rows in judging.human_scores(study).items():
            for caption, value in rows:
                human.setdefault(score, {}).setdefault(caption, []).append(value)
                if isinstance(caption, tuple):  # (caption, context): the caption's system
                    systems[caption] = systems.get(caption[0], "")
        scales = judging.scale(study)
        for judge in judges:
            runs = all_runs[judge.pk]
            entry = _describe(judge, runs)
            entry["scores"] = {}
            for score, ratings in human.items():
                per_run = {
                    r: {u: s[score] for u, s in answers.items() if score in s}
                    for r, answers in runs.items()
                }
                first = per_run.get(min(per_run), {}) if per_run else {}
                entry["scores"][score] = judge_alignment.caption_report(
                    first,
                    ratings,
                    systems=systems,
                    scale=scales.get(score),
                    runs=per_run,
                    resamples=resamples,
                    seed=study.seed,
                )
            out["judges"].append(entry)
        references = {
            score: {u: sum(v) / len(v) for u, v in ratings.items()}
            for score, ratings in human.items()
        }
    else:
        votes: dict[tuple[int, int], list[float]] = {}
        for a, b, choice in judging.human_pairs(study):
            votes.setdefault((a, b), []).append(float(choice))
        out["tie_rule"] = judge_alignment.PAIR_TIE_RULE
        for judge in judges:
            runs = all_runs[judge.pk]
            entry = _describe(judge, runs)
            per_run = {r: {u: s["choice"] for u, s in a.items()} for r, a in runs.items()}
            first = per_run.get(min(per_run), {}) if per_run else {}
            entry["pairs"] = judge_alignment.pair_report(
                first,
                votes,
                systems=systems,
                lengths=lengths,
                runs=per_run,
                resamples=resamples,
                seed=study.seed,
            )
            out["judges"].append(entry)
        majority = judge_alignment.human_majority(votes)
        references = {"choice": majority}
    out["drift"] = _drift(judges, all_runs, unit, references)
    out["reliability"] = _reliability(study, judging, judges, all_runs)
    # Which guidelines people and each judge were given, and a warning when they differ.
    out["guidelines"] = guidelines_versions(study, judges, mode)
    for entry in out["judges"]:
        entry["guidelines_version"] = out["guidelines"]["judges"].get(entry["id"])
    return out


_PAIR_LABELS = {0.0: "first", 1.0: "second", 0.5: "tie"}


def _reliability(study, judging, judges, all_runs) -> dict[str, Any] | None:
    """The mode's Dawid-Skene section over the same human labels as its report, with each
    judge entered as one more rater (its first run), marked ``judge``; None when the mode
    gives no labels (``Judging.human_labels``). The mode's own report never holds judges."""
    labels = judging.human_labels(study)
    if not labels:
        return None
    pseudonyms = dict(Participant.objects.filter(study=study).values_list("pk", "pseudonym"))
    rows = list(labels)
    score = next(iter(judging.scale(study)), None)
    marked = set()
    for number, judge in enumerate(judges, start=1):
        key = -number  # never a participant id
        pseudonyms[key] = f"Judge: {judge}"
        marked.add(pseudonyms[key])
        runs = all_runs[judge.pk]
        answers = runs.get(min(runs), {}) if runs else {}
        if judging.unit == "pair":
            choices = judge_alignment.judge_choices({u: s["choice"] for u, s in answers.items()})
            rows += [(key, unit, _PAIR_LABELS[c]) for unit, c in choices.items()]
        elif score is not None:
            rows += [(key, unit, int(s[score])) for unit, s in answers.items() if score in s]
    section = reliability_section(
        rows,
        pseudonyms=pseudonyms,
        note=(
            "The report's Dawid-Skene model of rater competence with each judge entered as one "
            "more rater (marked Judge), over every stored human label and the judge's first run"
        ),
    )
    for worker in section["workers"]:
        worker["judge"] = worker["participant"] in marked
    return section


def _drift(
    judges: list[Judge],
    all_runs: dict[int, dict[int, dict[Any, dict[str, float]]]],
    unit: str,
    references: dict[str, dict[Any, float]],
) -> list[dict[str, Any]]:
    """Judges of one name and model under several prompt versions, in version order."""
    families: dict[tuple[str, str], list[Judge]] = defaultdict(list)
    for judge in judges:
        families[(judge.name, judge.model)].append(judge)
    rows = []
    for (name, model), members in sorted(families.items()):
        if len(members) < 2:
            continue
        members.sort(key=lambda j: (j.prompt_version, j.pk))
        for score, reference in references.items():
            versions = {}
            for judge in members:
                runs = all_runs[judge.pk]
                answers = runs.get(min(runs), {}) if runs else {}
                values = {u: s[score] for u, s in answers.items() if score in s}
                if unit == "pair":
                    values = judge_alignment.judge_choices(values)
                versions[judge.prompt_version or "(none)"] = values
            try:
                drift: Any = judge_alignment.prompt_drift(versions, reference)
            except ValueError as exc:
                drift = {"error": str(exc)}
            rows.append({"name": name, "model": model, "score": score, "versions": drift})
    return rows
