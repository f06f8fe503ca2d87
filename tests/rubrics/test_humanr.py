"""Tests of rubrics.humanr: scoring one answer, groups of trials and the HUMANr report."""

import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest
import scipy.stats

from rubrics.humanr import (
    BASELINE_TEST,
    Responses,
    attention_check_failed,
    baseline_tests,
    build_groups,
    choose_reference,
    comparison_value,
    orient,
    report,
)
from rubrics.resampling import resample_indices

# ---------------------------------------------------------------------------
# One answer
# ---------------------------------------------------------------------------

# value = (s - 5) / 4 with s = raw (human on the left) or 10 - raw (human on the right)
VALUES_HUMAN_LEFT = {1: -1.0, 2: -0.75, 3: -0.5, 4: -0.25, 5: 0.0, 6: 0.25, 7: 0.5, 8: 0.75, 9: 1.0}
VALUES_HUMAN_RIGHT = {
    1: 1.0,
    2: 0.75,
    3: 0.5,
    4: 0.25,
    5: 0.0,
    6: -0.25,
    7: -0.5,
    8: -0.75,
    9: -1.0,
}


@pytest.mark.parametrize("raw", range(1, 10))
def test_comparison_value_all_raw_values_both_orientations(raw):
    assert comparison_value(raw, True) == VALUES_HUMAN_LEFT[raw]
    assert comparison_value(raw, False) == VALUES_HUMAN_RIGHT[raw]
    assert orient(raw, True) == raw
    assert orient(raw, False) == 10 - raw
    assert comparison_value(np.int64(raw), np.bool_(True)) == VALUES_HUMAN_LEFT[raw]


@pytest.mark.parametrize("raw", range(1, 10))
def test_attention_check_failed(raw):
    # Correct caption on the left: s = raw; pass only for s <= 4 (neutral 5 fails).
    assert attention_check_failed(raw, True) is (raw >= 5)
    # Correct caption on the right: s = 10 - raw; pass only for raw >= 6.
    assert attention_check_failed(raw, False) is (raw <= 5)


def test_attention_check_neutral_fails_both_sides():
    assert attention_check_failed(5, True)
    assert attention_check_failed(5, False)


@pytest.mark.parametrize("raw", [0, 10, -1, 4.5, None, True, "5", float("nan"), 5.0000001])
def test_refuses_bad_slider_values(raw):
    with pytest.raises(ValueError, match="raw"):
        comparison_value(raw, True)
    with pytest.raises(ValueError, match="raw"):
        attention_check_failed(raw, True)


@pytest.mark.parametrize("side", [None, 1, 0, "left"])
def test_refuses_bad_side(side):
    with pytest.raises(ValueError, match="human_on_left"):
        comparison_value(5, side)
    with pytest.raises(ValueError, match="correct_on_left"):
        attention_check_failed(5, side)


def test_integral_float_raw_is_accepted():
    assert comparison_value(7.0, True) == 0.5


def test_choose_reference_is_seeded_and_random():
    assert choose_reference("a", "b", 3) == choose_reference("a", "b", 3)
    picks = Counter(choose_reference("a", "b", s)[0] for s in range(200))
    assert set(picks) == {"a", "b"}
    assert 60 < picks["a"] < 140  # a fair coin: 100 +- 40 is > 5 standard deviations


# ---------------------------------------------------------------------------
# Groups
# ---------------------------------------------------------------------------


def make_comparisons(n_images, per_image):
    return [(f"c{i}-{k}", f"img{i}") for i in range(n_images) for k in range(per_image)]


def human_caps(n_images, per_image=2):
    return {f"img{i}": [f"h{i}-{k}" for k in range(per_image)] for i in range(n_images)}


def check_groups(groups, comparisons, captions, group_size=10):
    image_of = dict(comparisons)
    used = []
    for g in groups:
        comps = [t for t in g.trials if t.kind == "comparison"]
        checks = [t for t in g.trials if t.kind == "attention_check"]
        assert len(checks) == 1
        assert [t.position for t in g.trials] == list(range(len(g.trials)))
        images = [t.image_id for t in comps]
        assert len(set(images)) == len(images)  # distinct images
        assert all(image_of[t.comparison_id] == t.image_id for t in comps)
        assert len(comps) <= group_size - 1
        assert g.is_short is (len(comps) < group_size - 1)
        check = checks[0]
        assert check.position == g.check_position
        assert check.image_id not in images  # 10 distinct images per group
        # No image met twice in a group: the distractor caption is of a third image.
        assert check.distractor_image_id != check.image_id
        assert check.distractor_image_id not in images
        assert check.correct_caption_id in captions[check.image_id]
        assert check.distractor_caption_id in captions[check.distractor_image_id]
        assert isinstance(check.correct_on_left, bool)
        used += g.comparison_ids
    assert sorted(used) == sorted(c for c, _ in comparisons)  # every comparison exactly once
    return used


