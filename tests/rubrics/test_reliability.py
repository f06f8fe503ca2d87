"""Tests for rubrics.reliability: hand-worked crowds, simulated spammers, degenerate input.

Independent references: statsmodels' and scikit-learn's Cohen's kappa (a worker against a
known truth), a plain-Python leave-one-out posterior and, on simulated crowds, the worker
ordering by agreement with the leave-one-out majority vote, computed here in plain Python.
"""

import dataclasses
import math
import warnings
from collections import Counter

import numpy as np
import pytest
import scipy.stats
from crowdkit.aggregation import DawidSkene
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from rubrics.reliability import (
    MAX_ITERATIONS,
    MIN_LABELS,
    TOLERANCE,
    ConfusionFit,
    dawid_skene,
    fit_confusions,
    shared_answers,
    worker_estimate,
    worker_tables,
)

LEVELS = 5


def by_worker(result):
    return {w.worker: w for w in result.workers}


def truth_cycle(n, classes=(1, 2, 3)):
    return [classes[t % len(classes)] for t in range(n)]


def perfect_pair_and(third, truth):
    """Rows of two workers who always give the truth and a third worker ``third(t, truth)``."""
    rows = []
    for t, label in enumerate(truth):
        rows += [("A", t, label), ("B", t, label), ("C", t, third(t, label))]
    return rows


# ----------------------------------------------------------------- hand-worked cases


def test_two_perfect_workers_and_a_constant_answerer():
    # 12 tasks, true classes 1, 2, 3 four times each; C always answers 1.
    # A's truth without A is B's label (C's constant answer carries no information), so A's
    # table is diagonal: competence 1; chance = sum of row share x column share = 3 x 1/9.
    # C answers 1 everywhere: competence = share of tasks whose truth is 1 = 1/3, and chance
    # = 1 x 1/3 = 1/3, kappa 0: flagged as a constant answerer.
    result = dawid_skene(perfect_pair_and(lambda t, label: 1, truth_cycle(12)))
    assert result.estimable and result.reason == ""
    assert result.classes == (1, 2, 3) and result.tasks == 12
    workers = by_worker(result)
    for name in "AB":
        assert workers[name].labels == 12
        assert workers[name].competence == pytest.approx(1.0, abs=1e-6)
        assert workers[name].chance == pytest.approx(1 / 3, abs=1e-6)
        assert workers[name].kappa == pytest.approx(1.0, abs=1e-6)
        assert not workers[name].flagged and workers[name].reason == ""
    constant = workers["C"]
    assert constant.competence == pytest.approx(1 / 3, abs=1e-6)
    assert constant.chance == pytest.approx(1 / 3, abs=1e-6)
    assert constant.kappa == pytest.approx(0.0, abs=1e-6)
    assert constant.flagged
    assert constant.reason.startswith("gives the same answer (1) to all 12 shared tasks")
    assert result.flagged == ("C",)


def test_worker_kappa_equals_cohens_kappa_against_a_known_truth():
    # With two perfect workers the truth is certain, so the third worker's numbers are the
    # plain confusion table against it: competence = observed agreement, kappa = Cohen's.
    rng = np.random.default_rng(3)
    truth = [int(x) for x in rng.integers(1, 4, 60)]
    answers = [label if rng.random() < 0.7 else int(rng.integers(1, 4)) for label in truth]
    result = dawid_skene(perfect_pair_and(lambda t, label: answers[t], truth))
    third = by_worker(result)["C"]
    table = np.zeros((3, 3))
    for answer, label in zip(answers, truth, strict=True):
        table[answer - 1, label - 1] += 1
    expected = cohens_kappa(table, return_results=False)
    assert third.kappa == pytest.approx(expected, abs=1e-6)
    assert third.competence == pytest.approx(np.trace(table) / 60, abs=1e-6)
    assert not third.flagged


def test_worker_who_swaps_labels_is_below_chance():
    # C answers 2 for 1, 3 for 2 and 1 for 3: never the truth. Competence 0, chance 1/3,
    # kappa (0 - 1/3) / (2/3) = -1/2, clearly below chance (below -SPAMMER_KAPPA).
    result = dawid_skene(perfect_pair_and(lambda t, label: label % 3 + 1, truth_cycle(15)))
    swapped = by_worker(result)["C"]
    assert swapped.competence == pytest.approx(0.0, abs=1e-6)
    assert swapped.kappa == pytest.approx(-0.5, abs=1e-6)
    assert swapped.flagged
    assert swapped.reason.startswith("agrees with the others' answers less often than chance")


