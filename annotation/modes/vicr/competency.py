"""The VICR report's rater-competency section: a Rasch model of agreement scores.

Each compared game rating is scored as in VICR section 4 (2 exact, 1 adjacent, 0 otherwise)
against the consensus of the pair's other raters; ``rubrics.rasch`` puts players and pairs
on one logit scale. :func:`competency` returns a frozen :class:`Competency`, which the report
serialises with ``as_dict()``: players with infit and outfit, the hardest pairs, the two
thresholds and the Wright map's bins (:func:`wright_map_bins`, drawn by :func:`wright_map`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from annotation.models import Caption, Item
from rubrics import rasch

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The Rasch fit stops here even if not converged (the report says so). A VICR-size study
#: (68,000 ratings) converges in about 20 iterations of about 10 ms each.
RASCH_MAX_ITERATIONS = 200
#: Pairs listed as the hardest to agree on.
HARDEST_PAIRS = 10
#: The Wright map's bins: 0.25 logits, widened so that there are at most 60.
MAP_BIN_LOGITS = 0.25
MAP_MAX_BINS = 60
#: What each agreement score means (VICR section 4's rubric), thresholds 1 and 2.
THRESHOLD_LABELS = ("adjacent or exact (AA)", "exact (EA)")
#: ``Facet.extreme`` in words: every response at the top score, at the bottom, or neither.
EXTREME_WORDS = {1: "all exact", -1: "none close", 0: ""}


@dataclass(frozen=True)
class PlayerMeasure:
    """One player's row: measure and standard error, fit statistics and a misfit flag."""

    pseudonym: str
    status: str
    measure: float | None
    se: float | None
    infit: float | None
    outfit: float | None
    responses: int
    extreme: str
    flag: str


