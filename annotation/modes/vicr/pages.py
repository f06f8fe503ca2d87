"""The VICR game's pages: the pair to rate, the feedback after each rating, the leaderboard.

A pair's truth is shown only on the feedback of that pair, after it is answered: the item
page is handed the caption's text, never the caption row (which carries the truth).
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.db.models import IntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone

from annotation.models import Assignment, Caption, Judgment, Participant
from annotation.modes.base import Pages
from annotation.modes.vicr.protocol import BLOCK_KINDS, GAME, player_state
from rubrics import vicr as rules


class VicrPages(Pages):
    intro_template = "modes/vicr/intro.html"
    item_template = "modes/vicr/item.html"
    feedback_template = "modes/vicr/feedback.html"
    finished_template = "modes/vicr/finished.html"

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        return {"rating": post.get("rating")}

    def item_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        # The services and views hand the lease over with its participant (freshly read,
        # with the study) already loaded.
        participant = assignment.participant
        config = self.mode.settings(participant.study)
        caption = Caption.objects.select_related("image").get(pk=assignment.item.spec["caption_id"])
        state = participant.state or {}
        player = player_state(participant)
        kind = assignment.item.kind
        progress: dict[str, Any] = {
            "kind": kind,
            "score": player.score,
            "game_total": state.get("game_total", 0),
        }
        if kind in BLOCK_KINDS:
            progress["number"] = len(state.get("block", [])) + 1
            progress["of"] = config.block_pairs(kind)
            progress["attempt"] = player.probation_attempts + 1
            progress["max_attempts"] = config.max_probation_attempts
        waited = (timezone.now() - assignment.served_at).total_seconds()
        remaining = max(0.0, float(config.seconds_before_submit) - waited)
        levels = config.scale_levels
        return {
            # The text only: the caption row carries the truth, and a pair's truth is shown
            # only after it is answered (on the feedback page).
            "caption": {"text": caption.text},
            "image": caption.image,
            "image_url": (settings.MEDIA_URL + caption.image.display)
            if caption.image.display
            else "",
            "alt_text": caption.image.alt_text or "Image to rate",
            "levels": [
                rules.SCALE[level] for level in sorted(rules.SCALE, reverse=True) if level <= levels
            ],
            "progress": progress,
            "remaining_seconds": math.ceil(remaining * 10) / 10,
            "minimum_seconds": config.seconds_before_submit,
        }

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        result = judgment.result
        participant = judgment.participant
        phase = judgment.item.kind
        context: dict[str, Any] = {
            "result": result,
            "rating": judgment.payload["rating"],
            "phase": phase,
            "transition": result.get("transition"),
            "score_after": result.get("score_after", 0),
            "scale": rules.SCALE,
        }
        if phase in BLOCK_KINDS:
            caption = Caption.objects.only("truth", "explanation").get(
                pk=judgment.item.spec["caption_id"]
            )
            context["explanation"] = caption.explanation
            context["truth_text"] = rules.SCALE[result["truth"]].label
        elif result.get("consensus"):
            context["consensus_text"] = rules.SCALE[result["consensus"]].label
        context.update(self.leaderboard(participant))
        return context

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        state = participant.state or {}
        player = player_state(participant)
        context = {
            "phase": player.phase,
            "score": player.score,
            "game_total": state.get("game_total", 0),
        }
        context.update(self.leaderboard(participant))
        return context

    def leaderboard(self, participant: Participant) -> dict[str, Any]:
        """Top players in the game by running score (two queries, whatever the study size).

        Tied players share a rank (standard competition ranking: 12, 9, 9, 7 rank 1, 2, 2, 4);
        among tied players the earlier participant is listed first.
        """
        size = self.mode.settings(participant.study).leaderboard_size
        if not size:
            return {}
        players = Participant.objects.filter(study_id=participant.study_id, status=GAME).annotate(
            game_score=Cast(KT("state__player__score"), IntegerField())
        )
        top = list(
            players.order_by("-game_score", "pk").values_list("pk", "pseudonym", "game_score")[
                :size
            ]
        )
        # Standard competition ranks (1, 1, 3): within the top, which is sorted by score,
        # every higher score is above, so a rank counts the higher scores shown.
        ranks = rules.competition_ranks([score or 0 for _, _, score in top])
        rows = [
            {"rank": rank, "pseudonym": pseudonym, "score": score, "me": pk == participant.pk}
            for rank, (pk, pseudonym, score) in zip(ranks, top, strict=True)
        ]
        own_rank = None
        if participant.status == GAME:
            # Asked even when the player is on the board, so every page costs the same queries.
            # 1 + the players above: a tie shares the rank, as on the board.
            own_score = player_state(participant).score
            own_rank = players.filter(game_score__gt=own_score).count() + 1
            if any(row["me"] for row in rows):
                own_rank = None
        return {
            "leaderboard": rows,
            "own_rank": own_rank,
            "own_score": player_state(participant).score,
        }
