"""Tests of rubrics.context: the context mode's questions and its BLV/sighted report.

Expected values are worked by hand (arithmetic in the comments) or come from independent
code written here (plain loops) and from statsmodels (OLS on a constant with
``cov_type="cluster"``: the same rater-clustered variance, G/(G-1) corrected, and t(G-1)
intervals) and the ``krippendorff`` package.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import krippendorff
import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubrics.agreement import krippendorff_alpha
from rubrics.context import (
    AFTER,
    BEFORE,
    QUESTIONS,
    ContextRating,
    clustered_mean,
    context_report,
    group_difference,
    ordinal_alpha,
)

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rating(participant, item, group, overall, after=None, *, system="s", domain="news", **rest):
    """A ContextRating whose before-image dimensions other than overall default to 3."""
    before = {d: rest.get(d, 3) for d in BEFORE}
    before["overall"] = overall
    return ContextRating(
        participant=participant,
        item=item,
        caption=item,
        system=system,
        domain=domain,
        group=group,
        before=before,
        after=None if after is None else {"overall": after, "accuracy": 4, "missing": ""},
    )


# ---------------------------------------------------------------------------
# Questions
# ---------------------------------------------------------------------------


def test_every_dimension_has_one_question_with_five_distinct_words():
    assert set(QUESTIONS[0]) == set(BEFORE) and set(QUESTIONS[1]) == set(AFTER)
    for part in (0, 1):
        for name, question in QUESTIONS[part].items():
            assert question.name == name and question.text.endswith("?")
            assert len(question.scale) == 5 and len(set(question.scale)) == 5
            assert all(word.strip() for word in question.scale) and question.source


def test_overall_is_asked_last_before_the_image():
    """Both studies asked the overall question after the others."""
    assert list(QUESTIONS[0])[-1] == "overall"


@pytest.mark.parametrize(
    ("part", "name", "text", "ends"),
    [
        # The BLV form's words (Kreiss et al. 2022), checked against the study's materials.
        (
            0,
            "imaginability",
            "How well can you imagine this image in your mind?",
            ("Not well", "Very well"),
        ),
        (
            0,
            "relevance",
            "How well does the description capture the relevant aspects of the image?",
            ("Not well", "Very well"),
        ),
        (
            0,
            "irrelevance",
            "Does the description mention extra information unnecessary for "
            "making the image accessible?",
            ("Yes, too much", "No, just right"),
        ),
        (
            0,
            "overall",
            "How good is the description for overall nonvisual accessibility?",
            ("Not good", "Very good"),
        ),
    ],
)
def test_before_questions_keep_the_papers_words(part, name, text, ends):
    question = QUESTIONS[part][name]
    assert question.text == text
    assert (question.scale[0], question.scale[-1]) == ends


# ---------------------------------------------------------------------------
# A hand-worked study
# ---------------------------------------------------------------------------

# BLV: rater 1 rates items 1, 2 overall 2 and 4; rater 2 rates item 1 overall 5.
# Sighted: rater 3 rates items 11, 12 overall 1 and 3 (after: 2, 3);
#          rater 4 rates items 11, 12 overall 2 and 4 (after: 3, 5).
HAND = [
    rating(1, 1, "blv", 2),
    rating(1, 2, "blv", 4),
    rating(2, 1, "blv", 5),
    rating(3, 11, "sighted", 1, after=2),
    rating(3, 12, "sighted", 3, after=3),
    rating(4, 11, "sighted", 2, after=3),
    rating(4, 12, "sighted", 4, after=5),
]


def test_hand_worked_group_means_and_clustered_intervals():
    cell = context_report(HAND).systems["s"].all
    blv = cell.groups["blv"].before["overall"]
    # BLV: n = 3, mean = 11/3. Residuals summed per rater: rater 1 (2 - 11/3) + (4 - 11/3)
    # = -4/3; rater 2: 5 - 11/3 = 4/3. var = G/(G-1) * sum^2 / n^2 = 2 * (32/9) / 9 = 64/81,
    # se = 8/9, df = G - 1 = 1, t_{0.975, 1} = 12.706204736...
    t1 = 12.706204736174698
    assert (blv.n, blv.n_raters) == (3, 2)
    assert blv.mean == pytest.approx(11 / 3, abs=1e-12)
    assert blv.se == pytest.approx(8 / 9, abs=1e-12)
    assert blv.df == 1
    assert blv.low == pytest.approx(11 / 3 - t1 * 8 / 9, abs=1e-9)
    assert blv.high == pytest.approx(11 / 3 + t1 * 8 / 9, abs=1e-9)
    sighted = cell.groups["sighted"].before["overall"]
    # Sighted: mean = 10/4 = 5/2; rater 3: (1 - 5/2) + (3 - 5/2) = -1; rater 4: +1.
    # var = 2 * 2 / 16 = 1/4, se = 1/2.
    assert sighted.mean == pytest.approx(2.5, abs=1e-12)
    assert sighted.se == pytest.approx(0.5, abs=1e-12)
    assert sighted.low == pytest.approx(2.5 - t1 * 0.5, abs=1e-9)


def test_hand_worked_difference_and_change():
    cell = context_report(HAND).systems["s"].all
    diff = cell.difference["overall"]
    # BLV - sighted = 11/3 - 5/2 = 7/6; var = 64/81 + 1/4 = 337/324.
    # Welch-Satterthwaite df = (337/324)^2 / ((64/81)^2 / 1 + (1/4)^2 / 1)
    var = 337 / 324
    df = var**2 / ((64 / 81) ** 2 + (1 / 4) ** 2)
    half = scipy.stats.t.ppf(0.975, df) * math.sqrt(var)
    assert diff.mean == pytest.approx(7 / 6, abs=1e-12)
    assert diff.se == pytest.approx(math.sqrt(var), abs=1e-12)
    assert diff.df == pytest.approx(df, abs=1e-12)
    assert (diff.low, diff.high) == pytest.approx((7 / 6 - half, 7 / 6 + half), abs=1e-12)
    assert (diff.n, diff.n_raters) == (7, 4)
    # Change (after - before): rater 3: +1, 0; rater 4: +1, +1. mean = 3/4.
    # Residuals per rater: rater 3: 1/4 - 3/4 = -1/2; rater 4: 1/4 + 1/4 = +1/2.
    # var = 2 * (1/4 + 1/4) / 16 = 1/16, se = 1/4, df = 1.
    change = cell.change
    assert change.mean == pytest.approx(0.75, abs=1e-12)
    assert change.se == pytest.approx(0.25, abs=1e-12)
    assert change.high == pytest.approx(0.75 + 12.706204736174698 * 0.25, abs=1e-9)
    # The after-image overall mean: (2 + 3 + 3 + 5) / 4 = 13/4.
    assert cell.groups["sighted"].after["overall"].mean == pytest.approx(3.25, abs=1e-12)


def test_hand_worked_agreement():
    # BLV overall: item 1 holds {2, 5}, item 2 holds {4} (not pairable). Pairable: n = 2
    # values, one unit with m_u = 2, so o_25 = o_52 = 1 and n_2 = n_5 = 1. Ordinal delta d
    # between 2 and 5: alpha = 1 - (n - 1) * (o_25 + o_52) d / ((n_2 n_5 + n_5 n_2) d)
    # = 1 - 1 * 2d / 2d = 0.
    cell = context_report(HAND).systems["s"].all
    agreement = cell.groups["blv"].agreement_before["overall"]
    assert (agreement.n_items, agreement.n_ratings) == (1, 2)
    assert agreement.alpha == pytest.approx(0.0, abs=1e-12)


def test_hand_worked_agreement_above_zero():
    # Raters 1 and 2 rate items 1, 2, 3 "relevance": item 1 {1, 1}, item 2 {3, 3},
    # item 3 {1, 3}. n = 6, n_1 = n_3 = 3. With two values every disagreement has the same
    # ordinal delta d: observed sum o_13 + o_31 = 2 (item 3, m_u = 2); expected
    # sum n_c n_k = 2 * 3 * 3 = 18. alpha = 1 - (n - 1) * 2d / (18 d) = 1 - 10/18 = 4/9.
    values = {(1, 1): 1, (1, 2): 3, (1, 3): 1, (2, 1): 1, (2, 2): 3, (2, 3): 3}
    rows = [
        rating(p, i, "blv", 3, relevance=v)  # overall 3 everywhere: alpha undefined there
        for (p, i), v in values.items()
    ]
    group = context_report(rows).systems["s"].all.groups["blv"]
    assert group.agreement_before["relevance"].alpha == pytest.approx(4 / 9, abs=1e-12)
    assert (group.agreement_before["relevance"].n_items, group.n_items) == (3, 3)
    assert group.agreement_before["overall"].alpha is None


# ---------------------------------------------------------------------------
# An independent implementation (loops and statsmodels) on random studies
# ---------------------------------------------------------------------------


def loop_clustered(values, raters, confidence=0.95):
    """Mean, se, low, high by plain loops (the sandwich variance of the module docstring)."""
    n = len(values)
    mean = sum(values) / n
    sums = defaultdict(float)
    for y, r in zip(values, raters, strict=True):
        sums[r] += y - mean
    g = len(sums)
    var = g / (g - 1) * sum(s * s for s in sums.values()) / n**2
    se = math.sqrt(var)
    half = scipy.stats.t.ppf(0.5 + confidence / 2, g - 1) * se
    return mean, se, mean - half, mean + half


def statsmodels_clustered(values, raters, confidence=0.95):
    y = np.asarray(values, dtype=float)
    fit = sm.OLS(y, np.ones_like(y)).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(raters)}, use_t=True
    )
    low, high = fit.conf_int(1 - confidence)[0]
    return float(fit.params[0]), float(fit.bse[0]), float(low), float(high)


def random_study(
    seed, n_raters=8, n_items=6, systems=("a", "b"), domains=("news", "shop"), top=5, shift=0
):
    """Raters 0..n-1 (even: BLV, odd: sighted), each rating a random half of the items.

    Ratings are drawn from 1..top, then ``shift`` is added to every one of them.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_raters):
        group = "blv" if p % 2 == 0 else "sighted"
        for i in range(n_items):
            if rng.random() < 0.5:
                continue
            for s_idx, system in enumerate(systems):
                item = (1000 if group == "blv" else 0) + 10 * i + s_idx
                before = {d: int(rng.integers(1, top + 1)) + shift for d in BEFORE}
                after = None
                if group == "sighted" and rng.random() < 0.9:
                    after = {d: int(rng.integers(1, top + 1)) + shift for d in AFTER}
                rows.append(
                    ContextRating(
                        participant=p,
                        item=item,
                        caption=10 * i + s_idx,
                        system=system,
                        domain=domains[i % len(domains)],
                        group=group,
                        before=before,
                        after=after,
                    )
                )
    return rows


