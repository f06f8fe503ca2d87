"""The VICR game's pages: the pair to rate, the feedback after each rating, the leaderboard.

A pair's truth is shown only on the feedback of that pair, after it is answered: the item
page is handed the caption's text, never the caption row (which carries the truth).
"""

from __future__ import annotations

import math
import time
from functools import cache
from typing import Any

from django.core.cache import cache as django_cache
from django.db.models import IntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from annotation import storage
from annotation.models import Assignment, Judgment, Participant, Study
from annotation.modes.base import Pages
from annotation.modes.vicr import captions as caption_data
from annotation.modes.vicr.protocol import BLOCK_KINDS, CATCH, GAME, pair_caption, player_state
from rubrics import vicr as rules

#: Seconds the other players' scores on the leaderboard may be old (``standings``).
LEADERBOARD_SECONDS = 5

#: The minus sign (U+2212): a hyphen is not a minus to a reader or to a screen reader.
MINUS = "\u2212"


def signed(value: int) -> SafeString:
    """A whole number as the pages show it (``−1``, with a true minus sign); a negative one
    carries ``minus 1`` for screen readers, which may skip or misread the sign."""
    if value < 0:
        return format_html(
            '<span aria-hidden="true">{}</span><span class="visually-hidden">minus {}</span>',
            f"{MINUS}{-value}",
            -value,
        )
    return format_html("{}", value)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def consensus_basis(result: dict[str, Any], *, catch: bool = False) -> str:
    """What a game rating's consensus rested on, in words (never "0 player ratings").

    The pool holds earlier game ratings of people and the pair's starting ratings: the
    machine predictions a fresh pair is primed with, or a catch trial's fixed ratings.
    Both are called "starting ratings", whatever ``catch`` says (kept for callers): a
    word only catch trials got made them recognisable after the first one, and the
    player would then answer the next ones differently (issue 29, row 8).
    """
    humans = result.get("pool_human") or 0
    reference = result.get("pool_primed") or 0
    if not humans and not reference:
        return "No one has rated this pair before you, so there is no consensus yet."
    starting = _plural(reference, "starting rating")
    if not humans:
        return (
            f"No other player has rated this pair yet: the consensus rests only on {starting} "
            "made before any player rated it."
        )
    people = _plural(humans, "earlier player rating")
    if not reference:
        return f"The consensus rests on {people}."
    return f"The consensus rests on {people} and {starting}."


def reason_text(result: dict[str, Any]) -> str:
    """Algorithm 1's reason, naming the ratings it compares as what they are: with no
    player before, "the raters so far all agreed" would speak of people who do not exist."""
    reason = str(result.get("reason") or "")
    if result.get("pool_human"):
        return reason.replace("the raters so far", "the ratings so far").replace(
            "raters disagreed", "the ratings disagreed"
        )
    return reason.replace("the raters so far all agreed", "the starting ratings all agree").replace(
        "raters disagreed", "the starting ratings disagree"
    )


def scale_levels(levels: int) -> list[rules.ScaleLevel]:
    """The levels of a ``levels``-point scale, best first, as the pair page lists them."""
    return [rules.SCALE[level] for level in sorted(rules.SCALE, reverse=True) if level <= levels]


