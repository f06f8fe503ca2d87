"""The VICR rating game (PROTOCOLS.md section 2): tutorial, probation, game, report.

The protocol rules (points, consensus, priming, Algorithm 1, the phase machine and the
virtual-rater statistics) live in ``rubrics.vicr``; this module maps them onto the shared
data model.

Items. One ``Item`` per caption, ``spec = {"caption_id": ...}``, ``kind`` from the caption's
purpose: ``tutorial`` and ``probation`` (pools in import order; any player may get any of
them, so their ``target`` is ``UNLIMITED``) and ``game`` (shuffled with the study seed,
``target`` = ``max_ratings``; the assignment service serves the least-rated pairs first, so
every pair reaches ``min_ratings`` before any goes beyond it).

Gates. A player's tutorial is ``tutorial_pairs`` pairs drawn from the tutorial pool, and each
probation attempt ``probation_pairs`` pairs from the probation pool, in an order of the
player's own (``rubrics.vicr.block_draw``, from the study seed and the participant id), and
no attempt repeats a pair of an earlier one. Why: the feedback shows each pair's truth, so
pairs shared by every player (or served again on a retry) could be learned by one id and
replayed by another, or by the same id. ``eligible_items`` offers exactly the next pair of
the draw, so the order is the draw's; the draw is recomputed, never stored.

Players. ``Participant.status`` is the phase (``tutorial``, ``probation``, ``game``,
``excluded``; a participant who has not rated yet still has the generic initial status and
is in the tutorial). ``Participant.state`` holds::

    {"player": {"phase", "probation_attempts", "score", "game_ratings"},  # rubrics PlayerState
     "block": [points of the tutorial or probation attempt under way],
     "tutorial_score": int | None, "probation_scores": [int per finished attempt],
     "game_total": game ratings over all stays, "game_points": their points over all stays}

Every lease is assignment round 0: the assignment service then never serves one player the
same pair twice, a second guard behind the disjoint draws. The score of a game rating is
computed with the item row locked, from the game ratings committed before it (plus the
primed ratings the priming rule keeps).

Report ("final" view): game ratings of players in good standing (status ``game``) that are
not flagged as excluded.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any, ClassVar

from django.conf import settings
from django.db.models import IntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study
from annotation.modes.base import (
    JUDGMENT_FROM,
    JUDGMENT_SELECT,
    JUDGMENT_TRAILING,
    ExportColumn,
    ExportSql,
    Mode,
    Progress,
    SubmissionError,
    check_int,
    judgment_export_columns,
    judgment_trailing_columns,
    parse_choice,
    register,
)
from rubrics import vicr as rules

TUTORIAL, PROBATION, GAME, EXCLUDED = "tutorial", "probation", "game", "excluded"
BLOCK_KINDS = (TUTORIAL, PROBATION)
#: Target of tutorial and probation items: every player rates them, so capacity never binds
#: (the largest value a PostgreSQL integer column holds).
UNLIMITED = 2**31 - 1

AGREEMENT_LABELS = {
    "tau_x_yz": "τ X–YZ",
    "tau_y_xz": "τ Y–XZ",
    "tau_z_xy": "τ Z–XY",
    "kendall_w": "Kendall's W",
    "fleiss_kappa": "Fleiss' κ",
}

# name: (lowest, highest) for integer settings; checked by clean_settings.
_INT_BOUNDS: dict[str, tuple[int, int]] = {
    "min_ratings": (1, 1000),
    "max_ratings": (1, 1000),
    "tutorial_pass": (-1000, 1000),
    "probation_pass": (-1000, 1000),
    "first_game_ratings": (1, 1000),
    "first_game_pass": (-2000, 2000),
    "max_probation_attempts": (1, 100),
    "tutorial_pairs": (1, 1000),
    "probation_pairs": (1, 1000),
    "completion_game_ratings": (1, 100_000),
    "scale_levels": (4, 5),
    "leaderboard_size": (0, 100),
    "report_repetitions": (1, 10_000),
}


def round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def _primed(caption_primes: Iterable[Any]) -> list[int]:
    """Primed ratings as the integers the priming rule needs.

    The caption import accepts real-valued machine predictions (e.g. 3.7); they are rounded
    half up to the nearest level so that a prime counts like a rating.
    """
    return [min(5, max(1, round_half_up(float(value)))) for value in caption_primes]


def player_state(participant: Participant) -> rules.PlayerState:
    raw = (participant.state or {}).get("player") or {}
    return rules.PlayerState(
        phase=rules.Phase(raw.get("phase", TUTORIAL)),
        probation_attempts=int(raw.get("probation_attempts", 0)),
        score=int(raw.get("score", 0)),
        game_ratings=int(raw.get("game_ratings", 0)),
    )


def _state_dict(state: rules.PlayerState) -> dict[str, Any]:
    return {
        "phase": str(state.phase),
        "probation_attempts": state.probation_attempts,
        "score": state.score,
        "game_ratings": state.game_ratings,
    }


def _parse_rating(value: Any, levels: int) -> int:
    return parse_choice(
        value, low=1, high=levels, field="rating", message=f"Choose a rating from 1 to {levels}."
    )


@register
class VicrMode(Mode):
    name = "vicr"
    label = "VICR rating game"
    exclusion_rules = (
        "Tutorial and probation ratings never enter the dataset (phase column); the final "
        "view holds game ratings of players whose status is game and that are not flagged."
    )
    default_settings: ClassVar[dict[str, Any]] = {
        "min_ratings": 3,
        "max_ratings": 7,
        "seconds_before_submit": 3,
        "tutorial_pass": 10,
        "probation_pass": 25,
        "first_game_ratings": 20,
        "first_game_pass": 25,
        "max_probation_attempts": 2,
        # Pairs per tutorial and per probation attempt (the paper's 10 and 20), drawn per
        # player from the imported pools, which must hold at least tutorial_pairs and
        # probation_pairs x max_probation_attempts pairs.
        "tutorial_pairs": 10,
        "probation_pairs": 20,
        # Game ratings that earn a crowd worker the completion code (as many as the first-
        # game check looks at, so the code follows the check, not a half-finished stay).
        "completion_game_ratings": 20,
        "scale_levels": 5,
        # Fleiss' kappa merges levels 4 and 5 (the paper's VICR column); no-op on 4 levels.
        "collapse_top": True,
        "leaderboard_size": 10,
        "report_repetitions": 100,
    }

    intro_template = "modes/vicr/intro.html"
    item_template = "modes/vicr/item.html"
    feedback_template = "modes/vicr/feedback.html"
    report_template = "modes/vicr/report.html"
    finished_template = "modes/vicr/finished.html"
    figure_names = ("rating-distribution",)
    # One rating takes seconds; a crowd lease lapses after a few minutes so a pair left open
    # goes back to other players soon.
    crowd_lease_seconds = 5 * 60

    # ------------------------------------------------------------------ settings, items

    def clean_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        merged = super().clean_settings(raw)
        for key, (low, high) in _INT_BOUNDS.items():
            check_int(merged, key, low, high)
        seconds = merged["seconds_before_submit"]
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError("seconds_before_submit must be a number of seconds")
        if not 0 <= seconds <= 600:
            raise ValueError("seconds_before_submit must be from 0 to 600")
        if merged["min_ratings"] > merged["max_ratings"]:
            raise ValueError("min_ratings must not exceed max_ratings")
        limit = 2 * merged["first_game_ratings"]
        if merged["first_game_pass"] > limit:
            raise ValueError(
                f"first_game_pass cannot exceed {limit} (2 points per rating over "
                f"first_game_ratings ratings)"
            )
        if not isinstance(merged["collapse_top"], bool):
            raise ValueError("collapse_top must be true or false")
        for kind in BLOCK_KINDS:
            pairs, needed = merged[f"{kind}_pairs"], merged[f"{kind}_pass"]
            if needed > 2 * pairs:
                raise ValueError(
                    f"{kind}_pass is {needed} but {pairs} {kind} pairs ({kind}_pairs) give at "
                    f"most {2 * pairs} points."
                )
        return merged

    def build_items(self, study: Study) -> int:
        captions = list(
            Caption.objects.filter(study=study)
            .order_by("line", "id")
            .values_list("id", "image_id", "purpose")
        )
        by_purpose: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for caption_id, image_id, purpose in captions:
            by_purpose[purpose].append((caption_id, image_id))
        tutorial = by_purpose[Caption.Purpose.TUTORIAL]
        probation = by_purpose[Caption.Purpose.PROBATION]
        game = by_purpose[Caption.Purpose.STUDY]
        if not tutorial or not probation or not game:
            raise ValueError(
                "A VICR study needs tutorial pairs, probation pairs and game pairs "
                f"(found {len(tutorial)}, {len(probation)} and {len(game)})."
            )
        config = self.clean_settings(study.settings or {})
        # One player must be able to finish every block without meeting a pair twice.
        attempts = config["max_probation_attempts"]
        for kind, pool, needed, why in (
            (TUTORIAL, tutorial, config["tutorial_pairs"], "tutorial_pairs"),
            (
                PROBATION,
                probation,
                config["probation_pairs"] * attempts,
                f"probation_pairs {config['probation_pairs']} x max_probation_attempts "
                f"{attempts}, none repeated",
            ),
        ):
            if len(pool) < needed:
                raise ValueError(
                    f"The {kind} pool has {len(pool)} pairs but one player needs {needed} "
                    f"({why}): import more {kind} pairs or lower the setting."
                )
        random.Random(study.seed).shuffle(game)
        rows = []
        for kind, pairs, target in (
            (TUTORIAL, tutorial, UNLIMITED),
            (PROBATION, probation, UNLIMITED),
            (GAME, game, config["max_ratings"]),
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
        Item.objects.bulk_create(rows, batch_size=1000)
        return len(rows)

    # ------------------------------------------------------------------ serving

    def eligible_items(self, participant: Participant):
        phase = player_state(participant).phase
        items = Item.objects.filter(study_id=participant.study_id)
        if phase == rules.Phase.EXCLUDED:
            return items.none()
        if phase in BLOCK_KINDS:
            # Only the next pair of the player's draw, so they get the draw's order.
            pair = self._next_block_pair(participant)
            return items.filter(pk=pair) if pair is not None else items.none()
        return items.filter(kind=GAME)

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
                pairs=self.settings_for(participant.study)[f"{kind}_pairs"],
                attempt=state.probation_attempts if kind == PROBATION else 0,
                study_seed=participant.study.seed,
                player=participant.pk,
                kind=kind,
            )
        except ValueError:
            return []
        return [pool[position] for position in positions]

    def _next_block_pair(self, participant: Participant) -> int | None:
        done = len((participant.state or {}).get("block", []))
        draw = self._block_draw(participant)
        return draw[done] if done < len(draw) else None

    def current_round(self, participant: Participant) -> int:
        # Always 0, retries included: a retry draws new pairs (``_block_draw``), and one
        # round lets the assignment service refuse to serve a player any pair twice.
        return 0

    def min_seconds(self, assignment: Assignment) -> float:
        study = assignment.participant.study
        return float(self.settings_for(study)["seconds_before_submit"])

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        participant = assignment.participant
        levels = self.settings_for(participant.study)["scale_levels"]
        phase = player_state(participant).phase
        kind = assignment.item.kind
        if phase == rules.Phase.EXCLUDED:
            raise SubmissionError(
                "You can no longer rate pairs in this study; nothing was saved.", status=409
            )
        if kind != str(phase):
            raise SubmissionError(
                f"This is a {kind} pair, but you are in the {phase} now, so it cannot count "
                f"as a {phase} rating. Nothing was saved.",
                status=409,
            )
        if kind in BLOCK_KINDS and assignment.item_id != self._next_block_pair(participant):
            # Only the pair the draw is at counts, so nobody picks which pairs score.
            raise SubmissionError(
                f"This is not the {kind} pair you are at now, so it cannot count. Nothing was "
                f"saved.",
                status=409,
            )
        return {"rating": _parse_rating(data.get("rating"), levels)}

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        rating = payload["rating"]
        caption = Caption.objects.only("truth", "prime_ratings").get(pk=item.spec["caption_id"])
        if item.kind in BLOCK_KINDS:
            points = rules.tutorial_points(rating, caption.truth)
            result = {"points": points, "truth": caption.truth}
            if item.kind == PROBATION:
                # Every lease is round 0 now, so the attempt (1-based) is kept with the rating.
                result["attempt"] = player_state(assignment.participant).probation_attempts + 1
            return result
        # The item row is locked: these are exactly the game ratings committed before ours.
        humans = list(
            Judgment.objects.filter(item=item, phase=GAME, excluded=False)
            .order_by("id")
            .values_list("payload__rating", flat=True)
        )
        primed = _primed(caption.prime_ratings or [])
        pool = rules.consensus_pool(humans, primed)
        scored = rules.score_rating(rating, pool)
        return {
            "points": scored.points,
            "consensus": scored.consensus,
            "pool_size": len(pool),
            "pool_human": min(len(humans), len(pool)),
            "pool_primed": len(pool) - min(len(humans), len(pool)),
            "n": scored.n,
            "var": scored.var,
            "v": scored.v,
            "d": scored.d,
            "reason": scored.reason,
        }

    def after_submit(self, participant: Participant, judgment: Judgment) -> None:
        # The submission service holds the participant's row lock and gave ``participant``
        # the state as locked, so it is read from there, not again.
        config = self.settings_for(participant.study)
        state = dict(participant.state or {})
        before = player_state(participant)
        points = judgment.result["points"]
        transition: dict[str, Any] | None = None
        if judgment.phase in BLOCK_KINDS:
            block = [*state.get("block", []), points]
            if len(block) >= config[f"{judgment.phase}_pairs"]:
                after = rules.next_state(before, block, self._phase_rules(config))
                total = sum(block)
                if judgment.phase == TUTORIAL:
                    state["tutorial_score"] = total
                else:
                    state["probation_scores"] = [*state.get("probation_scores", []), total]
                transition = _block_transition(
                    judgment.phase, before, after, total, 2 * len(block), config
                )
                block = []
            else:
                after = before
            state["block"] = block
        else:
            after = rules.next_state(before, points, self._phase_rules(config))
            state["game_total"] = state.get("game_total", 0) + 1
            state["game_points"] = state.get("game_points", 0) + points
            if after.phase != rules.Phase.GAME:
                transition = _first_game_transition(before.score + points, after, config)
        state["player"] = _state_dict(after)
        participant.state = state
        participant.status = str(after.phase)
        participant.save(update_fields=["state", "status"])
        judgment.result = {
            **judgment.result,
            "score_after": after.score,
            "phase_after": str(after.phase),
            **({"transition": transition} if transition else {}),
        }
        Judgment.objects.filter(pk=judgment.pk).update(result=judgment.result)

    def completion_earned(self, participant: Participant) -> bool:
        # Earned by game ratings in good standing: the phase must be the game when the count
        # is reached, so a player the first-game check sends back to probation earns it only
        # after passing probation again, and an excluded player never does.
        if player_state(participant).phase != rules.Phase.GAME:
            return False
        needed = self.settings_for(participant.study)["completion_game_ratings"]
        return (participant.state or {}).get("game_total", 0) >= needed

    def _phase_rules(self, config: dict[str, Any]) -> rules.PhaseRules:
        return rules.PhaseRules(
            tutorial_pairs=config["tutorial_pairs"],
            tutorial_pass=config["tutorial_pass"],
            probation_pairs=config["probation_pairs"],
            probation_pass=config["probation_pass"],
            max_probation_attempts=config["max_probation_attempts"],
            first_game_ratings=config["first_game_ratings"],
            first_game_pass=config["first_game_pass"],
        )

    # ------------------------------------------------------------------ pages

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        return {"rating": post.get("rating")}

    def page_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        from django.utils import timezone

        # The services and views hand the lease over with its participant (freshly read,
        # with the study) already loaded.
        participant = assignment.participant
        config = self.settings_for(participant.study)
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
            progress["of"] = config[f"{kind}_pairs"]
            progress["attempt"] = player.probation_attempts + 1
            progress["max_attempts"] = config["max_probation_attempts"]
        waited = (timezone.now() - assignment.served_at).total_seconds()
        remaining = max(0.0, float(config["seconds_before_submit"]) - waited)
        levels = config["scale_levels"]
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
            "minimum_seconds": config["seconds_before_submit"],
        }

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        result = judgment.result
        participant = judgment.participant
        context: dict[str, Any] = {
            "result": result,
            "rating": judgment.payload["rating"],
            "phase": judgment.phase,
            "transition": result.get("transition"),
            "score_after": result.get("score_after", 0),
            "scale": rules.SCALE,
        }
        if judgment.phase in BLOCK_KINDS:
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
        context = {
            "phase": player_state(participant).phase,
            "score": player_state(participant).score,
            "game_total": state.get("game_total", 0),
        }
        context.update(self.leaderboard(participant))
        return context

    def leaderboard(self, participant: Participant) -> dict[str, Any]:
        """Top players in the game by running score (two queries, whatever the study size)."""
        size = self.settings_for(participant.study)["leaderboard_size"]
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
        rows = [
            {"rank": rank, "pseudonym": pseudonym, "score": score, "me": pk == participant.pk}
            for rank, (pk, pseudonym, score) in enumerate(top, start=1)
        ]
        own_rank = None
        if participant.status == GAME:
            # Asked even when the player is on the board, so every page costs the same queries.
            own_score = player_state(participant).score
            own_rank = players.filter(game_score__gt=own_score).count() + 1
            if any(row["me"] for row in rows):
                own_rank = None
        return {
            "leaderboard": rows,
            "own_rank": own_rank,
            "own_score": player_state(participant).score,
        }

    # ------------------------------------------------------------------ report

    def report(self, study: Study, progress: Progress) -> dict[str, Any]:
        config = self.settings_for(study)
        levels = config["scale_levels"]
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
            Judgment.objects.filter(study=study, phase=GAME)
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
        repetitions = config["report_repetitions"]
        agreement, agreement_error = None, ""
        try:
            values = rules.virtual_raters(
                pair_ratings,
                repetitions=repetitions,
                seed=abs(study.seed) % 2**63,
                collapse_top=config["collapse_top"],
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
            "collapse_top": config["collapse_top"],
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

    def figure(self, name: str, result: dict[str, Any]):
        if name != "rating-distribution":
            raise KeyError(name)
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

    # ------------------------------------------------------------------ export

    export_row_unit = "rating (tutorial, probation and game)"

    def export_columns(self) -> list[ExportColumn]:
        return [
            *judgment_export_columns(),
            ExportColumn("phase", "str", "tutorial, probation or game (only game is data)."),
            ExportColumn("attempt", "int", "Probation attempt (1, 2, ...); 0 outside probation."),
            ExportColumn("caption_id", "int", "Id of the caption rated (the pair).", "captions"),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("system", "str", "System that wrote the caption (Human for people)."),
            ExportColumn("caption", "str", "Caption as shown."),
            ExportColumn("rating", "int", "Rating, 1 (worst) to scale_levels (best)."),
            ExportColumn("points", "int", "Points the rating earned (Algorithm 1 or the truth)."),
            ExportColumn("truth", "int", "Tutorial and probation: the expert rating."),
            ExportColumn(
                "consensus", "int", "Game: the consensus of the pool when rated (empty: none)."
            ),
            ExportColumn("pool_size", "int", "Game: ratings in the consensus pool when rated."),
            ExportColumn("pool_human", "int", "Game: of which earlier human game ratings."),
            ExportColumn("pool_primed", "int", "Game: of which primed ratings."),
            ExportColumn("score_after", "int", "The player's running score after the rating."),
            ExportColumn("player_status", "str", "The player's phase now (game: good standing)."),
            ExportColumn(
                "final_view",
                "bool",
                "In the paper's final view: a game rating, not excluded, of a player in game.",
            ),
            *judgment_trailing_columns(),
        ]

    def export_query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        result = [
            sql.int("j.result", key)
            for key in (
                "points",
                "truth",
                "consensus",
                "pool_size",
                "pool_human",
                "pool_primed",
                "score_after",
            )
        ]
        return (
            # Ratings store their probation attempt; ratings stored before that was kept
            # have it as the lease's round (a retry used to be a new round).
            f"SELECT {JUDGMENT_SELECT}, j.phase, "
            f"COALESCE({sql.int('j.result', 'attempt')}, a.round), "
            "c.id, im.name, c.system, c.text, "
            f"{sql.int('j.payload', 'rating')}, {', '.join(result)}, p.status, "
            f"(j.phase = '{GAME}' AND NOT j.excluded AND p.status = '{GAME}'), "
            f"{JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_assignment a ON a.id = j.assignment_id "
            "JOIN annotation_item i ON i.id = j.item_id "
            f"LEFT JOIN annotation_caption c ON c.id = {sql.int('i.spec', 'caption_id')} "
            "LEFT JOIN annotation_image im ON im.id = c.image_id "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )


def _block_transition(
    kind: str,
    before: rules.PlayerState,
    after: rules.PlayerState,
    total: int,
    maximum: int,
    config: dict[str, Any],
) -> dict[str, Any]:
    needed = config["tutorial_pass"] if kind == TUTORIAL else config["probation_pass"]
    name = "the tutorial" if kind == TUTORIAL else "probation"
    if after.phase == rules.Phase.GAME:
        message = f"You passed {name} with {total} of {maximum} points. On to the game!"
    elif after.phase == rules.Phase.PROBATION and kind == TUTORIAL:
        message = (
            f"The tutorial gave you {total} of {maximum} points; {needed} are needed. "
            f"Next comes probation: more practice pairs with expert ratings "
            f"({config['probation_pass']} points needed to join the game)."
        )
    elif after.phase == rules.Phase.PROBATION:
        message = (
            f"This probation attempt gave you {total} of {maximum} points; {needed} are "
            f"needed. You may try again: attempt {after.probation_attempts + 1} of "
            f"{config['max_probation_attempts']}."
        )
    else:
        message = (
            f"This probation attempt gave you {total} of {maximum} points; {needed} are "
            f"needed, and no attempt is left. Thank you for playing; you cannot rate more "
            f"pairs in this study."
        )
    return {
        "from": kind,
        "to": str(after.phase),
        "total": total,
        "maximum": maximum,
        "message": message,
    }


def _first_game_transition(
    total: int, after: rules.PlayerState, config: dict[str, Any]
) -> dict[str, Any]:
    first, needed = config["first_game_ratings"], config["first_game_pass"]
    message = f"Your first {first} game ratings scored {total} of the {needed} needed: "
    if after.phase == rules.Phase.PROBATION:
        message += "your score is reset and you go back to probation."
    else:
        message += (
            "your score is reset, and no probation attempt is left, so you cannot rate "
            "more pairs in this study. Thank you for playing."
        )
    return {
        "from": GAME,
        "to": str(after.phase),
        "total": total,
        "maximum": 2 * first,
        "message": message,
    }
