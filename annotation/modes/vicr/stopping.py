"""VICR adaptive stopping: when a game pair's consensus is settled enough to stop early.

Moved out of ``protocol`` (which calls ``adaptive_stop`` from ``after_submit``) so the
phase machine and the stopping rule each stay readable; the rule itself is
``rubrics.adaptive.vicr_needs_more`` (docs/protocol-choices.md "Plan and stop").
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotation import identities
from annotation.models import Item, Judgment, Participant
from annotation.modes.vicr.settings import VicrSettings
from rubrics import adaptive
from rubrics import vicr as rules

#: The game pairs' ``Item.kind`` (``protocol.GAME``; not imported from there, which imports
#: this module).
GAME = str(rules.Phase.GAME)

#: The study's own rater model is fitted once it has this many game pairs with at least
#: ``max(min_ratings, 2)`` kept ratings (EM needs a few pairs per level to mean anything);
#: before that the stated, pessimistic ``RaterModel.symmetric`` defaults are used.
ADAPTIVE_FIT_MIN_PAIRS = 30
#: The fit reads at most this many of the study's latest kept game ratings, so the work per
#: submission is bounded whatever the study's size (one query, EM over <= 2000 ratings:
#: a few milliseconds; nothing is cached between submissions).
ADAPTIVE_FIT_MAX_RATINGS = 2000


def identity_groups_of(study_id: int) -> dict[int, int]:
    """Each participant of the study mapped to its linked-identity group
    (``annotation.identities.identity_groups``; one query of three columns)."""
    return identities.identity_groups(
        Participant.objects.filter(study_id=study_id).values_list("id", "browser_id", "network")
    )


def adaptive_rater_model(
    item: Item, config: VicrSettings, groups: dict[int, int] | None = None
) -> tuple[adaptive.RaterModel, str]:
    """The rater model the stopping rule uses for ``item``, and where it came from.

    ``"study"``: fitted (``rubrics.adaptive.fit_rater_model``) on the study's other game
    pairs with at least ``max(min_ratings, 2)`` kept ratings among its latest
    ``ADAPTIVE_FIT_MAX_RATINGS``; ``"assumed"``: ``RaterModel.symmetric`` (a rater gives
    the true level 60% of the time, a neighbour 30%), which stops few pairs early, so a
    study saves little until its own data show how much raters agree. Like the pair's own
    ratings (``independent_ratings``), the fit reads only players past their gates with no
    flag, one rating per linked identity and pair: sybil ids agreeing with each other on
    other pairs would otherwise teach the model that raters agree, and stop pairs sooner.
    ``groups``: ``identity_groups_of`` the study, when the caller has it.
    """
    if groups is None:
        groups = identity_groups_of(item.study_id)
    rows = (
        Judgment.objects.filter(
            study_id=item.study_id,
            item__kind=GAME,
            excluded=False,
            participant__status=GAME,
            participant__flags=[],
        )
        .exclude(item_id=item.pk)
        .order_by("-id")
        .values_list("item_id", "participant_id", "payload__rating")[:ADAPTIVE_FIT_MAX_RATINGS]
    )
    pairs: dict[int, list[int]] = defaultdict(list)
    seen: set[tuple[int, int]] = set()
    for item_id, participant_id, rating in list(rows)[::-1]:  # earliest first, as below
        key = (item_id, groups.get(participant_id, participant_id))
        if key not in seen:
            seen.add(key)
            pairs[item_id].append(int(rating))
    enough = max(config.min_ratings, 2)
    rated = [ratings for ratings in pairs.values() if len(ratings) >= enough]
    if len(rated) >= ADAPTIVE_FIT_MIN_PAIRS:
        return adaptive.fit_rater_model(rated, levels=config.scale_levels), "study"
    return adaptive.RaterModel.symmetric(config.scale_levels), "assumed"


def independent_ratings(
    judgment: Judgment, *, counts_this: bool, groups: dict[int, int] | None = None
) -> list[int]:
    """The pair's ratings the stopping rule may count: one per linked identity.

    Only ratings by players past their gates count (status ``game``, no integrity flag),
    so ids that have not proved they know the scale, or that an integrity rule flagged,
    cannot settle a pair. Of players who may be one person (``annotation.identities``:
    same browser or network, through chains), only the earliest rating counts, so a crowd
    of sybil ids is one vote. ``judgment`` (not stored yet) counts when ``counts_this``
    and its player carries no flag. The groups are computed over the study's participants
    (one query of three columns), because a chain may run through ids that never rated
    this pair (``groups``: ``identity_groups_of`` the study, when the caller has it).
    """
    item = judgment.item
    rows = list(
        Judgment.objects.filter(
            item_id=item.pk, excluded=False, participant__status=GAME, participant__flags=[]
        )
        .order_by("id")
        .values_list("participant_id", "payload__rating")
    )
    participant = judgment.participant
    if counts_this and not participant.flags:
        rows.append((participant.pk, judgment.payload["rating"]))
    if groups is None:
        groups = identity_groups_of(item.study_id)
    seen: set[int] = set()
    ratings = []
    for participant_id, rating in rows:
        group = groups.get(participant_id, participant_id)
        if group not in seen:
            seen.add(group)
            ratings.append(int(rating))
    return ratings


def adaptive_stop(
    judgment: Judgment, config: VicrSettings, *, counts_this: bool
) -> dict[str, Any] | None:
    """The item target that stops a settled game pair now, or None to go on.

    Called by ``after_submit`` with the item row locked (``judgment.item`` as locked, before
    this judgment's counters). The pair's ratings are its kept game ratings plus this one
    when it is kept (``counts_this``); the rule sees only ``independent_ratings`` (one per
    linked identity, players past their gates), so the pair's ``min_ratings`` (the
    protocol's minimum, 3 by default as in the paper) counts independent players, never
    ids (issue 29: sybil ids must not steer stopping).
    Settled (``vicr_needs_more`` is False below ``max_ratings``): the target becomes the
    stored judgments plus the open leases, so leases already out may still be answered but
    no new one is given.
    """
    item = judgment.item
    kept = Judgment.objects.filter(item_id=item.pk, excluded=False).count() + counts_this
    if not kept or kept >= config.max_ratings:
        return None  # nothing yet, or the pair is at its target anyway
    groups = identity_groups_of(item.study_id)
    ratings = independent_ratings(judgment, counts_this=counts_this, groups=groups)
    model, source = adaptive_rater_model(item, config, groups)
    if adaptive.vicr_needs_more(
        ratings,
        min_ratings=config.min_ratings,
        max_ratings=config.max_ratings,
        model=model,
        risk=config.adaptive_risk,
    ):
        return None
    # This judgment turns one open lease into a stored judgment: the sum does not change.
    target = item.judgment_count + item.open_lease_count
    if target >= item.target:
        return None
    return {
        "item_target": target,
        "result": {"stopped": True, "ratings": len(ratings), "model": source},
    }