def test_build_groups_full_and_leftover():
    comparisons = make_comparisons(30, 4)  # Human-vs-Human + 3 models per image
    captions = human_caps(30)
    groups = build_groups(comparisons, captions, seed=1)
    check_groups(groups, comparisons, captions)
    # 120 comparisons: 13 full groups of 9 (117) and one short group of the last 3.
    assert [len(g.comparison_ids) for g in groups] == [9] * 13 + [3]
    assert [g.is_short for g in groups] == [False] * 13 + [True]
    assert all(len(g.trials) == 10 for g in groups[:13])


def test_build_groups_skewed_images():
    # One image with 20 comparisons and 9 with one each: at most one full group is possible
    # (g full groups need sum(min(c_i, g)) >= 9 g: g + 9 >= 9 g -> g <= 1). Two more images
    # with human captions leave room for a full group's check and distractor.
    comparisons = [(f"big{k}", "big") for k in range(20)] + [(f"s{i}", f"s{i}") for i in range(9)]
    captions = {"big": ["hb"], **{f"s{i}": [f"h{i}"] for i in range(9)}, "x1": ["y1"], "x2": ["y2"]}
    groups = build_groups(comparisons, captions, seed=2)
    check_groups(groups, comparisons, captions)
    assert sum(not g.is_short for g in groups) == 1
    assert len(groups) == 20  # 1 full + {big, last single} + 18 x {big}


def test_build_groups_deterministic_and_check_position_varies():
    comparisons = make_comparisons(90, 4)
    captions = human_caps(90)
    a = build_groups(comparisons, captions, seed=5)
    b = build_groups(comparisons, captions, seed=5)
    c = build_groups(comparisons, captions, seed=6)
    assert a == b
    assert [g.check_position for g in a] != [g.check_position for g in c]
    positions = Counter(g.check_position for g in a)
    assert len(positions) >= 8  # 40 groups spread over the 10 positions
    assert {g.trials[0].comparison_id for g in a} != {g.trials[0].comparison_id for g in c}
    sides = Counter(t.correct_on_left for g in a for t in g.trials if t.kind == "attention_check")
    assert sides[True] > 0 and sides[False] > 0


def test_build_groups_other_group_size():
    comparisons = make_comparisons(12, 2)
    captions = human_caps(12)
    groups = build_groups(comparisons, captions, seed=0, group_size=5)
    check_groups(groups, comparisons, captions, group_size=5)
    assert [len(g.comparison_ids) for g in groups] == [4] * 6  # 24 = 6 x 4


@pytest.mark.parametrize("seed", range(20))
def test_build_groups_distractor_is_never_an_image_of_the_group(seed):
    # 11 images: exactly enough for 9 comparison images, the check image and the distractor,
    # so a draw that ignored the group's images would pick one of them most of the time.
    comparisons = make_comparisons(11, 3)
    captions = human_caps(11)
    for g in build_groups(comparisons, captions, seed=seed):
        check = next(t for t in g.trials if t.kind == "attention_check")
        shown = [t.image_id for t in g.trials] + [check.distractor_image_id]
        assert len(shown) == len(set(shown)), "an image (or its caption) appears twice"


def test_build_groups_without_room_for_full_groups_shrink_them_so_no_image_repeats():
    # Worked by hand. 10 images with human captions, 2 comparisons each (20): a full group
    # of 9 comparison images would leave 1 image for both the check and its distractor, so
    # groups hold at most 10 - 2 = 8 comparisons. Largest-first: the first two groups take
    # 8 images each (every image keeps >= 1 comparison left), so the leftovers are 4.
    comparisons = make_comparisons(10, 2)
    captions = human_caps(10)
    for seed in range(20):
        groups = build_groups(comparisons, captions, seed=seed)
        check_groups(groups, comparisons, captions)
        assert [len(g.comparison_ids) for g in groups] == [8, 8, 4]
        assert all(g.is_short for g in groups), "fewer than 9 comparisons: short"


@pytest.mark.parametrize("seed", range(10))
def test_build_groups_three_images_is_the_smallest_study(seed):
    # Worked by hand: 3 images, room for 3 - 2 = 1 comparison per group. Each of the three
    # groups shows one comparison image, a check of a second image and a distractor caption
    # of the third, so every group meets all three images exactly once.
    comparisons = make_comparisons(3, 1)
    captions = human_caps(3)
    groups = build_groups(comparisons, captions, seed=seed)
    check_groups(groups, comparisons, captions)
    assert len(groups) == 3
    for g in groups:
        check = next(t for t in g.trials if t.kind == "attention_check")
        (compared,) = [t.image_id for t in g.trials if t.kind == "comparison"]
        met = [compared, check.image_id, check.distractor_image_id]
        assert sorted(met) == ["img0", "img1", "img2"]