@cache
def rating_guide(levels: int) -> SafeString:
    """The rating guide of a ``levels``-point scale, as HTML.

    Every pair page shows it twice (in its dialog, and for readers without JavaScript), and
    its words are fixed: rendered once per scale and process, not twice a request (issue 27).
    """
    return render_to_string("modes/vicr/_guide.html", {"guide_levels": scale_levels(levels)})


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
        caption = pair_caption(assignment.item)
        state = participant.state or {}
        player = player_state(participant)
        # A catch trial is a game pair to the player: same page, its own text (modes/catch.py).
        catch = assignment.item.spec.get("catch")
        kind = GAME if catch else assignment.item.kind
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
        else:
            # The game: this pair's number, and for a crowd worker how many ratings earn
            # the completion code (a catch trial is a game pair to the player).
            progress["number"] = progress["game_total"] + 1
            if participant.source != Participant.Source.ACCOUNT:
                progress["of"] = config.completion_game_ratings
        progress["score_text"] = signed(player.score)
        waited = (timezone.now() - assignment.served_at).total_seconds()
        remaining = max(0.0, float(config.seconds_before_submit) - waited)
        levels = config.scale_levels
        return {
            # The text only: the caption row carries the truth, and a pair's truth is shown
            # only after it is answered (on the feedback page).
            "caption": {"text": catch["text"] if catch else caption.text},
            "image": caption.image,
            "image_url": storage.display_url(caption.image.display)
            if caption.image.display
            else "",
            "alt_text": caption.image.alt_text or "Image to rate",
            "levels": scale_levels(levels),
            "guide": rating_guide(levels),
            "progress": progress,
            "remaining_seconds": math.ceil(remaining * 10) / 10,
            "minimum_seconds": config.seconds_before_submit,
        }

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        result = judgment.result
        participant = judgment.participant
        # A catch trial is a game pair to the player: its feedback must not tell it apart.
        phase = GAME if judgment.item.kind == CATCH else judgment.item.kind
        # The pair is shown again beside the outcome: the rating is judged against it.
        spec = judgment.item.spec
        caption = pair_caption(judgment.item)
        # What the pair page showed: a catch trial's altered text, on the item's image.
        shown_text = (spec.get("catch") or {}).get("text") or caption.text
        # A pair's image is usually its caption's, which came with the caption's row: asking
        # for the same row again would cost a query per rating (issue 27).
        item_image_id = judgment.item.image_id
        image = caption.image if item_image_id in (None, caption.image_id) else judgment.item.image
        context: dict[str, Any] = {
            "result": result,
            "rating": judgment.payload["rating"],
            "phase": phase,
            "transition": result.get("transition"),
            "score_after": result.get("score_after", 0),
            "score_text": signed(result.get("score_after", 0)),
            "points_text": signed(result.get("points", 0)),
            "points_word": "point" if abs(result.get("points", 0)) == 1 else "points",
            "scale": rules.SCALE,
            "caption": {"text": shown_text},
            "image": image,
            "image_url": storage.display_url(image.display) if image.display else "",
            "alt_text": image.alt_text or "The image you rated",
        }
        if phase == GAME:
            context["basis"] = consensus_basis(result, catch=judgment.item.kind == CATCH)
            context["reason"] = reason_text(result)
        if phase in BLOCK_KINDS:
            context["explanation"] = caption_data.explanation(caption)
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
            "score_text": signed(player.score),
            "game_total": state.get("game_total", 0),
        }
        context.update(self.leaderboard(participant))
        return context

    def leaderboard(self, participant: Participant, *, now: float | None = None) -> dict[str, Any]:
        """Top players in the game by running score, and the player's own rank.

        Tied players share a rank (standard competition ranking: 12, 9, 9, 7 rank 1, 2, 2, 4);
        among tied players the earlier participant is listed first. The other players' scores
        come from ``standings`` (at most ``LEADERBOARD_SECONDS`` old, no query when cached);
        the player's own score is always the live one, so the page never contradicts the
        score it shows beside the board.
        """
        size = self.mode.settings(participant.study).leaderboard_size
        if not size:
            return {}
        board = standings(participant.study, size, now=now)
        own_score = player_state(participant).score
        in_game = participant.status == GAME
        others = [row for row in board["top"] if row[0] != participant.pk]
        if in_game:
            others.append((participant.pk, participant.pseudonym, own_score))
        top = sorted(others, key=lambda row: (-row[2], row[0]))[:size]
        # Standard competition ranks (1, 1, 3): within the top, which is sorted by score,
        # every higher score is above, so a rank counts the higher scores shown.
        ranks = rules.competition_ranks([score for _, _, score in top])
        rows = [
            {
                "rank": rank,
                "pseudonym": pseudonym,
                "score": score,
                "score_text": signed(score),
                "me": pk == participant.pk,
            }
            for rank, (pk, pseudonym, score) in zip(ranks, top, strict=True)
        ]
        own_rank = None
        if in_game and not any(row["me"] for row in rows):
            # 1 + the other players above: a tie shares the rank, as on the board.
            own_rank = 1 + sum(
                1
                for pk, score in board["scores"].items()
                if score > own_score and pk != participant.pk
            )
        return {
            "leaderboard": rows,
            "own_rank": own_rank,
            "own_score": own_score,
            "own_score_text": signed(own_score),
        }


def standings(study: Study, size: int, *, now: float | None = None) -> dict[str, Any]:
    """The study's players in the game: the best ``size + 1`` as (pk, pseudonym, score), best
    first, and every player's score by pk; one query, then cached.

    Every rating's feedback page and the POST that answers it show the board (issue 48: two
    of the POST's thirteen queries), yet its order changes by a point at a time; so it is
    kept in Django's cache (the project configures none: the per-process memory cache, so
    each gunicorn worker reads it once per period) under the study's ``public_id`` (unique
    for ever, unlike a pk that SQLite may hand out again) and served while younger than
    ``LEADERBOARD_SECONDS``. The age is checked against ``now`` (seconds since the epoch;
    the clock by default) as well as by the cache's timeout, so no backend can serve it
    older. One row beyond ``size`` is kept because the viewer's own row is replaced by
    their live score, and the top ``size`` of the others is then still known. No write
    needs to bump it sooner: pseudonyms never change, no service deletes a player, and a
    player who leaves the game leaves the others' boards within the period (their own at
    once, since their own status is read live).
    """
    now = time.time() if now is None else now
    key = f"vicr-leaderboard:{study.public_id}:{size}"
    cached = django_cache.get(key)
    if cached is not None and 0 <= now - cached["at"] < LEADERBOARD_SECONDS:
        return cached
    rows = [
        (pk, pseudonym, score or 0)
        for pk, pseudonym, score in Participant.objects.filter(study_id=study.pk, status=GAME)
        .annotate(game_score=Cast(KT("state__player__score"), IntegerField()))
        .values_list("pk", "pseudonym", "game_score")
    ]
    rows.sort(key=lambda row: (-row[2], row[0]))
    board = {
        "at": now,
        "top": rows[: size + 1],
        "scores": {pk: score for pk, _, score in rows},
    }
    django_cache.set(key, board, timeout=LEADERBOARD_SECONDS)
    return board
