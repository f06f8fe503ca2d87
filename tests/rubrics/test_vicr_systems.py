"""Per-system VICR results (``rubrics.vicr_systems``): means, paired differences and their
bootstrap intervals, against a hand-worked case and an independent loop over the draws."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rubrics.vicr_systems import (
    MAX_ALL_PAIRS_SYSTEMS,
    fit_systems,
    image_table,
    neighbour_robustness,
    paired_differences,
    system_results,
)

# Two images, three systems, one pair each; a pair's score is its mean rating.
HAND = [
    ("img1", "A", (5 + 4 + 5) / 3),
    ("img1", "B", (3 + 3 + 2) / 3),
    ("img1", "C", (1 + 2 + 1) / 3),
    ("img2", "A", 4.0),
    ("img2", "B", (3 + 4 + 4) / 3),
    ("img2", "C", (2 + 1 + 1) / 3),
]


def run(rows, **kwargs):
    images, systems, scores = zip(*rows, strict=True)
    return system_results(list(images), list(systems), list(scores), **kwargs)


def test_hand_worked_means_and_differences():
    result = run(HAND, n_resamples=200, seed=3)
    got = {row["system"]: row for row in result["systems"]}
    # A: (14/3 + 4) / 2 = 13/3; B: (8/3 + 11/3) / 2 = 19/6; C: 4/3
    assert [row["system"] for row in result["systems"]] == ["A", "B", "C"]
    assert got["A"]["mean"] == pytest.approx(13 / 3)
    assert got["B"]["mean"] == pytest.approx(19 / 6)
    assert got["C"]["mean"] == pytest.approx(4 / 3)
    assert all(row["pairs"] == 2 and row["images"] == 2 for row in result["systems"])
    differences = {(d["upper"], d["lower"]): d for d in result["differences"]}
    # A-B per image: 14/3 - 8/3 = 2 and 4 - 11/3 = 1/3 -> 7/6; A-C: 10/3, 8/3 -> 3;
    # B-C: 4/3, 7/3 -> 11/6
    assert differences[("A", "B")]["difference"] == pytest.approx(7 / 6)
    assert differences[("A", "C")]["difference"] == pytest.approx(3.0)
    assert differences[("B", "C")]["difference"] == pytest.approx(11 / 6)
    # With two images a resample is (1, 1), (1, 2) or (2, 2): the interval of A-C lies in
    # [8/3, 10/3] and excludes 0; A's in [4, 14/3].
    assert 8 / 3 - 1e-9 <= differences[("A", "C")]["ci_low"] <= 3
    assert 3 <= differences[("A", "C")]["ci_high"] <= 10 / 3 + 1e-9
    assert differences[("A", "C")]["excludes_zero"] is True
    assert 4 - 1e-9 <= got["A"]["ci_low"] <= got["A"]["ci_high"] <= 14 / 3 + 1e-9
    assert result["all_pairs"] is True and result["n_images"] == 2


def test_intervals_equal_an_independent_loop_over_the_same_draws():
    rng = np.random.default_rng(11)
    rows = []
    for image in range(25):
        for system in ("Human", "GoodBot", "MidBot", "BadBot"):
            if system == "BadBot" and image % 5 == 0:
                continue  # BadBot lacks a caption of some images
            rows.append((image, system, float(rng.integers(1, 6, size=3).mean())))
    result = run(rows, n_resamples=300, confidence=0.9, seed=7)

    # Independently: the documented stream (default_rng(seed).integers over the sorted
    # images), then means of pair scores over the drawn images, by a plain loop.
    images = sorted({r[0] for r in rows})
    draws = np.random.default_rng(7).integers(0, len(images), size=(300, len(images)))
    by = {}
    for image, system, score in rows:
        by.setdefault(system, {}).setdefault(image, []).append(score)

    def mean_over(system, drawn):
        values = [s for i in drawn for s in by[system].get(images[i], [])]
        return sum(values) / len(values)

    def diff_over(upper, lower, drawn):
        ds = [
            np.mean(by[upper][images[i]]) - np.mean(by[lower][images[i]])
            for i in drawn
            if images[i] in by[upper] and images[i] in by[lower]
        ]
        return sum(ds) / len(ds)

    for row in result["systems"]:
        reps = [mean_over(row["system"], drawn) for drawn in draws]
        low, high = np.percentile(reps, [5, 95])
        assert row["mean"] == pytest.approx(
            np.mean([s for s in (r[2] for r in rows if r[1] == row["system"])])
        )
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))
    assert len(result["differences"]) == 6
    for d in result["differences"]:
        reps = [diff_over(d["upper"], d["lower"], drawn) for drawn in draws]
        low, high = np.percentile(reps, [5, 95])
        assert (d["ci_low"], d["ci_high"]) == pytest.approx((low, high))
        shared = [i for i in by[d["upper"]] if i in by[d["lower"]]]
        assert d["images"] == len(shared)
        assert d["difference"] == pytest.approx(
            np.mean([np.mean(by[d["upper"]][i]) - np.mean(by[d["lower"]][i]) for i in shared])
        )
    # Ranked by mean, highest first
    means = [row["mean"] for row in result["systems"]]
    assert means == sorted(means, reverse=True)


def test_many_systems_compare_neighbours_only():
    n = MAX_ALL_PAIRS_SYSTEMS + 2
    rows = [(image, f"S{j:02d}", float(j + image % 2)) for image in range(4) for j in range(n)]
    result = run(rows, n_resamples=100)
    assert result["all_pairs"] is False
    assert len(result["differences"]) == n - 1
    order = [row["system"] for row in result["systems"]]
    assert [(d["upper"], d["lower"]) for d in result["differences"]] == list(
        zip(order, order[1:], strict=False)
    )


def test_systems_sharing_no_image_have_no_difference():
    result = run([("a", "X", 4.0), ("b", "Y", 2.0)], n_resamples=50)
    (d,) = result["differences"]
    assert (d["difference"], d["ci_low"], d["excludes_zero"], d["images"]) == (None, None, None, 0)


@pytest.mark.parametrize(
    "images, systems, scores, message",
    [
        ([], [], [], "empty"),
        (["a"], ["X", "Y"], [1.0], "same length"),
        (["a"], ["X"], [float("nan")], "scores"),
    ],
)
def test_bad_input_is_a_value_error(images, systems, scores, message):
    with pytest.raises(ValueError, match=message):
        system_results(images, systems, scores)


def test_robustness_counts_the_images_that_hold_each_neighbouring_order():
    # A leads B on three images by 2, 1 and 0.5 (shared images only); C has one image.
    rows = [
        (1, "A", 5.0), (1, "B", 3.0),
        (2, "A", 4.0), (2, "B", 3.0),
        (3, "A", 3.5), (3, "B", 3.0),
        (4, "C", 1.0),
    ]  # fmt: skip
    result = run(rows, n_resamples=50)
    a_b, b_c = result["robustness"]
    # Remove the lead of 2, then the lead of 1: 0.5 left, still ahead; no removal of at
    # most 2 of the 3 images puts B ahead, so nothing can reverse the order.
    assert (a_b["upper"], a_b["lower"], a_b["removed"], a_b["total"]) == ("A", "B", None, 3)
    assert (b_c["upper"], b_c["lower"], b_c["removed"], b_c["total"]) == ("B", "C", None, 0)


def test_robustness_finds_the_fewest_removals():
    # A's mean is ahead (by the first image's lead of 3); B leads on the other two.
    rows = [
        (1, "A", 5.0),
        (1, "B", 2.0),
        (2, "A", 3.0),
        (2, "B", 3.5),
        (3, "A", 3.0),
        (3, "B", 3.5),
    ]
    result = run(rows, n_resamples=50)
    (a_b,) = result["robustness"]
    # Leads 3, -0.5, -0.5 (sum 2): removing the image with the lead of 3 leaves -1 < 0.
    assert (a_b["upper"], a_b["removed"], a_b["total"]) == ("A", 1, 3)


# ------------------------------------------------------------ the estimators alone


def test_image_table_sums_and_counts_per_image_and_system():
    # img1 has two pairs of A (scores 4 and 2) and none of B; img2 one pair of each.
    table = image_table(
        ["img1", "img1", "img2", "img2"], ["A", "A", "A", "B"], np.array([4.0, 2.0, 3.0, 1.0])
    )
    assert table.images.tolist() == ["img1", "img2"] and table.names.tolist() == ["A", "B"]
    assert table.sums.tolist() == [[6.0, 0.0], [3.0, 1.0]]
    assert table.sizes.tolist() == [[2.0, 0.0], [1.0, 1.0]]
    # A's mean is over its three pairs, (4 + 2 + 3) / 3, not over its two images.
    assert table.means.tolist() == pytest.approx([3.0, 1.0])
    assert table.image_means[0, 0] == pytest.approx(3.0) and np.isnan(table.image_means[0, 1])
    assert table.order == [0, 1]


def test_paired_differences_use_the_shared_images_only():
    table = image_table(
        ["img1", "img1", "img2", "img2"], ["A", "A", "A", "B"], np.array([4.0, 2.0, 3.0, 1.0])
    )
    paired = paired_differences(table, all_pairs=True)
    # A - B only on img2, where both have a pair: 3 - 1.
    assert paired.compared == ((0, 1),)
    assert paired.sums[:, 0].tolist() == [0.0, 2.0] and paired.sizes[:, 0].tolist() == [0, 1]


def test_neighbour_robustness_without_a_shared_image_has_no_reversal():
    table = image_table([1, 2], ["A", "B"], np.array([5.0, 1.0]))
    (entry,) = neighbour_robustness(table)
    assert (entry.upper, entry.lower, entry.reversal) == ("A", "B", None)
    assert entry.as_dict() == {
        "upper": "A",
        "lower": "B",
        "removed": None,
        "total": 0,
        "share": None,
    }


def test_fit_systems_is_frozen_and_serialises_to_system_results():
    images, systems, scores = (list(column) for column in zip(*HAND, strict=True))
    fitted = fit_systems(images, systems, scores, n_resamples=100, seed=5)
    assert fitted.as_dict() == system_results(images, systems, scores, n_resamples=100, seed=5)
    assert [row.system for row in fitted.systems] == ["A", "B", "C"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fitted.systems[0].mean = 0.0  # type: ignore[misc]
