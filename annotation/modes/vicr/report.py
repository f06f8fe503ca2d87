"""The VICR report: the paper's final view, its virtual-rater agreement and the players.

The final view holds the game ratings of players in good standing (status ``game``) that are
not flagged as excluded. Agreement is computed by ``rubrics.vicr.virtual_raters`` over the
final view's pairs; every player keeps a row, excluded ones included, so a researcher sees
who was left out and why.

:meth:`VicrReport.run` composes small estimators, each returning a frozen result that it
serialises here, at the edge, into the stored JSON:

* ``annotation/modes/vicr/final_view.py``: what is read, the final view, the rating
  distribution and the virtual-rater agreement;
* ``annotation/modes/vicr/players.py``: each player against the consensus of the *other*
  raters of each pair (``rubrics.vicr.consensus_of_others``);
* ``annotation/modes/vicr/competency.py``: the same comparisons, scored as in VICR section 4
  (2 exact, 1 adjacent, 0 otherwise), in the rater-competency model (``rubrics.rasch``):
  players and pairs on one logit scale, drawn as a Wright map, with infit and outfit;
* ``annotation/modes/vicr/systems.py``: each system's mean rating over its pairs in the
  final view and the paired differences between systems, with bootstrap intervals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# matplotlib (about 30 MB) is imported where a figure is drawn, not here: the export path
# imports this module through the mode registry and must stay inside its memory budget
# (issue 27; tests/annotation/test_exports.py checks it).
from annotation.models import Judgment, Study
from annotation.modes import catch
from annotation.modes.base import Progress, Report
from annotation.modes.reliability import reliability_section
from annotation.modes.vicr import final_view as view
from annotation.modes.vicr.competency import (
    HARDEST_PAIRS,
    MAP_BIN_LOGITS,
    MAP_MAX_BINS,
    RASCH_MAX_ITERATIONS,
    THRESHOLD_LABELS,
    competency,
    wright_map,
)
from annotation.modes.vicr.final_view import AGREEMENT_LABELS, GameRatings
from annotation.modes.vicr.players import compare_with_others, player_table
from annotation.modes.vicr.protocol import GAME
from annotation.modes.vicr.systems import FIGURE as SYSTEMS_FIGURE
from annotation.modes.vicr.systems import systems_figure, systems_section

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "AGREEMENT_LABELS",
    "HARDEST_PAIRS",
    "MAP_BIN_LOGITS",
    "MAP_MAX_BINS",
    "RASCH_MAX_ITERATIONS",
    "THRESHOLD_LABELS",
    "VicrReport",
]


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
        data = view.load(study)
        progress(25, "Building the final view")
        final = view.final_view(data)
        progress(40, "Virtual raters")
        agreement = view.agreement(
            final.pair_ratings,
            repetitions=config.report_repetitions,
            seed=abs(study.seed) % 2**63,
            collapse_top=config.collapse_top,
            levels=levels,
        )
        progress(60, "Players")
        kept = data.kept
        comparisons = compare_with_others(kept, data.good, levels)
        players = player_table(data.people, kept, comparisons)
        progress(80, "Rater competency (Rasch model)")
        compared = comparisons.compared
        rasch_section = competency(
            comparisons.player_ids[compared],
            comparisons.item_ids[compared],
            comparisons.scores(),
            people=data.people,
            game_pairs=len(data.game_items),
        )
        progress(90, "Annotator reliability (Dawid-Skene)")
        reliability = _reliability(data, levels=levels)
        progress(93, "Ratings by system")
        systems = systems_section(study, final.final)
        progress(95, "Done")
        return {
            "levels": levels,
            "collapse_top": config.collapse_top,
            "repetitions": config.report_repetitions,
            "distribution": view.distribution(final.pair_ratings, levels),
            "agreement": agreement.as_rows(),
            "agreement_error": agreement.error,
            "included": final.included(),
            "coverage": final.coverage(data.game_items),
            "game_pairs": len(data.game_items),
            # Each system's mean rating and the differences between systems (issue 26;
            # annotation/modes/vicr/systems.py), from the final view.
            "systems": systems,
            "players": [row.as_dict() for row in players],
            # Imported datasets (services/datasets.py) stand one participant per rating
            # position (a pair's first, second, ... rating): per-player rows describe
            # positions, not people.
            "imported": data.imported,
            "rasch": rasch_section.as_dict(),
            "reliability": reliability,
            # Catch trials (annotation.modes.catch): share caught per transformation and
            # gamma, and the players the exclusion rule flagged; empty when there are none.
            "catch": catch.report_section(study.pk, people=data.people),
        }

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name == "rating-distribution":
            return _distribution_figure(result)
        if name == "wright-map":
            return wright_map(result.get("rasch"))
        if name == SYSTEMS_FIGURE:
            return systems_figure(result.get("systems"))
        raise KeyError(name)


def _reliability(data: GameRatings, *, levels: int) -> dict[str, Any]:
    """Dawid-Skene over every stored game rating (excluded ones too: the model judges
    workers, not pairs); pairs rated by one player only carry no evidence and drop out."""
    return reliability_section(
        (
            (participant_id, item_id, int(rating))
            for item_id, participant_id, rating, _, _ in data.rows
        ),
        pseudonyms={pk: person["pseudonym"] for pk, person in data.people.items()},
        note=(
            f"Each player's competence (the chance their 1-{levels} rating equals a pair's "
            "true level) and confusion matrix, estimated from every stored game rating of "
            "pairs that two or more players rated, excluded ratings included"
            + (" (imported dataset: each player is a rating position)" if data.imported else "")
        ),
    )


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
