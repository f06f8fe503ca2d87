"""Annotator reliability: a worker-competence model of categorical answers (no Django).

:func:`dawid_skene` fits the Dawid-Skene model (Dawid and Skene, 1979) with crowd-kit's
``DawidSkene`` to rows ``(worker, task, label)`` and returns, per worker, how many labels
the estimate rests on, a competence in [0, 1] and a spammer flag with its reason.

Why Dawid-Skene and not MACE. Both are in crowd-kit. MACE (Hovy et al., 2013) models a
worker as "knows the answer" or "spams from a private distribution", which fits nominal
labels with one right answer. Our answers are ratings on ordered scales (THumB 1-5, VICR
1-5, HUMANr 1-9), where an honest rater is often one step off: Dawid-Skene's full
confusion matrix per worker describes that (a rater who says 4 for a true 5 is not a
spammer), and it fits by plain EM without random restarts, so the result is deterministic.

What the numbers mean. Dawid-Skene fits class priors ``p`` and, per worker, a confusion
matrix ``E[k, c] = P(label k | true class c)``. Each worker is then compared with the truth
*the other workers* establish: for every task the worker labelled, the posterior of its
true class given the task's other labels (the E-step without the worker's own term), so a
worker never agrees with themself (a spammer's own label would otherwise pull the truth
their way). Summing those posteriors by the worker's label gives the worker's table
``T[k, c]`` (shares of their labels), and:

- ``competence = sum_k T[k, k]``: the estimated probability that the worker's label equals
  the true class;
- ``chance = sum_k (sum_c T[k, c]) (sum_c' T[c', k])``: the competence of the same worker if
  their answers were independent of the true class (a uniform random clicker gets about
  ``1/K``, a constant answerer the share of the truth their constant label has);
- ``kappa = (competence - chance) / (1 - chance)``: Cohen's kappa of the worker against the
  others' truth.

A worker is flagged when ``kappa < SPAMMER_KAPPA``: answers (nearly) independent of the
true class, which covers uniform random and constant answerers and anyone below chance.
Only workers with at least ``min_labels`` labels on shared tasks are estimated; the others
get ``competence=None`` and are never flagged on too little data.

Only tasks labelled by at least two workers enter the model: a task with one label says
nothing about its worker (EM would simply believe them). Degenerate inputs give a result
with ``estimable=False`` and the reason (no labels, one worker, no task shared by two
workers, one class only); malformed rows raise ``ValueError``. Nothing is ever NaN.

The EM is deterministic for the same rows in the same order (majority-vote start, no
randomness); ``max_iterations`` caps it, and the result says whether it converged (change
of crowd-kit's evidence lower bound per label below ``tolerance``). At VICR's size (68,000
ratings, 113 players) it converges in about 10 iterations of about 70 ms each; the
simulated crowds of the tests take 8 to 21, so the cap of 30 only stops a runaway fit.

:func:`dawid_skene` composes small estimators, each with a frozen result:
:func:`shared_answers` (the validated rows of shared tasks, :class:`SharedAnswers`),
:func:`fit_confusions` (crowd-kit's fit, :class:`ConfusionFit`), :func:`worker_tables` (each
worker against the others' truth) and :func:`worker_estimate` (one worker's competence,
chance, kappa and flag, :class:`WorkerReliability`).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# pandas (about 40 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MIN_LABELS",
    "SPAMMER_KAPPA",
    "ConfusionFit",
    "Reliability",
    "SharedAnswers",
    "WorkerReliability",
    "dawid_skene",
    "fit_confusions",
    "shared_answers",
    "worker_estimate",
    "worker_tables",
]

#: Fewest labels on shared tasks for a worker's competence to be reported and flagged. A
#: K x K confusion matrix from fewer answers is mostly noise (and one unlucky spammer-free
#: batch of 5 labels would look like a spammer).
MIN_LABELS = 10
#: A worker whose chance-corrected agreement with the latent truth is below this is flagged.
#: Honest raters of the simulated crowds in tests/rubrics/test_reliability.py (accuracy
#: 0.5 or better on 5 classes) stay above 0.3; spammers' estimates scatter around 0 with
#: about 0.1 spread at 30 labels.
SPAMMER_KAPPA = 0.2
#: EM stops after this many iterations even if not converged (the result says so).
MAX_ITERATIONS = 30
#: Convergence: change of crowd-kit's evidence lower bound per label between iterations.
TOLERANCE = 1e-5


@dataclass(frozen=True)
class WorkerReliability:
    """One worker's estimate; ``competence``, ``chance`` and ``kappa`` are None when the worker
    has fewer than ``min_labels`` labels on shared tasks (or the model is not estimable)."""

    worker: Hashable
    labels: int
    competence: float | None
    chance: float | None
    kappa: float | None
    flagged: bool
    reason: str


@dataclass(frozen=True)
class Reliability:
    """The fitted model: ``estimable`` False with ``reason`` when no model could be fitted."""

    estimable: bool
    reason: str
    workers: tuple[WorkerReliability, ...]
    tasks: int
    classes: tuple[Hashable, ...]
    iterations: int
    converged: bool

    @property
    def flagged(self) -> tuple[Hashable, ...]:
        """The flagged workers, in the order of ``workers``."""
        return tuple(w.worker for w in self.workers if w.flagged)


def dawid_skene(
    rows: Iterable[tuple[Hashable, Hashable, Hashable]],
    *,
    min_labels: int = MIN_LABELS,
    threshold: float = SPAMMER_KAPPA,
    max_iterations: int = MAX_ITERATIONS,
    tolerance: float = TOLERANCE,
) -> Reliability:
    """Fit Dawid-Skene to ``(worker, task, label)`` rows; see the module docstring.

    Workers are listed in order of first appearance, each once, including those with no
    label on a shared task (``labels=0``). A worker may label a task once (ValueError
    otherwise); labels must be mutually comparable (they are sorted into classes).
    """
    if min_labels < 1:
        raise ValueError(f"min_labels must be >= 1, got {min_labels}")
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be strictly between 0 and 1, got {threshold}")
    answers = shared_answers(rows)
    if answers.reason:
        return Reliability(
            estimable=False,
            reason=answers.reason,
            workers=tuple(
                WorkerReliability(w, answers.counts.get(w, 0), None, None, None, False, "")
                for w in answers.workers
            ),
            tasks=0,
            classes=(),
            iterations=0,
            converged=False,
        )
    fit = fit_confusions(answers, max_iterations=max_iterations, tolerance=tolerance)
    tables = worker_tables(answers, fit)
    estimates = []
    for code, worker in enumerate(answers.workers):
        n = answers.counts.get(worker, 0)
        if n < min_labels:
            estimates.append(WorkerReliability(worker, n, None, None, None, False, ""))
        else:
            estimates.append(
                worker_estimate(worker, tables[code] / n, n, answers.classes, threshold)
            )
    return Reliability(
        estimable=True,
        reason="",
        workers=tuple(estimates),
        tasks=int(answers.frame["task"].nunique()),
        classes=answers.classes,
        iterations=fit.iterations,
        converged=fit.converged,
    )


@dataclass(frozen=True)
class SharedAnswers:
    """The answers the model rests on: those to tasks at least two workers answered.

    ``workers`` holds every worker in order of first appearance (``frame["worker"]`` is an
    index into it); ``frame`` has integer ``worker``, ``task`` and ``label`` codes, the
    label coding ``classes`` (sorted); ``counts`` is each worker's number of shared
    answers. ``reason`` says why no model can be fitted (empty when one can; ``frame`` and
    ``classes`` are then meaningful).
    """

    workers: tuple[Hashable, ...]
    frame: pd.DataFrame | None
    counts: dict[Hashable, int]
    classes: tuple[Hashable, ...]
    reason: str


def shared_answers(rows: Iterable[tuple[Hashable, Hashable, Hashable]]) -> SharedAnswers:
    """Validate ``rows`` and keep the shared tasks; ValueError for malformed rows, a repeat
    answer or labels that cannot be sorted."""
    workers, tasks, labels = _columns(rows)
    worker_ids: dict[Hashable, int] = {}
    for worker in workers:
        worker_ids.setdefault(worker, len(worker_ids))
    everyone = tuple(worker_ids)

    def not_estimable(reason: str, counts: dict[Hashable, int] | None = None) -> SharedAnswers:
        return SharedAnswers(everyone, None, counts or {}, (), reason)

    if not workers:
        return not_estimable("no labels yet")
    if len(worker_ids) < 2:
        return not_estimable("only one worker has answered: nobody to compare them with")
    import pandas as pd

    frame = pd.DataFrame(
        {
            "worker": [worker_ids[w] for w in workers],
            "task": pd.factorize(pd.Series(tasks, dtype=object))[0],
            "label": labels,
        }
    )
    if frame.duplicated(["worker", "task"]).any():
        first = frame[frame.duplicated(["worker", "task"])].index[0]
        raise ValueError(
            f"row {first}: worker {workers[first]!r} labels task {tasks[first]!r} a second time"
        )
    per_task = frame.groupby("task")["worker"].transform("size")
    shared = frame[per_task >= 2].reset_index(drop=True)
    counts = {everyone[code]: int(n) for code, n in shared["worker"].value_counts().items()}
    if shared.empty:
        return not_estimable("no task was answered by two workers, so no answer can be checked")
    try:
        classes = tuple(sorted(set(shared["label"])))
    except TypeError as exc:
        raise ValueError(f"labels must be mutually comparable: {exc}") from None
    if len(classes) < 2:
        return not_estimable(
            f"every shared answer is {classes[0]!r}: agreement by chance is certain, so no "
            "competence can be told from it",
            counts,
        )
    codes = {label: index for index, label in enumerate(classes)}
    shared["label"] = shared["label"].map(codes).astype(np.int64)
    return SharedAnswers(everyone, shared, counts, classes, "")


@dataclass(frozen=True)
class ConfusionFit:
    """Dawid-Skene's estimates: class ``priors`` (K,) and, per worker, a confusion matrix
    ``matrices[worker, label, true class]`` whose columns sum to 1; how the EM went."""

    priors: np.ndarray
    matrices: np.ndarray
    iterations: int
    converged: bool


def fit_confusions(
    answers: SharedAnswers, *, max_iterations: int = MAX_ITERATIONS, tolerance: float = TOLERANCE
) -> ConfusionFit:
    """Fit crowd-kit's ``DawidSkene`` to estimable shared answers."""
    # Imported lazily: crowd-kit pulls in pandas extras (and tqdm) that the other rubrics
    # modules, and the pages that never fit a model, do not need.
    from crowdkit.aggregation import DawidSkene

    model = DawidSkene(n_iter=max_iterations, tol=tolerance)
    with warnings.catch_warnings():
        # pandas' deprecation warnings about crowd-kit's own calls, not about our input.
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        model.fit(answers.frame)
    k = len(answers.classes)
    priors = model.priors_.reindex(range(k), fill_value=0.0).to_numpy(dtype=np.float64)
    priors = priors / priors.sum()
    errors = model.errors_.reindex(columns=range(k), fill_value=0.0)
    iterations = len(model.loss_history_)
    history = model.loss_history_
    converged = iterations < max_iterations or (
        iterations >= 2 and history[-1] - history[-2] < tolerance
    )
    # Dense confusion matrices, E[worker, label, true class]; crowd-kit keeps rows only for
    # labels a worker gave (the others are 0).
    matrices = np.zeros((len(answers.workers), k, k))
    matrices[
        errors.index.get_level_values(0).to_numpy(dtype=np.int64),
        errors.index.get_level_values(1).to_numpy(dtype=np.int64),
    ] = errors.to_numpy(dtype=np.float64)
    matrices /= np.maximum(matrices.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    return ConfusionFit(priors, matrices, iterations, bool(converged))


def worker_tables(answers: SharedAnswers, fit: ConfusionFit) -> np.ndarray:
    """Each worker's answers against the others' truth, summed: ``tables[worker, label,
    class]`` (a worker's table sums to their number of shared answers)."""
    frame = answers.frame
    truth = _truth_without_self(frame, fit.matrices, fit.priors)
    k = len(answers.classes)
    tables = np.zeros((len(answers.workers), k, k))
    np.add.at(tables, (frame["worker"].to_numpy(), frame["label"].to_numpy()), truth)
    return tables


def worker_estimate(
    worker: Hashable,
    table: np.ndarray,
    labels: int,
    classes: tuple[Hashable, ...],
    threshold: float = SPAMMER_KAPPA,
) -> WorkerReliability:
    """Competence, chance, kappa and flag of one worker from their table ``T[label, class]``
    of shares (summing to 1) over ``labels`` shared answers; see the module docstring."""
    competence = float(np.clip(np.trace(table), 0.0, 1.0))
    chance = float(np.clip(table.sum(axis=1) @ table.sum(axis=0), 0.0, 1.0))
    kappa = (competence - chance) / (1.0 - chance) if chance < 1.0 else 0.0
    flagged = kappa < threshold
    reason = ""
    if flagged:
        given = np.flatnonzero(table.sum(axis=1) > 0)
        if given.size == 1:
            answer = classes[int(given[0])]
            reason = f"gives the same answer ({answer}) to all {labels} shared tasks"
        elif kappa < -threshold:
            reason = "agrees with the others' answers less often than chance"
        else:
            reason = "answers look independent of the true class"
        reason += f" (competence {competence:.2f}, {chance:.2f} expected by chance)"
    return WorkerReliability(worker, labels, competence, chance, float(kappa), flagged, reason)


def _truth_without_self(
    shared: pd.DataFrame, matrices: np.ndarray, priors: np.ndarray
) -> np.ndarray:
    """Per row, the posterior of its task's true class given every *other* label of the task.

    Dawid-Skene's E-step: log P(c | labels) = log p[c] + sum over the task's labels of
    log E[worker, label, c] (up to a constant); leaving out the row's own term gives the
    truth as the other workers see it, so a worker is never compared with their own answer.
    """
    workers = shared["worker"].to_numpy()
    labels = shared["label"].to_numpy()
    tasks = shared["task"].to_numpy()
    own = np.log(np.clip(matrices[workers, labels], 1e-300, None))  # rows x classes
    totals = np.zeros((int(tasks.max()) + 1, own.shape[1]))
    np.add.at(totals, tasks, own)
    logits = np.log(np.clip(priors, 1e-300, None)) + totals[tasks] - own
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=1, keepdims=True)