def test_build_groups_refusals():
    captions = human_caps(3)
    with pytest.raises(ValueError, match="empty"):
        build_groups([], captions, seed=0)
    with pytest.raises(ValueError, match="twice"):
        build_groups([("c1", "img0"), ("c1", "img1")], captions, seed=0)
    with pytest.raises(ValueError, match="at least three images"):
        build_groups([("c1", "img0")], {"img0": ["h"], "img1": [], "img2": ["h2"]}, seed=0)
    with pytest.raises(ValueError, match="at least three images"):
        build_groups([("c1", "img0"), ("c2", "img1")], human_caps(2), seed=0)
    with pytest.raises(ValueError, match="group_size"):
        build_groups([("c1", "img0")], captions, seed=0, group_size=1)
    with pytest.raises(ValueError, match="pairs"):
        build_groups(["c1"], captions, seed=0)


# ---------------------------------------------------------------------------
# Report: a tiny set worked by hand
# ---------------------------------------------------------------------------

# worker, group, image, system, raw, human_on_left (correct_on_left for checks), is_check
TINY = [
    ("w1", "g1", "i1", "A", 2, True, False),  # s = 2 -> -0.75
    ("w1", "g1", "i2", "A", 7, False, False),  # s = 3 -> -0.5
    ("w1", "g1", "i3", "A", 6, False, False),  # s = 4 -> -0.25
    ("w1", "g1", "i1", "Human", 6, True, False),  # s = 6 -> 0.25
    ("w1", "g1", "i2", "Human", 3, False, False),  # s = 7 -> 0.5
    ("w1", "g1", "i9", "", 2, True, True),  # check: s = 2, passes
    ("w2", "g2", "i3", "A", 1, True, False),  # dropped (failed check in g2)
    ("w2", "g2", "i3", "Human", 1, True, False),  # dropped
    ("w2", "g2", "i8", "", 5, True, True),  # check: s = 5 (neutral) fails
    ("w2", "g3", "i4", "A", 9, False, False),  # s = 1 -> -1
    ("w2", "g3", "i4", "Human", 4, False, False),  # s = 6 -> 0.25
    ("w2", "g3", "i7", "", 8, False, True),  # check: s = 2, passes
    ("w3", "g2", "i5", "A", 4, True, False),  # s = 4 -> -0.25 (g2 of w3 is another group)
    ("w3", "g2", "i5", "Human", 5, False, False),  # s = 5 -> 0
    ("w3", "g2", "i6", "", 3, True, True),  # check: s = 3, passes
]


def responses(rows, dropped=None):
    return Responses(
        worker_ids=[r[0] for r in rows],
        group_ids=[r[1] for r in rows],
        image_ids=[r[2] for r in rows],
        systems=[r[3] for r in rows],
        raw=[r[4] for r in rows],
        human_on_left=[r[5] for r in rows],
        is_attention_check=[r[6] for r in rows],
        dropped=dropped,
    )


def test_report_by_hand():
    rep = report(responses(TINY), n_bootstrap=200, n_splits=50)
    a = rep["systems"]["A"]
    # Kept A values: -0.75, -0.5, -0.25, -1, -0.25 -> sum -2.75, mean -0.55.
    assert a["n_kept"] == 5 and a["n_comparisons"] == 6
    assert a["humanr"] == pytest.approx(-0.55)
    # Deviations from -0.55: -0.2, 0.05, 0.3, -0.45, 0.3 -> squares sum
    # 0.04 + 0.0025 + 0.09 + 0.2025 + 0.09 = 0.425; sd = sqrt(0.425 / 4).
    assert a["std"] == pytest.approx(math.sqrt(0.425 / 4))
    assert a["sem"] == pytest.approx(math.sqrt(0.425 / 4 / 5))
    half = scipy.stats.t.ppf(0.975, 4) * math.sqrt(0.425 / 20)
    assert a["t_interval"] == pytest.approx([-0.55 - half, -0.55 + half])
    assert a["n_images"] == 5  # i1, i2, i3, i4, i5
    lo, hi = a["bootstrap_interval"]
    assert -1.0 <= lo <= -0.55 <= hi <= 0
    # Baseline: Human kept values 0.25, 0.5, 0.25, 0 -> mean 0.25.
    base = rep["baseline"]
    assert base["humanr"] == pytest.approx(0.25) and base["n_kept"] == 4
    assert "Human" not in rep["systems"]
    # Position bias over the 9 kept comparisons: raws 2, 7, 6, 9, 4 (A) and 6, 3, 4, 5 (Human)
    # -> 46 / 9.
    assert rep["position_bias"]["mean_raw"] == pytest.approx(46 / 9)
    assert rep["position_bias"]["n"] == 9
    assert a["mean_raw"] == pytest.approx(28 / 5)
    checks = rep["attention_checks"]
    assert (checks["n_checks"], checks["n_failed"]) == (4, 1)
    assert checks["n_dropped_groups"] == 1 and checks["n_dropped_responses"] == 3
    assert checks["per_worker"]["w1"] == {
        "responses": 6,
        "groups": 1,
        "checks": 1,
        "failed_checks": 0,
        "dropped_groups": 0,
        "dropped_responses": 0,
    }
    assert checks["per_worker"]["w2"] == {
        "responses": 6,
        "groups": 2,
        "checks": 2,
        "failed_checks": 1,
        "dropped_groups": 1,
        "dropped_responses": 3,
    }
    assert rep["n_kept"] == 9 and rep["n_comparisons"] == 11
    json.dumps(rep, allow_nan=False)


