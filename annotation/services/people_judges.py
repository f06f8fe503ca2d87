"""People and a judge together (issue 40): prediction-powered estimates per system.

``people_judge_data`` reads the study's people (``Judging.people_values``, or
``Judging.human_battles`` for a Bradley-Terry mode) and one judge's answers
(``Judging.judge_values``) and lays them out per system: *labeled* units (people and the
judge), *unlabeled* ones (the judge only), and units people answered without the judge,
which count only in the people-only estimate. ``people_judge_report`` turns them into the
people-only, judge-only and combined estimates (``rubrics.ppi``: PPI++ means, active
inference under a sampling design, the prediction-powered Bradley-Terry fit) with the
rectifier and the effective number of human judgments. It only reads; the report job
stores its result as ``result["people_judge"]`` (``services/reports.py``).

The mode decides what is estimated (``Judging.estimate``): a mean of a per-unit score,
a share (each pair's outcome oriented to the system) or Bradley-Terry strengths.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from annotation.errors import ServiceError
from annotation.models import Item, Judge, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.services.people_design import unit_sampling
from rubrics import ppi

#: One sentence on when the combined estimate holds (the page and the API show it).
VALID_WHEN = (
    "Valid when the units people answered are a random subset of the judged units, or were "
    "drawn with known probabilities (the study's sampling design, every drawn unit "
    "answered), whatever the judge's errors; not valid when people chose, or were steered "
    "to, units in a way nobody recorded."
)
ALPHA = 0.05
ESTIMATES = ("mean", "share", "bradley_terry")


@dataclass
class SystemData:
    """One system's inputs to the estimate (``labeled`` and ``unlabeled`` name the units
    of ``y``/``yhat`` and of ``yhat_unlabeled``, in the same order)."""

    system: str
    y: np.ndarray  # labeled units' human means
    yhat: np.ndarray  # the judge on the same units
    yhat_unlabeled: np.ndarray
    # Per labeled then unlabeled unit under a sampling design, else None.
    probabilities: np.ndarray | None = None
    # Every unit people answered (labeled or not): the people-only estimate's means.
    y_people: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Kept human ratings of each labeled unit (the planner's ratings per unit).
    ratings: np.ndarray = field(default_factory=lambda: np.zeros(0))
    labeled: list[Any] = field(default_factory=list)
    unlabeled: list[Any] = field(default_factory=list)
    # Units left out of a design's estimate: judged, but with no known probability.
    without_probability: int = 0


def _describe(judge: Judge | None) -> dict[str, Any] | None:
    return None if judge is None else {"id": judge.pk, "name": str(judge)}


def _chosen_judge(study: Study, judge_id: int) -> tuple[Judge, list[Judge]]:
    """The judge the estimate uses (``judge_id``; 0: the study's first) and every judge."""
    judges = list(Judge.objects.filter(study=study))
    if not judges:
        raise ServiceError("The study has no judge yet: import or run one first.")
    if not judge_id:
        return judges[0], judges
    for judge in judges:
        if judge.pk == judge_id:
            return judge, judges
    raise ServiceError(
        f"people_judge: judge {judge_id} is not a judge of this study.", field="people_judge"
    )


def _answers(judge: Judge) -> list[tuple[int, int | None, dict[str, Any], dict[str, float]]]:
    return list(judge.answers.values_list("caption_id", "caption_b_id", "answer", "scores"))


def sampling(study: Study, mode: Mode) -> dict[Any, tuple[float, bool]]:
    """Per unit, (its probability of going to people, chosen by the judge's uncertainty);
    ``{}`` without a sampling design (``services/people_design.py``)."""
    return unit_sampling(study, mode=mode)


def _design(study: Study, mode: Mode, probabilities: dict[Any, Any]) -> dict[str, Any]:
    """The stored design (what the items carry, not the setting, which may have changed
    since it was drawn) and the settings' share and floor."""
    config = mode.settings(study)
    kind = "all"
    if probabilities:
        stored = (
            Item.objects.filter(study=study, sampling_probability__isnull=False)
            .exclude(sampling_design="")
            .values_list("sampling_design", flat=True)
            .first()
        )
        kind = stored or getattr(config, "people_design", "") or "uniform"
    # Items drawn for people that nobody has answered yet: until they are, the weighted
    # estimate treats them as not drawn, which leans it towards the judge; the page says
    # the estimate is final only once this is 0.
    unanswered = (
        Item.objects.filter(
            study=study, sampling_probability__isnull=False, target__gt=0, judgment_count=0
        ).count()
        if probabilities
        else 0
    )
    return {
        "kind": kind,
        "share": getattr(config, "people_share", None),
        "floor": getattr(config, "people_floor", None),
        "drawn_unanswered": unanswered,
    }


def people_judge_data(
    study: Study, *, mode: Mode | None = None, judge_id: int = 0, score: str = ""
) -> dict[str, Any]:
    """The estimate's inputs: ``{"judge", "judges", "score", "scores", "estimate",
    "design", "systems": [SystemData]}``; a Bradley-Terry mode gives ``"names"`` (the
    systems, sorted: their indexes) and ``"battles"`` (``human``, ``judge_labeled``,
    ``judge_unlabeled``, ``people``: arrays of rows ``(i, j, y)``, y the share won by j)
    and ``"systems": []``. Reads only. ServiceError when undefined: a mode without judges,
    no judge, an unknown judge or score."""
    mode = mode or get_mode(study.mode)
    judging = mode.judging
    if not judging.unit:
        raise ServiceError(f"The {mode.label} mode takes no judge answers.")
    estimate = judging.estimate
    if estimate not in ESTIMATES:  # pragma: no cover - a mode declared out of the contract
        raise ServiceError(f"Unknown estimate {estimate!r} of the {mode.label} mode.")
    judge, judges = _chosen_judge(study, judge_id)
    answers = _answers(judge)
    if not answers:
        raise ServiceError(f"The judge {judge} has no answers.")
    probabilities = sampling(study, mode)
    design = _design(study, mode, probabilities)
    if design["kind"] == "uniform":
        # A uniform draw ignores the data: given how many it drew, people's units are a
        # simple random sample of the judged ones, which plain PPI++ assumes. The weights
        # are constant and would only add the scores' level to the variance.
        probabilities = {}
    out: dict[str, Any] = {
        "judge": _describe(judge),
        "judges": [_describe(j) for j in judges],
        "estimate": estimate,
        "design": design,
        "systems": [],
    }
    if estimate == "bradley_terry":
        out.update(score="choice", scores=["choice"])
        out.update(_battles(study, judging, answers, probabilities))
        return out
    people = judging.people_values(study)
    judged = judging.judge_values(study, answers)
    scores = list(people) + [name for name in judged if name not in people]
    if not scores:
        raise ServiceError("Neither people nor the judge gave a score yet.")
    score = score or scores[0]
    if score not in scores:
        raise ServiceError(
            f"people_judge_score: {score!r} is not a score of this study "
            f"(one of {', '.join(scores)}).",
            field="people_judge_score",
        )
    out.update(score=score, scores=scores)
    out["systems"] = _systems(
        study, judging, people.get(score, {}), judged.get(score, {}), probabilities
    )
    return out


def _systems(
    study: Study,
    judging: Any,
    people: dict[Any, list[float]],
    judged: dict[Any, float],
    probabilities: dict[Any, tuple[float, bool]],
) -> list[SystemData]:
    """Per system (sorted), its labeled, unlabeled and people-only units."""
    systems = judging.unit_systems(study, set(people) | set(judged))
    by_system: dict[str, list[Any]] = {}
    for unit, system in systems.items():
        by_system.setdefault(system, []).append(unit)
    out = []
    for system in sorted(by_system):
        units = sorted(by_system[system], key=_sort_key)
        labeled = [u for u in units if u in people and u in judged]
        unlabeled = [u for u in units if u in judged and u not in people]
        missing = 0
        weights = None
        if probabilities:
            missing = sum(1 for u in labeled + unlabeled if u not in probabilities)
            labeled = [u for u in labeled if u in probabilities]
            unlabeled = [u for u in unlabeled if u in probabilities]
            weights = np.array([probabilities[u][0] for u in labeled + unlabeled], dtype=float)
        out.append(
            SystemData(
                system=system,
                y=np.array([np.mean(people[u]) for u in labeled], dtype=float),
                yhat=np.array([judged[u] for u in labeled], dtype=float),
                yhat_unlabeled=np.array([judged[u] for u in unlabeled], dtype=float),
                probabilities=weights,
                y_people=np.array([np.mean(people[u]) for u in units if u in people]),
                ratings=np.array([len(people[u]) for u in labeled], dtype=float),
                labeled=labeled,
                unlabeled=unlabeled,
                without_probability=missing,
            )
        )
    return out


def _sort_key(unit: Any) -> tuple:
    return unit if isinstance(unit, tuple) else (unit,)


def _battles(
    study: Study,
    judging: Any,
    answers: list[tuple[int, int | None, dict[str, Any], dict[str, float]]],
    probabilities: dict[Any, tuple[float, bool]],
) -> dict[str, Any]:
    """Battle rows for ``rubrics.ppi.bradley_terry``, each unit ``(lower id, higher id)``
    with y oriented to the higher id: every human vote a row, the judge's answer on its
    unit (runs and both orders averaged) the same row's prediction, and the judge's
    units no person voted on the unlabeled rows. Pairs of one system are left out."""
    judged: dict[tuple[int, int], list[float]] = {}
    for first, second, _answer, scores in answers:
        if second is None or "choice" not in scores:
            continue
        choice = float(scores["choice"])  # toward the caption shown second
        unit = (min(first, second), max(first, second))
        judged.setdefault(unit, []).append(choice if second > first else 1.0 - choice)
    judge = {unit: sum(v) / len(v) for unit, v in judged.items()}
    votes: list[tuple[tuple[int, int], float]] = []
    for a, b, y in judging.human_battles(study):
        unit = (min(a, b), max(a, b))
        votes.append((unit, y if b > a else 1.0 - y))
    units = set(judge) | {unit for unit, _ in votes}
    system_of = judging.unit_systems(study, {c for unit in units for c in unit})
    names = sorted({system_of[c] for unit in units for c in unit if c in system_of})
    index = {name: i for i, name in enumerate(names)}

    def sides(unit: tuple[int, int]) -> tuple[int, int] | None:
        low, high = system_of.get(unit[0]), system_of.get(unit[1])
        if low is None or high is None or low == high:
            return None
        return index[low], index[high]

    human, labeled, people, weights = [], [], [], []
    voted = set()
    for unit, y in sorted(votes, key=lambda row: (row[0], row[1])):
        pair = sides(unit)
        if pair is None:
            continue
        voted.add(unit)
        people.append((*pair, y))
        if unit in judge and (not probabilities or unit in probabilities):
            human.append((*pair, y))
            labeled.append((*pair, judge[unit]))
            if probabilities:
                weights.append(1.0 / probabilities[unit][0])
    unlabeled = [
        (*sides(unit), judge[unit])
        for unit in sorted(judge)
        if unit not in voted
        and sides(unit) is not None
        and (not probabilities or unit in probabilities)
    ]

    def rows(values: list) -> np.ndarray:
        return np.array(values, dtype=float).reshape(-1, 3)

    return {
        "names": names,
        "battles": {
            "human": rows(human),
            "judge_labeled": rows(labeled),
            "judge_unlabeled": rows(unlabeled),
            "people": rows(people),
            "weights": np.array(weights, dtype=float) if probabilities else None,
        },
    }


# ---------------------------------------------------------------------------- the report


def people_judge_report(
    study: Study, *, mode: Mode | None = None, resamples: int = 1000
) -> dict[str, Any]:
    """The people + judge section of the report; the study's report settings
    ``people_judge`` and ``people_judge_score`` pick the judge and the score.

    ``{"judge": {id, name} | None, "judges": [{id, name}], "score", "scores", "estimate":
    "mean" | "share" | "bradley_terry", "alpha", "design": {kind: "all" | "uniform" |
    "uncertainty", share, floor}, "systems": [{system, n_people, n_judge, n_labeled,
    people, judge, combined, rectifier (each {estimate, low, high, se}, or None; the
    Bradley-Terry ones also rank_low, rank_high, and no rectifier), lam, effective_n,
    bootstrap: {low, high} | None, and "error" when the system has too few units}],
    "valid_when"}``, with ``"error"`` when the estimate is undefined (no judge, too few
    units both answered). Never raises for the study's state."""
    mode = mode or get_mode(study.mode)
    config = mode.settings(study)
    out: dict[str, Any] = {
        "judge": None,
        "judges": [_describe(j) for j in Judge.objects.filter(study=study)],
        "score": "",
        "scores": [],
        "estimate": mode.judging.estimate if mode.judging.unit else "",
        "alpha": ALPHA,
        "design": {"kind": "all", "share": None, "floor": None},
        "systems": [],
        "valid_when": VALID_WHEN,
    }
    try:
        data = people_judge_data(
            study,
            mode=mode,
            judge_id=getattr(config, "people_judge", 0),
            score=getattr(config, "people_judge_score", ""),
        )
    except ServiceError as exc:
        out["error"] = exc.message
        return out
    for key in ("judge", "judges", "score", "scores", "estimate", "design"):
        out[key] = data[key]
    if data["estimate"] == "bradley_terry":
        out["systems"], error = bradley_terry_rows(data, alpha=ALPHA)
    else:
        out["systems"], error = mean_rows(
            data["systems"], alpha=ALPHA, resamples=resamples, seed=study.seed
        )
    if error:
        out["error"] = error
    return out


def system_seed(seed: int, system: str) -> int:
    """A bootstrap seed from the study's seed and the system's name (never a pk)."""
    return (abs(int(seed)) + zlib.crc32(system.encode("utf-8"))) % 2**32


def mean_rows(
    systems: list[SystemData], *, alpha: float, resamples: int, seed: int
) -> tuple[list[dict[str, Any]], str]:
    """One row per system (``mean_row``) and the error when no system has an estimate."""
    rows = [mean_row(data, alpha=alpha, resamples=resamples, seed=seed) for data in systems]
    if not rows:
        return rows, "No unit has both a system and a score yet."
    if all("error" in row for row in rows):
        return rows, "No system has 2 units that both people and the judge answered yet."
    return rows, ""


def mean_row(data: SystemData, *, alpha: float, resamples: int, seed: int) -> dict[str, Any]:
    """People-only, judge-only, combined and rectifier intervals of one system's mean.

    Without a design: PPI++ (``ppi_mean``) over the labeled and unlabeled units, the
    people-only interval over every unit people answered, the percentile bootstrap at the
    combined estimate's lambda beside it; a uniform design is read the same way
    (``people_judge_data``). Under the uncertainty design: active inference over every
    judged unit with its probability, and people-only as the self-normalised
    inverse-probability mean (``weighted_people_only``: the plain mean of units drawn by
    uncertainty is biased); no bootstrap (``bootstrap_mean`` knows no probabilities).
    Every interval but the judge-only one is the small-sample one (``small_sample``):
    Student's t with n - 1 degrees of freedom (n: the units people answered; Kish's
    effective n for the weighted people-only mean) and Bessel's n / (n - 1).
    """
    row: dict[str, Any] = {
        "system": data.system,
        "n_people": int(data.y_people.shape[0]),
        "n_judge": len(data.labeled) + len(data.unlabeled),
        "n_labeled": len(data.labeled),
        "people": None,
        "judge": None,
        "combined": None,
        "lam": None,
        "rectifier": None,
        "effective_n": None,
        "bootstrap": None,
    }
    if data.without_probability:
        row["without_probability"] = data.without_probability
    everything = np.concatenate([data.yhat, data.yhat_unlabeled])
    # The small-sample intervals (``rubrics.ppi._interval``): a study's systems often
    # have 20-50 people, where the normal quantile under-covers (bench/results-ppi.md).
    level = {"alpha": alpha, "small_sample": True}
    try:
        if data.y_people.shape[0] >= 2 and data.probabilities is None:
            row["people"] = ppi.people_only(data.y_people, **level).as_dict()
        if everything.shape[0] >= 2:
            row["judge"] = ppi.judge_only(everything, alpha=alpha).as_dict()
        if data.y.shape[0] < 2:
            row["error"] = "fewer than 2 units that both people and the judge answered"
            return row
        row["rectifier"] = ppi.rectifier(data.y, data.yhat, **level).as_dict()
        if data.probabilities is None:
            combined = ppi.ppi_mean(data.y, data.yhat, data.yhat_unlabeled, **level)
            boot = ppi.bootstrap_mean(
                data.y,
                data.yhat,
                data.yhat_unlabeled,
                lam=combined.lam,
                alpha=alpha,
                resamples=resamples,
                seed=system_seed(seed, data.system),
            )
            row["bootstrap"] = {"low": boot.low, "high": boot.high}
        else:
            labeled = np.arange(everything.shape[0]) < data.y.shape[0]
            y = np.concatenate([data.y, np.full(data.yhat_unlabeled.shape[0], np.nan)])
            args = (everything, y, labeled, data.probabilities)
            combined = ppi.active_mean(*args, **level)
            drawn = data.probabilities[: data.y.shape[0]]
            row["people"] = ppi.weighted_people_only(data.y, drawn, **level).as_dict()
    except ValueError as exc:
        row["error"] = str(exc)
        return row
    row.update(
        combined=combined.interval.as_dict(),
        lam=combined.lam,
        # Infinite when the combined variance is 0 (a judge equal to people on every
        # unit): jsonb refuses Infinity, and "no finite figure" is what it means.
        effective_n=combined.effective_n if np.isfinite(combined.effective_n) else None,
    )
    return row


def bradley_terry_rows(data: dict[str, Any], *, alpha: float) -> tuple[list[dict[str, Any]], str]:
    """One row per system of the prediction-powered Bradley-Terry fit (natural-log
    strengths summing to 0), each interval with its rank interval; the people-only fit
    uses every human vote, the judge's or not."""
    names, battles = data["names"], data["battles"]
    if len(names) < 2:
        return [], "Fewer than 2 systems have battles yet."
    human, people = battles["human"], battles["people"]
    if human.shape[0] < 2:
        return [], "Fewer than 2 battles that both people and the judge answered yet."
    k = len(names)
    try:
        fit = ppi.bradley_terry(
            human,
            battles["judge_labeled"],
            battles["judge_unlabeled"],
            k,
            alpha=alpha,
            weights=battles["weights"],
        )
        alone = ppi.bradley_terry(people, people, np.zeros((0, 3)), k, alpha=alpha, lam=0.0)
    except ValueError as exc:
        return [], str(exc)
    n_people, n_judge, n_labeled = (
        _per_system(rows, k)
        for rows in (
            people,
            np.concatenate([battles["judge_labeled"], battles["judge_unlabeled"]]),
            human,
        )
    )

    def interval(result: dict[str, Any], s: int) -> dict[str, Any]:
        if "error" in result:  # the judge-only fit alone may fail (rubrics.ppi_ranking)
            return {"error": result["error"]}
        return {
            "estimate": float(result["scores"][s]),
            "low": float(result["low"][s]),
            "high": float(result["high"][s]),
            "se": float(result["se"][s]),
            "rank_low": int(result["rank_low"][s]),
            "rank_high": int(result["rank_high"][s]),
        }

    rows = []
    for s, name in enumerate(names):
        combined = interval(fit, s)
        people_only = interval(alone, s)
        rows.append(
            {
                "system": name,
                "n_people": int(n_people[s]),
                "n_judge": int(n_judge[s]),
                "n_labeled": int(n_labeled[s]),
                "people": people_only,
                "judge": interval(fit["judge_only"], s),
                "combined": combined,
                "lam": float(fit["lam"]),
                "rectifier": None,
                "effective_n": _effective(people_only, combined, people.shape[0]),
                "bootstrap": None,
            }
        )
    return rows, ""


def _effective(people: dict[str, Any], combined: dict[str, Any], n: int) -> float | None:
    """Human battles the judge is worth for one strength: n times the variance ratio."""
    if not combined["se"] or not people["se"]:
        return None
    return float(n * (people["se"] / combined["se"]) ** 2)


def _per_system(rows: np.ndarray, k: int) -> np.ndarray:
    """Battles each system is in."""
    sides = rows[:, :2].astype(int).ravel()
    return np.bincount(sides, minlength=k)