def test_uniform_random_answerer_near_chance():
    # 300 tasks: C draws uniformly from 1-5, independent of the truth, so competence and
    # chance both come out near 1/5 and kappa near 0 (standard error about 0.03 here).
    rng = np.random.default_rng(11)
    truth = [int(x) for x in rng.integers(1, LEVELS + 1, 300)]
    noise = [int(x) for x in rng.integers(1, LEVELS + 1, 300)]
    result = dawid_skene(perfect_pair_and(lambda t, label: noise[t], truth))
    random_worker = by_worker(result)["C"]
    assert random_worker.competence == pytest.approx(0.2, abs=0.06)
    assert abs(random_worker.kappa) < 0.1
    assert random_worker.flagged
    assert random_worker.reason.startswith("answers look independent of the true class")


def test_too_few_labels_are_not_estimated_nor_flagged():
    truth = truth_cycle(MIN_LABELS + 2)
    rows = perfect_pair_and(lambda t, label: label, truth)
    # D answers 1 on MIN_LABELS - 1 tasks: a constant answerer, but on too little evidence.
    rows += [("D", t, 1) for t in range(MIN_LABELS - 1)]
    workers = by_worker(dawid_skene(rows))
    assert workers["D"].labels == MIN_LABELS - 1
    assert workers["D"].competence is None and workers["D"].kappa is None
    assert not workers["D"].flagged and workers["D"].reason == ""


def test_labels_count_only_shared_tasks_and_every_worker_is_listed():
    rows = perfect_pair_and(lambda t, label: label, truth_cycle(12))
    rows += [("A", "alone-1", 2), ("A", "alone-2", 3), ("E", "alone-3", 1)]
    result = dawid_skene(rows)
    workers = by_worker(result)
    assert workers["A"].labels == 12  # the two unshared labels are left out
    assert workers["E"].labels == 0 and workers["E"].competence is None
    assert [w.worker for w in result.workers] == ["A", "B", "C", "E"]
    assert result.tasks == 12


def test_same_rows_give_the_same_result():
    rng = np.random.default_rng(5)
    rows = [(f"w{w}", t, int(rng.integers(1, 6))) for t in range(40) for w in range(4)]
    assert dawid_skene(rows) == dawid_skene(list(rows))


def test_no_number_is_nan():
    rng = np.random.default_rng(8)
    rows = [(f"w{w}", t, int(rng.integers(1, 3))) for t in range(30) for w in range(3)]
    for worker in dawid_skene(rows).workers:
        for value in (worker.competence, worker.chance, worker.kappa):
            assert value is None or math.isfinite(value)


# ----------------------------------------------------------------- degenerate input


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([], "no labels yet"),
        ([("A", 1, 1), ("A", 2, 2)], "only one worker"),
        ([("A", 1, 1), ("A", 2, 2), ("B", 3, 1), ("B", 4, 2)], "no task was answered by two"),
        ([("A", t, 3) for t in range(20)] + [("B", t, 3) for t in range(20)], "every shared"),
    ],
    ids=["empty", "one worker", "no overlap", "one class"],
)
def test_degenerate_crowds_are_not_estimable(rows, reason):
    result = dawid_skene(rows)
    assert not result.estimable
    assert result.reason.startswith(reason)
    assert result.flagged == ()
    assert all(w.competence is None and not w.flagged for w in result.workers)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("A", 1)], "row 0: expected (worker, task, label)"),
        ([("A", 1, 2), ("B", 1, None)], "row 1: label is missing"),
        ([("A", 1, float("nan")), ("B", 1, 2)], "row 0: label is missing"),
        ([("A", 1, 2), ("B", 1, 2), ("A", 1, 3)], "row 2: worker 'A' labels task 1 a second"),
        ([("A", 1, [2]), ("B", 1, 2)], "row 0: label [2] is not hashable"),
        ([("A", 1, 2), ("B", 1, "two")], "labels must be mutually comparable"),
    ],
)
def test_malformed_rows_raise(rows, message):
    with pytest.raises(ValueError) as info:
        dawid_skene(rows)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [("min_labels", 0), ("max_iterations", 0), ("threshold", 0), ("threshold", 1.5)],
)
def test_bad_options_raise(option, value):
    with pytest.raises(ValueError, match=option):
        dawid_skene([("A", 1, 1), ("B", 1, 1)], **{option: value})


