"""HUMANr allocation with one vote per worker (issue 29, row 10): hand-worked cases."""

from __future__ import annotations

import pytest

from rubrics.adaptive import humanr_next_systems_by_worker as next_systems


def test_many_ids_of_one_identity_are_one_vote_and_never_settle():
    # 18 ids of one person, 81 values of 0: one worker, below the minimum of 2 workers.
    assert next_systems(
        {"GIT": {1: [0.0] * 81}}, target_half_width=0.5, min_values=27, min_workers=2
    ) == ["GIT"]


def test_votes_are_worker_means_and_the_interval_is_over_them():
    # Votes: worker means 0, 0.5, 1 (from unequal numbers of values). n = 3, sd = 0.5,
    # t(0.975, 2) = 4.303 (a t table): half-width 4.303 * 0.5 / sqrt(3) = 1.2421.
    values = {"GIT": {1: [0.0, 0.0], 2: [0.25, 0.75, 0.5], 3: [1.0]}}
    assert next_systems(values, target_half_width=1.25, min_values=6, min_workers=3) == []
    assert next_systems(values, target_half_width=1.24, min_values=6, min_workers=3) == ["GIT"]
    # Too few values in all, or too few workers: open whatever the width.
    assert next_systems(values, target_half_width=1.25, min_values=7, min_workers=3) == ["GIT"]
    assert next_systems(values, target_half_width=1.25, min_values=6, min_workers=4) == ["GIT"]


def test_open_systems_come_widest_first_and_bad_input_is_refused():
    values = {
        "A": {1: [0.0], 2: [0.0], 3: [0.0]},  # width 0: settled
        "B": {1: [0.0], 2: [0.5], 3: [1.0]},  # width 1.2421
        "C": {1: [0.0], 2: [1.0], 3: [-1.0]},  # sd 1: width 2.4842
    }
    assert next_systems(values, target_half_width=0.1, min_values=3, min_workers=3) == ["C", "B"]
    with pytest.raises(ValueError, match="target_half_width"):
        next_systems(values, target_half_width=0, min_values=3, min_workers=3)
    with pytest.raises(ValueError, match="comparison values"):
        next_systems({"A": {1: [2.0]}}, target_half_width=0.1)
