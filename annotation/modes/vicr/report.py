"""The VICR report: the paper's final view, its virtual-rater agreement and the players.

The final view holds the game ratings of players in good standing (status ``game``) that are
not flagged as excluded. Agreement is computed by ``rubrics.vicr.virtual_raters`` over the
final view's pairs; every player keeps a row, excluded ones included, so a researcher sees
who was left out and why.

Per player, agreement is measured against the consensus of the *other* raters of each pair
(``rubrics.vicr.consensus_of_others`` over the final view; machine predictions are left out,
as in the rest of the report: they only prime the game's scoring of a pair's first ratings).
A pair the player rated alone is not compared, and the table says on how many pairs each
number rests. The same comparisons, scored as in VICR section 4 (2 exact, 1 adjacent, 0
otherwise), feed the rater-competency model (``rubrics.rasch``): players and pairs on one
logit scale, drawn as a Wright map, with infit and outfit per player.

Per system (``annotation/modes/vicr/systems.py``): each system's mean rating over its pairs
in the final view and the paired differences between systems, with bootstrap intervals.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

# matplotlib (about 30 MB) is imported where a figure is drawn, not here: the export path
# imports this module through the mode registry and must stay inside its memory budget
# (issue 27; tests/annotation/test_exports.py checks it).
from annotation.models import Caption, Item, Judgment, Participant, Study
from annotation.modes import catch
from annotation.modes.base import Progress, Report
from annotation.modes.reliability import reliability_section
from annotation.modes.vicr.protocol import GAME
from annotation.modes.vicr.systems import FIGURE as SYSTEMS_FIGURE
from annotation.modes.vicr.systems import systems_figure, systems_section
from rubrics import rasch
from rubrics import vicr as rules

if TYPE_CHECKING:
    from matplotlib.figure import Figure

AGREEMENT_LABELS = {
    "tau_x_yz": "τ X–YZ",
    "tau_y_xz": "τ Y–XZ",
    "tau_z_xy": "τ Z–XY",
    "kendall_w": "Kendall's W",
    "fleiss_kappa": "Fleiss' κ",
}


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


class VicrReport(Report):
    template = "modes/vicr/report.html"
    figure_names = ("rating-distribution", SYSTEMS_FIGURE, "wright-map")
    summary_keys = ("agreement", "agreement_error", "included")

    def human_scores(self, study: Study) -> tuple[dict[str, list[tuple[int, float]]], str]:
        """One row per kept game rating: Kendall tau-c over the flattened ratings, as the
        survey's Table 4 for Flickr8k-Expert (tau-b when the ratings take two values only)."""
        rows = [
            (spec.get("caption_id"), payload.get("rating"))
            for spec, payload in Judgment.objects.filter(
                study=study, excluded=False, item__kind=GAME
            ).values_list("item__spec", "payload")
        ]
        rows = [(int(c), float(r)) for c, r in rows if c is not None and r is not None]
        binary = len({r for _, r in rows}) == 2
        return {"rating": rows}, "kendall_tau_b" if binary else "kendall_tau_c"

    def run(self, study: Study, progress: Progress) -> dict[str, Any]:
        config = self.mode.settings(study)
        levels = config.scale_levels
        progress(5, "Loading ratings")
        game_items = list(
            Item.objects.filter(study=study, kind=GAME)
            .order_by("position", "id")
            .values_list("id", flat=True)
        )
        people = {
            pk: {"pseudonym": pseudonym, "status": status, "state": state or {}}
            for pk, pseudonym, status, state in Participant.objects.filter(study=study).values_list(
                "pk", "pseudonym", "status", "state"
            )
        }
        good = {pk for pk, person in people.items() if person["status"] == GAME}
        rows = list(
            Judgment.objects.filter(study=study, item__kind=GAME)
            .order_by("id")
            .values_list("item_id", "participant_id", "payload__rating", "dwell_ms", "excluded")
        )
        progress(25, "Building the final view")
        final: dict[int, list[int]] = defaultdict(list)
        stored: Counter[int] = Counter()
        final_players: set[int] = set()
        for item_id, participant_id, rating, _dwell, excluded in rows:
            if excluded:
                continue
            stored[item_id] += 1
            if participant_id in good:
                final[item_id].append(int(rating))
                final_players.add(participant_id)
        pair_ratings = [final[item_id] for item_id in game_items if final.get(item_id)]
        histogram = (
            rules.rating_distribution(pair_ratings, levels=levels)
            if pair_ratings
            else {level: 0 for level in range(1, levels + 1)}
        )
        progress(40, "Virtual raters")
        repetitions = config.report_repetitions
        agreement, agreement_error = None, ""
        try:
            values = rules.virtual_raters(
                pair_ratings,
                repetitions=repetitions,
                seed=abs(study.seed) % 2**63,
                collapse_top=config.collapse_top,
                levels=levels,
            )
            agreement = [
                {"key": key, "label": AGREEMENT_LABELS[key], **values[key]}
                for key in rules.VIRTUAL_RATER_KEYS
            ]
        except ValueError as exc:
            agreement_error = str(exc)
        progress(60, "Players")
        kept = [row for row in rows if not row[4]]
        item_ids = np.array([row[0] for row in kept], dtype=np.int64)
        player_ids = np.array([row[1] for row in kept], dtype=np.int64)
        ratings = np.array([int(row[2]) for row in kept], dtype=np.int64)
        counted = np.isin(player_ids, np.fromiter(good, dtype=np.int64, count=len(good)))
        # Each rating against the consensus of the pair's other final-view ratings (0: none).
        others = rules.consensus_of_others(item_ids, ratings, counted, levels=levels)
        compared = others > 0
        per_player: dict[int, dict[str, list]] = defaultdict(
            lambda: {"x": [], "r": [], "dwell": []}
        )
        counts: Counter[int] = Counter()
        for (_, participant_id, _, dwell, _), x, r in zip(kept, ratings, others, strict=True):
            counts[participant_id] += 1
            per_player[participant_id]["dwell"].append(dwell)
            if r:
                per_player[participant_id]["x"].append(int(x))
                per_player[participant_id]["r"].append(int(r))
        in_game = [pk for pk, person in people.items() if person["status"] == GAME]
        ranks = dict(
            zip(
                in_game,
                rules.competition_ranks([_score(people[pk]["state"]) for pk in in_game]),
                strict=True,
            )
        )
        players = []
        for pk, person in people.items():
            state = person["state"]
            mine = per_player.get(pk)
            agreement_row = (
                rules.agreement_with_consensus(mine["x"], mine["r"]) if mine and mine["x"] else None
            )
            players.append(
                {
                    "pseudonym": person["pseudonym"],
                    "status": person["status"],
                    "rank": ranks.get(pk),
                    "score": _score(state),
                    "game_points": state.get("game_points", 0),
                    "tutorial_score": state.get("tutorial_score"),
                    "probation_attempts": int(
                        (state.get("player") or {}).get("probation_attempts", 0)
                    ),
                    "probation_scores": state.get("probation_scores", []),
                    "ratings": counts.get(pk, 0),
                    "compared": len(mine["x"]) if mine else 0,
                    "exact": agreement_row["exact"] if agreement_row else None,
                    "adjacent": agreement_row["adjacent"] if agreement_row else None,
                    "median_dwell_s": (statistics.median(mine["dwell"]) / 1000) if mine else None,
                }
            )
        # The leaderboard's order (rank), then players off the game by ratings.
        players.sort(
            key=lambda p: (p["rank"] is None, p["rank"] or 0, -p["ratings"], p["pseudonym"])
        )
        progress(80, "Rater competency (Rasch model)")
        competency = _competency(
            player_ids[compared],
            item_ids[compared],
            rules.agreement_scores(ratings[compared], others[compared]),
            people=people,
            game_pairs=len(game_items),
        )
        coverage = Counter(min(stored.get(item_id, 0), 3) for item_id in game_items)
        final_coverage = Counter(min(len(final.get(item_id, [])), 3) for item_id in game_items)
        progress(90, "Annotator reliability (Dawid-Skene)")
        reliability = _reliability(rows, people, levels=levels)
        progress(93, "Ratings by system")
        systems = systems_section(study, final)
        progress(95, "Done")
        return {
            "levels": levels,
            "collapse_top": config.collapse_top,
            "repetitions": repetitions,
            "distribution": [
                {"level": lv, "label": rules.SCALE_LABELS.get(lv, ""), "pairs": histogram[lv]}
                for lv in range(1, levels + 1)
            ],
            "agreement": agreement,
            "agreement_error": agreement_error,
            "included": {
                "pairs": len(pair_ratings),
                "pairs_virtual": sum(1 for r in pair_ratings if len(r) >= 3),
                "players": len(final_players),
                "ratings": sum(len(r) for r in pair_ratings),
                "game_ratings": sum(stored.values()),
            },
            "coverage": [
                {"label": label, "pairs": coverage.get(k, 0), "final": final_coverage.get(k, 0)}
                for k, label in enumerate(("0", "1", "2", "3 or more"))
            ],
            "game_pairs": len(game_items),
            # Each system's mean rating and the differences between systems (issue 26;
            # annotation/modes/vicr/systems.py), from the final view.
            "systems": systems,
            "players": players,
            # Imported datasets (services/datasets.py) stand one participant per rating
            # position (a pair's first, second, ... rating): per-player rows describe
            # positions, not people.
            "imported": any(person["state"].get("imported") for person in people.values()),
            "rasch": competency,
            "reliability": reliability,
            # Catch trials (annotation.modes.catch): share caught per transformation and
            # gamma, and the players the exclusion rule flagged; empty when there are none.
            "catch": catch.report_section(study.pk, people=people),
        }

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name == "rating-distribution":
            return _distribution_figure(result)
        if name == "wright-map":
            return _wright_map(result.get("rasch"))
        if name == SYSTEMS_FIGURE:
            return systems_figure(result.get("systems"))
        raise KeyError(name)