# ----------------------------------------------------------------- simulated crowds


def simulated_crowd(seed, *, workers=100, tasks=1000, per_task=5, levels=LEVELS):
    """A crowd with 10% planted spammers: half answer uniformly at random, half always give
    the same (random) level. Honest workers have accuracies drawn from 0.5 to 0.95; their
    errors are one level off 70% of the time (ratings scales), otherwise uniform."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, levels + 1, tasks)
    n_spam = workers // 10
    kinds = ["honest"] * (workers - n_spam) + ["uniform", "constant"] * (n_spam // 2)
    kinds += ["uniform"] * (workers - len(kinds))
    rng.shuffle(kinds)
    accuracy = rng.uniform(0.5, 0.95, workers)
    constant = rng.integers(1, levels + 1, workers)
    rows = []
    for t in range(tasks):
        for w in rng.choice(workers, per_task, replace=False):
            if kinds[w] == "uniform":
                label = rng.integers(1, levels + 1)
            elif kinds[w] == "constant":
                label = constant[w]
            elif rng.random() < accuracy[w]:
                label = truth[t]
            elif rng.random() < 0.7:
                label = np.clip(truth[t] + rng.choice([-1, 1]), 1, levels)
            else:
                label = rng.integers(1, levels + 1)
            rows.append((f"w{w}", t, int(label)))
    spammers = {f"w{w}" for w in range(workers) if kinds[w] != "honest"}
    return rows, spammers, {f"w{w}": accuracy[w] for w in range(workers) if kinds[w] == "honest"}


@pytest.mark.parametrize("seed", range(10))
def test_planted_spammers_are_found(seed):
    # Issue 13: on simulated crowds with 10% planted spammers, precision and recall >= 0.9.
    rows, spammers, _ = simulated_crowd(seed)
    result = dawid_skene(rows)
    assert result.estimable and result.converged
    flagged = set(result.flagged)
    true_positives = len(flagged & spammers)
    precision = true_positives / len(flagged) if flagged else 0.0
    recall = true_positives / len(spammers)
    assert precision >= 0.9, f"flagged honest workers: {sorted(flagged - spammers)}"
    assert recall >= 0.9, f"missed spammers: {sorted(spammers - flagged)}"
    assert all(w.reason for w in result.workers if w.flagged)


def test_three_raters_per_task_also_find_spammers():
    # VICR's minimum coverage: 3 ratings per pair (1,500 pairs, 45 labels per worker).
    rows, spammers, _ = simulated_crowd(21, tasks=1500, per_task=3)
    flagged = set(dawid_skene(rows).flagged)
    assert len(flagged & spammers) / len(spammers) >= 0.9
    assert len(flagged & spammers) / len(flagged) >= 0.9


def loo_majority_agreement(rows):
    """Per worker, the share of their labels equal to the majority of the *other* labels of
    the task (ties: every tied level counts as a match, weighted 1 / number tied)."""
    by_task = {}
    for worker, task, label in rows:
        by_task.setdefault(task, []).append((worker, label))
    hits, counts = Counter(), Counter()
    for answers in by_task.values():
        for i, (worker, label) in enumerate(answers):
            others = Counter(other for j, (_, other) in enumerate(answers) if j != i)
            if not others:
                continue
            top = max(others.values())
            tied = [level for level, n in others.items() if n == top]
            hits[worker] += (label in tied) / len(tied)
            counts[worker] += 1
    return {worker: hits[worker] / counts[worker] for worker in counts}


def test_competence_orders_workers_like_majority_vote_agreement():
    # 40 workers, 125 labels each: enough for the ordering to rest on more than noise.
    rows, _, accuracy = simulated_crowd(4, workers=40)
    result = by_worker(dawid_skene(rows))
    majority = loo_majority_agreement(rows)
    names = sorted(majority)
    rho = scipy.stats.spearmanr(
        [result[n].competence for n in names], [majority[n] for n in names]
    ).statistic
    assert rho >= 0.9
    # And the competence of honest workers follows their simulated accuracy.
    honest = sorted(accuracy)
    rho_truth = scipy.stats.spearmanr(
        [result[n].competence for n in honest], [accuracy[n] for n in honest]
    ).statistic
    assert rho_truth >= 0.8


# ----------------------------------------------------------------- the estimators alone


def test_shared_answers_keep_tasks_two_workers_answered():
    # Task "t3" has one answer: it drops out, and C (who answered only it) has 0 shared.
    rows = [("A", "t1", 2), ("B", "t1", 1), ("A", "t2", 1), ("B", "t2", 1), ("C", "t3", 3)]
    answers = shared_answers(rows)
    assert answers.reason == "" and answers.workers == ("A", "B", "C")
    assert answers.classes == (1, 2) and answers.counts == {"A": 2, "B": 2}
    assert sorted(answers.frame["task"].unique().tolist()) == [0, 1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        answers.reason = "changed"  # type: ignore[misc]


def test_worker_tables_equal_a_plain_leave_one_out_posterior():
    # Any confusion matrices and priors will do: the table is their leave-one-out E-step,
    # recomputed here by the product over the task's other labels.
    rng = np.random.default_rng(4)
    rows = [
        (w, t, int(rng.integers(1, 4))) for t in range(15) for w in "ABCD" if rng.random() < 0.8
    ]
    answers = shared_answers(rows)
    k, n = len(answers.classes), len(answers.workers)
    matrices = rng.dirichlet(np.ones(k), size=(n, k)).transpose(0, 2, 1)  # columns sum to 1
    priors = rng.dirichlet(np.ones(k))
    tables = worker_tables(answers, ConfusionFit(priors, matrices, 1, True))
    frame = answers.frame
    expected = np.zeros((n, k, k))
    for _task, group in frame.groupby("task"):
        labels = list(zip(group["worker"], group["label"], strict=True))
        for worker, label in labels:
            weights = np.array(
                [
                    priors[c] * math.prod(matrices[w, x, c] for w, x in labels if w != worker)
                    for c in range(k)
                ]
            )
            expected[worker, label] += weights / weights.sum()
    np.testing.assert_allclose(tables, expected, rtol=1e-9, atol=1e-12)
    counts = [answers.counts.get(w, 0) for w in answers.workers]
    np.testing.assert_allclose(tables.sum(axis=(1, 2)), counts)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_worker_estimate_of_a_hard_table_is_cohens_kappa(seed):
    # When the truth is known (a table of counts), competence is the accuracy and kappa is
    # Cohen's kappa of the worker against the truth (scikit-learn's, independently).
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, size=60)
    answer = np.where(rng.random(60) < 0.6, truth, rng.integers(0, 4, size=60))
    table = np.zeros((4, 4))
    np.add.at(table, (answer, truth), 1.0)
    estimate = worker_estimate("W", table / 60, 60, (1, 2, 3, 4))
    assert estimate.labels == 60
    assert estimate.competence == pytest.approx(np.mean(answer == truth))
    assert estimate.kappa == pytest.approx(cohen_kappa_score(answer, truth))


def test_worker_estimate_names_a_constant_answer():
    table = np.array([[0.0, 0.0], [0.5, 0.5]])  # always answers the second class
    estimate = worker_estimate("W", table, 12, ("no", "yes"))
    assert estimate.flagged and estimate.kappa == pytest.approx(0.0)
    assert estimate.reason.startswith("gives the same answer (yes) to all 12 shared tasks")


def test_confusion_fit_is_the_m_step_of_crowd_kits_posteriors():
    # crowd-kit's last M-step turns its task posteriors into priors and confusion matrices;
    # redoing that step here in plain numpy from the posteriors it reports must give the
    # dense matrices and priors: the reshaping of its tables lost or moved nothing.
    rng = np.random.default_rng(8)
    truth = rng.integers(1, 4, size=40)
    rows = [
        (w, t, int(label if rng.random() < accuracy else rng.integers(1, 4)))
        for t, label in enumerate(truth)
        for w, accuracy in (("A", 0.9), ("B", 0.7), ("C", 0.5), ("D", 0.3))
    ]
    answers = shared_answers(rows)
    fit = fit_confusions(answers)
    k, frame = len(answers.classes), answers.frame
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DawidSkene(n_iter=MAX_ITERATIONS, tol=TOLERANCE).fit(frame)
    posteriors = model.probas_.reindex(columns=range(k)).to_numpy()
    np.testing.assert_allclose(fit.priors, posteriors.mean(axis=0), atol=1e-8)
    counts = np.zeros((len(answers.workers), k, k))
    np.add.at(
        counts,
        (frame["worker"].to_numpy(), frame["label"].to_numpy()),
        posteriors[frame["task"].to_numpy()],
    )
    np.testing.assert_allclose(fit.matrices, counts / counts.sum(axis=1, keepdims=True), atol=1e-8)
    assert fit.iterations == len(model.loss_history_)
