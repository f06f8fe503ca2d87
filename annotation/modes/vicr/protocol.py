"""The VICR game's protocol: settings, items, the gates, scoring and the phase machine.

The protocol rules (points, consensus, priming, Algorithm 1, the phase machine and the
virtual-rater statistics) live in ``rubrics.vicr``; this module maps them onto the shared
data model.

Items. One ``Item`` per caption, ``spec = {"caption_id": ...}``, ``kind`` from the caption's
purpose: ``tutorial`` and ``probation`` (pools in import order; any player may get any of
them, so their ``target`` is ``UNLIMITED``) and ``game`` (shuffled with the study seed,
``target`` = ``max_ratings``; the assignment service serves the least-rated pairs first, so
every pair reaches ``min_ratings`` before any goes beyond it). A judgment's phase is its
item's kind.

Gates. A player's tutorial is ``tutorial_pairs`` pairs drawn from the tutorial pool, and each
probation attempt ``probation_pairs`` pairs from the probation pool, in an order of the
player's own (``rubrics.vicr.block_draw``, from the study seed and the participant id), and
no attempt repeats a pair of an earlier one. Why: the feedback shows each pair's truth, so
pairs shared by every player (or served again on a retry) could be learned by one id and
replayed by another, or by the same id. ``eligible_items`` offers exactly the next pair of
the draw, so the order is the draw's; the draw is recomputed, never stored. The pools must
hold ``gate_pool_multiple`` times one player's draw, and a player whose gate answers beat
their first game by ``replay_gap`` is flagged (``gates``); adaptive stopping is in
``stopping``.

Players. ``Participant.status`` is the phase (``tutorial``, ``probation``, ``game``,
``excluded``), and the only place it is kept; a participant who has not rated yet still has
the generic initial status and is in the tutorial. ``Participant.state`` holds::

    {"player": {"probation_attempts", "score", "game_ratings"},  # rubrics PlayerState
     "block": [points of the tutorial or probation attempt under way],
     "tutorial_score": int | None, "probation_scores": [int per finished attempt],
     "game_total": game ratings over all stays, "game_points": their points over all stays}

Every lease is assignment round 0: the assignment service then never serves one player the
same pair twice, a second guard behind the disjoint draws. The score of a game rating is
computed with the item row locked, from the game ratings committed before it (plus the
primed ratings the priming rule keeps).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from django.db.models import QuerySet

from annotation.errors import Conflict
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study, rows
from annotation.modes import catch
from annotation.modes.base import CompletionProgress, Mode, Outcome, parse_choice
from annotation.modes.vicr import captions as caption_data
from annotation.modes.vicr.gates import (
    REPLAY_HOLD,
    _block_transition,
    _first_game_transition,
    gate_screen_out,
    pool_needed,
    replay_flags,
)

# The stopping rule lives in its own module; its names stay importable from here.
from annotation.modes.vicr.settings import (  # noqa: F401
    BLOCK_KINDS,
    PROBATION,
    TUTORIAL,
    VicrSettings,
)
from annotation.modes.vicr.stopping import (  # noqa: F401
    ADAPTIVE_FIT_MAX_RATINGS,
    ADAPTIVE_FIT_MIN_PAIRS,
    adaptive_rater_model,
    adaptive_stop,
)
from rubrics import catch as catch_rules
from rubrics import vicr as rules

GAME, EXCLUDED = "game", "excluded"
CATCH = catch.CATCH
#: A catch trial is scored as a game pair primed with two ratings of 1 ("Wrong"), the
#: priming rule's pool size: 1 earns 2 points, 2 earns 0, 3 loses 1, 4 and 5 lose 2.
CATCH_POOL = (1, 1)
#: A control (an untouched human caption, issue 29) is primed high instead: two ratings of
#: 4 ("Mostly complete"), on either scale (4 levels when 4 and 5 are merged).
CONTROL_POOL = (4, 4)
PHASES = frozenset(str(phase) for phase in rules.Phase)
#: Target of tutorial and probation items: every player rates them, so capacity never binds
#: (the largest value a PostgreSQL integer column holds).
UNLIMITED = 2**31 - 1


def round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def _primed(caption_primes: Iterable[Any]) -> list[int]:
    """Primed ratings as the integers the priming rule needs.

    The caption import accepts real-valued machine predictions (e.g. 3.7); they are rounded
    half up to the nearest level so that a prime counts like a rating.
    """
    return [min(5, max(1, round_half_up(float(value)))) for value in caption_primes]


def pair_caption(item: Item) -> Caption:
    """The caption a pair asks about, with its image, read once per item row in hand.

    Scoring a rating and the feedback page after it both need the caption (issue 27: a
    query less per rating): the submission service hands both the item row it locked, so
    the row carries it from one to the other. Captions do not change once a study is open.
    """
    cached = item.__dict__.get("_pair_caption")
    if cached is None or cached.pk != item.spec["caption_id"]:
        # One fixed statement: built by the ORM, this read cost a tenth of a rating page's
        # CPU (issue 48).
        cached = rows.by_pk(Caption, item.spec["caption_id"], related="image")
        item.__dict__["_pair_caption"] = cached
    return cached


#: A game pair's caption with its image (``pair_caption``'s read) and the ratings that
#: count (its judgments not excluded), in one statement for ``score`` (issue 48: a rating's
#: answer made the two reads one after the other; built by the ORM each cost more than the
#: database its work): the caption's row first (``0``), then a row per rating (``1``, its
#: judgment id, its payload) in commit order, the other columns NULL. Params: caption id,
#: item id.
SCORED = """SELECT 0, NULL, NULL, {caption}
UNION ALL
SELECT 1, j."id", j."payload", {nulls} FROM "{judgments}" j
WHERE j."item_id" = %s AND NOT j."excluded"
ORDER BY 1, 2"""


def caption_and_ratings(item: Item) -> tuple[Caption, list[Any]]:
    """A game pair's caption (as ``pair_caption`` gives it, and kept on the item row as it
    keeps it) and the ratings that count, oldest first, in one statement (``SCORED``)."""
    caption_sql, width = rows.by_pk_statement(Caption, "image")
    sql = SCORED.format(
        caption=caption_sql.removeprefix("SELECT "),
        nulls=", ".join(["NULL"] * width),
        judgments=Judgment._meta.db_table,
    )
    with rows.cursor() as cursor:
        cursor.execute(sql, [item.spec["caption_id"], item.pk])
        found = cursor.fetchall()
    if not found or found[0][0] != 0:
        raise Caption.DoesNotExist("Caption matching query does not exist.")
    caption = rows.by_pk_instance(Caption, found[0][3:], related="image")
    item.__dict__["_pair_caption"] = caption
    ratings = [rows.converted(Judgment, ("payload",), (row[2],))[0] for row in found[1:]]
    return caption, [payload.get("rating") for payload in ratings]


def player_state(participant: Participant) -> rules.PlayerState:
    """The player's place in the phase machine: the phase from the status, the rest from state.

    A status that is no phase (the generic initial one) means the player has not rated yet,
    so is in the tutorial.
    """
    raw = (participant.state or {}).get("player") or {}
    status = participant.status
    return rules.PlayerState(
        phase=rules.Phase(status) if status in PHASES else rules.Phase.TUTORIAL,
        probation_attempts=int(raw.get("probation_attempts", 0)),
        score=int(raw.get("score", 0)),
        game_ratings=int(raw.get("game_ratings", 0)),
    )


def _state_dict(state: rules.PlayerState) -> dict[str, Any]:
    """What ``state["player"]`` keeps; the phase goes to ``Participant.status`` instead."""
    return {
        "probation_attempts": state.probation_attempts,
        "score": state.score,
        "game_ratings": state.game_ratings,
    }


def _parse_rating(value: Any, levels: int) -> int:
    return parse_choice(
        value, low=1, high=levels, field="rating", message=f"Choose a rating from 1 to {levels}."
    )


class VicrProtocol(Mode):
    """Tutorial, probation and game over one pool of pairs per phase; see the module doc."""

    name = "vicr"
    label = "VICR rating game"
    settings_class = VicrSettings
    # One rating takes seconds; a crowd lease lapses after a few minutes so a pair left open
    # goes back to other players soon.
    crowd_lease_seconds = 5 * 60

    # ------------------------------------------------------------------ items

    def build_items(self, study: Study) -> list[Item]:
        captions = list(
            Caption.objects.filter(study=study)
            .order_by("line", "id")
            .values_list("id", "image_id", "purpose")
        )
        by_purpose: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for caption_id, image_id, purpose in captions:
            by_purpose[purpose].append((caption_id, image_id))
        tutorial = by_purpose[TUTORIAL]
        probation = by_purpose[PROBATION]
        game = by_purpose[Caption.Purpose.STUDY]
        if not tutorial or not probation or not game:
            raise Conflict(
                "A VICR study needs tutorial pairs, probation pairs and game pairs "
                f"(found {len(tutorial)}, {len(probation)} and {len(game)}).",
            )
        # The stored settings are checked again: a study must not open with settings that
        # no longer pass (the pool rule below relies on them).
        self.clean_settings(study.settings or {})
        config = self.settings(study)
        # One player must be able to finish every block without meeting a pair twice, and
        # the pools must be large enough that one id's notes say little to the next
        # (gates.pool_needed).
        for kind, pool in ((TUTORIAL, tutorial), (PROBATION, probation)):
            needed, why = pool_needed(config, kind)
            if len(pool) < needed:
                raise Conflict(
                    f"The {kind} pool has {len(pool)} pairs but {why}: "
                    f"import more {kind} pairs or lower the setting.",
                )
        random.Random(study.seed).shuffle(game)
        rows = []
        for kind, pairs, target in (
            (TUTORIAL, tutorial, UNLIMITED),
            (PROBATION, probation, UNLIMITED),
            (GAME, game, config.max_ratings),
        ):
            rows += [
                Item(
                    study=study,
                    kind=kind,
                    image_id=image_id,
                    position=position,
                    spec={"caption_id": caption_id},
                    target=target,
                )
                for position, (caption_id, image_id) in enumerate(pairs)
            ]
        return rows

    # ------------------------------------------------------------------ serving

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        phase = player_state(participant).phase
        items = Item.objects.filter(study_id=participant.study_id)
        if phase == rules.Phase.EXCLUDED:
            return items.none()
        if phase in BLOCK_KINDS:
            # Only the next pair of the player's draw, so they get the draw's order.
            pair = self._next_block_pair(participant)
            return items.filter(pk=pair) if pair is not None else items.none()
        if not self.settings(participant.study).catch_rate:
            return items.filter(kind=GAME)
        # A catch trial reserved for the player comes first; the pairs its caption came
        # from are never served to them afterwards.
        reserved = catch.pending(participant)
        if reserved.exists():
            return reserved
        game = items.filter(kind=GAME)
        used = catch.used_sources(participant)
        return game.exclude(spec__caption_id__in=used) if used else game

    def _block_draw(self, participant: Participant) -> list[int]:
        """Item ids of the tutorial or probation attempt the player is in, in serving order.

        Empty when the pool is too small for this attempt (a study opened before the pool
        rule; ``build_items`` refuses such a study now): the player is then offered nothing
        rather than a pair seen before.
        """
        state = player_state(participant)
        kind = str(state.phase)
        pool = list(
            Item.objects.filter(study_id=participant.study_id, kind=kind)
            .order_by("position", "id")
            .values_list("id", flat=True)
        )
        try:
            positions = rules.block_draw(
                len(pool),
                pairs=self.settings(participant.study).block_pairs(kind),
                attempt=state.probation_attempts if kind == PROBATION else 0,
                study_seed=participant.study.seed,
                player=participant.pk,
                kind=kind,
            )
        except ValueError:
            return []
        return [pool[position] for position in positions]

    def _next_block_pair(self, participant: Participant) -> int | None:
        """The item id of the practice pair the player is at, or None when the draw is done."""
        done = len((participant.state or {}).get("block", []))
        draw = self._block_draw(participant)
        return draw[done] if done < len(draw) else None

    def current_round(self, participant: Participant) -> int:
        # Always 0, retries included: a retry draws new pairs (``_block_draw``), and one
        # round lets the assignment service refuse to serve a player any pair twice.
        return 0

    def min_seconds(self, assignment: Assignment) -> float:
        return float(self.settings(assignment.participant.study).seconds_before_submit)

    # ------------------------------------------------------------------ submissions

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        participant = assignment.participant
        levels = self.settings(participant.study).scale_levels
        phase = player_state(participant).phase
        kind = assignment.item.kind
        if phase == rules.Phase.EXCLUDED:
            raise Conflict("You can no longer rate pairs in this study; nothing was saved.")
        if kind == CATCH:
            kind = GAME  # a catch trial is a game pair to the player
        if kind != str(phase):
            raise Conflict(
                f"This is a {kind} pair, but you are in the {phase} now, so it cannot count "
                f"as a {phase} rating. Nothing was saved.",
            )
        if kind in BLOCK_KINDS and assignment.item_id != self._next_block_pair(participant):
            # Only the pair the draw is at counts, so nobody picks which pairs score.
            raise Conflict(
                f"This is not the {kind} pair you are at now, so it cannot count. Nothing was "
                f"saved.",
            )
        return {"rating": _parse_rating(data.get("rating"), levels)}

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        rating = payload["rating"]
        if item.kind == CATCH:
            made = item.spec["catch"]
            control = made["kind"] == catch_rules.CONTROL
            pool = CONTROL_POOL if control else CATCH_POOL
            result = _game_result(rules.score_rating(rating, pool), len(pool), 0)
            result["catch"] = {
                "kind": made["kind"],
                "gamma": made["gamma"],
                "caught": catch_rules.vicr_control_passed(rating)
                if control
                else catch_rules.vicr_caught(rating),
            }
            return result
        if item.kind not in BLOCK_KINDS:
            # The item row is locked: these are exactly the game ratings committed before
            # ours (the item is a game pair, so every rating of it is a game rating).
            caption, humans = caption_and_ratings(item)
            primed = _primed(caption_data.prime_ratings(caption))
            pool = rules.consensus_pool(humans, primed)
            return _game_result(rules.score_rating(rating, pool), len(pool), len(humans))
        # A tutorial or probation pair: scored against its known truth.
        truth = caption_data.truth(pair_caption(item))
        points = rules.tutorial_points(rating, truth)
        result = {"points": points, "truth": truth}
        if item.kind == PROBATION:
            # Every lease is round 0 now, so the attempt (1-based) is kept with the rating.
            result["attempt"] = player_state(assignment.participant).probation_attempts + 1
        return result

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        # The submission service holds the participant's row lock and gave ``participant``
        # the state and status as locked, so they are read from there, not again.
        config = self.settings(participant.study)
        state = dict(participant.state or {})
        before = player_state(participant)
        kind = judgment.item.kind
        points = judgment.result["points"]
        transition: dict[str, Any] | None = None
        if kind in BLOCK_KINDS:
            block = [*state.get("block", []), points]
            if len(block) >= config.block_pairs(kind):
                after = rules.next_state(before, block, config.phase_rules())
                total = sum(block)
                if kind == TUTORIAL:
                    state["tutorial_score"] = total
                else:
                    state["probation_scores"] = [*state.get("probation_scores", []), total]
                transition = _block_transition(kind, after, total, 2 * len(block), config)
                block = []
            else:
                after = before
            state["block"] = block
        else:
            after = rules.next_state(before, points, config.phase_rules())
            state["game_total"] = state.get("game_total", 0) + 1
            state["game_points"] = state.get("game_points", 0) + points
            if after.phase != rules.Phase.GAME:
                transition = _first_game_transition(before.score + points, after, config)
        state["player"] = _state_dict(after)
        catch_fields = self._catch_outcome(participant, judgment, config, after)
        if kind in (GAME, CATCH):  # both count towards game_total
            flags = replay_flags(participant, judgment, config)
            if flags:
                catch_fields["flags"] = (*catch_fields.get("flags", ()), *flags)
                # Flagged, the code waits for the researcher's review (issue 45, row 6).
                catch_fields["hold"] = REPLAY_HOLD
        if after.phase == rules.Phase.EXCLUDED and before.phase != rules.Phase.EXCLUDED:
            # The gates are VICR's entry check: a player they turn away is screened out.
            catch_fields.setdefault("screen_out", gate_screen_out(kind, before, config))
        outcome = Outcome(
            state=state,
            status=str(after.phase),
            result={
                "score_after": after.score,
                "phase_after": str(after.phase),
                **({"transition": transition} if transition else {}),
            },
            **catch_fields,
        )
        if kind == GAME and config.adaptive_stopping:
            kept = not (outcome.exclusion or outcome.exclude_participant)
            stop = adaptive_stop(judgment, config, counts_this=kept)
            if stop is not None:
                outcome = replace(
                    outcome,
                    item_target=stop["item_target"],
                    result={**outcome.result, "adaptive": stop["result"]},
                )
        return outcome

    def _catch_outcome(
        self,
        participant: Participant,
        judgment: Judgment,
        config: VicrSettings,
        after: rules.PlayerState,
    ) -> dict[str, Any]:
        """The catch-trial parts of the outcome: the exclusion rule after a catch trial, and
        maybe the next catch trial after a game rating (see ``annotation.modes.catch``)."""
        kind = judgment.item.kind
        fields: dict[str, Any] = {}
        if kind == CATCH:
            fields = catch.rule_outcome(
                participant,
                caught=judgment.result["catch"]["caught"],
                kind=judgment.result["catch"]["kind"],
                min_seen=config.catch_min_seen,
                max_missed_share=config.catch_max_missed_share,
            )
        elif catch.is_flagged(participant):
            fields = {"exclusion": catch.LATER_REASON}
        if kind == GAME and config.catch_rate and after.phase == rules.Phase.GAME:
            draw = participant.state.get("game_total", 0) if participant.state else 0
            made = catch.new_catch_item(
                participant,
                rate=config.catch_rate,
                gammas=catch_rules.parse_gammas(config.catch_gammas),
                caption_ids_of=lambda spec: [spec["caption_id"]] if "caption_id" in spec else [],
                draw=draw,
            )
            if made is not None:
                fields["new_items"] = (made,)
        return fields

    def completion_progress(self, participant: Participant) -> CompletionProgress:
        needed = self.settings(participant.study).completion_game_ratings
        phase = player_state(participant).phase
        done = (participant.state or {}).get("game_total", 0)
        note = {
            rules.Phase.TUTORIAL: "game ratings count once you pass the tutorial",
            rules.Phase.PROBATION: "game ratings count once you pass probation",
        }.get(phase, "")
        return CompletionProgress(done, needed, "game ratings", note)

    def completion_earned(self, participant: Participant) -> bool:
        # Earned by game ratings in good standing: the phase must be the game when the count
        # is reached, so a player the first-game check sends back to probation earns it only
        # after passing probation again, and an excluded player never does.
        if player_state(participant).phase != rules.Phase.GAME:
            return False
        needed = self.settings(participant.study).completion_game_ratings
        return (participant.state or {}).get("game_total", 0) >= needed


def _game_result(scored: rules.Score, pool_size: int, humans: int) -> dict[str, Any]:
    """A game rating's result: Algorithm 1's values and where the consensus pool came from."""
    human = min(humans, pool_size)
    return {
        "points": scored.points,
        "consensus": scored.consensus,
        "pool_size": pool_size,
        "pool_human": human,
        "pool_primed": pool_size - human,
        "n": scored.n,
        "var": scored.var,
        "v": scored.v,
        "d": scored.d,
        "reason": scored.reason,
    }
