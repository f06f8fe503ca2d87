"""THumB's participation pages: one image with its caption groups in a per-annotator order,
stage 2 pre-filled with stage 1 and the check with stage 2, and the form read back into
caption groups."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from annotation import storage
from annotation.models import Assignment, Image, Item, Study, rows
from annotation.modes.base import Pages
from annotation.modes.catch import CATCH
from annotation.modes.thumb.protocol import SCORE_FIELDS, display_order, number_text
from annotation.modes.thumb.stages import (
    CHECK,
    FLUENCY,
    KINDS,
    REVIEWS,
    STAGE1,
    STAGE2,
    STAGE_COLUMNS,
    STAGE_ROWS,
    keep_stages,
    reviewed_payload,
    stage_params,
)
from rubrics import thumb as rubric

_FORM_FIELD = re.compile(r"^(c\d+)-(precision|recall|conciseness|inclusive|fluency|confirm)$")
_FORM_AMOUNT = re.compile(r"^(c\d+)-amount-([a-z_]+)$")

#: How a review page names the stage it starts from ("stage 1: 4").
_REVIEWED_LABEL = {STAGE1: "stage 1", STAGE2: "stage 2"}

#: Every column of an image, the id first (the page's image: its file, size and alt text).
IMAGE_FIELDS = tuple(f.attname for f in Image._meta.concrete_fields)

#: A page's own reads in one statement: the lease's image; the progress line's numbers (how
#: many stage-1 items ask for answers, ``target`` above 0: a people design leaves some out;
#: per stage, how many answers its items still need, from the counters the services keep on
#: each item; the annotator's finished sets); and, on a review's page, the image's stages
#: (``stages.STAGE_COLUMNS``: what the review starts from), one row each (none: one row of
#: NULLs). Written out (issue 48): the image, the progress and the stages were three
#: statements, and the ORM's filtered aggregates cost the web worker more to build than the
#: database to run them. ``{stages}``: ``_STAGES_JOIN`` on a review's page, else empty.
#: Params: the submitted status, participant id; ``_PROGRESS``' params; on a review's
#: page ``STAGE_COLUMNS``' and ``STAGE_ROWS``' params; the image id.
PAGE = f"""
SELECT {rows.columns("m", Image, IMAGE_FIELDS)},
       (SELECT COUNT(*) FROM "{Assignment._meta.db_table}" a
        WHERE a."status" = %s AND a."participant_id" = %s),
       pr."images", pr."stage1", pr."stage2", pr."fluency", pr."check"{{stage_columns}}
FROM "{Image._meta.db_table}" m
CROSS JOIN ({{progress}}) pr
{{stages}}
WHERE m."id" = %s
ORDER BY {{order}}
"""
#: The progress line's per-stage numbers (``PAGE``'s ``pr``). Params: the four stages, with
#: stage 1 first once more, and the study id.
_PROGRESS = f"""
  SELECT COALESCE(SUM(CASE WHEN i."kind" = %s AND i."target" > 0 THEN 1 ELSE 0 END), 0)
           AS "images",
         COALESCE(SUM(CASE WHEN i."kind" = %s THEN i."target" - i."judgment_count" ELSE 0 END), 0)
           AS "stage1",
         COALESCE(SUM(CASE WHEN i."kind" = %s THEN i."target" - i."judgment_count" ELSE 0 END), 0)
           AS "stage2",
         COALESCE(SUM(CASE WHEN i."kind" = %s THEN i."target" - i."judgment_count" ELSE 0 END), 0)
           AS "fluency",
         COALESCE(SUM(CASE WHEN i."kind" = %s THEN i."target" - i."judgment_count" ELSE 0 END), 0)
           AS "check"
  FROM "{Item._meta.db_table}" i WHERE i."study_id" = %s
"""
_STAGES_JOIN = f"LEFT JOIN (SELECT {STAGE_COLUMNS}\n{STAGE_ROWS}) s ON 1 = 1"
_STAGE_SELECT = ", s.sid, s.skind, s.spayload, s.sexcluded, s.slinked, s.snative"
#: PAGE for a page without stages to read, and for a review's.
PAGE_PLAIN = PAGE.format(progress=_PROGRESS, stage_columns="", stages="", order="1")
PAGE_REVIEW = PAGE.format(
    progress=_PROGRESS, stage_columns=_STAGE_SELECT, stages=_STAGES_JOIN, order="s.sid"
)
#: The progress line alone (``_progress``: a page without its image). Params: PAGE's first
#: two, then ``_PROGRESS``'.
PROGRESS = f"""
SELECT (SELECT COUNT(*) FROM "{Assignment._meta.db_table}" a
        WHERE a."status" = %s AND a."participant_id" = %s),
       pr."images", pr."stage1", pr."stage2", pr."fluency", pr."check"
FROM ({_PROGRESS}) pr
"""

_OPTION_TEXT = {
    ("conciseness", 0.0): "0: none",
    ("conciseness", 0.5): "−0.5: overly repetitive or exhaustive",
    ("inclusive", 0.0): "0: none",
    ("inclusive", 0.5): "−0.5: subjective comment on appearance",
    ("inclusive", 2.0): "−2: severe",
}


#: The rubric's fluency error types as the rubric dialog and each caption group show them: the
#: same on every page, so built once (read only: a group copies each row it fills in).
_FLUENCY_TABLE = tuple(
    {
        "key": error.key,
        "label": error.label,
        "example": error.example,
        "penalty": number_text(error.penalty) if error.is_fixed else "",
        "low": number_text(error.amount_range[0]) if error.amount_range else "",
        "high": number_text(error.amount_range[1]) if error.amount_range else "",
        "step": number_text(error.amount_range[2]) if error.amount_range else "",
    }
    for error in rubric.FLUENCY_ERRORS.values()
)


def rubric_context() -> dict[str, Any]:
    """What the rubric dialog shows (``modes/thumb/rubric.html``): the same on every page."""
    return {
        "precision_definition": rubric.PRECISION_DEFINITION,
        "recall_definition": rubric.RECALL_DEFINITION,
        "rules": rubric.RULES,
        "examples": rubric.EXAMPLES,
        "fluency_table": _FLUENCY_TABLE,
    }


class ThumbPages(Pages):
    intro_template = "modes/thumb/intro.html"
    item_template = "modes/thumb/item.html"
    #: A refused submission's page shows the answers as sent (``answers`` of item_context),
    #: so a person without JavaScript (no draft) loses nothing either.
    keeps_answers = True

    def item_context(
        self, assignment: Assignment, part: int, *, answers: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The page of one image; ``answers`` (``parse_form`` of a refused submission)
        replaces the starting values, while a review's "was" labels stay the reviewed ones."""
        item = assignment.item
        # A catch trial is a stage-1 caption set to the annotator (annotation/modes/catch.py).
        kind = STAGE1 if item.kind == CATCH else item.kind
        # The services and views hand the lease over with its participant and study loaded.
        study = assignment.participant.study
        # The image, the progress line and a review's stages in one statement (``PAGE``).
        image, progress = self._page_reads(assignment, study)
        prefill = (reviewed_payload(assignment) or {}).get("captions", {})
        groups = {group["key"]: group for group in item.spec["groups"]}
        order = display_order(
            list(groups), seed=study.seed, participant_id=assignment.participant_id, item_id=item.pk
        )
        sent = (answers or {}).get("captions") or {}
        shown = [
            self._group_context(
                number, groups[key], prefill.get(key), kind=kind, answers=sent.get(key)
            )
            for number, key in enumerate(order, start=1)
        ]
        return {
            "kind": kind,
            "stage_label": {
                STAGE1: "Stage 1",
                STAGE2: "Stage 2 (review)",
                FLUENCY: "Fluency check",
                CHECK: "Quality check (third annotator)",
            }[kind],
            "reviewed_label": _REVIEWED_LABEL[REVIEWS[kind]] if kind in REVIEWS else "",
            "image": image,  # its id and size, for the zoom (participate/_image.html)
            "image_url": storage.display_url(image.display) if image.display else "",
            "image_alt": image.alt_text
            or "The photograph the captions below describe (no description was supplied).",
            "image_width": image.width,
            "image_height": image.height,
            "groups": shown,
            "progress": progress,
            **rubric_context(),
            # The server's minimum for this set (crowd workers, issue 29), said up front so
            # an honest worker is not surprised by a refusal.
            "minimum_seconds": self.mode.min_seconds(assignment),
        }

    def parse_form(self, post, part: int) -> dict[str, Any]:
        """Group the form's ``c<n>-<field>`` values by caption group (no validation here)."""
        captions: dict[str, dict[str, Any]] = defaultdict(lambda: {"fluency_errors": {}})
        amounts: dict[str, dict[str, str]] = defaultdict(dict)
        for name in post:
            if match := _FORM_FIELD.match(name):
                key, field = match.groups()
                if field == "fluency":
                    for error in post.getlist(name):
                        captions[key]["fluency_errors"][error] = None
                elif field == "confirm":
                    # A review's "I checked this caption" box (see ThumbProtocol.validate).
                    captions[key]["confirmed"] = post.get(name) == "yes"
                else:
                    captions[key][field] = post.get(name)
            elif match := _FORM_AMOUNT.match(name):
                amounts[match.group(1)][match.group(2)] = post.get(name)
        for key, ticked in captions.items():
            for error in ticked["fluency_errors"]:
                if error in rubric.FLUENCY_ERRORS and not rubric.FLUENCY_ERRORS[error].is_fixed:
                    ticked["fluency_errors"][error] = amounts[key].get(error)
        return {"captions": {key: dict(value) for key, value in captions.items()}}

    @classmethod
    def _group_context(
        cls,
        number: int,
        group: dict[str, Any],
        before: dict[str, Any] | None,
        *,
        kind: str,
        answers: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What the template needs for one caption group; stage 2 starts from stage 1, a
        refused page from what was sent (``answers``)."""
        key = group["key"]
        values = answers if answers is not None else (before or {})
        ticked = values.get("fluency_errors") or {}
        if not isinstance(ticked, dict):
            ticked = {}
        fluency = []
        for row in _FLUENCY_TABLE:
            error = rubric.FLUENCY_ERRORS[row["key"]]
            amount = ticked.get(row["key"])
            fluency.append(
                {
                    **row,
                    "field": f"{key}-amount-{row['key']}",
                    "checked": row["key"] in ticked,
                    "amount": _shown_number(amount)
                    if amount is not None and not error.is_fixed
                    else row["low"],
                }
            )

        def options(field: str, choices, default=None) -> list[dict[str, Any]]:
            chosen = _as_float(values.get(field, default))
            return [
                {
                    "value": number_text(v),
                    "text": _OPTION_TEXT.get((field, v), number_text(v)),
                    "checked": chosen is not None and math.isclose(chosen, float(v)),
                }
                for v in choices
            ]

        review = bool(before) and kind in REVIEWS

        def was(field: str) -> str:
            if not review:
                return ""
            return number_text(before[field])

        return {
            "key": key,
            "number": number,
            "text": group["text"],
            "fields": {field: f"{key}-{field}" for field in SCORE_FIELDS},
            "fluency_fields": [f"{key}-fluency"]
            + [f"{key}-amount-{e.key}" for e in rubric.FLUENCY_ERRORS.values() if not e.is_fixed],
            "scales": [
                (
                    "precision",
                    "Precision (P)",
                    options("precision", rubric.SCORE_VALUES),
                    was("precision"),
                ),
                ("recall", "Recall (R)", options("recall", rubric.SCORE_VALUES), was("recall")),
            ],
            "penalties": [
                (
                    "conciseness",
                    "Conciseness penalty",
                    options("conciseness", rubric.CONCISENESS_VALUES, 0.0),
                    was("conciseness"),
                ),
                (
                    "inclusive",
                    "Inclusive-language penalty",
                    options("inclusive", rubric.INCLUSIVE_VALUES, 0.0),
                    was("inclusive"),
                ),
            ],
            "fluency": fluency,
            "fluency_count": len(ticked),
            "was_fluency": (
                ", ".join(
                    rubric.FLUENCY_ERRORS[k].label for k in ticked if k in rubric.FLUENCY_ERRORS
                )
                or "none"
            )
            if review
            else "",
            "total": number_text(values["total"]) if review and answers is None else "",
            "confirmed": bool(answers and answers.get("confirmed") is True),
        }

    @staticmethod
    def _page_reads(assignment: Assignment, study: Study) -> tuple[Image, dict[str, int]]:
        """The lease's image and the progress line: the annotator's position (their finished
        sets, plus this one) and the study's images and answers still needed per stage
        (``PAGE``); on a review's page its stages are kept on the lease too."""
        item = assignment.item
        review = item.kind in REVIEWS
        params: list[Any] = [Assignment.Status.SUBMITTED, assignment.participant_id]
        params += [STAGE1, *KINDS, study.pk]
        if review:
            params += stage_params(assignment)
        params.append(item.image_id)
        with rows.cursor() as cursor:
            cursor.execute(PAGE_REVIEW if review else PAGE_PLAIN, params)
            found = cursor.fetchall()
        if not found:
            raise Image.DoesNotExist("Image matching query does not exist.")
        width = len(IMAGE_FIELDS)
        first = found[0]
        image = rows.instance(Image, IMAGE_FIELDS, first[:width])
        if review:
            keep_stages(assignment, [row[width + 6 :] for row in found])
        return image, _progress_line(first[width : width + 6])

    @staticmethod
    def _progress(assignment: Assignment, study: Study) -> dict[str, int]:
        """The progress line alone (``PROGRESS``), as a page shows it with its image."""
        params = [Assignment.Status.SUBMITTED, assignment.participant_id, STAGE1, *KINDS]
        with rows.cursor() as cursor:
            cursor.execute(PROGRESS, [*params, study.pk])
            return _progress_line(cursor.fetchone())


def _progress_line(numbers) -> dict[str, int]:
    """The progress line from ``PROGRESS``' columns: the annotator's finished sets, the
    images asked about, and the answers still needed per stage."""
    done, images, *left = (int(n) for n in numbers)
    remaining = dict(zip(KINDS, left, strict=True))
    return {
        "position": done + 1,
        # The images people are asked about: not those a people design left out.
        "images": images,
        **{f"left_{kind}": remaining[kind] for kind in KINDS},
        "left": sum(left),
    }


def _as_float(value: Any) -> float | None:
    """A sent or stored value as a number to compare with the options; None if it is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _shown_number(value: Any) -> str:
    """A fluency amount as the form shows it: stored numbers formatted, sent text as sent."""
    return number_text(value) if isinstance(value, int | float) else str(value)
