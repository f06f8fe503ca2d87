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
from scipy import stats

from rubrics import checks, resampling

__all__ = [
    "GROUP_SIZE",
    "HUMAN_SYSTEM",
    "NEUTRAL",
    "SLIDER_MAX",
    "SLIDER_MIN",
    "Group",
    "Responses",
    "Trial",
    "attention_check_failed",
    "build_groups",
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
    two images must have one); attention checks are drawn from it.

    Each group holds ``group_size - 1`` comparisons of different images and
    one attention check at a random position. The check's image is not one of
    the group's images when another image is available (so the paper's "10
    distinct images" holds); its distractor caption comes from another random
    image that is neither the check image nor one of the group's images when one
    is available, so no image (nor its caption) appears twice in a group.
    Comparisons are assigned largest-remaining-image-first with random ties,
    which forms as many full groups as the image counts allow (every image's
    comparisons spread over different groups).

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
    if len(check_images) < 2:
        raise ValueError(
            "human_captions: attention checks need human captions of at least two images"
        )

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
        while c > 0 and len(chosen) < need:
            bucket = buckets[c]
            while bucket and len(chosen) < need:
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
    # and pass the check without reading. Only a study too small for that reuses one.
    distractor_image = _draw_image(check_images, group_images | {check_image}, rng)
    if distractor_image == check_image:
        distractor_image = _draw_image(check_images, {check_image}, rng)
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
    """A random candidate not in ``avoid`` (any candidate if all are avoided)."""
    # ``avoid`` may hold images that are no candidates (no human caption), so its size alone
    # does not tell whether a candidate is left; the scan below decides in small studies.
    if avoid:
        for _ in range(64):
            img = candidates[int(rng.integers(len(candidates)))]
            if img not in avoid:
                return img
        allowed = [img for img in candidates if img not in avoid]
        if allowed:
            return allowed[int(rng.integers(len(allowed)))]
    return candidates[int(rng.integers(len(candidates)))]


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


def report(
    responses: Responses,
    *,
    human_system: str = HUMAN_SYSTEM,
    confidence: float = 0.95,
    n_bootstrap: int = 1000,
    n_splits: int = 1000,
    image_counts: Sequence[int] | None = None,
    n_image_draws: int = 200,
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
    * ``mean_raw`` of the system's kept comparisons.

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

    Also: attention-check counts per worker and in total, and position bias:
    the mean raw answer over all kept comparisons (5 = no side preference)
    with its t-interval. ``include_distributions`` adds the per-split half
    values. Undefined statistics are None. One generator from ``seed`` drives,
    in order, the bootstrap, the half-splits and the image subsets.
    """
    if not isinstance(responses, Responses):
        raise ValueError("responses: must be a Responses instance")
    conf = checks.confidence(confidence)
    n_bootstrap = checks.integer(n_bootstrap, "n_bootstrap")
    n_splits = checks.integer(n_splits, "n_splits")
    n_image_draws = checks.integer(n_image_draws, "n_image_draws", 2)
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
    # Bootstrap clustered by image, paired across systems: one draw of images.
    boot_low = boot_high = np.full(n_sys, np.nan)
    if n_img:
        boot = resampling.paired_cluster_bootstrap_means(img_sums, img_cnts, n_bootstrap, conf, rng)
        boot_low, boot_high = boot.low, boot.high

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
            "seed": int(seed) if not isinstance(seed, np.random.Generator) else None,
        },
    }
