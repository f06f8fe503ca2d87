"""HUMANr head-to-head protocol: scoring, groups of trials and the report.

Source: "ObjectNet Captions: Models are not superhuman captioners" (section 4.2,
Fig. 1 and Fig. 4) and the toolkit by Cummings and Mayo, as distilled in
``../shared/PROTOCOLS.md`` section 3.

A worker sees an image and two captions and answers "Which caption goes best
with the image?" on a 1-9 slider: 1 = only the left caption matches, 5 = both
match equally well, 9 = only the right caption matches. Orient the answer so
that the human (reference) caption is on the left, ``s = raw`` if it was on the
left else ``10 - raw``; the comparison's value is ``(s - 5) / 4`` in [-1, 1],
negative when the human caption is preferred. A system's HUMANr is the mean
value over its kept comparisons.

Human-vs-Human pairs: one of the two human captions is chosen at random as the
reference (``choose_reference``); the caller then passes
``human_on_left=True`` when that reference caption was shown on the left.

Attention checks: a human caption of the image (the correct one) against a
human caption of a different, random image; for a check, ``human_on_left``
means "the correct caption was on the left". A check fails when the oriented
answer is >= 5 (neutral counts as a failure), and a failed check drops every
response of its group from the scores.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

# scipy (about 60 MB) is imported in the functions that use it, not here: the export path
# imports this module (through the mode registry) and must stay inside its memory
# budget (issue 27; tests/annotation/test_exports.py checks it).
from rubrics import checks, resampling
from rubrics.robustness import unpaired_reversal

__all__ = [
    "BASELINE_TEST",
    "GROUP_SIZE",
    "HUMAN_SYSTEM",
    "NEUTRAL",
    "SLIDER_MAX",
    "SLIDER_MIN",
    "Group",
    "Responses",
    "Trial",
    "attention_check_failed",
    "baseline_tests",
    "build_groups",
    "build_system_groups",
    "choose_reference",
    "comparison_value",
    "orient",
    "report",
]

HUMAN_SYSTEM = "Human"
"""System name of the Human-vs-Human baseline comparisons (PROTOCOLS.md section 0)."""

SLIDER_MIN = 1
SLIDER_MAX = 9
NEUTRAL = 5
"""Slider answers are integers 1-9; 5 means both captions match equally well (section 4.2)."""

GROUP_SIZE = 10
"""Trials per group: 9 comparisons of 9 different images plus 1 attention check (section 4.2)."""


# ---------------------------------------------------------------------------
# Scoring one answer
# ---------------------------------------------------------------------------


def _raw(raw: Any, name: str = "raw") -> int:
    if raw is None:
        raise ValueError(f"{name}: missing slider value (the worker must choose)")
    if isinstance(raw, bool | np.bool_) or not isinstance(raw, numbers.Real):
        raise ValueError(f"{name}: slider value must be an integer 1-9, got {raw!r}")
    x = float(raw)
    if not math.isfinite(x) or x != int(x) or not SLIDER_MIN <= x <= SLIDER_MAX:
        raise ValueError(f"{name}: slider value must be an integer 1-9, got {raw!r}")
    return int(x)


def _side(flag: Any, name: str) -> bool:
    if flag is None:
        raise ValueError(f"{name}: missing (which side the caption was shown on)")
    if not isinstance(flag, bool | np.bool_):
        raise ValueError(f"{name}: must be True or False, got {flag!r}")
    return bool(flag)


def orient(raw: Any, human_on_left: Any) -> int:
    """Orient a 1-9 answer so the human (reference) caption is on the left (section 4.2).

    Returns ``raw`` when the human caption was shown on the left, else
    ``10 - raw``; low values then mean the human caption was preferred.
    """
    r = _raw(raw)
    return r if _side(human_on_left, "human_on_left") else 10 - r


def comparison_value(raw: Any, human_on_left: Any) -> float:
    """Value of one comparison, ``(s - 5) / 4`` in [-1, 1] with s the oriented answer (section 4.2).

    Negative means the human caption was preferred, 0 no preference, positive
    that the machine caption was preferred.
    """
    return (orient(raw, human_on_left) - NEUTRAL) / 4


def attention_check_failed(raw: Any, correct_on_left: Any) -> bool:
    """Whether an attention check failed: oriented answer s >= 5, neutral included (section 4.2).

    ``correct_on_left`` says whether the image's own caption (not the one from
    a random other image) was shown on the left.
    """
    r = _raw(raw)
    s = r if _side(correct_on_left, "correct_on_left") else 10 - r
    return s >= NEUTRAL


def choose_reference(
    caption_a: Hashable, caption_b: Hashable, seed: int | np.random.Generator
) -> tuple[Hashable, Hashable]:
    """Pick at random which caption of a Human-vs-Human pair is the reference (section 4.2).

    Returns ``(reference, other)``; the caller stores it and later passes
    ``human_on_left=True`` when the reference was shown on the left.
    """
    rng = resampling.as_generator(seed)
    return (caption_a, caption_b) if rng.random() < 0.5 else (caption_b, caption_a)


# ---------------------------------------------------------------------------
# Groups of trials
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """One trial of a group (section 4.2): a comparison, or the group's attention check.

    Comparison: ``comparison_id`` and its ``image_id``; which caption is shown
    left is decided by the caller at presentation. Attention check:
    ``image_id`` is the shown image, ``correct_caption_id`` a human caption of
    it, ``distractor_caption_id`` a human caption of ``distractor_image_id``
    (a different image), and ``correct_on_left`` the random side of the
    correct caption.
    """

    position: int
    kind: Literal["comparison", "attention_check"]
    image_id: Hashable
    comparison_id: Hashable | None = None
    correct_caption_id: Hashable | None = None
    distractor_caption_id: Hashable | None = None
    distractor_image_id: Hashable | None = None
    correct_on_left: bool | None = None


@dataclass(frozen=True)
class Group:
    """A group of trials served together (section 4.2); ``is_short`` for a leftover group."""

    index: int
    trials: tuple[Trial, ...]
    is_short: bool

    @property
    def check_position(self) -> int:
        """Position (0-based) of the attention check in the group (section 4.2)."""
        return next(t.position for t in self.trials if t.kind == "attention_check")

    @property
    def comparison_ids(self) -> list[Hashable]:
        """Comparison ids of the group in serving order (section 4.2)."""
        return [t.comparison_id for t in self.trials if t.kind == "comparison"]


def build_groups(
    comparisons: Iterable[tuple[Hashable, Hashable]],
    human_captions: Mapping[Hashable, Sequence[Hashable]],
    seed: int | np.random.Generator,
    group_size: int = GROUP_SIZE,
) -> list[Group]:
    """Split comparisons into groups of distinct images plus one attention check (section 4.2).

    ``comparisons``: ``(comparison_id, image_id)`` pairs, each comparison id
    once. ``human_captions``: image id -> ids of its human captions (at least
    three images must have one); attention checks are drawn from it.

    Each group holds ``group_size - 1`` comparisons of different images and
    one attention check at a random position. No image is met twice in a group
    (the paper's "groups of 10 with 10 distinct images"): the check's image is
    not one of the group's images, and its distractor caption comes from a
    third image that is neither the check image nor one of the group's images.
    So a group needs two images with human captions outside its comparisons:
    with fewer than ``group_size + 1`` such images, groups hold at most that
    many minus 2 comparisons (all groups are then short). Comparisons are
    assigned largest-remaining-image-first with random ties, which forms as many
    full groups as the image counts allow (every image's comparisons spread over
    different groups).

    Leftovers: when fewer than ``group_size - 1`` distinct images still have
    comparisons, the rest go into short groups (``is_short=True``) of distinct
    images, each with its own attention check, so every comparison is used
    exactly once. The same seed gives the same groups.
    """
    group_size = checks.integer(group_size, "group_size", 2)
    rng = resampling.as_generator(seed)
    need = group_size - 1

    by_image: dict[Hashable, list[Hashable]] = {}
    seen: set[Hashable] = set()
    for item in comparisons:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ValueError(f"comparisons: expected (comparison_id, image_id) pairs, got {item!r}")
        cid, image = item
        if cid is None or image is None:
            raise ValueError(f"comparisons: missing id in {item!r}")
        if cid in seen:
            raise ValueError(f"comparisons: comparison id {cid!r} occurs twice")
        seen.add(cid)
        by_image.setdefault(image, []).append(cid)
    if not by_image:
        raise ValueError("comparisons: empty")

    check_images = [img for img, caps in human_captions.items() if len(caps) > 0]
    if len(check_images) < 3:
        raise ValueError(
            "human_captions: attention checks need human captions of at least three images "
            "(a comparison's image, the check's image and the distractor's must differ)"
        )
    # Two check candidates must stay outside every group's images, whichever images the
    # group holds; only studies of fewer than group_size + 1 such images are limited.
    per_group = min(need, len(check_images) - 2)

    images = list(by_image)
    queues: list[list[Hashable]] = []
    for img in images:
        ids = by_image[img]
        queues.append([ids[i] for i in rng.permutation(len(ids))])
    # buckets[c] = indices of images with c comparisons left (random order within a bucket).
    max_count = max(len(q) for q in queues)
    buckets: list[list[int]] = [[] for _ in range(max_count + 1)]
    for i in rng.permutation(len(images)):
        buckets[len(queues[i])].append(int(i))

    groups: list[Group] = []
    top = max_count
    while True:
        while top > 0 and not buckets[top]:
            top -= 1
        if top == 0:
            break
        chosen: list[int] = []
        c = top
        while c > 0 and len(chosen) < per_group:
            bucket = buckets[c]
            while bucket and len(chosen) < per_group:
                k = int(rng.integers(len(bucket)))
                bucket[k], bucket[-1] = bucket[-1], bucket[k]
                chosen.append(bucket.pop())
            c -= 1
        order = [chosen[i] for i in rng.permutation(len(chosen))]
        picked = [(images[i], queues[i].pop()) for i in order]
        for i in chosen:
            if queues[i]:
                buckets[len(queues[i])].append(i)
        groups.append(_with_check(len(groups), picked, need, check_images, human_captions, rng))
    return groups


def build_system_groups(
    comparisons: Iterable[tuple[Hashable, Hashable, Hashable]],
    human_captions: Mapping[Hashable, Sequence[Hashable]],
    seed: int | np.random.Generator,
    group_size: int = GROUP_SIZE,
) -> list[Group]:
    """Groups of one system each, interleaved across systems, for adaptive allocation.

    ``comparisons``: ``(comparison_id, image_id, system)`` triples. Each system's
    comparisons are split by ``build_groups`` (so ``group_size - 1`` comparisons of
    different images and one attention check per group, leftovers in short groups); the
    groups are then numbered round-robin over the systems in name order, so a server
    taking the lowest index first gives every open system its next group in turn.

    Why one system per group: a group serves one worker whole, so a group mixing systems
    keeps costing judgments of systems whose intervals are settled (as mixed, adaptive
    allocation saved 1.8%; issue 27). With one system per group, the groups of a settled
    system are simply no longer served.
    """
    by_system: dict[Hashable, list[tuple[Hashable, Hashable]]] = {}
    for item in comparisons:
        if not isinstance(item, tuple | list) or len(item) != 3:
            raise ValueError(
                f"comparisons: expected (comparison_id, image_id, system) triples, got {item!r}"
            )
        cid, image, system = item
        by_system.setdefault(system, []).append((cid, image))
    if not by_system:
        raise ValueError("comparisons: empty")
    rng = resampling.as_generator(seed)
    queues = [
        build_groups(by_system[system], human_captions, rng, group_size)
        for system in sorted(by_system, key=str)
    ]
    groups: list[Group] = []
    for rank in range(max(len(queue) for queue in queues)):
        for queue in queues:
            if rank < len(queue):
                group = queue[rank]
                groups.append(Group(len(groups), group.trials, group.is_short))
    return groups


def _with_check(
    index: int,
    picked: list[tuple[Hashable, Hashable]],
    need: int,
    check_images: list[Hashable],
    human_captions: Mapping[Hashable, Sequence[Hashable]],
    rng: np.random.Generator,
) -> Group:
    group_images = {img for img, _ in picked}
    check_image = _draw_image(check_images, group_images, rng)
    # The distractor caption must not belong to an image the group shows: a worker who saw
    # that caption with its own image a few trials earlier would recognise it as foreign
    # and pass the check without reading (build_groups leaves room for both draws).
    distractor_image = _draw_image(check_images, group_images | {check_image}, rng)
    correct = human_captions[check_image]
    distractor = human_captions[distractor_image]
    position = int(rng.integers(len(picked) + 1))
    check = Trial(
        position=position,
        kind="attention_check",
        image_id=check_image,
        correct_caption_id=correct[int(rng.integers(len(correct)))],
        distractor_caption_id=distractor[int(rng.integers(len(distractor)))],
        distractor_image_id=distractor_image,
        correct_on_left=bool(rng.random() < 0.5),
    )
    trials: list[Trial] = []
    for img, cid in picked:
        if len(trials) == position:
            trials.append(check)
        trials.append(
            Trial(position=len(trials), kind="comparison", image_id=img, comparison_id=cid)
        )
    if len(trials) == position:
        trials.append(check)
    return Group(index=index, trials=tuple(trials), is_short=len(picked) < need)


def _draw_image(
    candidates: list[Hashable], avoid: set[Hashable], rng: np.random.Generator
) -> Hashable:
    """A random candidate not in ``avoid``; build_groups sizes groups so that one is left."""
    # ``avoid`` may hold images that are no candidates (no human caption), so its size alone
    # does not tell whether a candidate is left; the scan below decides in small studies.
    for _ in range(64):
        img = candidates[int(rng.integers(len(candidates)))]
        if img not in avoid:
            return img
    allowed = [img for img in candidates if img not in avoid]
    if not allowed:  # unreachable through build_groups: a group leaves two candidates out
        raise ValueError("no image left for an attention check outside the group's images")
    return allowed[int(rng.integers(len(allowed)))]


# ---------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------


def _bool_array(values: ArrayLike, name: str, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name}: expected {n} rows, got shape {arr.shape}")
    if arr.dtype == object:
        for i, v in enumerate(arr):
            if v is None:
                raise ValueError(f"{name}: row {i} is missing")
            if not isinstance(v, bool | np.bool_):
                raise ValueError(f"{name}: row {i} must be True or False, got {v!r}")
        return arr.astype(bool)
    if arr.dtype.kind != "b":
        raise ValueError(f"{name}: must be booleans, got dtype {arr.dtype}")
    return arr


@dataclass(frozen=True, kw_only=True)
class Responses:
    """HUMANr responses as aligned 1-D arrays, one row per answered trial (section 4.2).

    * ``worker_ids``, ``image_ids``, ``group_ids``: hashable ids. A group is
      identified by (worker, group id): one group served to one worker.
    * ``systems``: the machine system of a Human-vs-model comparison, or
      ``"Human"`` for a Human-vs-Human pair; ignored on attention-check rows
      (any string, e.g. ``""``).
    * ``raw``: the slider answer, an integer 1-9.
    * ``human_on_left``: comparison rows: the human (reference) caption was on
      the left; attention-check rows: the correct caption was on the left.
    * ``is_attention_check``: the row is the group's attention check.
    * ``dropped``: optional extra exclusions (e.g. a researcher's flag); rows of
      a (worker, group) with a failed attention check are dropped anyway.

    Validated on construction; ValueError names the field and the first bad row.
    """

    worker_ids: np.ndarray
    image_ids: np.ndarray
    systems: np.ndarray
    raw: np.ndarray
    human_on_left: np.ndarray
    is_attention_check: np.ndarray
    group_ids: np.ndarray
    dropped: np.ndarray | None = None

    def __post_init__(self) -> None:
        raw = np.asarray(self.raw)
        if raw.ndim != 1:
            raise ValueError(f"raw: must be one-dimensional, got shape {raw.shape}")
        n = raw.shape[0]
        if n == 0:
            raise ValueError("raw: no responses")
        if raw.dtype == object:
            for i, v in enumerate(raw):
                _raw(v, f"raw[{i}]")
            raw = raw.astype(float)
        if raw.dtype.kind not in "iuf" or raw.dtype.kind == "b":
            raise ValueError(f"raw: slider values must be integers 1-9, got dtype {raw.dtype}")
        bad = ~np.isfinite(raw) | (raw != np.round(raw)) | (raw < SLIDER_MIN) | (raw > SLIDER_MAX)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"raw: row {i} must be an integer 1-9, got {raw[i]!r}")
        object.__setattr__(self, "raw", raw.astype(np.int64))
        object.__setattr__(self, "worker_ids", checks.id_array(self.worker_ids, "worker_ids", n))
        object.__setattr__(self, "image_ids", checks.id_array(self.image_ids, "image_ids", n))
        object.__setattr__(self, "group_ids", checks.id_array(self.group_ids, "group_ids", n))
        check = _bool_array(self.is_attention_check, "is_attention_check", n)
        object.__setattr__(self, "is_attention_check", check)
        object.__setattr__(
            self, "human_on_left", _bool_array(self.human_on_left, "human_on_left", n)
        )
        dropped = (
            np.zeros(n, dtype=bool)
            if self.dropped is None
            else _bool_array(self.dropped, "dropped", n)
        )
        object.__setattr__(self, "dropped", dropped)
        systems = np.asarray(self.systems)
        if systems.dtype == object:  # attention-check rows may carry None as system
            systems = np.array(["" if x is None else x for x in systems], dtype=object)
        systems = checks.id_array(systems, "systems", n).astype(str)
        comp = ~check
        if comp.any() and (systems[comp] == "").any():
            i = int(np.flatnonzero(comp & (systems == ""))[0])
            raise ValueError(f"systems: comparison row {i} has no system")
        object.__setattr__(self, "systems", systems)

    def __len__(self) -> int:
        return int(self.raw.shape[0])

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Responses:
        """Build from dicts keyed by the singular field names (section 4.2); dropped optional."""
        rows = list(records)

        def col(key: str, default: Any = None) -> np.ndarray:
            out = np.empty(len(rows), dtype=object)
            out[:] = [r.get(key, default) for r in rows]
            return out

        return cls(
            worker_ids=col("worker_id"),
            image_ids=col("image_id"),
            systems=col("system", ""),
            raw=col("raw"),
            human_on_left=col("human_on_left"),
            is_attention_check=col("is_attention_check", False),
            group_ids=col("group_id"),
            dropped=col("dropped", False),
        )

    def values(self) -> np.ndarray:
        """Comparison value ``(s - 5) / 4`` of every row (section 4.2)."""
        s = np.where(self.human_on_left, self.raw, 10 - self.raw)
        return (s - NEUTRAL) / 4.0

    def check_failed(self) -> np.ndarray:
        """Per row: an attention check that failed (oriented s >= 5) (section 4.2)."""
        s = np.where(self.human_on_left, self.raw, 10 - self.raw)
        return self.is_attention_check & (s >= NEUTRAL)


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def _float_or_none(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _t_interval(values: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """t-interval of the mean with the standard error (ddof=1), None for fewer than 2 values."""
    n = values.shape[0]
    if n < 2:
        return None
    mean = float(values.mean())
    sem = float(values.std(ddof=1)) / math.sqrt(n)
    from scipy import stats

    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sem
    return mean - half, mean + half


def _summary(x: np.ndarray) -> dict[str, float | int | None]:
    """mean, std, 2.5/50/97.5 percentiles over the finite values of x."""
    x = x[np.isfinite(x)]
    if x.shape[0] == 0:
        return {"n": 0, "mean": None, "std": None, "p2_5": None, "p50": None, "p97_5": None}
    p = np.percentile(x, [2.5, 50, 97.5])
    return {
        "n": int(x.shape[0]),
        "mean": float(x.mean()),
        "std": float(x.std(ddof=1)) if x.shape[0] > 1 else None,
        "p2_5": float(p[0]),
        "p50": float(p[1]),
        "p97_5": float(p[2]),
    }


def _default_image_counts(n_images: int) -> list[int]:
    grid = []
    k = 10
    while k < n_images:
        for m in (1, 2, 5):
            if m * k < n_images:
                grid.append(m * k)
        k *= 10
    return grid


# ---------------------------------------------------------------------------
# Each system against the Human-vs-Human baseline
# ---------------------------------------------------------------------------

BASELINE_TEST = "paired sign-flip permutation test over images, two-sided"
"""What ``baseline_tests`` computes, as the report and the export's datasheet name it."""

# Sign flips per block of the Monte Carlo test: 2**18 cells (2 MB as floats) whatever the
# number of images, so memory stays flat and a block stays in cache. Blocks of 2**19 cells
# and more were 10 to 20 times slower on a 2-core machine (OpenBLAS starts threads for
# larger products); 2**18 cells make 10,000 flips of 3,500 images about 0.02 s.
_FLIP_CELLS = 2**18


def _paired_differences(
    values: np.ndarray, names: list[str], human_system: str
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The other systems, d = system - baseline per image (0 where unpaired), the pairs."""
    if len(set(names)) != len(names):
        raise ValueError("systems: a name occurs twice")
    if human_system not in names:
        raise ValueError(f"systems: no {human_system!r} column (the baseline)")
    base = names.index(human_system)
    others = [j for j in range(len(names)) if j != base]
    diffs = values[:, others] - values[:, [base]]
    paired = ~np.isnan(diffs)
    return [names[j] for j in others], np.where(paired, diffs, 0.0), paired


def _sign_flip_counts(
    diffs: np.ndarray, paired: np.ndarray, n_permutations: int, rng: np.random.Generator
) -> tuple[np.ndarray, bool, int]:
    """Per column, how many sign flips of the images give a sum of ``diffs`` at least as far
    from 0 as the observed one; whether every flip was counted; how many flips."""
    rows = diffs[paired.any(axis=1)]  # an image paired for no system adds 0 to every sum
    n = rows.shape[0]
    observed = rows.sum(axis=0)
    # Sums of differences are exact in most studies (quarters), not always (a mean of three
    # answers): equal sums must compare equal after the matrix product's rounding.
    threshold = np.abs(observed) - 1e-9 * np.maximum(1.0, np.abs(rows).sum(axis=0))

    def extreme(flips: np.ndarray) -> np.ndarray:
        # Flipping the images in f turns sum(d) into sum(d) - 2 * (f @ d): one product.
        sums = observed - 2.0 * (flips.astype(np.float64) @ rows)
        return (np.abs(sums) >= threshold).sum(axis=0)

    if n < 63 and 2**n <= n_permutations:
        return extreme((np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n)) & 1), True, 2**n
    count = np.zeros(rows.shape[1], dtype=np.int64)
    block, width = max(1, _FLIP_CELLS // n), (n + 7) // 8
    for start in range(0, n_permutations, block):
        size = min(block, n_permutations - start)
        random_bytes = np.frombuffer(rng.bytes(size * width), dtype=np.uint8)
        count += extreme(np.unpackbits(random_bytes.reshape(size, width), axis=1, count=n))
    return count, False, n_permutations


def _baseline_entries(
    names: list[str],
    diffs: np.ndarray,
    paired: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    flips: tuple[np.ndarray, bool, int],
    confidence: float,
) -> dict[str, dict[str, Any]]:
    extreme, exact, n_flips = flips
    out: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(names):
        n_pairs = int(paired[:, k].sum())
        entry: dict[str, Any] = {
            "test": BASELINE_TEST,
            "n_images": n_pairs,
            "difference": None,
            "difference_interval": None,
            "confidence": confidence,
            "interval_excludes_baseline": None,
            "p_value": None,
            "exact": exact,
            "n_permutations": n_flips,
        }
        if n_pairs:
            entry["difference"] = float(diffs[:, k].sum() / n_pairs)
            # Exact: the observed flip is one of the 2^n counted. Random: (1 + extreme) /
            # (1 + flips), the observed one added, so a p-value is never 0.
            p = extreme[k] / n_flips if exact else (1 + extreme[k]) / (1 + n_flips)
            entry["p_value"] = float(p)
            if not np.isnan(low[k]):
                entry["difference_interval"] = [float(low[k]), float(high[k])]
                entry["interval_excludes_baseline"] = bool(low[k] > 0 or high[k] < 0)
        out[name] = entry
    return out


def baseline_tests(
    image_values: ArrayLike,
    systems: Sequence[str],
    *,
    human_system: str = HUMAN_SYSTEM,
    confidence: float = 0.95,
    n_permutations: int = 10_000,
    n_bootstrap: int = 1000,
    seed: int | np.random.Generator = 0,
) -> dict[str, dict[str, Any]]:
    """Test each system against the Human-vs-Human baseline, paired by image (section 4.2).

    The paper: "The human-human comparisons provide a baseline variance that we use to
    determine whether the model-human comparisons present statistically significant
    deviations from human captioning performance."

    ``image_values``: (images, systems), the mean kept comparison value of each system
    (column) on each image, NaN where the image has none; ``systems`` names the columns
    and must include ``human_system``. Per other system, over the images that have both
    a value of the system and of the baseline (its paired images), with
    ``d_i = value(system, i) - value(baseline, i)``:

    * ``difference``: the mean of ``d_i``, the system's HUMANr minus the baseline's on
      its paired images;
    * ``p_value``: two-sided paired permutation test of "the system's comparisons and
      the baseline's are exchangeable within an image": under it each ``d_i`` is as
      likely to have either sign, so the p-value is the share of the ``2 ** n`` sign
      flips of the ``d_i`` whose sum is at least as far from 0 as the observed one.
      Exact (every flip, ``exact=True``) when ``2 ** n <= n_permutations`` for the n
      images paired for some system; otherwise ``n_permutations`` random flips and
      ``(1 + extreme) / (1 + n_permutations)`` (never 0: Phipson and Smyth 2010);
    * ``difference_interval``: percentile bootstrap interval of the mean difference at
      ``confidence``: ``resampling.paired_cluster_bootstrap_means`` over all rows of
      ``image_values`` (the same drawn images for every system; a system's replicate is
      the mean of ``d_i`` over the drawn images paired for it);
    * ``interval_excludes_baseline``: that interval excludes 0, i.e. the system's
      HUMANr, drawn paired with the baseline's by image, excludes the baseline.

    A system with no paired image gets None for each value. The same sign flips serve
    every system (an image not paired for a system adds 0 to its sums). One generator
    from ``seed`` draws the bootstrap, then the flips; ``report`` draws the same
    bootstrap as its own (one set of drawn images) and the flips last.
    """
    values = np.asarray(image_values, dtype=np.float64)
    names = [str(name) for name in systems]
    if values.ndim != 2 or values.shape[1] != len(names):
        raise ValueError(
            f"image_values: expected (images, {len(names)}) for {len(names)} systems, "
            f"got shape {values.shape}"
        )
    if np.isinf(values).any():
        raise ValueError("image_values: infinite value (use NaN for a missing one)")
    others, diffs, paired = _paired_differences(values, names, human_system)
    confidence = checks.confidence(confidence)
    n_permutations = checks.integer(n_permutations, "n_permutations")
    n_bootstrap = checks.integer(n_bootstrap, "n_bootstrap")
    rng = resampling.as_generator(seed)
    low = high = np.full(len(others), np.nan)
    if values.shape[0]:
        boot = resampling.paired_cluster_bootstrap_means(
            diffs, paired.astype(np.float64), n_bootstrap, confidence, rng
        )
        low, high = boot.low, boot.high
    flips = _sign_flip_counts(diffs, paired, n_permutations, rng)
    return _baseline_entries(others, diffs, paired, low, high, flips, confidence)


def report(
    responses: Responses,
    *,
    human_system: str = HUMAN_SYSTEM,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    n_splits: int = 1000,
    image_counts: Sequence[int] | None = None,
    n_image_draws: int = 200,
    n_permutations: int = 10_000,
    include_distributions: bool = False,
    seed: int | np.random.Generator = 0,
) -> dict[str, Any]:
    """HUMANr report per system (section 4.2, Fig. 1 and Fig. 4) as a JSON-serialisable dict.

    Kept comparisons: comparison rows (not attention checks) that are not
    dropped. A (worker, group) whose attention check failed has all its rows
    dropped; ``responses.dropped`` drops more rows. A group without a check
    row is never dropped by this rule.

    Per system (``systems``: the machine systems; ``baseline``: the
    Human-vs-Human entry, or None):

    * ``humanr``: mean comparison value over kept comparisons;
    * ``t_interval``: mean +- t quantile x standard error of the mean (sd with
      ddof=1, t with n - 1 degrees of freedom), clipped to [-1, 1], as the
      toolkit does;
    * ``bootstrap_interval``: percentile bootstrap clustered by image: each of
      ``n_bootstrap`` resamples draws images (all images with a kept
      comparison) with replacement, and a system's replicate is the mean over
      all its kept comparisons on the drawn images (sum of drawn image sums /
      sum of drawn image counts). The same draws serve every system (paired),
      which is exactly the per-system cluster bootstrap when every system has
      comparisons on every image; an image without a comparison of the system
      contributes nothing to it (``rubrics.resampling.paired_cluster_bootstrap_means``);
    * ``mean_raw`` of the system's kept comparisons;
    * ``n_workers``, ``worker_mean`` and ``worker_t_interval``: the t-interval (clipped)
      over one vote per worker, the mean of the worker's kept values of the system. It
      allows for a worker's leaning moving all their values of a system at once (a
      group of one system, as adaptive allocation builds them), which ``t_interval``
      does not; None for fewer than 2 workers.

    Reproducibility: ``n_splits`` random half-splits of the workers that have
    kept comparisons (half A gets floor(W/2) workers): per system a summary of
    the HUMANr values of both halves and of the difference A - B (mean, std,
    2.5/50/97.5 percentiles; splits where a half has no comparison of the
    system are left out and counted). ``std_by_image_count``: for each k of
    ``image_counts`` (default 10, 20, 50, ... below the number of images), the
    std over ``n_image_draws`` random subsets of k images (without
    replacement) of the system's HUMANr on those images (paper Fig. 4 right);
    the subsets of one draw are nested (the first k images of one random
    order of the images), so each k's subset is a uniform random k-subset.

    Against the baseline: each system's ``vs_baseline`` is its
    :func:`baseline_tests` entry (paired by image over the per-image mean
    values, ``n_permutations`` sign flips, ``n_bootstrap`` resamples), None
    when there is no Human-vs-Human comparison.

    ``robustness``: for each pair of machine systems adjacent in HUMANr order,
    the fewest kept comparisons (of either system) whose removal puts the lower
    system's HUMANr strictly above the upper's, exact
    (``rubrics.robustness.unpaired_reversal``).

    Also: attention-check counts per worker and in total, and position bias:
    the mean raw answer over all kept comparisons (5 = no side preference)
    with its t-interval. ``include_distributions`` adds the per-split half
    values. Undefined statistics are None. One generator from ``seed`` drives,
    in order, the bootstrap, the half-splits, the image subsets and the tests
    against the baseline.
    """
    if not isinstance(responses, Responses):
        raise ValueError("responses: must be a Responses instance")
    conf = checks.confidence(confidence)
    n_bootstrap = checks.integer(n_bootstrap, "n_bootstrap")
    n_splits = checks.integer(n_splits, "n_splits")
    n_image_draws = checks.integer(n_image_draws, "n_image_draws", 2)
    n_permutations = checks.integer(n_permutations, "n_permutations")
    rng = resampling.as_generator(seed)

    check = responses.is_attention_check
    failed = responses.check_failed()
    worker_keys, worker = np.unique(responses.worker_ids, return_inverse=True)
    group_keys, group = np.unique(responses.group_ids, return_inverse=True)
    n_workers_all = worker_keys.shape[0]
    wg = worker.astype(np.int64) * group_keys.shape[0] + group
    failed_wg = np.unique(wg[failed])
    dropped_by_check = np.isin(wg, failed_wg)
    dropped = dropped_by_check | responses.dropped
    comp = ~check
    if not comp.any():
        raise ValueError("responses: no comparisons (only attention checks)")
    kept = comp & ~dropped

    values_all = responses.values()
    sys_names, sys_all = np.unique(responses.systems[comp], return_inverse=True)
    n_sys = sys_names.shape[0]
    sys_idx = np.full(len(responses), -1)
    sys_idx[comp] = sys_all

    v = values_all[kept]
    s_k = sys_idx[kept]
    raw_k = responses.raw[kept]
    img_keys, img_k = np.unique(responses.image_ids[kept], return_inverse=True)
    w_keys, w_k = np.unique(worker[kept], return_inverse=True)
    n_img, n_w = img_keys.shape[0], w_keys.shape[0]

    # Per image x system sums and counts of the kept comparison values.
    img_sums = np.zeros((max(n_img, 1), n_sys))
    img_cnts = np.zeros((max(n_img, 1), n_sys))
    np.add.at(img_sums, (img_k, s_k), v)
    np.add.at(img_cnts, (img_k, s_k), 1.0)
    # Against the baseline: d = system - baseline per image, as baseline_tests pairs them.
    baseline_pairs = None
    if human_system in sys_names.tolist() and n_img:
        with np.errstate(invalid="ignore", divide="ignore"):
            image_means = img_sums / img_cnts  # NaN where an image has no kept comparison
        baseline_pairs = _paired_differences(
            image_means, [str(name) for name in sys_names], human_system
        )
    # Bootstrap clustered by image, paired across systems: one draw of images, which also
    # draws the intervals of the differences from the baseline (their extra columns cost
    # next to nothing; drawing the images again would double the bootstrap's time).
    boot_low = boot_high = np.full(n_sys, np.nan)
    diff_low = diff_high = np.full(n_sys, np.nan)
    if n_img:
        sums, sizes = img_sums, img_cnts
        if baseline_pairs is not None:
            sums = np.hstack([img_sums, baseline_pairs[1]])
            sizes = np.hstack([img_cnts, baseline_pairs[2].astype(np.float64)])
        boot = resampling.paired_cluster_bootstrap_means(sums, sizes, n_bootstrap, conf, rng)
        boot_low, boot_high = boot.low[:n_sys], boot.high[:n_sys]
        diff_low, diff_high = boot.low[n_sys:], boot.high[n_sys:]

    entries: dict[str, dict[str, Any]] = {}
    for j in range(n_sys):
        mask = s_k == j
        vj = v[mask]
        n_j = int(vj.shape[0])
        entry: dict[str, Any] = {
            "n_comparisons": int((comp & (sys_idx == j)).sum()),
            "n_kept": n_j,
            "n_images": int((img_cnts[:, j] > 0).sum()),
            "humanr": None,
            "std": None,
            "sem": None,
            "t_interval": None,
            "bootstrap_interval": None,
            "mean_raw": None,
        }
        if n_j:
            entry["humanr"] = float(vj.mean())
            entry["mean_raw"] = float(raw_k[mask].mean())
            ti = _t_interval(vj, conf)
            if ti is not None:
                entry["std"] = float(vj.std(ddof=1))
                entry["sem"] = entry["std"] / math.sqrt(n_j)
                entry["t_interval"] = [max(-1.0, ti[0]), min(1.0, ti[1])]
            if not np.isnan(boot_low[j]):  # NaN: no resample drew one of its images
                entry["bootstrap_interval"] = [float(boot_low[j]), float(boot_high[j])]
        entries[str(sys_names[j])] = entry

    # Reproducibility over half-splits of the workers.
    cell_sums = np.zeros((max(n_w, 1), n_sys))
    cell_cnts = np.zeros((max(n_w, 1), n_sys))
    np.add.at(cell_sums, (w_k, s_k), v)
    np.add.at(cell_cnts, (w_k, s_k), 1.0)
    # Worker-clustered interval: the t-interval over one vote per worker (the mean of the
    # worker's kept values of the system), as adaptive allocation measures a system
    # (rubrics.adaptive.humanr_next_systems_by_worker). The t_interval above treats values
    # as independent; when a worker answers a whole group of one system (adaptive studies,
    # issue 27), a worker's leaning moves nine values at once and that interval is too
    # narrow (bench/results-adaptive.md).
    for j in range(n_sys):
        has = cell_cnts[:, j] > 0
        votes = cell_sums[has, j] / cell_cnts[has, j]
        entry = entries[str(sys_names[j])]
        entry["n_workers"] = int(has.sum())
        entry["worker_mean"] = float(votes.mean()) if votes.size else None
        wi = _t_interval(votes, conf)
        entry["worker_t_interval"] = None if wi is None else [max(-1.0, wi[0]), min(1.0, wi[1])]
    split_report: dict[str, Any] | None = None
    if n_w >= 2:
        half = resampling.half_splits(n_w, n_splits, rng)
        a = half.astype(float)
        b = 1.0 - a
        with np.errstate(invalid="ignore", divide="ignore"):
            ha = (a @ cell_sums) / (a @ cell_cnts)
            hb = (b @ cell_sums) / (b @ cell_cnts)
        diff = ha - hb
        split_report = {"n_splits": n_splits, "n_workers": int(n_w), "half_a_size": n_w // 2}
        for j in range(n_sys):
            d = diff[:, j]
            item: dict[str, Any] = {
                "halves": _summary(np.concatenate([ha[:, j], hb[:, j]])),
                "difference": _summary(d),
                "n_undefined_splits": int((~np.isfinite(d)).sum()),
            }
            if include_distributions:
                item["half_a"] = [_float_or_none(x) for x in ha[:, j]]
                item["half_b"] = [_float_or_none(x) for x in hb[:, j]]
            entries[str(sys_names[j])]["half_splits"] = item
    else:
        for j in range(n_sys):
            entries[str(sys_names[j])]["half_splits"] = None

    # Std of HUMANr as a function of the number of images (Fig. 4 right).
    ks = _default_image_counts(n_img) if image_counts is None else list(image_counts)
    ks = [checks.integer(k, "each of image_counts", 1, n_img) for k in ks]
    by_images: list[dict[str, Any]] = []
    if ks and n_img:
        # rank[d, i]: position of image i in draw d's random order (a uniform permutation);
        # the images with rank < k form a uniform random k-subset, nested across k.
        rank = rng.permuted(np.tile(np.arange(n_img), (n_image_draws, 1)), axis=1)
        sums_cnts = np.concatenate([img_sums, img_cnts], axis=1)
        for k in ks:
            sub = (rank < k).astype(float) @ sums_cnts
            with np.errstate(invalid="ignore", divide="ignore"):
                vals = sub[:, :n_sys] / sub[:, n_sys:]
            std = {}
            for j in range(n_sys):
                x = vals[:, j][np.isfinite(vals[:, j])]
                std[str(sys_names[j])] = float(x.std(ddof=1)) if x.shape[0] > 1 else None
            by_images.append({"n_images": int(k), "std": std})

    # Each system against the Human-vs-Human baseline, paired by image (the flips last, so
    # every number above is drawn as it was before the tests existed).
    for name in entries:
        entries[name]["vs_baseline"] = None
    if baseline_pairs is not None:
        others, diffs, paired = baseline_pairs
        flips = _sign_flip_counts(diffs, paired, n_permutations, rng)
        tests = _baseline_entries(others, diffs, paired, diff_low, diff_high, flips, conf)
        for name, test in tests.items():
            entries[name]["vs_baseline"] = test

    # Attention checks per worker.
    per_worker: dict[str, dict[str, int]] = {}
    w_checks = np.bincount(worker[check], minlength=n_workers_all)
    w_failed = np.bincount(worker[failed], minlength=n_workers_all)
    w_resp = np.bincount(worker, minlength=n_workers_all)
    w_dropped = np.bincount(worker[dropped_by_check], minlength=n_workers_all)
    uniq_wg = np.unique(wg)
    w_groups = np.bincount(uniq_wg // group_keys.shape[0], minlength=n_workers_all)
    w_failed_groups = np.bincount(failed_wg // group_keys.shape[0], minlength=n_workers_all)
    for i, key in enumerate(worker_keys.tolist()):
        per_worker[str(key)] = {
            "responses": int(w_resp[i]),
            "groups": int(w_groups[i]),
            "checks": int(w_checks[i]),
            "failed_checks": int(w_failed[i]),
            "dropped_groups": int(w_failed_groups[i]),
            "dropped_responses": int(w_dropped[i]),
        }

    # Position bias over all kept comparisons.
    position: dict[str, Any] = {"n": int(raw_k.shape[0]), "mean_raw": None, "t_interval": None}
    if raw_k.shape[0]:
        position["mean_raw"] = float(raw_k.mean())
        ti = _t_interval(raw_k.astype(float), conf)
        position["t_interval"] = None if ti is None else [ti[0], ti[1]]

    baseline = entries.pop(human_system, None)

    def rank(name: str) -> tuple[bool, float, str]:
        h = entries[name]["humanr"]
        return (h is None, 0.0 if h is None else -h, name)

    order = sorted(entries, key=rank)
    # Ranking robustness (issue 15): adjacent machine systems; each comparison belongs to
    # one system, so removals are counted per system (unpaired, exact).
    robustness = []
    ranked = [name for name in order if entries[name]["humanr"] is not None]
    index = {str(name): j for j, name in enumerate(sys_names)}
    for upper, lower in zip(ranked, ranked[1:], strict=False):
        reversal = unpaired_reversal(v[s_k == index[upper]], v[s_k == index[lower]])
        robustness.append({"upper": upper, "lower": lower, **reversal.as_dict()})
    return {
        "human_system": human_system,
        "confidence": conf,
        "n_responses": len(responses),
        "n_comparisons": int(comp.sum()),
        "n_kept": int(kept.sum()),
        "n_images": int(n_img),
        "n_workers": int(n_workers_all),
        "systems": {s: entries[s] for s in order},
        "baseline": baseline,
        "robustness": robustness,
        "half_splits": split_report,
        "std_by_image_count": by_images,
        "attention_checks": {
            "n_checks": int(check.sum()),
            "n_failed": int(failed.sum()),
            "n_dropped_groups": int(failed_wg.shape[0]),
            "n_dropped_responses": int(dropped_by_check.sum()),
            "n_dropped_other": int((responses.dropped & ~dropped_by_check).sum()),
            "per_worker": per_worker,
        },
        "position_bias": position,
        "settings": {
            "n_bootstrap": n_bootstrap,
            "n_splits": n_splits,
            "n_image_draws": n_image_draws,
            "n_permutations": n_permutations,
            "seed": int(seed) if not isinstance(seed, np.random.Generator) else None,
        },
    }