def test_report_extra_dropped_flag():
    dropped = [r[0] == "w3" and r[3] == "A" for r in TINY]
    rep = report(responses(TINY, dropped=dropped), n_bootstrap=50, n_splits=10)
    # A without w3's -0.25: -0.75, -0.5, -0.25, -1 -> -2.5 / 4.
    assert rep["systems"]["A"]["humanr"] == pytest.approx(-0.625)
    assert rep["attention_checks"]["n_dropped_other"] == 1


def test_report_t_interval_matches_scipy_and_is_clipped():
    rng = np.random.default_rng(3)
    n = 57
    s = rng.integers(1, 10, n)
    rows = [("w1", f"g{k // 9}", f"i{k}", "A", int(s[k]), True, False) for k in range(n)]
    rep = report(responses(rows), n_bootstrap=50, n_splits=10)
    v = (s - 5) / 4
    lo, hi = scipy.stats.t.interval(0.95, n - 1, loc=v.mean(), scale=scipy.stats.sem(v))
    assert rep["systems"]["A"]["t_interval"] == pytest.approx([lo, hi])
    # Values -1, -1, -1, -0.75: mean -0.9375, sd 0.125, sem 0.0625, t(3) = 3.182 -> low -1.136,
    # clipped to -1; high -0.9375 + 0.199 = -0.739.
    rows = [("w1", "g", f"i{k}", "A", raw, True, False) for k, raw in enumerate([1, 1, 1, 2])]
    low, high = report(responses(rows), n_bootstrap=50, n_splits=10)["systems"]["A"]["t_interval"]
    assert low == -1.0
    assert high == pytest.approx(-0.9375 + scipy.stats.t.ppf(0.975, 3) * 0.0625)


def simulate(rng, true_humanr, n_images, n_workers=6):
    """A crowd preferring human captions: s = 1 + Binomial(8, q), E[value] = 2q - 1."""
    q = (true_humanr + 1) / 2
    s = 1 + rng.binomial(8, q, n_images)
    left = rng.random(n_images) < 0.5
    raw = np.where(left, s, 10 - s)
    workers = rng.integers(0, n_workers, n_images)
    rows = [
        (f"w{workers[k]}", f"g{k // 9}", f"i{k}", "M", int(raw[k]), bool(left[k]), False)
        for k in range(n_images)
    ]
    return responses(rows)


def test_coverage_simulation():
    true_humanr = -0.3
    hits_t = hits_boot = 0
    n_sims = 200
    for sim in range(n_sims):
        rng = np.random.default_rng(1000 + sim)
        rep = report(
            simulate(rng, true_humanr, 150),
            n_bootstrap=200,
            n_splits=5,
            image_counts=[],
            seed=sim,
        )
        m = rep["systems"]["M"]
        hits_t += m["t_interval"][0] <= true_humanr <= m["t_interval"][1]
        hits_boot += m["bootstrap_interval"][0] <= true_humanr <= m["bootstrap_interval"][1]
    assert hits_t / n_sims >= 0.90
    assert hits_boot / n_sims >= 0.90


