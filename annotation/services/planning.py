"""The planner (issue 15): how wide a study's headline intervals will be, and what it costs,
for each size, predicted by simulation with ``rubrics.planner``.

A read that computes: nothing is written. The mode's ``planner`` (``modes/base.py:Planner``)
holds what differs between protocols (the pilot, the assumptions it reads, its unit); this
module holds what every plan shares (crowd time, price, seed) and the JSON the page and the
API show.

With a judge (issue 40): ``study_judge_plan`` reads the study's units that both people and
its judge answered as a pilot and says, with ``rubrics.ppi_power.sample_size`` (the PPI++ power
formula), how many human units and judgments the target half-width needs without and with
the judge. ``study_plan`` carries it as ``judge``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np
from django.conf import settings

from annotation.errors import ServiceError
from annotation.models import Judgment, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.services.people_judges import SystemData, people_judge_data
from rubrics import ppi_power

#: The form's fields a mode's planner may read as its stated assumptions.
ASSUMPTIONS = ("mean", "difference", "spread", "exact", "adjacent")


def study_plan(
    study: Study,
    *,
    sizes: list[int],
    judgments_per_item: int,
    price_per_judgment: float | None,
    seconds_per_judgment: float | None,
    target_half_width: float | None,
    simulations: int,
    judge: bool = True,
    **assumptions: float,
) -> dict:
    """The planner's curve for the study's mode, as JSON.

    ``assumptions``: the form's ``ASSUMPTIONS`` (the mode's planner says which it reads and
    when the study is its own pilot). Seconds per judgment: given, else the median dwell of
    the study's kept timed judgments, else the mode's stated ``planner.default_seconds``;
    ``seconds_source`` says which (``given``, ``study``, ``default``). ``currency``: the
    money's (``settings.CAPEVAL_CURRENCY``); ``systems``: the study's own systems the mode's
    planner simulates (empty before it has captions, or for VICR). ValueError from the
    planner for a combination it refuses, or for a mode without a planner model.
    ``judge``: with the judge plan (``study_judge_plan``) as ``judge``; the figure, which
    draws the curve only, leaves it out.
    """
    mode = get_mode(study.mode)
    seconds_source = "given"
    if seconds_per_judgment is None:
        # An imported judgment has no dwell (stored as 0): counting it gave a median of 0 s
        # and 0.0 crowd hours (issue 27), so only timed judgments count.
        dwell = list(
            Judgment.objects.filter(study=study, excluded=False, dwell_ms__gt=0)
            .order_by("-id")
            .values_list("dwell_ms", flat=True)[:10_000]
        )
        if dwell:
            seconds_per_judgment, seconds_source = statistics.median(dwell) / 1000, "study"
        else:
            seconds_per_judgment, seconds_source = mode.planner.default_seconds, "default"
    common = {
        "target_half_width": target_half_width,
        "n_simulations": simulations,
        "price_per_judgment": price_per_judgment,
        "seconds_per_judgment": seconds_per_judgment,
        "seed": study.seed % 2**32,
    }
    # The systems simulated: the study's own where the mode's planner uses systems.
    systems = mode.planner.systems(study) if mode.planner.uses_systems else []
    plan, pilot = mode.planner.plan(
        study,
        sizes=sizes,
        judgments_per_item=judgments_per_item,
        assumptions={name: assumptions[name] for name in ASSUMPTIONS if name in assumptions},
        common=common,
    )
    result = {
        **plan.as_dict(),
        "pilot": pilot,
        "seconds_per_judgment": seconds_per_judgment,
        "seconds_source": seconds_source,
        "price_per_judgment": price_per_judgment,
        "currency": settings.CAPEVAL_CURRENCY,
        "systems": systems,
    }
    if judge:
        result["judge"] = study_judge_plan(study, target_half_width=target_half_width, mode=mode)
    return result


# -- the planner with a judge (issue 40): the study's own units with both are the pilot

#: Fewest units with both people and the judge a correlation is read from: below this the
#: pilot's correlation is noise, and a plan on it would promise a saving it cannot keep.
JUDGE_PILOT_MIN = 10

#: The error level of the judge plan's intervals (the report's people + judge estimate's).
JUDGE_ALPHA = 0.05

#: What the plan of a Bradley-Terry mode is of (``study_judge_plan``'s ``note``).
BATTLES_NOTE = (
    "The leaderboard is a Bradley-Terry fit, for which no simple power formula exists: "
    "this plan is for each system's share of the battles it is in (a tie counts one half), "
    "one unit per human vote. The fit's intervals shrink with the judge much as these do."
)

#: Why a plan from units drawn by the judge's uncertainty is only indicative.
DESIGN_NOTE = (
    "People's units in this study were drawn where the judge is least sure: the pilot's "
    "correlation is measured on those units, not on a random sample, and the plan is for "
    "a uniform design; take it as indicative."
)

#: The fields of ``study_judge_plan``'s JSON, for the API's schema (``apis.PlanOutput``).
JUDGE_PLAN_HELP = (
    "The human judgments a target half-width needs with and without the study's judge "
    "(issue 40; the PPI++ power formula, rubrics.ppi_power.sample_size), the study's units with "
    "both people and the judge as the pilot. Keys: judge ({id, name} or null), score (the "
    "human score the judge predicts, whose scale the target is on), target_half_width, "
    "alpha, interval_percent (100 (1 - alpha)), estimate (the report's: mean, share or "
    "bradley_terry, planned as each system's share of battles won), note (what the plan is "
    "of, when not the score itself, and when the pilot was drawn by the judge), error (why "
    "there is no plan; empty when there is one), systems and pooled (all systems' units "
    "together; null with one system or with battles), each {system, n_labeled (units with "
    "both), n_judged (N: units the judge answered), ratings_per_unit (the pilot's kept "
    "human ratings per labeled unit), rho (the pilot's judge-people correlation), bound (1 "
    "- rho^2: the least share of the people-only human units the judge can leave), "
    "people_only, with_judge (people answer n of the N judged units, the judge alone the "
    "other N - n), with_judge_unlimited (as many judge answers as wanted), each {units, "
    "judgments (units x ratings_per_unit, rounded up), saving (1 - units / people_only "
    "units)}, error (why this row has no plan)}. Without a target the three counts are "
    "null."
)


def judge_plan_row(
    system: str,
    y: Any,
    yhat: Any,
    n_judged: int,
    *,
    ratings_per_unit: float | None,
    target_half_width: float | None,
    alpha: float = JUDGE_ALPHA,
) -> dict[str, Any]:
    """One system's (or the pooled) judge plan from its pilot, as ``JUDGE_PLAN_HELP`` says.

    ``y``: the people's mean on each labeled unit; ``yhat``: the judge's on the same units;
    ``n_judged``: the units the judge answered (labeled ones included). Pure: the service
    gathers the inputs, this reads nothing.
    """
    y, yhat = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    row: dict[str, Any] = {
        "system": system,
        "n_labeled": int(y.size),
        "n_judged": int(n_judged),
        "ratings_per_unit": ratings_per_unit,
        "rho": None,
        "bound": None,
        "people_only": None,
        "with_judge": None,
        "with_judge_unlimited": None,
        "error": "",
    }
    if y.size < JUDGE_PILOT_MIN:
        row["error"] = (
            f"{y.size} unit{'' if y.size == 1 else 's'} ha{'s' if y.size == 1 else 've'} both "
            f"people's ratings and the judge's answer; the plan needs at least "
            f"{JUDGE_PILOT_MIN} to measure how well the judge agrees with people."
        )
        return row
    if float(y.var()) == 0.0:
        row["error"] = "People gave every unit of the pilot the same score: no spread to plan from."
        return row
    # The correlation as sample_size measures it (moments with ddof 0); a constant judge
    # is uncorrelated, and so saves nothing.
    spread = float(np.sqrt(y.var() * yhat.var()))
    rho = float(np.mean((y - y.mean()) * (yhat - yhat.mean())) / spread) if spread else 0.0
    row.update(rho=rho, bound=1.0 - rho * rho)
    if target_half_width is None:
        return row
    try:
        # The report's small-sample intervals (t, Bessel): the plan reaches the width
        # the report will show, not the CLT one it would show with many more people.
        unlimited = ppi_power.sample_size(
            y, yhat, target_halfwidth=target_half_width, alpha=alpha, small_sample=True
        )
        people = unlimited["people_only"]
        among = _units_among_judged(y, yhat, n_judged, target_half_width, alpha, people)
    except ValueError as exc:  # a target too small to reach on any study
        row["error"] = f"No plan reaches this target: {exc}."
        return row

    def need(units: int) -> dict[str, Any]:
        judgments = None if ratings_per_unit is None else math.ceil(units * ratings_per_unit)
        return {"units": units, "judgments": judgments, "saving": 1.0 - units / people}

    row.update(
        rho=unlimited["rho"],
        bound=1.0 - unlimited["rho"] ** 2,
        people_only=need(people),
        with_judge=need(among),
        with_judge_unlimited=need(unlimited["with_judge"]),
    )
    return row


def _units_among_judged(
    y: np.ndarray, yhat: np.ndarray, n_judged: int, target: float, alpha: float, people: int
) -> int:
    """The fewest units n people must answer among the ``n_judged`` the judge answered,
    the other ``n_judged - n`` the judge's alone, for the target: the least n with
    ``sample_size(unlabeled=n_judged - n)["with_judge"] <= n``, else the people-only n.

    Why a search: the units people answer are no longer unlabeled, so N depends on n. More
    of a fixed set of judged units answered by people never widens the interval (the
    effective n, ``n N / (n + (1 - rho^2) (N - n))``, grows with n), so the condition holds
    from some n on and a bisection finds it in a few dozen calls.
    """

    def enough(n: int) -> bool:
        if n >= people:
            return True
        if n >= n_judged:  # no judged unit left to the judge alone: people only
            return False
        planned = ppi_power.sample_size(
            y,
            yhat,
            target_halfwidth=target,
            alpha=alpha,
            unlabeled=n_judged - n,
            small_sample=True,
        )
        return planned["with_judge"] <= n

    low, high = 1, people  # enough(1) is never asked: every plan has n >= 2
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def study_judge_plan(
    study: Study, *, target_half_width: float | None, mode: Mode | None = None
) -> dict[str, Any]:
    """The planner with the study's judge (issue 40), as ``JUDGE_PLAN_HELP`` says: per
    system and pooled, the human units and judgments the target half-width needs without
    and with the judge, the study's own units with both as the pilot.

    The judge and the score are the report's settings (``people_judge``,
    ``people_judge_score``: the people + judge estimate's), read as the report reads them.
    A read: never raises for the study's state; ``error`` says why there is no plan.
    """
    mode = mode or get_mode(study.mode)
    settings_ = mode.settings(study)
    out: dict[str, Any] = {
        "judge": None,
        "score": "",
        "target_half_width": target_half_width,
        "alpha": JUDGE_ALPHA,
        "interval_percent": round(100 * (1 - JUDGE_ALPHA)),
        "systems": [],
        "pooled": None,
        "estimate": "",
        "note": "",
        "error": "",
    }
    try:
        data = people_judge_data(
            study,
            mode=mode,
            judge_id=getattr(settings_, "people_judge", 0),
            score=getattr(settings_, "people_judge_score", ""),
        )
    except ServiceError as exc:  # the study's state: no judge, a mode without one
        out["error"] = exc.message
        return out
    out.update(judge=data.get("judge"), score=data.get("score", ""))
    if data.get("error"):
        out["error"] = data["error"]
        return out
    out["estimate"] = data.get("estimate", "mean")
    if data.get("design", {}).get("kind") == "uncertainty":
        # Units people answered were chosen where the judge is unsure: their correlation
        # is not the study's, and the formula is for a uniform draw.
        out["note"] = DESIGN_NOTE
    systems = data["systems"]
    if out["estimate"] == "bradley_terry":
        # The fit's strengths have no one-line power formula: plan each system's share of
        # the battles it is in, a mean the formula covers, one unit per human vote.
        systems = _battle_systems(data)
        out["score"] = "share of battles won"
        out["note"] = " ".join(filter(None, (BATTLES_NOTE, out["note"])))
    rows = [
        judge_plan_row(
            s.system,
            s.y,
            s.yhat,
            len(s.y) + len(s.yhat_unlabeled),
            ratings_per_unit=_ratings_per_unit([s]),
            target_half_width=target_half_width,
        )
        for s in systems
    ]
    out["systems"] = rows
    if len(systems) > 1 and out["estimate"] != "bradley_terry":
        # Every system's units as one pilot: the judge's agreement over the whole study
        # (not battles: each is two systems' units, and their shares pool to one half).
        out["pooled"] = judge_plan_row(
            "all systems",
            np.concatenate([s.y for s in systems]),
            np.concatenate([s.yhat for s in systems]),
            sum(row["n_judged"] for row in rows),
            ratings_per_unit=_ratings_per_unit(systems),
            target_half_width=target_half_width,
        )
    if not systems:
        out["error"] = "No unit has both people's ratings and the judge's answer yet."
    return out


def _ratings_per_unit(systems: list[Any]) -> float | None:
    """The pilot's kept human ratings per labeled unit: what a planned unit costs in
    judgments (a unit's people value is the mean of its ratings, so its spread, and the
    plan, hold for units rated as often as the pilot's). None without labeled units."""
    counts = np.concatenate([np.asarray(s.ratings, dtype=float) for s in systems])
    return float(counts.mean()) if counts.size else None


def _battle_systems(data: dict[str, Any]) -> list[SystemData]:
    """Per system of a Bradley-Terry mode, its battles as shares won: people's votes
    (``battles["human"]``, rows ``(i, j, y)``, y the share won by j) with the judge's
    answer on the same rows, and the judge's battles no person voted on."""
    battles = data["battles"]

    def won(rows: np.ndarray, s: int) -> np.ndarray:
        rows = rows[(rows[:, 0] == s) | (rows[:, 1] == s)]
        return np.where(rows[:, 1] == s, rows[:, 2], 1.0 - rows[:, 2])

    out = []
    for s, name in enumerate(data["names"]):
        y = won(battles["human"], s)
        out.append(
            SystemData(
                system=name,
                y=y,
                yhat=won(battles["judge_labeled"], s),
                yhat_unlabeled=won(battles["judge_unlabeled"], s),
                probabilities=None,
                ratings=np.ones(y.size),
            )
        )
    return out
