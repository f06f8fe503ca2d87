"""People where the judge is unsure (issue 40): the study's sampling design.

With a judge's answer on every unit before the study's first judgment, the design decides
which items people answer: every item (``people_design`` "", the default), a uniform
random share (``"uniform"``), or a share drawn with probabilities that grow with the
judge's uncertainty (``"uncertainty"``, active inference: Zrnic and Candes 2024). Each
item keeps the chance it was drawn (``Item.sampling_probability``), which the estimate
(``services/people_judges.py``) turns into inverse-probability weights; an item not drawn
gets ``target = 0``, which the assignment SQL already never serves
(``judgment_count + open_lease_count < target``).

The judge's uncertainty per unit, the first of: the disagreement of a second judge
(``people_judge_second``), the judge's own spread over repeated runs (``JudgeAnswer.run``),
or, for pairs asked both ways, the disagreement between the two orders.

Units are keyed as everywhere in issue 40: a caption id, ``(caption, context)`` for a
mode with ``Judging.context_units``, ``(lower caption id, higher)`` for a pair, whose
choice is turned so that 1 means the higher id won. An item asks about one unit
(``Judging.item_unit``), or about several (an item whose units ``Judging.units`` names,
or an image's caption set: the units of the captions of the item's image). Items that
share a unit are drawn together, as one *group*: every unit is drawn once, with one
probability, whatever items ask about it (a description in one context asked of two
groups of raters, an image's stage-1 and stage-2 items). A group's uncertainty is the
root mean square of its units': people answer the group's units together, and with
independent judge errors the variance a group adds grows with the sum of its units'
squared errors, whose root the optimal probability follows (Zrnic and Candes, section 3).
The draw is seeded by the study's seed and the group's unit keys (caption ids), never an
item's id or position: the same units draw the same way however the items were built or
listed, and a design drawn again (before any judgment) draws the same items.
"""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean, pstdev
from typing import Any

import numpy as np
from django.db import OperationalError, transaction
from django.db.models import Count, Q, Sum

from annotation.errors import Conflict, Forbidden
from annotation.models import Caption, Item, ItemImage, Judge, JudgeAnswer, Judgment, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode
from rubrics.ppi import sampling_probabilities

UNIFORM = "uniform"
UNCERTAINTY = "uncertainty"
DESIGNS = ("", UNIFORM, UNCERTAINTY)
#: How each source of the judge's uncertainty is named in the summary.
SOURCES = {
    "second_judge": "the disagreement of the second judge",
    "runs": "the judge's spread over its repeated runs",
    "swaps": "the judge's disagreement with itself when a pair is shown the other way round",
}
#: Units a refusal names before it only counts the rest.
LISTED = 5
#: ``people_design_apply`` locks the items without waiting (``_lock_items``); when a claim
#: holds one it rolls back and tries again, this often, this far apart (about 5 s in all).
LOCK_TRIES = 50
LOCK_PAUSE_SECONDS = 0.1
#: PostgreSQL's SQLSTATE for a ``NOWAIT`` lock another transaction holds.
LOCK_NOT_AVAILABLE = "55P03"


@dataclass
class Group:
    """Units drawn together and the items asking about them (see the module docstring)."""

    units: list[Any]
    items: list[int] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The draw's seed text: the sorted units, stable across databases."""
        return ",".join(str(unit) for unit in self.units)


def unit_key(judging: Any, first: int, second: int | None) -> Any:
    """The unit's key (the spec's Vocabulary) from a question's two caption ids."""
    if judging.unit == "pair":
        return (min(first, second), max(first, second))
    if judging.context_units:
        return (first, second)
    return first