def test_half_splits_are_worker_halves():
    rng = np.random.default_rng(4)
    rows = []
    for k in range(80):
        worker = f"w{k % 4}"
        raw = int(rng.integers(1, 10))
        rows.append((worker, f"g{k}", f"i{k}", "A", raw, True, False))
    rep = report(responses(rows), n_bootstrap=20, n_splits=600, include_distributions=True)
    # All C(4, 2) = 6 possible halves: HUMANr of the comparisons of the chosen 2 workers.
    values = {f"w{w}": [] for w in range(4)}
    for w, _, _, _, raw, _, _ in rows:
        values[w].append((raw - 5) / 4)
    possible = {}
    for pair in itertools.combinations(sorted(values), 2):
        rest = [w for w in values if w not in pair]
        a = np.mean(values[pair[0]] + values[pair[1]])
        b = np.mean(values[rest[0]] + values[rest[1]])
        possible[pair] = (a, b)
    hs = rep["systems"]["A"]["half_splits"]
    seen = Counter()
    for a, b in zip(hs["half_a"], hs["half_b"], strict=True):
        match = [p for p, (pa, pb) in possible.items() if np.isclose(a, pa) and np.isclose(b, pb)]
        assert match, (a, b)
        seen[match[0]] += 1
    assert len(seen) == 6 and min(seen.values()) > 60  # about 100 each
    diffs = np.array(hs["half_a"]) - np.array(hs["half_b"])
    assert hs["difference"]["mean"] == pytest.approx(diffs.mean())
    assert hs["difference"]["std"] == pytest.approx(diffs.std(ddof=1))
    assert rep["half_splits"]["half_a_size"] == 2


def test_std_by_image_count_matches_sampling_theory():
    rng = np.random.default_rng(6)
    n = 400
    s = rng.integers(1, 10, n)
    rows = [("w1", f"g{k}", f"i{k}", "A", int(s[k]), True, False) for k in range(n)]
    rep = report(
        responses(rows), n_bootstrap=20, n_splits=5, image_counts=[20, 100], n_image_draws=3000
    )
    v = (s - 5) / 4
    var = v.var(ddof=1)
    for entry in rep["std_by_image_count"]:
        k = entry["n_images"]
        # Mean of a k-subset drawn without replacement: var / k * (N - k) / N (population
        # variance with the N - 1 divisor).
        expected = math.sqrt(var / k * (n - k) / n)
        assert entry["std"]["A"] == pytest.approx(expected, rel=0.08)


def test_default_image_count_grid():
    rng = np.random.default_rng(7)
    rows = [("w1", "g", f"i{k}", "A", int(rng.integers(1, 10)), True, False) for k in range(120)]
    rep = report(responses(rows), n_bootstrap=20, n_splits=5, n_image_draws=20)
    assert [e["n_images"] for e in rep["std_by_image_count"]] == [10, 20, 50, 100]
    stds = [e["std"]["A"] for e in rep["std_by_image_count"]]
    assert stds == sorted(stds, reverse=True)


def test_report_seed_determinism():
    rows = simulate(np.random.default_rng(8), -0.2, 200)
    assert report(rows, seed=3) == report(rows, seed=3)
    assert report(rows, seed=3) != report(rows, seed=4)


def test_report_all_dropped_and_single_worker():
    rows = [
        ("w1", "g1", "i1", "A", 2, True, False),
        ("w1", "g1", "i2", "", 9, True, True),  # fails: s = 9
    ]
    rep = report(responses(rows), n_bootstrap=20, n_splits=5)
    a = rep["systems"]["A"]
    assert a["n_kept"] == 0 and a["humanr"] is None and a["t_interval"] is None
    assert rep["half_splits"] is None and rep["position_bias"]["mean_raw"] is None
    json.dumps(rep, allow_nan=False)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"raw": [0]}, "raw"),
        ({"raw": [10]}, "raw"),
        ({"raw": [4.5]}, "raw"),
        ({"raw": np.array([None], dtype=object)}, "raw"),
        ({"human_on_left": np.array([None], dtype=object)}, "human_on_left"),
        ({"human_on_left": [1]}, "human_on_left"),
        ({"is_attention_check": [0]}, "is_attention_check"),
        ({"systems": [""]}, "systems"),
        ({"worker_ids": np.array([None], dtype=object)}, "worker_ids"),
        ({"image_ids": ["a", "b"]}, "image_ids"),
    ],
)
def test_responses_refusals(change, field):
    base = {
        "worker_ids": ["w"],
        "image_ids": ["i"],
        "systems": ["A"],
        "raw": [3],
        "human_on_left": [True],
        "is_attention_check": [False],
        "group_ids": ["g"],
    }
    base.update(change)
    with pytest.raises(ValueError, match=field):
        Responses(**base)


def test_responses_refuse_empty_and_checks_only():
    with pytest.raises(ValueError, match="no responses"):
        responses([])
    with pytest.raises(ValueError, match="only attention checks"):
        report(responses([("w1", "g1", "i1", "", 2, True, True)]))