def select(rows, system, domain, group):
    return [
        r for r in rows if r.system == system and r.group == group and domain in (None, r.domain)
    ]


@pytest.mark.parametrize("seed", range(6))
def test_means_equal_loops_and_statsmodels(seed):
    rows = random_study(seed)
    result = context_report(rows)
    for system, sys_result in result.systems.items():
        for domain, cell in [(None, sys_result.all), *sys_result.domains.items()]:
            for group in ("blv", "sighted"):
                chosen = select(rows, system, domain, group)
                for d in BEFORE:
                    est = cell.groups[group].before[d]
                    values = [r.before[d] for r in chosen]
                    raters = [r.participant for r in chosen]
                    if len(set(raters)) < 2:
                        assert est.low is None and est.note
                        continue
                    expected = loop_clustered(values, raters)
                    if expected[1] < 1e-12:  # no interval from a zero standard error
                        assert est.se == 0 and est.low is None and est.note
                        continue
                    got = (est.mean, est.se, est.low, est.high)
                    assert got == pytest.approx(expected, abs=1e-12)
                    assert got == pytest.approx(statsmodels_clustered(values, raters), abs=1e-10)
            paired = [r for r in select(rows, system, domain, "sighted") if r.after]
            deltas = [r.after["overall"] - r.before["overall"] for r in paired]
            raters = [r.participant for r in paired]
            if len(set(raters)) >= 2:
                c = cell.change
                expected = loop_clustered(deltas, raters)
                if expected[1] < 1e-12:  # no interval from a zero standard error
                    assert c.se == 0 and c.low is None and c.note
                    continue
                assert (c.mean, c.se, c.low, c.high) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_difference_equals_loops(seed):
    rows = random_study(seed, n_raters=10)
    cell = context_report(rows).systems["a"].all
    for d in BEFORE:
        parts = []
        for group in ("blv", "sighted"):
            chosen = select(rows, "a", None, group)
            mean, se, _, _ = loop_clustered(
                [r.before[d] for r in chosen], [r.participant for r in chosen]
            )
            parts.append((mean, se * se, len({r.participant for r in chosen}) - 1))
        (ma, va, fa), (mb, vb, fb) = parts
        df = (va + vb) ** 2 / (va * va / fa + vb * vb / fb)
        half = scipy.stats.t.ppf(0.975, df) * math.sqrt(va + vb)
        diff = cell.difference[d]
        expected = (ma - mb, ma - mb - half, ma - mb + half)
        assert (diff.mean, diff.low, diff.high) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_alpha_equals_rubrics_and_krippendorff_on_the_rater_matrix(seed):
    rows = random_study(seed, n_raters=10)
    cell = context_report(rows).systems["b"].domains["news"]
    for group in ("blv", "sighted"):
        chosen = select(rows, "b", "news", group)
        raters = sorted({r.participant for r in chosen})
        items = sorted({r.item for r in chosen})
        for d in BEFORE:
            matrix = np.full((len(raters), len(items)), np.nan)
            for r in chosen:
                matrix[raters.index(r.participant), items.index(r.item)] = r.before[d]
            got = cell.groups[group].agreement_before[d].alpha
            try:
                expected = krippendorff_alpha(matrix, "ordinal")
            except ValueError:
                assert got is None
                continue
            assert got == pytest.approx(expected, abs=1e-12)
            package = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
            assert got == pytest.approx(package, abs=1e-9)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@st.composite
