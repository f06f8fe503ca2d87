"""rubrics.judge_alignment's report against scipy, statsmodels and krippendorff on hand-made
studies, and the two biased judges the issue names: one that always prefers the caption
shown first (position bias 100%) and one that always prefers the longer caption."""

import krippendorff
import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.inter_rater import cohens_kappa

from rubrics import judge_alignment as ja

# 8 captions of 4 systems, 1-5 ratings by up to 3 people, and a judge's rating.
HUMAN = {
    1: [5, 4, 5],
    2: [4, 4, 3],
    3: [2, 1, 2],
    4: [3, 3],
    5: [1, 2, 1],
    6: [5, 5, 4],
    7: [3, 2, 3],
    8: [2, 3, 3],
}
JUDGE = {1: 5, 2: 3, 3: 2, 4: 4, 5: 1, 6: 5, 7: 2, 8: 3, 99: 4}  # 99: no human rating
SYSTEMS = {1: "A", 2: "B", 3: "C", 4: "D", 5: "C", 6: "A", 7: "D", 8: "B"}


def _rows():
    units = sorted(HUMAN)
    judge = [JUDGE[u] for u in units for _ in HUMAN[u]]
    human = [v for u in units for v in HUMAN[u]]
    return units, judge, human


def test_caption_correlations_equal_scipy():
    report = ja.caption_report(JUDGE, HUMAN, systems=SYSTEMS, scale=(1, 5), resamples=200)
    units, judge, human = _rows()
    assert report["n_captions"] == 8 and report["n_ratings"] == len(human) == 23
    corr = report["correlation"]
    assert corr["pearson"]["value"] == pytest.approx(scipy.stats.pearsonr(judge, human)[0])
    for variant in ("b", "c"):
        expected = scipy.stats.kendalltau(judge, human, variant=variant).statistic
        assert corr[f"kendall_tau_{variant}"]["value"] == pytest.approx(expected)
    low, high = corr["pearson"]["low"], corr["pearson"]["high"]
    assert low < corr["pearson"]["value"] < high <= 1.0


def test_kappa_alpha_and_confusion_equal_statsmodels_and_krippendorff():
    report = ja.caption_report(JUDGE, HUMAN, systems=SYSTEMS, scale=(1, 5), resamples=0)
    units = sorted(HUMAN)
    # Majority by hand (ties: nearest the median, then lower; [3, 3] is 3).
    majority = [5, 4, 2, 3, 1, 5, 3, 3]
    judge = [JUDGE[u] for u in units]
    table = np.zeros((5, 5))
    for j, h in zip(judge, majority, strict=True):
        table[j - 1, h - 1] += 1
    expected = cohens_kappa(table, wt="quadratic").kappa
    assert report["kappa"]["value"] == pytest.approx(expected)
    assert report["confusion"]["counts"] == table.astype(int).tolist()
    means = [np.mean(HUMAN[u]) for u in units]
    alpha = krippendorff.alpha(np.array([judge, means]), level_of_measurement="interval")
    assert report["alpha"]["value"] == pytest.approx(alpha)


def test_system_level_and_ceiling_equal_scipy():
    report = ja.caption_report(JUDGE, HUMAN, systems=SYSTEMS, scale=(1, 5), resamples=0)
    units = sorted(HUMAN)
    names = sorted(set(SYSTEMS.values()))
    jm = [np.mean([JUDGE[u] for u in units if SYSTEMS[u] == n]) for n in names]
    hm = [np.mean([np.mean(HUMAN[u]) for u in units if SYSTEMS[u] == n]) for n in names]
    assert report["system_level"]["spearman"] == pytest.approx(scipy.stats.spearmanr(jm, hm)[0])
    assert report["system_level"]["kendall_tau_b"] == pytest.approx(
        scipy.stats.kendalltau(jm, hm)[0]
    )
    # Ceiling, column 0 by hand: rating 0 of each caption against the mean of the others.
    first = [HUMAN[u][0] for u in units]
    rest = [np.mean(HUMAN[u][1:]) for u in units]
    tau_c = scipy.stats.kendalltau(first, rest, variant="c").statistic
    assert report["human_ceiling"]["per_human"][0] == pytest.approx(tau_c)
    judge_c = scipy.stats.kendalltau([JUDGE[u] for u in units], rest, variant="c").statistic
    assert report["human_ceiling"]["per_judge"][0] == pytest.approx(judge_c)


def test_self_consistency_over_runs_equals_krippendorff():
    runs = {0: dict(JUDGE), 1: {**JUDGE, 2: 4, 7: 3}}
    report = ja.caption_report(JUDGE, HUMAN, systems=SYSTEMS, scale=(1, 5), runs=runs, resamples=0)
    units = sorted(HUMAN)
    data = np.array([[runs[r][u] for u in units] for r in (0, 1)], dtype=float)
    sc = report["self_consistency"]
    assert sc["all_agree"] == pytest.approx(6 / 8)
    assert sc["alpha"] == pytest.approx(krippendorff.alpha(data, level_of_measurement="ordinal"))


def test_undefined_statistics_are_named_not_nan():
    report = ja.caption_report({1: 3}, {1: [3]}, systems={1: "A"}, resamples=0)
    assert "fewer than 2 captions" in report["error"]
    two = ja.caption_report({1: 3, 2: 4}, {1: [3], 2: [2]}, systems={1: "A", 2: "B"}, resamples=0)
    assert "at least 3 systems" in two["system_level"]["error"]
    assert "at least 2 human ratings" in two["human_ceiling"]["error"]


# ---------------------------------------------------------------------- pairs