def test_from_records():
    recs = [
        {
            "worker_id": r[0],
            "group_id": r[1],
            "image_id": r[2],
            "system": r[3],
            "raw": r[4],
            "human_on_left": r[5],
            "is_attention_check": r[6],
        }
        for r in TINY
    ]
    a = report(Responses.from_records(recs), n_bootstrap=30, n_splits=5)
    b = report(responses(TINY), n_bootstrap=30, n_splits=5)
    assert a == b
    with pytest.raises(ValueError, match="raw"):
        Responses.from_records([{**recs[0], "raw": None}])


def test_check_rows_may_have_no_system_and_ids_must_be_comparable():
    rows = [("w1", "g1", "i1", "A", 2, True, False), ("w1", "g1", "i2", None, 2, True, True)]
    rep = report(responses(rows), n_bootstrap=20, n_splits=5)
    assert rep["systems"]["A"]["humanr"] == -0.75  # s = 2 -> (2 - 5) / 4
    mixed = np.array(["w1", 2], dtype=object)
    with pytest.raises(ValueError, match="worker_ids"):
        Responses(
            worker_ids=mixed,
            image_ids=["i1", "i2"],
            systems=["A", "A"],
            raw=[2, 3],
            human_on_left=[True, True],
            is_attention_check=[False, False],
            group_ids=["g", "g"],
        )


def test_bootstrap_is_clustered_by_image_and_matches_a_loop():
    rng = np.random.default_rng(9)
    rows = []
    for i in range(30):
        for w in range(int(rng.integers(1, 4))):  # 1-3 comparisons per image
            rows.append((f"w{w}", f"g{i}", f"i{i:02d}", "A", int(rng.integers(1, 10)), True, False))
    rep = report(responses(rows), n_bootstrap=300, n_splits=5, seed=11)
    images = sorted({r[2] for r in rows})
    sums = np.array([sum((r[4] - 5) / 4 for r in rows if r[2] == i) for i in images])
    counts = np.array([sum(1 for r in rows if r[2] == i) for i in images])
    # Resample r draws images idx[r] (the bootstrap is the first use of the seed's stream).
    reps = [sums[d].sum() / counts[d].sum() for d in resample_indices(30, 300, 11)]
    lo, hi = np.percentile(reps, [2.5, 97.5])
    assert rep["systems"]["A"]["bootstrap_interval"] == pytest.approx([lo, hi])


# ---------------------------------------------------------------------------
# Each system against the Human-vs-Human baseline
# ---------------------------------------------------------------------------


def scipy_paired_p(system, human, n_resamples, seed=None):
    """scipy's paired permutation test of the mean difference (independent of ours)."""
    return scipy.stats.permutation_test(
        (system, human),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        random_state=seed,
    ).pvalue


def test_baseline_test_by_hand_every_sign_flip():
    # Three images, d = 0.25, 0.5, 0.75 (system minus baseline), observed sum 1.5. The
    # 8 flips give sums +-1.5 (all signs alike), +-1.0, +-0.5 and 0 twice: only the two
    # all-alike flips reach |1.5|, so p = 2 / 8. A fourth image has no value of the system
    # and a fifth no baseline value: both are left out of the pairs (and of the flips).
    values = np.array(
        [[0.25, 0.0], [0.25, -0.25], [1.0, 0.25], [np.nan, 0.5], [0.5, np.nan]]
    )  # columns: A, Human
    test = baseline_tests(values, ["A", "Human"])["A"]
    assert test["p_value"] == 2 / 8
    assert test["exact"] is True and test["n_permutations"] == 2**3
    assert test["n_images"] == 3
    assert test["difference"] == pytest.approx(0.5)
    assert test["test"] == BASELINE_TEST


def test_baseline_test_by_hand_with_ties_at_the_observed_sum():
    # d = 0.5, -0.5, 0.25, 0.25: observed sum 0.5. The sum of the first two, flipped, is
    # 1, 0, 0 or -1; of the last two 0.5, 0, 0 or -0.5. Of the 16 combinations only the four
    # with both parts 0 have |sum| < 0.5, so 12 are at least as extreme: p = 12 / 16.
    human = np.array([0.0, 0.5, -0.25, 0.0])
    system = human + np.array([0.5, -0.5, 0.25, 0.25])
    test = baseline_tests(np.column_stack([human, system]), ["Human", "B"])["B"]
    assert test["p_value"] == 12 / 16
    assert test["difference"] == pytest.approx(0.125)
    # All differences 0: every flip ties with the observed 0, p = 1.
    same = baseline_tests(np.column_stack([human, human]), ["Human", "B"])["B"]
    assert same["p_value"] == 1.0 and same["difference"] == 0.0
    assert same["interval_excludes_baseline"] is False and same["difference_interval"] == [0, 0]