def values_and_raters(draw):
    n = draw(st.integers(2, 30))
    values = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    raters = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    return values, raters


@PROPERTY
@given(values_and_raters(), st.randoms(use_true_random=False))
def test_clustered_mean_is_permutation_invariant(data, random):
    values, raters = data
    order = list(range(len(values)))
    random.shuffle(order)
    a = clustered_mean(values, raters, confidence=0.9)
    b = clustered_mean([values[i] for i in order], [raters[i] for i in order], confidence=0.9)
    assert a.mean == pytest.approx(b.mean, abs=1e-12)
    assert (a.se is None) == (b.se is None)
    if a.se is not None:
        assert a.se == pytest.approx(b.se, abs=1e-12)
        assert a.df == b.df


def close(a, b):
    """Equal JSON trees, floats to 1e-12 (sums in another order round differently)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0, abs_tol=1e-12)
    return a == b


@PROPERTY
@given(values_and_raters(), values_and_raters(), st.integers(-10, 10))
def test_shift_moves_means_and_keeps_differences(a, b, c):
    """Shifting every rating by c shifts each mean by c; se, df and differences stay."""
    base_a, base_b = (clustered_mean(v, r, confidence=0.95) for v, r in (a, b))
    moved_a, moved_b = (clustered_mean([y + c for y in v], r, confidence=0.95) for v, r in (a, b))
    for base, moved in ((base_a, moved_a), (base_b, moved_b)):
        assert moved.mean == pytest.approx(base.mean + c, abs=1e-12)
        assert (moved.se is None) == (base.se is None)
        if base.se is not None:
            assert moved.se == pytest.approx(base.se, abs=1e-12)
    diff = group_difference(base_a, base_b, confidence=0.95)
    moved_diff = group_difference(moved_a, moved_b, confidence=0.95)
    assert moved_diff.mean == pytest.approx(diff.mean, abs=1e-12)
    assert (moved_diff.low is None) == (diff.low is None)
    if diff.low is not None:
        assert moved_diff.low == pytest.approx(diff.low, abs=1e-12)
        assert moved_diff.high == pytest.approx(diff.high, abs=1e-12)


def walk(tree, path=()):
    """(path, value) of every leaf of a JSON tree."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from walk(value, (*path, key))
    else:
        yield path, tree