def item_units(study: Study, judging: Any) -> dict[int, set[Any]]:
    """Every item of the study that asks a judge's question, with the units it asks about.

    ``Judging.item_unit`` first; then the items ``Judging.units`` names (an item holding
    several pairs); then units with no item, by their caption's image (an item showing an
    image's caption set). Items with none (tutorials, gold battles, catch trials) are left
    out: a design never draws them.
    """
    items = list(Item.objects.filter(study=study).order_by())
    out: dict[int, set[Any]] = {}
    for item in items:
        unit = judging.item_unit(item)
        if unit is not None:
            out[item.pk] = {unit_key(judging, *unit)}
    by_item_unit = set(out)
    loose: list[tuple[int, Any]] = []
    for item_id, first, second in judging.units(study):
        key = unit_key(judging, first, second)
        if item_id is None:
            loose.append((first, key))
        elif item_id not in by_item_unit:
            out.setdefault(item_id, set()).add(key)
    if loose:
        mapped = set(out)
        by_image: dict[int, set[int]] = defaultdict(set)
        for item in items:
            if item.image_id is not None and item.pk not in mapped:
                by_image[item.image_id].add(item.pk)
        links = ItemImage.objects.filter(item__study=study).values_list("item_id", "image_id")
        for item_id, image_id in links:
            if item_id not in mapped:
                by_image[image_id].add(item_id)
        images = dict(
            Caption.objects.filter(pk__in={c for c, _ in loose}).values_list("pk", "image_id")
        )
        for caption, key in loose:
            for item_id in by_image.get(images.get(caption), ()):
                out.setdefault(item_id, set()).add(key)
    return out


def groups_of(units_by_item: dict[int, set[Any]]) -> list[Group]:
    """The items joined through shared units (connected components), in unit order."""
    items_by_unit: dict[Any, list[int]] = defaultdict(list)
    for item, units in units_by_item.items():
        for unit in units:
            items_by_unit[unit].append(item)
    done: set[Any] = set()
    groups = []
    for start in sorted(items_by_unit):
        if start in done:
            continue
        units: set[Any] = set()
        items: set[int] = set()
        stack = [start]
        while stack:
            unit = stack.pop()
            if unit in units:
                continue
            units.add(unit)
            for item in items_by_unit[unit]:
                if item not in items:
                    items.add(item)
                    stack.extend(units_by_item[item])
        done |= units
        groups.append(Group(units=sorted(units), items=sorted(items)))
    return groups


# ------------------------------------------------------------------ the judge's answers


def _judge(study: Study, judge_id: int, *, setting: str) -> Judge:
    """The study's judge ``judge_id`` (0: its first, ``Judge``'s ordering)."""
    judges = Judge.objects.filter(study=study)
    judge = judges.filter(pk=judge_id).first() if judge_id else judges.first()
    if judge is None:
        if judge_id:
            raise Conflict(
                f"The setting {setting} names judge {judge_id}, which is not a judge of this "
                "study; choose one of the study's judges.",
                field=setting,
            )
        raise Conflict(
            "The study has no judge: import or run a judge on every unit before applying a "
            "design (the design draws units by the judge's answers)."
        )
    return judge


def _score_name(study: Study, judging: Any, judge: Judge, config: Any) -> str:
    """The score a caption unit's uncertainty is measured on: the report's setting, else
    the first the mode's ``Judging.scores`` gives (its own order, not the database's)."""
    if judging.unit == "pair":
        return "choice"
    if config.people_judge_score:
        return config.people_judge_score
    answer = JudgeAnswer.objects.filter(judge=judge).values_list("answer", flat=True).first()
    return next(iter(judging.scores(answer)), "") if answer is not None else ""