def _reliability(
    rows: list[tuple[int, int, Any, int, bool]], people: dict[int, dict[str, Any]], *, levels: int
) -> dict[str, Any]:
    """Dawid-Skene over every stored game rating (excluded ones too: the model judges
    workers, not pairs); pairs rated by one player only carry no evidence and drop out."""
    imported = any(person["state"].get("imported") for person in people.values())
    return reliability_section(
        ((participant_id, item_id, int(rating)) for item_id, participant_id, rating, _, _ in rows),
        pseudonyms={pk: person["pseudonym"] for pk, person in people.items()},
        note=(
            f"Each player's competence (the chance their 1-{levels} rating equals a pair's "
            "true level) and confusion matrix, estimated from every stored game rating of "
            "pairs that two or more players rated, excluded ratings included"
            + (" (imported dataset: each player is a rating position)" if imported else "")
        ),
    )


def _score(state: dict[str, Any]) -> int:
    return int((state.get("player") or {}).get("score", 0))


def _distribution_figure(result: dict[str, Any]) -> Figure:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5, 3.2))
    axes = figure.subplots()
    levels = [row["level"] for row in result["distribution"]]
    pairs = [row["pairs"] for row in result["distribution"]]
    axes.bar(levels, pairs, color="#0b57d0", width=0.7)
    axes.set_xticks(levels)
    axes.set_xlabel("Rounded mean rating of the pair")
    axes.set_ylabel("Pairs")
    axes.set_title("Rating distribution")
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure


def _masked(values: np.ma.MaskedArray, index: int) -> float | None:
    return None if np.ma.is_masked(values[index]) else float(values[index])


def _flag(infit: float | None, outfit: float | None) -> str:
    """Linacre's conventional ranges (``rubrics.rasch.MISFIT_HIGH`` and ``MISFIT_LOW``)."""
    fits = [value for value in (infit, outfit) if value is not None]
    if any(value > rasch.MISFIT_HIGH for value in fits):
        return "noisy"
    if any(value < rasch.MISFIT_LOW for value in fits):
        return "too predictable"
    return ""


def _competency(
    players: np.ndarray,
    pairs: np.ndarray,
    scores: np.ndarray,
    *,
    people: dict[int, dict[str, Any]],
    game_pairs: int,
) -> dict[str, Any]:
    """The Rasch model of agreement scores: players, pairs, thresholds and the Wright map."""
    try:
        model = rasch.fit(players, pairs, scores, max_score=2, max_iterations=RASCH_MAX_ITERATIONS)
    except ValueError as exc:
        if players.size == 0:
            reason = "no game rating has another rater on its pair yet"
        else:
            reason = str(exc)
        return {"error": reason}
    offsets = rasch.thurstonian_thresholds(model.thresholds)
    extreme_words = {1: "all exact", -1: "none close", 0: ""}
    player_rows = []
    facet = model.persons
    for index, pk in enumerate(facet.ids.tolist()):
        infit, outfit = _masked(facet.infit, index), _masked(facet.outfit, index)
        player_rows.append(
            {
                "pseudonym": people[pk]["pseudonym"],
                "status": people[pk]["status"],
                "measure": _masked(facet.measure, index),
                "se": _masked(facet.se, index),
                "infit": infit,
                "outfit": outfit,
                "responses": int(facet.responses[index]),
                "extreme": extreme_words[int(facet.extreme[index])],
                "flag": _flag(infit, outfit),
            }
        )
    player_rows.sort(
        key=lambda row: (row["measure"] is None, -(row["measure"] or 0.0), row["pseudonym"])
    )
    items = model.items
    measured = ~np.ma.getmaskarray(items.measure)
    measures = np.ma.getdata(items.measure)[measured]
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
    hardest = [
        {
            "position": found[pk][0] + 1,
            "caption": captions.get(found[pk][1], ""),
            "measure": float(np.ma.getdata(items.measure)[where[pk]]),
            "se": _masked(items.se, where[pk]),
            "responses": int(items.responses[where[pk]]),
            "extreme": extreme_words[int(items.extreme[where[pk]])],
        }
        for pk in hardest_ids
    ]
    player_measures = np.array([r["measure"] for r in player_rows if r["measure"] is not None])
    aa, ea = measures + offsets[0], measures + offsets[1]
    low = float(min(player_measures.min(initial=np.inf), aa.min(initial=np.inf)))
    high = float(max(player_measures.max(initial=-np.inf), ea.max(initial=-np.inf)))
    width = max(MAP_BIN_LOGITS, (high - low) / MAP_MAX_BINS)
    start = np.floor(low / width) * width
    edges = start + width * np.arange(int(np.ceil((high - start) / width)) + 2)
    return {
        "error": "",
        "converged": model.converged,
        "iterations": model.iterations,
        "max_iterations": RASCH_MAX_ITERATIONS,
        "subsets": model.subsets,
        "responses": int(scores.size),
        "thresholds": [
            {"label": label, "andrich": float(tau), "se": float(se), "offset": float(offset)}
            for label, tau, se, offset in zip(
                THRESHOLD_LABELS, model.thresholds, model.threshold_se, offsets, strict=True
            )
        ],
        "players": player_rows,
        "misfits": sum(1 for row in player_rows if row["flag"]),
        "pairs": {
            "measured": int(measured.sum()),
            "unmeasured": game_pairs - int(measured.sum()),
            "all_exact": int(np.count_nonzero(items.extreme == 1)),
            "none_close": int(np.count_nonzero(items.extreme == -1)),
            "hardest": hardest,
        },
        "map": {
            "edges": edges.tolist(),
            "players": np.histogram(player_measures, edges)[0].tolist(),
            "aa": np.histogram(aa, edges)[0].tolist(),
            "ea": np.histogram(ea, edges)[0].tolist(),
        },
    }


def _wright_map(competency: dict[str, Any] | None) -> Figure:
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
