"""The arena report: the Bradley-Terry leaderboard with intervals, length control, the
win-rate and battle-count matrices, position bias, per-criterion results, gold battles,
reliability and agreement between workers on shared battles.

Every statistic is ``rubrics.arena`` / ``rubrics.arena_style`` (pure, documented in
``docs/protocol-choices.md``, "Arena battles"); this module reads the judgments and shapes
the JSON. A statistic that cannot be computed (too few battles, a disconnected comparison
graph) leaves its section empty with the reason, never a NaN.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

# matplotlib and scipy (about 90 MB) are imported where they are used, not here: the export path
# imports this module through the mode registry and must stay inside its memory budget
# (issue 27; tests/annotation/test_exports.py checks it).
from annotation.models import Caption, Job, Judgment, Participant, Study
from annotation.modes import catch
from annotation.modes.arena import figures
from annotation.modes.arena.protocol import (
    BATTLE,
    CATCH,
    CRITERION_NAMES,
    OUTCOME_LABELS,
    OUTCOMES,
)
from annotation.modes.base import Report
from annotation.modes.reliability import reliability_section
from rubrics import arena as rules
from rubrics import arena_style
from rubrics import arena_workers as worker_rules
from rubrics.agreement import fleiss_kappa
from rubrics.arena_criteria import criterion_preference

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def battle_rows(study: Study) -> list[dict[str, Any]]:
    """The study's battle judgments (excluded ones flagged) with what the report needs."""
    rows = list(
        Judgment.objects.filter(study=study, item__kind=BATTLE)
        .order_by("id")
        .values_list(
            "id", "participant_id", "item_id", "item__spec", "payload", "result", "excluded"
        )
    )
    ids = {spec[key] for _, _, _, spec, _, _, _ in rows for key in ("caption_a", "caption_b")}
    words = {
        pk: len(text.split())
        for pk, text in Caption.objects.filter(pk__in=ids).values_list("pk", "text")
    }
    return [
        {
            "judgment": pk,
            "participant": participant,
            "item": item,
            "system_a": spec["system_a"],
            "system_b": spec["system_b"],
            "len_a": words.get(spec["caption_a"], 0),
            "len_b": words.get(spec["caption_b"], 0),
            # None: an imported comparison without an overall verdict (ImageInWords SxS).
            "winner": result.get("winner"),
            # As shown: the left caption's view, for position bias.
            "shown": OUTCOMES.get(payload.get("outcome"), ""),
            "criteria": result.get("criteria") or {},
            "probability": result.get("pair_probability", 1.0),
            "excluded": excluded,
        }
        for pk, participant, item, spec, payload, result, excluded in rows
    ]


def design_weights(rows: list[dict[str, Any]]) -> np.ndarray | None:
    """The fit's weights: none under one fixed design (every battle stored the same pair
    probability), else each pair weighted by the inverse of its realised sampling rate
    (``rubrics.arena.pair_balanced_weights``), so the leaderboard is the uniform design's
    whatever the adaptive design served. The stored probabilities only say whether the
    design varied: the realised counts do not depend on them being exact (a worker's cap,
    images they saw, or an exhausted pair change the draw they record)."""
    if len({row["probability"] for row in rows}) <= 1:
        return None
    return rules.pair_balanced_weights([r["system_a"] for r in rows], [r["system_b"] for r in rows])


def leaderboard(
    rows: list[dict[str, Any]],
    *,
    anchor: tuple[str, float] | None,
    rounds: int,
    seed: int,
    weights: np.ndarray | None = None,
) -> dict[str, Any]:
    """The leaderboard (bootstrap intervals, rank intervals), its sandwich covariance (what
    adaptive pairing reads) and the count table's matrices: the plain Bradley-Terry fit, or
    with ``weights`` (``design_weights``) the inverse-probability-weighted one."""
    weighted = weights is not None
    table = rules.count_table(
        [r["system_a"] for r in rows],
        [r["system_b"] for r in rows],
        [r["winner"] for r in rows],
        weights,
    )
    point = rules.fit(table, anchor)
    intervals, _ = rules.bootstrap(table, anchor, rounds=rounds, seed=seed)
    robust, cov = rules.sandwich(table, anchor)
    if weighted:
        # Under adaptive pairing a few rarely served pairs carry large weights, and the
        # percentile bootstrap of such a fit is too narrow (coverage 0.85-0.89 measured in
        # bench/results-arena.md); the interval is the union of the bootstrap and the
        # sandwich ones, which covered at the nominal rate there.
        intervals = rules.Intervals(
            np.minimum(intervals.low, robust.low),
            np.maximum(intervals.high, robust.high),
            "union of bootstrap percentile and sandwich",
        )
    best, worst = rules.rank_intervals(intervals.low, intervals.high)
    counts = rules.battle_count_matrix(table)
    board = [
        {
            "system": system,
            "score": float(point.scores[i]),
            "ci_low": float(intervals.low[i]),
            "ci_high": float(intervals.high[i]),
            "rank_low": int(best[i]),
            "rank_high": int(worst[i]),
            "battles": int(round(counts[i].sum())),
        }
        for i, system in enumerate(table.systems)
    ]
    board.sort(key=lambda row: (-row["score"], row["system"]))
    rates = rules.win_rate_matrix(table)
    return {
        "leaderboard": board,
        "weighted": weighted,
        "interval_method": intervals.method,
        "adaptive": {
            "systems": list(table.systems),
            "scores": point.scores.tolist(),
            "covariance": cov.tolist(),
        },
        "matrices": {
            "systems": list(table.systems),
            "win_rate": [
                [None if rates.mask[i, j] else float(rates[i, j]) for j in range(len(rates))]
                for i in range(len(rates))
            ],
            "battles": [[int(round(v)) for v in row] for row in counts],
        },
    }


def fits_disagree(plain: list[dict[str, Any]], weighted: list[dict[str, Any]]) -> list[dict]:
    """Pairs of systems the two fits order oppositely where one of them separates the pair
    beyond its intervals (one system's interval wholly above the other's): the plain fit's
    ranking then rests on the Bradley-Terry model holding, which the weighted fit does not
    assume (issue 47's warning)."""
    boards = {
        "plain": {r["system"]: r for r in plain},
        "weighted": {r["system"]: r for r in weighted},
    }
    out = []
    for fit, theirs in (("plain", boards["weighted"]), ("weighted", boards["plain"])):
        for above in boards[fit].values():
            for below in boards[fit].values():
                both = above["system"] in theirs and below["system"] in theirs
                if (
                    both
                    and above["ci_low"] > below["ci_high"]
                    and theirs[below["system"]]["score"] > theirs[above["system"]]["score"]
                ):
                    out.append({"above": above["system"], "below": below["system"], "by": fit})
    return out


def length_controlled(
    rows: list[dict[str, Any]], *, anchor: tuple[str, float] | None
) -> dict[str, Any]:
    weights = design_weights(rows)
    control = arena_style.style_control(
        [r["system_a"] for r in rows],
        [r["system_b"] for r in rows],
        [r["winner"] for r in rows],
        [r["len_a"] for r in rows],
        [r["len_b"] for r in rows],
        weights=weights,
        anchor=anchor,
    )
    best, worst = rules.rank_intervals(control.low, control.high)
    board = [
        {
            "system": system,
            "score": float(control.scores[i]),
            "ci_low": float(control.low[i]),
            "ci_high": float(control.high[i]),
            "rank_low": int(best[i]),
            "rank_high": int(worst[i]),
        }
        for i, system in enumerate(control.systems)
    ]
    board.sort(key=lambda row: (-row["score"], row["system"]))
    return {
        "length_leaderboard": board,
        "length_coefficient": {
            "value": control.coefficient,
            "ci_low": control.coefficient_low,
            "ci_high": control.coefficient_high,
            "unit": "log-odds per standard deviation of (words A - words B) / (words A + words B)",
        },
    }


def worker_answers(study: Study) -> dict[int, list[str]]:
    """Every answer each worker gave, gold battles included, as the page showed it (what
    the checks before the completion code read, ``integrity.pattern_fields``)."""
    answers: dict[int, list[str]] = {}
    for participant, outcome in (
        Judgment.objects.filter(study=study, item__kind__in=[BATTLE, CATCH])
        .order_by("id")
        .values_list("participant_id", "payload__outcome")
    ):
        if outcome in worker_rules.OUTCOMES:
            answers.setdefault(participant, []).append(outcome)
    return answers


def position_section(
    rows: list[dict[str, Any]],
    answers: dict[int, list[str]],
    pseudonyms: dict[int, str],
    *,
    max_share: float,
) -> dict[str, Any]:
    """The share of decisive battles won by the caption shown left, overall (kept battles),
    and per worker the position-bias and constant-outcome rules over every answer they gave
    (``rubrics.arena_workers.answer_pattern``, the rules a crowd worker passes before the
    code; here for everyone, excluded answers too, so a flagged worker is still shown)."""
    section: dict[str, Any] = {}
    try:
        bias = rules.position_bias([r["shown"] for r in rows])
        section["overall"] = {
            "left_share": bias.left_share,
            "ci_low": bias.low,
            "ci_high": bias.high,
            "decisive": bias.decisive,
            "p_value": bias.p_value,
        }
    except ValueError as exc:
        section["overall_error"] = str(exc)
    workers = []
    for participant, given in answers.items():
        pattern = worker_rules.answer_pattern(given, max_share=max_share)
        workers.append(
            {
                "participant": pseudonyms.get(participant, str(participant)),
                "answers": pattern.answers,
                "decisive": pattern.decisive,
                "left_share": pattern.left_share,
                "p_value": pattern.p_value,
                "outcome": pattern.outcome,
                "outcome_label": OUTCOME_LABELS.get(pattern.outcome, ""),
                "share": pattern.share,
                "position": pattern.position,
                "constant": pattern.constant,
                "flagged": pattern.flagged,
            }
        )
    workers.sort(key=lambda w: (not w["flagged"], w["p_value"], w["participant"]))
    section["workers"] = workers
    section["rule"] = (
        f"a worker is flagged for position bias when the two-sided binomial test of their "
        f"share of left wins against 1/2 gives p < {worker_rules.POSITION_P:g} over at least "
        f"{worker_rules.MIN_ANSWERS} decisive answers"
    )
    section["constant_rule"] = (
        f"and for a constant outcome when one answer (ties included) is more than "
        f"{max_share:.0%} of at least {worker_rules.MIN_ANSWERS} answers"
        if max_share < 1
        else "and the constant-outcome rule is off (largest share 1)"
    )
    return section