@PROPERTY
@given(st.integers(0, 2**32 - 1), st.integers(1, 2))
def test_shifting_every_rating_shifts_the_reports_means_only(seed, c):
    """Ratings 1-3 moved to (1 + c)-(3 + c): means move by c; se, intervals' widths,
    differences, the change and (ordinal) alpha stay."""
    base = context_report(random_study(seed, n_raters=6, n_items=4, top=3)).as_dict()
    moved = context_report(random_study(seed, n_raters=6, n_items=4, top=3, shift=c)).as_dict()
    leaves = dict(walk(moved))
    for path, value in walk(base):
        got = leaves[path]
        is_mean = "groups" in path and path[-1] in ("mean", "low", "high")
        if is_mean and value is not None:
            assert got == pytest.approx(value + c, abs=1e-12), path
        elif isinstance(value, float):
            assert got == pytest.approx(value, abs=1e-12), path
        else:
            assert got == value, path


@PROPERTY
@given(st.integers(0, 2**32 - 1))
def test_report_is_invariant_to_the_order_of_ratings(seed):
    rows = random_study(seed, n_raters=6, n_items=4)
    shuffled = list(rows)
    np.random.default_rng(seed).shuffle(shuffled)
    assert close(context_report(shuffled).as_dict(), context_report(rows).as_dict())