@dataclass(frozen=True)
class PairMeasures:
    """How many pairs were measured, how many were extreme, and the hardest ones."""

    measured: int
    unmeasured: int
    all_exact: int
    none_close: int
    hardest: tuple[dict[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hardest": list(self.hardest)}


@dataclass(frozen=True)
class WrightMap:
    """Bin edges (logits) and, per bin, players and pairs' AA and EA thresholds."""

    edges: tuple[float, ...]
    players: tuple[int, ...]
    aa: tuple[int, ...]
    ea: tuple[int, ...]

    def as_dict(self) -> dict[str, list]:
        return {key: list(value) for key, value in asdict(self).items()}


@dataclass(frozen=True)
class Competency:
    """The fitted section, or ``error`` alone when no model could be fitted."""

    error: str
    model: rasch.RaschFit | None = None
    responses: int = 0
    players: tuple[PlayerMeasure, ...] = ()
    pairs: PairMeasures | None = None
    offsets: tuple[float, ...] = ()
    map: WrightMap | None = None

    def as_dict(self) -> dict[str, Any]:
        if self.model is None or self.pairs is None or self.map is None:
            return {"error": self.error}
        model = self.model
        players = [asdict(row) for row in self.players]
        return {
            "error": "",
            "converged": model.converged,
            "iterations": model.iterations,
            "max_iterations": RASCH_MAX_ITERATIONS,
            "subsets": model.subsets,
            "responses": self.responses,
            "thresholds": [
                {"label": label, "andrich": float(tau), "se": float(se), "offset": float(offset)}
                for label, tau, se, offset in zip(
                    THRESHOLD_LABELS,
                    model.thresholds,
                    model.threshold_se,
                    self.offsets,
                    strict=True,
                )
            ],
            "players": players,
            "misfits": sum(1 for row in self.players if row.flag),
            "pairs": self.pairs.as_dict(),
            "map": self.map.as_dict(),
        }


def competency(
    players: np.ndarray,
    pairs: np.ndarray,
    scores: np.ndarray,
    *,
    people: dict[int, dict[str, Any]],
    game_pairs: int,
) -> Competency:
    """The Rasch model of agreement scores: players, pairs, thresholds and the Wright map."""
    try:
        model = rasch.fit(players, pairs, scores, max_score=2, max_iterations=RASCH_MAX_ITERATIONS)
    except ValueError as exc:
        reason = "no game rating has another rater on its pair yet" if players.size == 0 else ""
        return Competency(error=reason or str(exc))
    offsets = rasch.thurstonian_thresholds(model.thresholds)
    rows = player_measures(model.persons, people)
    items = model.items
    measured = ~np.ma.getmaskarray(items.measure)
    measures = np.ma.getdata(items.measure)[measured]
    player_values = np.array([row.measure for row in rows if row.measure is not None])
    return Competency(
        error="",
        model=model,
        responses=int(scores.size),
        players=rows,
        pairs=PairMeasures(
            measured=int(measured.sum()),
            unmeasured=game_pairs - int(measured.sum()),
            all_exact=int(np.count_nonzero(items.extreme == 1)),
            none_close=int(np.count_nonzero(items.extreme == -1)),
            hardest=hardest_pairs(items, measured, measures),
        ),
        offsets=tuple(offsets),
        map=wright_map_bins(player_values, measures + offsets[0], measures + offsets[1]),
    )


def player_measures(
    facet: rasch.Facet, people: dict[int, dict[str, Any]]
) -> tuple[PlayerMeasure, ...]:
    """One row per fitted player, highest measure first (unmeasured last, then by name)."""
    rows = []
    for index, pk in enumerate(facet.ids.tolist()):
        infit, outfit = _masked(facet.infit, index), _masked(facet.outfit, index)
        rows.append(
            PlayerMeasure(
                pseudonym=people[pk]["pseudonym"],
                status=people[pk]["status"],
                measure=_masked(facet.measure, index),
                se=_masked(facet.se, index),
                infit=infit,
                outfit=outfit,
                responses=int(facet.responses[index]),
                extreme=EXTREME_WORDS[int(facet.extreme[index])],
                flag=misfit_flag(infit, outfit),
            )
        )
    rows.sort(key=lambda row: (row.measure is None, -(row.measure or 0.0), row.pseudonym))
    return tuple(rows)


def hardest_pairs(
    items: rasch.Facet, measured: np.ndarray, measures: np.ndarray
) -> tuple[dict[str, Any], ...]:
    """The ``HARDEST_PAIRS`` measured pairs of highest difficulty, with their captions."""
    order = np.argsort(-measures, kind="stable")[:HARDEST_PAIRS]
    hardest_ids = items.ids[measured][order].tolist()
    found = {
        pk: (position, spec["caption_id"])
        for pk, position, spec in Item.objects.filter(pk__in=hardest_ids).values_list(
            "pk", "position", "spec"
        )
    }
    captions = dict(
        Caption.objects.filter(pk__in=[caption for _, caption in found.values()]).values_list(
            "pk", "text"
        )
    )
    where = {pk: index for index, pk in enumerate(items.ids.tolist())}
    return tuple(
        {
            "position": found[pk][0] + 1,
            "caption": captions.get(found[pk][1], ""),
            "measure": float(np.ma.getdata(items.measure)[where[pk]]),
            "se": _masked(items.se, where[pk]),
            "responses": int(items.responses[where[pk]]),
            "extreme": EXTREME_WORDS[int(items.extreme[where[pk]])],
        }
        for pk in hardest_ids
    )


def wright_map_bins(players: np.ndarray, aa: np.ndarray, ea: np.ndarray) -> WrightMap:
    """Histograms of player measures and of pairs' AA and EA thresholds on shared bins.

    The bins are ``MAP_BIN_LOGITS`` wide (wider when that would make more than
    ``MAP_MAX_BINS``), aligned on multiples of the width, from the lowest player or AA
    threshold to the highest player or EA threshold, with a spare bin above.
    """
    low = float(min(players.min(initial=np.inf), aa.min(initial=np.inf)))
    high = float(max(players.max(initial=-np.inf), ea.max(initial=-np.inf)))
    width = max(MAP_BIN_LOGITS, (high - low) / MAP_MAX_BINS)
    start = np.floor(low / width) * width
    edges = start + width * np.arange(int(np.ceil((high - start) / width)) + 2)
    return WrightMap(
        edges=tuple(edges.tolist()),
        players=tuple(np.histogram(players, edges)[0].tolist()),
        aa=tuple(np.histogram(aa, edges)[0].tolist()),
        ea=tuple(np.histogram(ea, edges)[0].tolist()),
    )


def misfit_flag(infit: float | None, outfit: float | None) -> str:
    """Linacre's conventional ranges (``rubrics.rasch.MISFIT_HIGH`` and ``MISFIT_LOW``)."""
    fits = [value for value in (infit, outfit) if value is not None]
    if any(value > rasch.MISFIT_HIGH for value in fits):
        return "noisy"
    if any(value < rasch.MISFIT_LOW for value in fits):
        return "too predictable"
    return ""


def _masked(values: np.ma.MaskedArray, index: int) -> float | None:
    return None if np.ma.is_masked(values[index]) else float(values[index])


def wright_map(competency: dict[str, Any] | None) -> Figure:
    """Players (left) and pairs' two difficulty thresholds (right) on one logit scale."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.8))
    players_axes, pairs_axes = figure.subplots(
        1, 2, sharey=True, gridspec_kw={"width_ratios": [1, 2]}
    )
    if not competency or competency.get("error") or "map" not in competency:
        reason = (competency or {}).get("error") or "recompute the report to draw this map"
        figure.text(0.5, 0.5, f"Not computed: {reason}", ha="center", va="center", wrap=True)
        players_axes.set_axis_off()
        pairs_axes.set_axis_off()
        return figure
    bins = competency["map"]
    edges = np.asarray(bins["edges"])
    centres, height = (edges[:-1] + edges[1:]) / 2, edges[1] - edges[0]
    players_axes.barh(centres, bins["players"], height=height * 0.9, color="#0b57d0")
    players_axes.invert_xaxis()
    players_axes.set_xlabel("Players")
    players_axes.set_ylabel("Logits (players: competency; pairs: difficulty)")
    pairs_axes.barh(
        centres - height / 4,
        bins["aa"],
        height=height / 2,
        color="#e8710a",
        label="50% chance of adjacent or exact agreement",
    )
    pairs_axes.barh(
        centres + height / 4,
        bins["ea"],
        height=height / 2,
        color="#c5221f",
        label="50% chance of exact agreement",
    )
    pairs_axes.set_xlabel("Pairs (thresholds)")
    pairs_axes.legend(loc="upper right", fontsize="small", frameon=False)
    players_axes.set_ylim(edges[0], edges[-1])
    figure.suptitle("Wright map")
    for axes in (players_axes, pairs_axes):
        for spine in ("top", "right"):
            axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure
