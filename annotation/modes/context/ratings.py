"""The kept ratings of a context study, read once for the report, the metric lab and the
judge alignment.

A rating is one rater's answers to one item: the before-image part (part 0, every rater)
and, for sighted raters, the after-image part (part 1) of the same assignment. The group
is the rater's declared vision (``Participant.vision_group``), the group the item was
served to otherwise (an imported rating has no declaration; items are only ever served to
their own group, so the two agree for every rater who declared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation.models import Caption, Judgment, Study, Vision
from rubrics.context.questions import BEFORE
from rubrics.context.report import ContextRating

#: The group names the pages and the alignment show (never a participant's own answer).
GROUP_LABELS = {"blv": "BLV", "sighted": "sighted"}
_BLV = (Vision.BLIND, Vision.LOW_VISION)


@dataclass(frozen=True)
class Rated:
    """One kept rating with the context it was given in (``ContextRating`` has no room
    for it: the report groups by domain, the judge alignment by (caption, context))."""

    rating: ContextRating
    context: int


def kept_ratings(study: Study) -> list[Rated]:
    """Every kept rating of the study, in judgment order. A rating whose before-image
    part is excluded is left out whole (its after-image part answers the same item); an
    excluded after-image part leaves the rating without one."""
    rows = (
        Judgment.objects.filter(study=study, excluded=False)
        .order_by("id")
        .values_list(
            "assignment_id", "part", "payload", "participant_id", "participant__vision",
            "item_id", "item__kind", "item__spec",
        )
    )  # fmt: skip
    parts: dict[int, dict[int, Any]] = {}
    for assignment, part, payload, participant, vision, item, kind, spec in rows:
        parts.setdefault(assignment, {})[part] = (payload, participant, vision, item, kind, spec)
    captions = {
        spec["caption"] for by_part in parts.values() for (_, _, _, _, _, spec) in by_part.values()
    }
    systems = dict(Caption.objects.filter(pk__in=captions).values_list("pk", "system"))
    out: list[Rated] = []
    for by_part in parts.values():
        if 0 not in by_part:
            continue
        payload, participant, vision, item, kind, spec = by_part[0]
        group = "blv" if vision in _BLV else "sighted" if vision == Vision.SIGHTED else kind
        after = by_part.get(1, (None,))[0] if group == "sighted" else None
        rating = ContextRating(
            participant=participant,
            item=item,
            caption=spec["caption"],
            system=systems.get(spec["caption"], ""),
            domain=spec.get("domain") or "(none)",
            group=group,
            before={key: payload[key] for key in payload if key != "missing"},
            after=dict(after) if after else None,
        )
        out.append(Rated(rating, int(spec["context"])))
    return out


def score_rows(rated: list[Rated]) -> dict[str, list[tuple[Any, float, int]]]:
    """``{score name: [(caption id, value, context id), ...]}``, one row per rating, each
    group under its own names ("overall (BLV)", "overall (sighted)", ...), so that the
    metric lab and the judge alignment show every group apart."""
    out: dict[str, list[tuple[Any, float, int]]] = {}
    for row in rated:
        r = row.rating
        label = GROUP_LABELS[r.group]
        for dim in BEFORE:
            out.setdefault(f"{dim} ({label})", []).append(
                (r.caption, float(r.before[dim]), row.context)
            )
        if r.after is not None:
            out.setdefault("accuracy (sighted)", []).append(
                (r.caption, float(r.after["accuracy"]), row.context)
            )
            out.setdefault("overall after image (sighted)", []).append(
                (r.caption, float(r.after["overall"]), row.context)
            )
    return out
