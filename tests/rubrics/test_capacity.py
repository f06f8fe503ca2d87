"""The distinct-workers lower bound (rubrics/capacity.py) against a brute-force assignment."""

from __future__ import annotations

import random

import pytest

from rubrics import capacity
from rubrics.capacity import Bound, new_workers_needed, unit_tallies, workers_needed


def brute_force_min_new(pieces, met) -> int:
    """The fewest new workers (who met nothing) such that every slot gets its own worker,
    no worker takes two pieces sharing a unit, nor a piece showing a unit they met.

    Tries k = 0, 1, ... new workers and searches every assignment of the slots to workers
    (new workers opened in order, so their permutations are not tried twice)."""
    slots = [frozenset(units) for units, left in pieces for _ in range(left)]
    slots.sort(key=len, reverse=True)

    def place(i: int, workers: list[set], first_new: int, opened: int) -> bool:
        if i == len(slots):
            return True
        for w, seen in enumerate(workers):
            if w > first_new + opened:
                break  # new workers are interchangeable: open them in order
            if seen & slots[i]:
                continue
            seen |= slots[i]
            if place(i + 1, workers, first_new, max(opened, w - first_new + 1)):
                return True
            seen -= slots[i]
        return False

    for k in range(len(slots) + 1):
        workers = [set(units) for units in met] + [set() for _ in range(k)]
        if place(0, workers, len(met), 0):
            return k
    raise AssertionError("unreachable: one new worker per slot always works")


def counts_bound(pieces, met) -> int:
    slots, met_by = unit_tallies(pieces, met)
    return new_workers_needed(slots, met_by, existing=len(met)).needed


def bound(pieces, met) -> int:
    return workers_needed(pieces, met).needed


def test_row_6_two_annotators_cannot_take_groups_sharing_an_image():
    # Issue 26 row 6 in miniature: 4 groups over 4 images, each image in 2 groups (the
    # Human-vs-Human and the model comparison of one image), 1 worker per group. Two
    # annotators each finished one group: {1, 2} and {3, 4}. The remaining groups {1, 3}
    # and {2, 4} each share an image with both annotators' groups: by hand, each needs a
    # new worker, and one new worker can take both (they are disjoint): 1 needed.
    pieces = [({1, 3}, 1), ({2, 4}, 1)]
    met = [{1, 2}, {3, 4}]
    assert bound(pieces, met) == 1
    assert brute_force_min_new(pieces, met) == 1
    # The counts alone miss it: each annotator has not met half of the images.
    assert counts_bound(pieces, met) == 0


def test_slots_of_one_image_need_that_many_workers():
    # Image 7 is in three groups with 2 slots each: 6 different workers, whatever else.
    pieces = [({7, 1}, 2), ({7, 2}, 2), ({7, 3}, 2)]
    slots, met_by = unit_tallies(pieces, [])
    assert new_workers_needed(slots, met_by, existing=0) == Bound(6, 7, 6, 0)
    assert brute_force_min_new(pieces, []) == 6
    # Two existing workers who met nothing take two of them: 4 new ones.
    assert bound(pieces, [set(), set()]) == 4 == brute_force_min_new(pieces, [set(), set()])
    # A worker who met image 7 takes none.
    assert bound(pieces, [{7}, set()]) == 5 == brute_force_min_new(pieces, [{7}, set()])


def test_a_triangle_of_shared_images_needs_more_than_the_bound():
    # A-B share 1, B-C share 2, C-A share 3: every two groups conflict, so 3 workers; no
    # single image is in more than 2 groups, so the bound says 2 (a lower bound, not tight).
    pieces = [({1, 3}, 1), ({1, 2}, 1), ({2, 3}, 1)]
    assert bound(pieces, []) == 2
    assert brute_force_min_new(pieces, []) == 3


def test_no_remaining_slots_need_no_one():
    assert new_workers_needed({1: 0}, {}, existing=0) == Bound(0)
    assert bound([], [{1}]) == 0


def test_existing_workers_enough():
    assert bound([({1}, 2)], [set(), set(), set()]) == 0


@pytest.mark.parametrize("seed", range(120))
def test_never_above_the_brute_force_minimum(seed):
    rng = random.Random(seed)
    images = list(range(rng.randint(3, 6)))
    pieces = [
        (set(rng.sample(images, rng.randint(1, min(3, len(images))))), rng.randint(0, 2))
        for _ in range(rng.randint(1, 5))
    ]
    met = [set(rng.sample(images, rng.randint(0, 2))) for _ in range(rng.randint(0, 3))]
    exact = brute_force_min_new(pieces, met)
    assert 0 <= counts_bound(pieces, met) <= bound(pieces, met) <= exact


def test_falls_back_to_the_counts_bound_on_large_inputs(monkeypatch):
    pieces, met = [({1, 3}, 1), ({2, 4}, 1)], [{1, 2}, {3, 4}]
    monkeypatch.setattr(capacity, "MAX_PAIR_CHECKS", 3)
    assert bound(pieces, met) == counts_bound(pieces, met) == 0


def test_equal_to_brute_force_when_pieces_are_single_units():
    # VICR's case: each pair is its own unit, so the units never interact and the bound is
    # the exact minimum.
    rng = random.Random(5)
    for _ in range(40):
        pieces = [({u}, rng.randint(0, 3)) for u in range(rng.randint(1, 4))]
        met = [set(rng.sample(range(4), rng.randint(0, 3))) for _ in range(rng.randint(0, 3))]
        assert bound(pieces, met) == brute_force_min_new(pieces, met)


def test_refuses_impossible_counts():
    with pytest.raises(ValueError):
        new_workers_needed({1: 2}, {1: 3}, existing=2)
    with pytest.raises(ValueError):
        new_workers_needed({1: 2}, {}, existing=-1)
    with pytest.raises(ValueError):
        unit_tallies([({1}, -1)], [])