@PROPERTY
@given(values_and_raters(), st.lists(st.integers(0, 8), min_size=30, max_size=30))
def test_alpha_equals_the_rater_matrix_alpha(data, unit_draws):
    """Packing values per item gives the raters x items alpha (values in any rows)."""
    values, raters = data
    items = unit_draws[: len(values)]
    pairs = {}
    for y, r, i in zip(values, raters, items, strict=True):
        pairs[(r, i)] = y  # one rating per (rater, item), as context_report requires
    values = list(pairs.values())
    raters = [r for r, _ in pairs]
    items = [i for _, i in pairs]
    got = ordinal_alpha(values, items)
    rater_ids, item_ids = sorted(set(raters)), sorted(set(items))
    matrix = np.full((len(rater_ids), len(item_ids)), np.nan)
    for y, r, i in zip(values, raters, items, strict=True):
        matrix[rater_ids.index(r), item_ids.index(i)] = y
    try:
        expected = krippendorff_alpha(matrix, "ordinal")
    except ValueError:
        assert got.alpha is None and got.note
        return
    assert got.alpha == pytest.approx(expected, abs=1e-12)
    package = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    assert got.alpha == pytest.approx(package, abs=1e-9)


# ---------------------------------------------------------------------------
# Edge cases: thin data gives None with a reason, bad input a ValueError
# ---------------------------------------------------------------------------


def test_empty_study():
    result = context_report([])
    assert result.systems == {} and result.n_ratings == 0
    assert json.loads(json.dumps(result.as_dict(), allow_nan=False))["n_raters"] == {
        "blv": 0,
        "sighted": 0,
    }


def test_one_group_only_and_one_rater():
    rows = [rating(1, 1, "sighted", 3, after=4), rating(1, 2, "sighted", 5, after=5)]
    cell = context_report(rows).systems["s"].all
    blv = cell.groups["blv"].before["overall"]
    assert (blv.n, blv.mean, blv.low, blv.note) == (0, None, None, "no ratings")
    sighted = cell.groups["sighted"].before["overall"]
    assert sighted.mean == 4.0 and sighted.low is None and "one rater" in sighted.note
    diff = cell.difference["overall"]
    assert diff.mean is None and diff.note == "a group has no ratings"
    assert cell.change.mean == pytest.approx(0.5) and cell.change.low is None
    assert cell.groups["sighted"].agreement_before["overall"].alpha is None
    assert cell.groups["blv"].after["accuracy"].note == "no ratings"
    json.dumps(context_report(rows).as_dict(), allow_nan=False)