def judge_values(judge: Judge, judging: Any, score: str) -> dict[Any, dict[int, list[tuple]]]:
    """unit -> run -> [(shown the other way round, value)]: a caption unit's ``score``, or a
    pair's choice turned so that 1 means the higher caption id won."""
    out: dict[Any, dict[int, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    rows = judge.answers.values_list("caption_id", "caption_b_id", "run", "scores")
    for first, second, run, scores in rows:
        value = (scores or {}).get(score)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        key = unit_key(judging, first, second)
        swapped = judging.unit == "pair" and first > second
        out[key][run].append((swapped, 1.0 - value if swapped else float(value)))
    return out


def _mean(runs: dict[int, list[tuple]]) -> float:
    """The judge's answer on a unit: every run and order averaged."""
    return fmean(value for values in runs.values() for _, value in values)


def _refuse_missing(missing: list[Any], total: int, what: str) -> None:
    if missing:
        shown = ", ".join(str(unit) for unit in sorted(missing)[:LISTED])
        more = f" and {len(missing) - LISTED} more" if len(missing) > LISTED else ""
        raise Conflict(f"{what} {len(missing)} of the {total} units ({shown}{more}).")


def uncertainty(
    study: Study,
    judging: Any,
    config: Any,
    judge: Judge,
    values: dict,
    units: list[Any],
    score: str,
) -> tuple[dict[Any, float], str]:
    """Per unit, the judge's uncertainty, and its source (a key of ``SOURCES``); ``values``
    are the judge's (``judge_values`` on ``score``) on ``units``.

    ServiceError when the judge gives none: one run, no pair asked both ways, no second
    judge."""
    if config.people_judge_second:
        second = _judge(study, config.people_judge_second, setting="people_judge_second")
        if second.pk == judge.pk:
            raise Conflict(
                "The second judge is the judge itself: choose another judge as "
                "people_judge_second, or 0 for the judge's own spread.",
                field="people_judge_second",
            )
        other = judge_values(second, judging, score)
        missing = [u for u in units if u not in other]
        _refuse_missing(missing, len(units), f"The second judge {second} has no answer for")
        return {u: abs(_mean(values[u]) - _mean(other[u])) for u in units}, "second_judge"
    if any(len(values[u]) > 1 for u in units):
        once = [u for u in units if len(values[u]) < 2]
        _refuse_missing(
            once,
            len(units),
            "The judge's spread over repeated runs is the uncertainty, but it answered once",
        )
        spread = {u: pstdev(fmean(v for _, v in run) for run in values[u].values()) for u in units}
        return spread, "runs"
    if judging.unit == "pair":
        orders = {u: defaultdict(list) for u in units}
        for u in units:
            for answers in values[u].values():
                for swapped, value in answers:
                    orders[u][swapped].append(value)
        if any(len(orders[u]) == 2 for u in units):
            one_way = [u for u in units if len(orders[u]) < 2]
            _refuse_missing(one_way, len(units), "The judge asked the pairs both ways except")
            out = {u: abs(fmean(orders[u][True]) - fmean(orders[u][False])) for u in units}
            return out, "swaps"
    raise Conflict(
        "The uncertainty design needs the judge's uncertainty, and this judge answered every "
        "unit once: run it again on every unit (a second run), "
        + ("ask every pair both ways, " if judging.unit == "pair" else "")
        + "or name a second judge (people_judge_second); or choose the uniform design.",
        field="people_design",
    )


# ---------------------------------------------------------------------------- the write


def _refuse_unless_open(study: Study, user: Any) -> None:
    """Who may apply a design, and when (before any judgment); its own step, read first."""
    if not (user.is_staff or user.pk == study.owner_id):
        raise Forbidden("Only the study's owner applies its sampling design.")
    if Judgment.objects.filter(study=study).exists():
        raise Conflict(
            "People have answered already: the design must be fixed before the first "
            "judgment, or the inverse-probability weights of the estimate are wrong. "
            "Start a new study to draw a design.",
            field="people_design",
        )


def _probabilities(
    design: str, config: Any, groups: list[Group], unit_uncertainty: dict[Any, float]
) -> np.ndarray:
    """One probability per group: ``share`` for all (uniform), else by its uncertainty."""
    if design == UNIFORM:
        return np.full(len(groups), float(config.people_share))
    if config.people_floor > config.people_share:
        raise Conflict(
            f"people_floor ({config.people_floor}) must not exceed people_share "
            f"({config.people_share}): the probabilities average to the share.",
            field="people_floor",
        )
    group_uncertainty = np.array(
        [math.sqrt(fmean(unit_uncertainty[u] ** 2 for u in group.units)) for group in groups]
    )
    return sampling_probabilities(
        group_uncertainty, share=float(config.people_share), floor=float(config.people_floor)
    )


def _restored_targets(items: dict[int, Item]) -> dict[str, int]:
    """Per kind, the target an item left out by an earlier design gets back when drawn now:
    the kind's largest (a mode gives one kind one target when it builds its items)."""
    targets: dict[str, int] = {}
    for item in items.values():
        if item.target > 0:
            targets[item.kind] = max(targets.get(item.kind, 0), item.target)
    return targets


def _new_target(item: Item, drawn: bool, restore: dict[str, int]) -> int:
    if not drawn:
        if item.open_lease_count:
            raise Conflict(
                "Someone holds a lease on an item the design leaves out: apply the design "
                "before the study's link is shared, or once the open leases are released "
                "(the dashboard lists them).",
                field="people_design",
            )
        return 0
    if item.target == 0 and item.sampling_design:
        if item.kind not in restore:
            raise Conflict(
                f"An earlier design left out every item of kind {item.kind}, so their "
                "target is not known any more: start a new study to draw again."
            )
        return restore[item.kind]
    return item.target


def people_design_apply(*, study: Study, user: Any, mode: Mode | None = None) -> dict[str, Any]:
    """Apply the study's sampling design to its items, in one transaction; the summary.

    Reads ``people_design``, ``people_share``, ``people_floor``, ``people_judge`` and
    ``people_judge_second``; draws each group of items in or out (``Group``); an item left
    out gets ``target = 0``, one drawn keeps its target (or gets back the one an earlier
    design took); every drawn-or-not item stores its probability and the design. The
    design "" removes an earlier one (every item to people again) and otherwise changes
    nothing. Refused (ServiceError) for anyone but the owner or staff, once the study has
    a judgment, without a judge's answer on every unit, and under the uncertainty design
    when the judge gives no uncertainty.
    """
    _refuse_unless_open(study, user)
    mode = mode or get_mode(study.mode)
    judging, config = mode.judging, mode.settings(study)
    design = config.people_design
    if design not in DESIGNS:
        raise Conflict(f"people_design: one of {DESIGNS}.", field="people_design")
    if not judging.unit:
        raise Conflict(f"The {mode.label} mode takes no judge, so it has no sampling design.")
    for _ in range(LOCK_TRIES):
        try:
            with transaction.atomic():
                return _apply_locked(study, user, mode, _lock_items(study))
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
        time.sleep(LOCK_PAUSE_SECONDS)
    raise Conflict(
        "Workers are being served this study's items right now, and the design could not "
        "lock them all at once; apply it again in a moment (or pause the study first)."
    )


def _lock_items(study: Study) -> dict[int, Item]:
    """The study's items, locked without waiting; a row another transaction holds raises
    OperationalError (``LOCK_NOT_AVAILABLE``) on PostgreSQL, and the caller starts again.

    The items' rows first, as the assignment service locks them: a lease or a judgment
    taken while the design is drawn is seen here, never lost. Never waiting is what keeps
    the design out of a deadlock: a claim whose ``SKIP LOCKED`` try locked an item that was
    full by then keeps that lock (PostgreSQL does) while it waits for another item, so a
    design holding that other item and waiting for the first would close the cycle.
    """
    locked = Item.objects.select_for_update(nowait=True).filter(study=study).order_by("pk")
    return {item.pk: item for item in locked}


def _apply_locked(study: Study, user: Any, mode: Mode, items: dict[int, Item]) -> dict[str, Any]:
    """``people_design_apply``'s body, with the study's items locked."""
    judging, config = mode.judging, mode.settings(study)
    design = config.people_design
    _refuse_unless_open(study, user)
    if not items:
        raise Conflict("The study has no items yet: open it first (its items are built then).")
    if not design:
        return _remove_design(study, items)
    groups = groups_of(item_units(study, judging))
    units = [unit for group in groups for unit in group.units]
    if not units:
        raise Conflict("No item of the study asks a question a judge answers.")
    judge = _judge(study, config.people_judge, setting="people_judge")
    score = _score_name(study, judging, judge, config)
    values = judge_values(judge, judging, score)
    _refuse_missing(
        [u for u in units if u not in values],
        len(units),
        f"Every unit needs the judge's answer ({score or 'its score'}) before a design is "
        f"drawn; judge {judge} has none for",
    )
    source = ""
    unit_uncertainty: dict[Any, float] = {}
    if design == UNCERTAINTY:
        unit_uncertainty, source = uncertainty(study, judging, config, judge, values, units, score)
    probabilities = _probabilities(design, config, groups, unit_uncertainty)
    restore = _restored_targets(items)
    changed, drawn_groups = [], 0
    for group, probability in zip(groups, probabilities, strict=True):
        drawn = random.Random(f"{study.seed}:{group.key}").random() < probability
        drawn_groups += drawn
        for item_id in group.items:
            item = items[item_id]
            item.target = _new_target(item, drawn, restore)
            item.sampling_probability = float(probability)
            item.sampling_design = design
            changed.append(item)
    fields = ["target", "sampling_probability", "sampling_design"]
    Item.objects.bulk_update(changed, fields, batch_size=1000)
    return {
        **_summary(study, mode),
        "judge": {"id": judge.pk, "name": str(judge)},
        "score": score,
        "uncertainty": source,
        "uncertainty_words": SOURCES.get(source, ""),
        "units": len(units),
        "groups": len(groups),
        "drawn_groups": drawn_groups,
        "expected_groups": float(probabilities.sum()),
    }


def _remove_design(study: Study, items: dict[int, Item]) -> dict[str, Any]:
    """The design "": every item an earlier design left out gets its target back and no
    item keeps a probability; nothing is written when no design was applied."""
    restore = _restored_targets(items)
    changed = []
    for item in items.values():
        if item.sampling_probability is None and not item.sampling_design:
            continue
        item.target = _new_target(item, True, restore)
        item.sampling_probability, item.sampling_design = None, ""
        changed.append(item)
    if changed:
        fields = ["target", "sampling_probability", "sampling_design"]
        Item.objects.bulk_update(changed, fields, batch_size=1000)
    return _summary(study, get_mode(study.mode))


# ----------------------------------------------------------------------------- the reads


def _summary(study: Study, mode: Mode) -> dict[str, Any]:
    """The design's settings and its items' counts (``people_design_state``'s body)."""
    config = mode.settings(study)
    counts = Item.objects.filter(study=study).aggregate(
        items=Count("id"),
        in_design=Count("id", filter=Q(sampling_probability__isnull=False)),
        drawn=Count("id", filter=Q(sampling_probability__isnull=False, target__gt=0)),
        left_out=Count("id", filter=Q(sampling_probability__isnull=False, target=0)),
        uncertainty=Count("id", filter=Q(sampling_design=UNCERTAINTY)),
        expected=Sum("sampling_probability"),
    )
    applied = Item.objects.filter(study=study).exclude(sampling_design="")
    return {
        "design": config.people_design,
        "share": config.people_share,
        "floor": config.people_floor,
        "judge_id": config.people_judge,
        "second_judge_id": config.people_judge_second,
        "applied": applied.values_list("sampling_design", flat=True).first() or "",
        "items": counts["items"],
        "items_in_design": counts["in_design"],
        "items_drawn": counts["drawn"],
        "items_left_out": counts["left_out"],
        "items_expected": float(counts["expected"] or 0.0),
        "judgments": Judgment.objects.filter(study=study).count(),
    }


def people_design_state(study: Study, *, mode: Mode | None = None) -> dict[str, Any]:
    """The study's design settings, the design its items carry (``applied``; "" none) and
    the items' counts: all, in the design, drawn for people, left out, and the expected
    number drawn (the sum of their probabilities)."""
    return _summary(study, mode or get_mode(study.mode))


def unit_sampling(study: Study, *, mode: Mode | None = None) -> dict[Any, tuple[float, bool]]:
    """Per unit of an item that carries a probability: (its probability of going to people,
    whether the judge's uncertainty drew it: the uncertainty design, and drawn). ``{}``
    when the study has no design. Units keyed as ``unit_key``."""
    rows = list(
        Item.objects.filter(study=study, sampling_probability__isnull=False).values_list(
            "pk", "sampling_probability", "sampling_design", "target"
        )
    )
    if not rows:
        return {}
    mode = mode or get_mode(study.mode)
    units = item_units(study, mode.judging)
    out: dict[Any, tuple[float, bool]] = {}
    for pk, probability, design, target in rows:
        for unit in units.get(pk, ()):
            out[unit] = (probability, design == UNCERTAINTY and target > 0)
    return out
