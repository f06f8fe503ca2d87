"""How many more distinct workers a study's remaining work needs: a lower bound.

Issue 26 ("studies that can finish"). Some protocols forbid one worker from taking two
pieces of work that share a *unit*: HUMANr's exposure rule (nobody meets an image twice, so
two groups showing one image need two workers), VICR's one rating per player and pair.
Then the remaining work needs a number of distinct workers that no amount of time from the
workers already there can replace, and a study with only registered annotators can stall
for good (issue 26, row 6: HUMANr stopped at 2 of 6 groups with 2 annotators).

The model. Remaining work is a list of *slots*: a slot belongs to one piece of work (a
HUMANr group, a VICR pair) and needs one worker; a piece with ``r`` slots needs ``r``
different workers. Each piece shows a set of units. A worker may take at most one slot among
all the pieces showing a unit ``u`` and none if they already met ``u``.

The bound. Fix a unit ``u`` and let ``S_u`` be the slots of the pieces showing it. Every
one of those ``S_u`` slots needs its own worker (two of them by one worker would meet ``u``
twice), and an existing worker who already met ``u`` can take none. So, with ``E``
existing workers of whom ``M_u`` met ``u``, at most ``E - M_u`` of the slots go to existing
workers and the rest need new ones::

    new workers >= max(0, max over u of S_u - (E - M_u))

An existing worker is only able to take a slot showing ``u`` if some piece showing ``u``
shares no unit with what they met, so counting those workers (``A_u <= E - M_u``) gives
the sharper bound ``max over u of S_u - A_u`` (``workers_needed``). Row 6 needs it: two
annotators who each finished one group had met an image of every group left, so neither
could take any, though each had not met half of the images.

This is a lower bound, not the answer: it looks at one unit at a time. Pieces that share
different units with each other (group A and B share image 1, B and C image 2, C and A
image 3) can need more workers than any one unit says (here 2 by the bound, 3 in fact), and
a protocol's other rules (HUMANr's attention checks use up two more images per group) only
add to it. Its use is the warning "this study cannot finish with these workers": when even
the bound exceeds the workers a study can get, no assignment can finish it.
``tests/rubrics/test_capacity.py`` checks it against a brute-force assignment on small
cases (never above the true minimum, equal on the hand-worked ones).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """``needed`` more distinct workers at least, because of ``unit`` (None: no unit binds):
    its ``slots`` remaining slots against ``able`` existing workers who have not met it."""

    needed: int
    unit: Hashable | None = None
    slots: int = 0
    able: int = 0


def unit_tallies(
    pieces: Sequence[tuple[Iterable[Hashable], int]], met: Sequence[Iterable[Hashable]]
) -> tuple[dict[Hashable, int], dict[Hashable, int]]:
    """``(S_u, M_u)`` by unit from the pieces ``(units shown, slots left)`` and each
    existing worker's met units (the per-unit counts ``new_workers_needed`` reads)."""
    slots: Counter[Hashable] = Counter()
    for units, left in pieces:
        if left < 0:
            raise ValueError("a piece cannot have fewer than 0 slots left")
        for unit in set(units):
            slots[unit] += left
    met_by: Counter[Hashable] = Counter()
    for units in met:
        met_by.update(set(units))
    return dict(slots), dict(met_by)


def new_workers_needed(
    slots: Mapping[Hashable, int], met: Mapping[Hashable, int], *, existing: int
) -> Bound:
    """The lower bound above: ``slots`` is ``S_u`` by unit, ``met`` is ``M_u`` (existing
    workers who met the unit; absent: 0), ``existing`` is ``E``. The binding unit is the
    one with the largest shortfall (ties: the most slots, then the first given)."""
    if existing < 0:
        raise ValueError("existing workers cannot be negative")
    best = Bound(0)
    for unit, left in slots.items():
        if left <= 0:
            continue
        met_u = met.get(unit, 0)
        if not 0 <= met_u <= existing:
            raise ValueError(f"unit {unit!r}: {met_u} workers met it, of {existing}")
        able = existing - met_u
        short = left - able
        if short > best.needed or (short == best.needed > 0 and left > best.slots):
            best = Bound(short, unit, left, able)
    return best


#: ``workers_needed`` compares every existing worker with every open piece up to this many
#: times (about 0.1 s); beyond it, the counts bound (``new_workers_needed``), still valid.
MAX_PAIR_CHECKS = 500_000


def workers_needed(
    pieces: Sequence[tuple[Iterable[Hashable], int]], met: Sequence[Iterable[Hashable]]
) -> Bound:
    """The sharper bound ``max over u of S_u - A_u`` from the pieces ``(units shown, slots
    left)`` and each existing worker's met units, ``A_u`` the existing workers for whom some
    open piece showing ``u`` shares no unit with what they met. Falls back to the counts
    bound when that would take more than ``MAX_PAIR_CHECKS`` comparisons."""
    open_pieces = [(frozenset(units), left) for units, left in pieces if left > 0]
    met_sets = [frozenset(units) for units in met]
    slots, met_by = unit_tallies(open_pieces, met_sets)
    if len(open_pieces) * len(met_sets) > MAX_PAIR_CHECKS:
        return new_workers_needed(slots, met_by, existing=len(met_sets))
    able: Counter[Hashable] = Counter()
    for seen in met_sets:
        reachable: set[Hashable] = set()
        for units, _left in open_pieces:
            if units.isdisjoint(seen):
                reachable |= units
        able.update(reachable)
    # new_workers_needed reads "met" as E - able: the workers who cannot take any slot of u.
    unable = {unit: len(met_sets) - able.get(unit, 0) for unit in slots}
    return new_workers_needed(slots, unable, existing=len(met_sets))