@pytest.mark.parametrize("seed", range(5))
def test_baseline_test_exact_p_values_match_scipy(seed):
    # 12 images (4,096 flips, below the 10,000 permutations: exact in both), answers in
    # quarters as the mode stores them, some images without a value of a system.
    rng = np.random.default_rng(seed)
    values = rng.integers(-4, 5, size=(12, 3)) / 4 + np.array([0.0, -0.25, 0.1])
    values[rng.random((12, 3)) < 0.15] = np.nan
    values[:, 0] = rng.integers(-4, 5, size=12) / 4  # every image has a baseline value
    tests = baseline_tests(values, ["Human", "A", "B"], n_permutations=10_000, seed=seed)
    for j, name in ((1, "A"), (2, "B")):
        pairs = ~np.isnan(values[:, j])
        assert tests[name]["exact"]
        expected = scipy_paired_p(values[pairs, j], values[pairs, 0], n_resamples=10**6)
        assert tests[name]["p_value"] == pytest.approx(expected, abs=1e-12)
        assert tests[name]["n_images"] == pairs.sum()


@pytest.mark.parametrize("seed", range(4))
def test_baseline_test_monte_carlo_p_values_agree_with_scipy(seed):
    # 300 images: random flips in both, from different streams, so the p-values differ by
    # Monte Carlo error only: with 9,999 flips each, the difference has a standard error of
    # at most sqrt(2 * 0.25 / 10,000) = 0.007; 0.03 is more than 4 of them.
    rng = np.random.default_rng(100 + seed)
    human = rng.integers(-4, 5, size=300) / 4
    system = np.clip(human + rng.integers(-4, 5, size=300) / 4 - 0.05 * seed, -1, 1)
    test = baseline_tests(
        np.column_stack([system, human]), ["A", "Human"], n_permutations=9_999, seed=seed
    )["A"]
    expected = scipy_paired_p(system, human, n_resamples=9_999, seed=seed)
    assert not test["exact"] and test["n_permutations"] == 9_999
    assert test["p_value"] == pytest.approx(expected, abs=0.03)


def test_baseline_test_monte_carlo_p_value_is_never_zero():
    # 40 images all 1 apart: only the two all-alike flips of 2^40 reach the observed sum,
    # so 10,000 random flips almost surely miss them and p = (1 + 0) / (1 + 10,000).
    values = np.column_stack([np.full(40, -0.5), np.full(40, 0.5)])
    test = baseline_tests(values, ["A", "Human"], n_permutations=10_000)["A"]
    assert test["p_value"] == 1 / 10_001
    assert test["difference"] == -1.0 and test["interval_excludes_baseline"] is True
    assert test["difference_interval"] == [-1.0, -1.0]


def test_baseline_test_interval_is_the_paired_bootstrap_over_images():
    # The bootstrap is the first use of the seed: resample r draws images
    # resample_indices(n, n_bootstrap, seed)[r], the same for every system, and a
    # system's replicate is the mean difference over the drawn images where it has one.
    rng = np.random.default_rng(21)
    values = rng.integers(-4, 5, size=(50, 3)) / 4
    values[rng.random(50) < 0.2, 2] = np.nan
    tests = baseline_tests(values, ["Human", "A", "B"], n_bootstrap=400, seed=13)
    draws = resample_indices(50, 400, 13)
    for j, name in ((1, "A"), (2, "B")):
        d = values[:, j] - values[:, 0]
        replicates = [np.nanmean(d[rows]) for rows in draws]
        low, high = np.percentile(replicates, [2.5, 97.5])
        assert tests[name]["difference_interval"] == pytest.approx([low, high])
        assert tests[name]["interval_excludes_baseline"] is bool(low > 0 or high < 0)
        assert tests[name]["difference"] == pytest.approx(np.nanmean(d))


def test_baseline_test_rejects_at_its_level_under_the_null_and_finds_a_real_gap():
    # 400 simulated studies of 60 images where the system is judged like the baseline
    # (both columns drawn alike): a valid test rejects at 5% in about 5% of them (binomial
    # standard error 1.1%). Where the system is 0.5 worse (about 4 standard errors of the
    # mean difference, sd 0.9 / sqrt(60)), it rejects nearly always.
    rng = np.random.default_rng(5)
    null_p, gap_p = [], []
    for _ in range(400):
        baseline = rng.integers(-4, 5, size=60) / 4
        alike = rng.integers(-4, 5, size=60) / 4
        worse = np.clip(alike - 0.5, -1, 1)
        tests = baseline_tests(
            np.column_stack([baseline, alike, worse]),
            ["Human", "alike", "worse"],
            n_permutations=999,
            n_bootstrap=100,
            seed=rng,
        )
        null_p.append(tests["alike"]["p_value"])
        gap_p.append(tests["worse"]["p_value"])
    assert 0.02 <= np.mean(np.array(null_p) <= 0.05) <= 0.09
    assert np.mean(np.array(gap_p) <= 0.05) >= 0.9