def criteria_section(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Per system pair and criterion: the mean label (positive: system A of the pair) with
    a bootstrap interval, and which system the interval shows winning."""
    out = []
    pairs = sorted({(r["system_a"], r["system_b"]) for r in rows if r["criteria"]})
    for system_a, system_b in pairs:
        labelled = [r for r in rows if (r["system_a"], r["system_b"]) == (system_a, system_b)]
        for criterion, label in CRITERION_NAMES.items():
            values = [r["criteria"][criterion] for r in labelled if criterion in r["criteria"]]
            if not values:
                continue
            summary = criterion_preference(values, seed=seed)
            if summary["low"] > 0:
                winner = system_a
            elif summary["high"] < 0:
                winner = system_b
            else:
                winner = ""
            counts = {str(v): values.count(v) for v in (2, 1, 0, -1, -2)}
            out.append(
                {
                    "system_a": system_a,
                    "system_b": system_b,
                    "criterion": criterion,
                    "label": label,
                    **{k: float(v) for k, v in summary.items() if k != "n"},
                    "n": len(values),
                    "counts": counts,
                    "winner": winner,
                }
            )
    return out


def agreement_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement between workers on battles two or more of them judged: the share of
    pairs of judgments with the same outcome, and Fleiss' kappa over the first two."""
    by_item: dict[int, list[str]] = {}
    for r in rows:
        by_item.setdefault(r["item"], []).append(r["winner"])
    shared = [winners for winners in by_item.values() if len(winners) >= 2]
    if not shared:
        return {"shared_battles": 0, "note": "no battle was judged by two workers"}
    same = total = 0
    for winners in shared:
        for x, y in itertools.combinations(winners, 2):
            total += 1
            same += x == y
    section: dict[str, Any] = {
        "shared_battles": len(shared),
        "pairs": total,
        "percent_agreement": same / total,
    }
    try:
        section["fleiss_kappa"] = fleiss_kappa(
            np.array([winners[:2] for winners in shared]), categories=list(rules.OUTCOMES)
        )
    except ValueError as exc:
        section["fleiss_kappa_error"] = str(exc)
    return section


@dataclass(frozen=True)
class RefreshState:
    """Where an adaptive study stands between two reports (``refresh_state``)."""

    answered: int  # battle judgments stored (gold battles aside)
    seen: int  # of them, those the latest finished report read (its ``battles_stored``)
    report_at: datetime | None  # when that report finished; None: no report yet
    next_in: int | None  # battles until a refresh is due (0: due); None: refresh is off


def refresh_state(study: Study, config) -> RefreshState | None:
    """The adaptive design's refresh state; None for a uniform study. Two queries, neither
    reading a stored report whole (its ``battles_stored`` alone). An exclusion never delays
    a refresh: every battle answered counts."""
    if not config.adaptive:
        return None
    answered = Judgment.objects.filter(study=study, item__kind=BATTLE).count()
    latest = (
        Job.objects.filter(study=study, kind=Job.Kind.REPORT, status=Job.Status.DONE)
        .order_by("-id")
        .values_list("finished_at", "result__battles_stored")
        .first()
    )
    report_at, seen = latest or (None, 0)
    seen = int(seen or 0)
    refresh = config.adaptive_refresh
    next_in = max(refresh - (answered - seen), 0) if refresh else None
    return RefreshState(answered=answered, seen=seen, report_at=report_at, next_in=next_in)


class ArenaReport(Report):
    template = "modes/arena/report.html"
    figure_names = figures.NAMES
    summary_keys = ("agreement", "position_bias_overall")

    def context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """Only the figures the stored report can draw: the scores and matrices come with
        the Bradley-Terry fit, which does not exist while a system never lost or never won
        (issue 46: the page linked three figures that answered 500)."""
        if result.get("leaderboard") and result.get("matrices"):
            return {}
        why = result.get("leaderboard_error") or "no leaderboard yet"
        return {"figure_names": [], "figures_missing": [(n, why) for n in self.figure_names]}

    def refresh_due(self, study: Study) -> bool:
        """An adaptive study's design reads the latest report: due once ``adaptive_refresh``
        battles were answered since that report read them (``refresh_state``)."""
        state = refresh_state(study, self.mode.settings(study))
        return state is not None and state.next_in == 0

    def human_pairs(self, study: Study) -> dict[str, list[tuple[int, int, int]]]:
        """Decisive kept battles as the metric lab's pairwise judgments, by system pair:
        ``(caption a, caption b, 0 if a won else 1)``; ties carry no preference."""
        pairs: dict[str, list[tuple[int, int, int]]] = {}
        for spec, winner in Judgment.objects.filter(
            study=study, item__kind=BATTLE, excluded=False
        ).values_list("item__spec", "result__winner"):
            if winner in ("model_a", "model_b"):
                group = f"{spec['system_a']} vs {spec['system_b']}"
                choice = 0 if winner == "model_a" else 1
                pairs.setdefault(group, []).append((spec["caption_a"], spec["caption_b"], choice))
        return pairs

    def run(self, study: Study, progress) -> dict[str, Any]:
        config = self.mode.settings(study)
        anchor = (config.anchor_system, config.anchor_score) if config.anchor_system else None
        pseudonyms = dict(Participant.objects.filter(study=study).values_list("pk", "pseudonym"))
        people = {pk: {"pseudonym": name} for pk, name in pseudonyms.items()}
        every = battle_rows(study)
        # Per-criterion results use every kept battle; the rest needs an overall verdict.
        labelled = [r for r in every if not r["excluded"]]
        all_rows = [r for r in every if r["winner"]]
        rows = [r for r in all_rows if not r["excluded"]]
        progress(10, "battles read")
        result: dict[str, Any] = {
            "battles": len(rows),
            "battles_stored": len(all_rows),
            "anchor": {"system": anchor[0], "score": anchor[1]} if anchor else None,
            "bootstrap_rounds": config.bootstrap_rounds,
            "leaderboard": [],
            "length_leaderboard": [],
            "length_coefficient": None,
        }
        if not rows:
            result["leaderboard_error"] = result["length_error"] = "no battle is kept yet"
        else:
            try:
                # The plain fit is the leaderboard, an adaptive design's too (valid when
                # Bradley-Terry holds); the weighted fit beside it is the robustness check.
                result.update(
                    leaderboard(
                        rows, anchor=anchor, rounds=config.bootstrap_rounds, seed=study.seed
                    )
                )
                weights = design_weights(rows)
                result["weighted"] = weights is not None
                if weights is not None:
                    check = leaderboard(
                        rows,
                        anchor=anchor,
                        rounds=config.bootstrap_rounds,
                        seed=study.seed,
                        weights=weights,
                    )
                    result["weighted_leaderboard"] = check["leaderboard"]
                    result["weighted_interval_method"] = check["interval_method"]
                    result["fits_disagree"] = fits_disagree(
                        result["leaderboard"], check["leaderboard"]
                    )
            except ValueError as exc:
                result["leaderboard_error"] = str(exc)
            progress(60, "leaderboard fitted")
            try:
                result.update(length_controlled(rows, anchor=anchor))
            except ValueError as exc:
                result["length_error"] = str(exc)
        position = position_section(
            rows, worker_answers(study), pseudonyms, max_share=config.answer_max_share
        )
        result["position_bias"] = position
        result["position_bias_overall"] = position.get("overall")
        result["criteria"] = criteria_section(labelled, study.seed)
        result["without_verdict"] = len(labelled) - len(rows)
        result["agreement"] = agreement_section(rows)
        result["reliability"] = reliability_section(
            ((r["participant"], r["item"], r["winner"]) for r in all_rows),
            pseudonyms=pseudonyms,
            note=(
                "Each worker's competence (the chance their outcome equals a battle's true "
                "outcome among the four), estimated from every stored battle two or more "
                "workers judged, excluded ones too"
            ),
        )
        result["catch"] = catch.report_section(study.pk, people=people)
        # The page states the rule with the study's own numbers.
        result["gold_rule"] = {
            "min_seen": config.catch_min_seen,
            "max_missed_share": config.catch_max_missed_share,
        }
        progress(100, "done")
        return result

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        return figures.figure(name, result)