# Six pairs of captions; caption c has c * c words (the higher id is the longer caption),
# of systems A (odd ids) and B (even) plus C for 7 and 8.
LENGTHS = {c: c * c for c in range(1, 13)}
PSYS = {1: "A", 2: "B", 3: "A", 4: "B", 5: "A", 6: "B", 7: "C", 8: "C", 9: "A", 10: "C"}
PSYS |= {11: "B", 12: "C"}
PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)]
# Human votes in the pair's order: 0 = the first (shorter) caption, 1 = the second.
VOTES = {
    (1, 2): [0, 0, 1],
    (3, 4): [1, 1, 1],
    (5, 6): [0, 1],  # split evenly: left out of the accuracy
    (7, 8): [0, 0],
    (9, 10): [1, 0, 1],
    (11, 12): [0, 0, 0],
}


def test_judge_that_always_prefers_the_left_caption():
    # Asked every pair both ways, always answering "the caption shown first".
    answers = {**{p: 0.0 for p in PAIRS}, **{(b, a): 0.0 for a, b in PAIRS}}
    report = ja.pair_report(answers, VOTES, systems=PSYS, lengths=LENGTHS, resamples=0)
    assert report["position_bias"]["flip_rate"] == 1.0
    assert report["position_bias"]["flips"] == 6
    assert report["position_bias"]["first_position_rate"] == 1.0
    # Both orders averaged: every pair a tie, a miss under the stated rule.
    assert report["judge_ties"] == 6 and report["human_ties"] == 1
    assert report["accuracy"]["value"] == 0.0 and report["accuracy"]["n"] == 5
    assert "split evenly" in report["tie_rule"]


def test_judge_that_prefers_the_longer_caption():
    # Shown in the stored order only: the longer caption is always the second.
    answers = {p: 1.0 for p in PAIRS}
    report = ja.pair_report(answers, VOTES, systems=PSYS, lengths=LENGTHS, resamples=0)
    length = report["length_bias"]["judge"]
    assert length["longer_wins"] == 1.0 and length["n_decided_unequal"] == 6
    assert "error" in report["position_bias"]  # never asked both ways
    # Accuracy by hand: decided human majorities 0, 1, 0, 1, 0 -> the judge's 1 hits 2 of 5.
    assert report["accuracy"]["value"] == pytest.approx(2 / 5)
    # Point-biserial: "first picked" (always 0) has no variance, so no correlation; the
    # humans' own length preference is reported beside it.
    assert length["correlation"] is None
    human_first = [1.0, 0.0, 0.5, 1.0, 0.0, 1.0]
    diffs = [LENGTHS[a] - LENGTHS[b] for a, b in PAIRS]
    assert report["length_bias"]["human"]["correlation"] == pytest.approx(
        scipy.stats.pearsonr(diffs, human_first)[0]
    )


def test_pair_confusion_ceiling_and_system_level_by_hand():
    answers = {(1, 2): 0.0, (4, 3): 0.0, (5, 6): 0.5, (7, 8): 1.0, (9, 10): 1.0, (11, 12): 0.0}
    report = ja.pair_report(answers, VOTES, systems=PSYS, lengths=LENGTHS, resamples=0)
    # (4, 3) answered 0 = caption 4 = the second of the canonical (3, 4): a hit.
    # Decided: (1,2) hit, (3,4) hit, (7,8) miss, (9,10) hit, (11,12) hit -> 4 of 5.
    assert report["accuracy"]["value"] == pytest.approx(4 / 5)
    counts = np.array(report["confusion"]["counts"])
    assert counts.sum() == 6 and counts[1, 1] == 1 and counts[2, 0] == 1
    # Ceiling by hand: each vote against the majority of the others where they decide.
    # (1,2) [0,0,1]: vote0 vs others [0,1] split: skip; vote1 likewise; vote2 vs 0: miss.
    # (3,4) three hits; (5,6): each other is one vote: 0 vs 1 miss, 1 vs 0 miss.
    # (7,8) two hits; (9,10) [1,0,1]: v0 vs [0,1] skip, v1 vs [1,1] miss, v2 skip.
    # (11,12) three hits. Humans: 8 hits of 12 votes.
    ceiling = report["human_ceiling"]
    assert ceiling["n_votes"] == 12 and ceiling["human"] == pytest.approx(8 / 12)
    # Win rates by hand: every side of every shared pair (C meets itself in (7, 8)).
    level = report["system_level"]
    assert level["systems"] == ["A", "B", "C"]
    judge_rates = [np.mean([1, 0, 0.5, 0]), np.mean([0, 1, 0.5, 1]), np.mean([0, 1, 1, 0])]
    assert level["judge_win_rates"] == pytest.approx(judge_rates)
    human_rates = [np.mean([1, 0, 0.5, 0]), np.mean([0, 1, 0.5, 1]), np.mean([1, 0, 1, 0])]
    assert level["spearman"] == pytest.approx(scipy.stats.spearmanr(judge_rates, human_rates)[0])


def test_prompt_drift_equals_scipy():
    v1 = {1: 5, 2: 3, 3: 2, 4: 4}
    v2 = {1: 5, 2: 4, 3: 1, 4: 4, 5: 2}
    human = {1: 4.5, 2: 3.5, 3: 1.5, 4: 3.0}
    rows = ja.prompt_drift({"v1": v1, "v2": v2}, human)
    units = [1, 2, 3, 4]
    tau = scipy.stats.kendalltau([v2[u] for u in units], [human[u] for u in units], variant="c")
    assert rows[1]["alignment"] == pytest.approx(tau.statistic)
    assert rows[1]["agreement_with_previous"] == pytest.approx(2 / 4)
    assert rows[0]["n"] == 4
    with pytest.raises(ValueError, match="fewer than 2 units"):
        ja.prompt_drift({"v1": {1: 1}}, human)
