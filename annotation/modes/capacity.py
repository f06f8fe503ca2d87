"""The distinct workers a study's remaining items need, when a unit bars repeats (issue 26).

What several modes share for ``Mode.workers_needed``: the items of some kinds, grouped by
a *unit* one worker may take at most one slot of (VICR and spans: the item itself, one
rating or marking per worker; the arena: the image, a worker never sees one twice; THumB:
the image, each stage by a different annotator). ``rubrics.capacity``'s counts bound: for
each unit, the slots left (``wanted - judgment_count - open_lease_count`` summed over its
items with room) plus the participants still in the study who already judged an item of
it, less those participants; the largest. Exact when every unit is one item. A few queries
whatever the study's size: a cheap upper bound first (stop when nothing can be short), then
per-item units without a subquery per item (``_per_item``), images with one.
HUMANr's groups share images with each other, so it uses the sharper bound
(``modes/humanr/capacity.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Case,
    Count,
    Expression,
    F,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from annotation.models import Item, Judgment, Participant, Study
from annotation.modes.base import WorkersNeeded


@dataclass(frozen=True)
class UnitShortfall:
    """The most binding unit: ``needed`` more workers at least, its ``left`` slots, the
    ``players`` still in the study, ``met`` of them already judged it (0, 0, ...: none)."""

    needed: int
    left: int
    players: int
    met: int


def unit_shortfall(
    study: Study,
    *,
    kinds: list[str],
    unit: str,
    players: QuerySet[Participant],
    wanted: Expression | None = None,
) -> UnitShortfall | None:
    """The counts bound over ``study``'s items of ``kinds`` grouped by ``unit`` (an item
    field: ``"pk"``, ``"image_id"``); ``players`` are the participants who may still work;
    ``wanted`` the answers an item should reach (default its ``target``). None when no item
    has room left. At most five queries."""
    wanted = F("target") if wanted is None else wanted
    count = players.count()
    # An item of target 0 is never served (a people design left it out, issue 40): it
    # needs nobody, whatever ``wanted`` (VICR's floor of ratings) asks of the others.
    items = (
        Item.objects.filter(study_id=study.pk, kind__in=kinds)
        .exclude(target=0)
        .annotate(room=wanted - F("judgment_count") - F("open_lease_count"))
    )
    # A cheap upper bound first: the participants who judged a unit are at most its
    # finished leases, so when no unit's room plus finished leases exceeds the participants,
    # nothing is needed and the subquery per unit below is not run (a large crowd study).
    upper = (
        items.annotate(
            share=Case(When(room__gt=0, then=F("room")), default=Value(0)) + F("judgment_count")
        )
        .order_by()
        .values(unit)
        .annotate(upper=Sum("share"))
        .order_by("-upper")
        .values_list("upper", flat=True)
        .first()
    )
    if upper is None:
        return None
    if upper <= count:
        return UnitShortfall(0, 0, count, 0) if items.filter(room__gt=0).exists() else None
    if unit == "pk":
        return _per_item(study, items, kinds=kinds, players=players, count=count)
    met = (
        Judgment.objects.filter(
            item__study_id=study.pk,
            item__kind__in=kinds,
            participant__in=players.values("pk"),
            **{f"item__{unit}": OuterRef(unit)},
        )
        .order_by()
        .values(f"item__{unit}")
        .annotate(n=Count("participant", distinct=True))
        .values("n")[:1]
    )
    row = (
        items.filter(room__gt=0)
        .order_by()
        .values(unit)
        .annotate(left=Sum("room"))
        .annotate(met=Coalesce(Subquery(met, output_field=IntegerField()), 0))
        .annotate(need=F("left") + F("met"))
        .order_by("-need", unit)
        .values_list("left", "met")
        .first()
    )
    if row is None:
        return None
    left, judged = row
    return UnitShortfall(max(0, left + judged - count), left, count, judged)


def workers_needed_by_unit(
    study: Study, *, kinds: list[str], unit: str, rule: str, what: str
) -> WorkersNeeded | None:
    """``Mode.workers_needed`` from ``unit_shortfall`` over every participant of the study
    (counting one who may no longer work only lowers the bound), with a plain reason:
    ``rule`` says what bars repeats ("Nobody sees an image in two battles"), ``what`` names
    one unit ("an image"). None when no item of ``kinds`` has room left."""
    players = Participant.objects.filter(study_id=study.pk)
    bound = unit_shortfall(study, kinds=kinds, unit=unit, players=players)
    if bound is None:
        return None
    if not bound.needed:
        return WorkersNeeded(0, "")
    count = bound.players
    others = (
        f"{count - bound.met or 'none'} of the {count} participant{'s' if count != 1 else ''} "
        "so far can still give one"
        if count
        else "nobody has started yet"
    )
    return WorkersNeeded(
        bound.needed,
        f"{rule}: {what} still needs {bound.left} answer{'s' if bound.left != 1 else ''}, "
        f"each from a different worker, and {others}.",
    )


def _per_item(study: Study, items, *, kinds: list[str], players, count: int):
    """``unit_shortfall`` when every item is its own unit, without a subquery per item.

    An item's finished leases are its distinct judges (one lease per participant and item in
    round 0, one part each), so its judges among ``players`` are its finished leases less
    its judges outside them, read in one grouped query (few: those the gates excluded).
    The items those judged are read one by one; of the others, the one with the most room
    plus finished leases, in one ordered query: no subquery per item, which cost about
    0.4 s at 20,000 pairs on SQLite (``bench/capacity.py``).
    """
    outside = dict(
        Judgment.objects.filter(item__study_id=study.pk, item__kind__in=kinds)
        .exclude(participant__in=players.values("pk"))
        .order_by()
        .values("item_id")
        .annotate(n=Count("participant", distinct=True))
        .values_list("item_id", "n")
    )
    open_items = items.filter(room__gt=0)
    candidates = [
        (room + judged - outside[pk], room, judged - outside[pk])
        for pk, room, judged in open_items.filter(pk__in=list(outside)).values_list(
            "pk", "room", "judgment_count"
        )
    ]
    best = (
        open_items.exclude(pk__in=list(outside))
        .annotate(need=F("room") + F("judgment_count"))
        .order_by("-need", "pk")
        .values_list("need", "room", "judgment_count")
        .first()
    )
    if best is not None:
        candidates.append(best)
    if not candidates:
        return None
    need, left, judged = max(candidates, key=lambda row: (row[0], row[1]))
    return UnitShortfall(max(0, need - count), left, count, judged)