def _columns(
    rows: Iterable[tuple[Hashable, Hashable, Hashable]],
) -> tuple[list[Hashable], list[Hashable], list[Hashable]]:
    """The three columns of ``rows``; ValueError naming the first malformed row.

    The fast path transposes and checks whole columns (a VICR-size study has 68,000 rows);
    only when a check fails does the row-by-row pass run, to name the row.
    """
    rows = list(rows)
    try:
        columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[], [], []]
    except (TypeError, ValueError):
        columns = []
    if len(columns) == 3 and not any(map(_missing, (v for c in columns for v in c))):
        try:
            for column in columns:
                set(column)  # every value hashable
        except TypeError:
            pass
        else:
            return columns[0], columns[1], columns[2]
    for index, row in enumerate(rows):
        try:
            worker, task, label = row
        except (TypeError, ValueError):
            raise ValueError(f"row {index}: expected (worker, task, label), got {row!r}") from None
        for name, value in (("worker", worker), ("task", task), ("label", label)):
            if _missing(value):
                raise ValueError(f"row {index}: {name} is missing")
            try:
                hash(value)
            except TypeError:
                raise ValueError(f"row {index}: {name} {value!r} is not hashable") from None
    raise AssertionError("unreachable: a column check failed but no row did")  # pragma: no cover


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and not np.isfinite(value))