def test_constant_ratings_have_no_interval_and_say_why():
    rows = [rating(p, i, "blv", 4) for p in (1, 2) for i in (1, 2)]
    rows += [rating(p, 10 + i, "sighted", 2) for p in (3, 4) for i in (1, 2)]
    cell = context_report(rows).systems["s"].all
    blv = cell.groups["blv"].before["overall"]
    assert blv.mean == 4.0 and blv.se == 0.0 and blv.low is None
    assert "all ratings are equal" in blv.note
    diff = cell.difference["overall"]
    assert diff.mean == 2.0 and diff.low is None and "0" in diff.note
    alpha = cell.groups["blv"].agreement_before["overall"]
    assert alpha.alpha is None and "undefined" in alpha.note


def test_zero_standard_error_without_constant_ratings():
    # Rater 1: 1, 5 (mean 3); rater 2: 3, 3: every rater's residuals sum to 0.
    est = clustered_mean([1, 5, 3, 3], [1, 1, 2, 2], confidence=0.95)
    assert est.mean == 3.0 and est.se == 0.0 and est.low is None
    assert "overall mean" in est.note


def test_difference_with_one_rater_in_a_group_has_no_interval():
    a = clustered_mean([1, 2, 3], [1, 2, 3], confidence=0.95)
    b = clustered_mean([4, 5], [7, 7], confidence=0.95)
    diff = group_difference(a, b, confidence=0.95)
    assert diff.mean == pytest.approx(-2.5) and diff.low is None and "one rater" in diff.note


def test_domains_are_reported_apart():
    rows = [rating(1, 1, "blv", 5, domain="news"), rating(1, 2, "blv", 1, domain="shopping")]
    result = context_report(rows).systems["s"]
    assert list(result.domains) == ["news", "shopping"]
    assert result.domains["news"].groups["blv"].before["overall"].mean == 5.0
    assert result.domains["shopping"].groups["blv"].before["overall"].mean == 1.0
    assert result.all.groups["blv"].before["overall"].mean == 3.0
    assert result.all.domain is None and result.domains["news"].domain == "news"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group": "partly"}, "group"),
        ({"participant": True}, "participant"),
        ({"item": "3"}, "item"),
        ({"system": ""}, "system"),
        ({"before": {"overall": 3}}, "before"),
        ({"before": {d: 6 for d in BEFORE}}, "before"),
        ({"before": {**{d: 3 for d in BEFORE}, "overall": 2.0}}, "before"),
        ({"before": {**{d: 3 for d in BEFORE}, "extra": 1}}, "before"),
        ({"after": {"overall": 3}}, "after"),
        ({"group": "blv", "after": {"overall": 3, "accuracy": 3}}, "BLV"),
    ],
)
def test_bad_ratings_are_refused(change, message):
    fields = {
        "participant": 1,
        "item": 1,
        "caption": 1,
        "system": "s",
        "domain": "news",
        "group": "sighted",
        "before": {d: 3 for d in BEFORE},
        "after": None,
        **change,
    }
    with pytest.raises(ValueError, match=message):
        ContextRating(**fields)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([rating(1, 1, "blv", 3), rating(1, 2, "sighted", 3)], "both groups"),
        ([rating(1, 1, "blv", 3), rating(2, 1, "blv", 3, system="t")], "item 1"),
        ([rating(1, 1, "blv", 3), rating(1, 1, "blv", 4)], "twice"),
        (["not a rating"], "ContextRating"),
    ],
)
def test_inconsistent_studies_are_refused(rows, message):
    with pytest.raises(ValueError, match=message):
        context_report(rows)


@pytest.mark.parametrize("confidence", [0, 1, 95, True, "0.9"])
def test_bad_confidence_is_refused(confidence):
    with pytest.raises(ValueError, match="confidence"):
        context_report(HAND, confidence=confidence)


def test_confidence_changes_only_the_interval():
    wide = context_report(HAND, confidence=0.99).systems["s"].all.groups["sighted"]
    narrow = context_report(HAND, confidence=0.8).systems["s"].all.groups["sighted"]
    w, n = wide.before["overall"], narrow.before["overall"]
    assert w.mean == n.mean and w.se == n.se
    t80 = scipy.stats.t.ppf(0.9, 1)  # two-sided 80%: the 0.9 quantile of t(1) = 3.0777
    assert n.high - n.mean == pytest.approx(t80 * 0.5, abs=1e-12)
    assert w.high - w.mean > n.high - n.mean
