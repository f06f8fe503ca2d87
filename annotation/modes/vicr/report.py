"""The VICR report: the paper's final view, its virtual-rater agreement and the players.

The final view holds the game ratings of players in good standing (status ``game``) that are
not flagged as excluded. Agreement is computed by ``rubrics.vicr.virtual_raters`` over the
final view's pairs; every player keeps a row, excluded ones included, so a researcher sees
who was left out and why.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from matplotlib.figure import Figure

from annotation.models import Item, Judgment, Participant, Study
from annotation.modes.base import Progress, Report
from annotation.modes.vicr.protocol import GAME
from rubrics import vicr as rules

AGREEMENT_LABELS = {
    "tau_x_yz": "τ X–YZ",
    "tau_y_xz": "τ Y–XZ",
    "tau_z_xy": "τ Z–XY",
    "kendall_w": "Kendall's W",
    "fleiss_kappa": "Fleiss' κ",
}


class VicrReport(Report):
    template = "modes/vicr/report.html"
    figure_names = ("rating-distribution",)

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
        progress(75, "Players")
        consensus = {item_id: rules.consensus(r) for item_id, r in final.items() if r}
        per_player: dict[int, dict[str, list]] = defaultdict(
            lambda: {"x": [], "r": [], "dwell": []}
        )
        counts: Counter[int] = Counter()
        for item_id, participant_id, rating, dwell, excluded in rows:
            if excluded:
                continue
            counts[participant_id] += 1
            per_player[participant_id]["dwell"].append(dwell)
            if item_id in consensus:
                per_player[participant_id]["x"].append(int(rating))
                per_player[participant_id]["r"].append(consensus[item_id])
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
                    "score": int((state.get("player") or {}).get("score", 0)),
                    "game_points": state.get("game_points", 0),
                    "tutorial_score": state.get("tutorial_score"),
                    "probation_attempts": int(
                        (state.get("player") or {}).get("probation_attempts", 0)
                    ),
                    "probation_scores": state.get("probation_scores", []),
                    "ratings": counts.get(pk, 0),
                    "exact": agreement_row["exact"] if agreement_row else None,
                    "adjacent": agreement_row["adjacent"] if agreement_row else None,
                    "median_dwell_s": (statistics.median(mine["dwell"]) / 1000) if mine else None,
                }
            )
        players.sort(key=lambda p: (-p["ratings"], p["pseudonym"]))
        coverage = Counter(min(stored.get(item_id, 0), 3) for item_id in game_items)
        final_coverage = Counter(min(len(final.get(item_id, [])), 3) for item_id in game_items)
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
            "players": players,
        }

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name != "rating-distribution":
            raise KeyError(name)
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