def test_baseline_test_refusals_and_a_system_without_pairs():
    with pytest.raises(ValueError, match="baseline"):
        baseline_tests(np.zeros((3, 2)), ["A", "B"])
    with pytest.raises(ValueError, match="shape"):
        baseline_tests(np.zeros((3, 2)), ["A", "B", "Human"])
    with pytest.raises(ValueError, match="twice"):
        baseline_tests(np.zeros((3, 2)), ["Human", "Human"])
    with pytest.raises(ValueError, match="infinite"):
        baseline_tests(np.array([[np.inf, 0.0]]), ["A", "Human"])
    with pytest.raises(ValueError, match="n_permutations"):
        baseline_tests(np.zeros((3, 2)), ["A", "Human"], n_permutations=0)
    lonely = baseline_tests(np.array([[np.nan, 0.5], [0.25, np.nan]]), ["A", "Human"])["A"]
    assert lonely["n_images"] == 0 and lonely["p_value"] is None
    assert lonely["difference"] is None and lonely["interval_excludes_baseline"] is None


def test_report_tests_each_system_against_the_baseline_by_hand():
    # TINY, kept: A on i1 -0.75, i2 -0.5, i3 -0.25, i4 -1, i5 -0.25; Human on i1 0.25,
    # i2 0.5, i4 0.25, i5 0 (Human on i3 is in w2's dropped group). Paired images i1, i2,
    # i4, i5: d = -1, -1, -1.25, -0.25, mean -0.875. Of the 2^4 flips only the two
    # all-alike ones reach |-3.5| (flipping the smallest, 0.25, gives 3.0): p = 2 / 16.
    rep = report(responses(TINY), n_bootstrap=200, n_splits=50)
    test = rep["systems"]["A"]["vs_baseline"]
    assert test["n_images"] == 4 and test["exact"]
    assert test["difference"] == pytest.approx(-0.875)
    assert test["p_value"] == 2 / 16
    assert rep["baseline"]["vs_baseline"] is None
    assert rep["settings"]["n_permutations"] == 10_000
    json.dumps(rep, allow_nan=False)
    # Without Human-vs-Human comparisons there is nothing to test against.
    no_baseline = report(responses([r for r in TINY if r[3] != "Human"]), n_splits=5)
    assert no_baseline["systems"]["A"]["vs_baseline"] is None


def test_the_report_tests_as_baseline_tests_does_on_the_per_image_means():
    # The report's bootstrap draws the images once for the systems and the differences, as
    # the first use of its seed; baseline_tests' bootstrap is the first use of its seed too,
    # over the same rows (the images with a kept comparison, in order): same intervals.
    rep = report(responses(TINY), n_bootstrap=200, n_splits=50, seed=3)
    nan = np.nan
    means = np.array(
        [[-0.75, 0.25], [-0.5, 0.5], [-0.25, nan], [-1.0, 0.25], [-0.25, 0.0]]
    )  # rows i1-i5, columns A and Human (by hand from TINY, see above)
    alone = baseline_tests(means, ["A", "Human"], n_bootstrap=200, seed=3)["A"]
    from_report = rep["systems"]["A"]["vs_baseline"]
    assert from_report["difference_interval"] == pytest.approx(alone["difference_interval"])
    assert {**from_report, "difference_interval": None} == {**alone, "difference_interval": None}


def test_the_baseline_tests_come_last_so_the_other_numbers_stay_as_they_were():
    # The tests draw from the report's generator after everything else, so how they draw
    # (here: 4 images, exact with 16 flips or Monte Carlo with 10) changes nothing else.
    rep = report(responses(TINY), n_bootstrap=200, n_splits=50, seed=3)
    again = report(responses(TINY), n_bootstrap=200, n_splits=50, seed=3, n_permutations=10)
    assert rep["systems"]["A"]["vs_baseline"]["exact"]
    assert not again["systems"]["A"]["vs_baseline"]["exact"]
    for result in (rep, again):
        result["systems"]["A"].pop("vs_baseline")
        result["settings"].pop("n_permutations")
    assert rep == again
