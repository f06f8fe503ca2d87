"""The THumB rubric (Kasai et al. 2022): an image's caption set scored in two stages.

Items, one set per image:

* ``stage1``: an annotator scores every caption group of the image (P, R, penalties);
* ``stage2``: a different annotator sees the stage-1 scores and confirms or modifies each
  field; served only once stage 1 is judged, never to the stage-1 annotator;
* ``fluency``: created after the last stage when no annotator of the image is a native
  English speaker (``User.native_english``); served to native speakers only.

A caption group is one normalised text: identical texts of several systems are shown once
and the scores apply to each caption of the group. Only one caption per (image, system)
is shown (the first imported); further captions of a system, e.g. extra human references,
are left out, so the report has one row per (image, system) as the paper's tables do.

The protocol rules and the statistics live in ``rubrics.thumb``; this module maps them onto
items, judgments and pages.
"""

from __future__ import annotations

import math
import random
import re
from collections import defaultdict
from typing import Any

import numpy as np
from django.conf import settings as django_settings
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Sum
from django.db.models.functions import Cast

from annotation.models import (
    Assignment,
    Caption,
    Image,
    Item,
    Judgment,
    Participant,
    Study,
)
from annotation.modes.base import (
    JUDGMENT_FROM,
    JUDGMENT_SELECT,
    JUDGMENT_TRAILING,
    ExportColumn,
    ExportSql,
    Mode,
    Progress,
    SubmissionError,
    check_int,
    judgment_export_columns,
    judgment_trailing_columns,
    register,
)
from rubrics import thumb as rubric

STAGE1 = "stage1"
STAGE2 = "stage2"
FLUENCY = "fluency"
KINDS = (STAGE1, STAGE2, FLUENCY)

SCORE_FIELDS = ("precision", "recall", "fluency", "conciseness", "inclusive")
_FIELD_LABELS = {
    "precision": "precision",
    "recall": "recall",
    "fluency": "fluency errors",
    "conciseness": "conciseness",
    "inclusive": "inclusive language",
}
_FORM_FIELD = re.compile(r"^(c\d+)-(precision|recall|conciseness|inclusive|fluency)$")
_FORM_AMOUNT = re.compile(r"^(c\d+)-amount-([a-z_]+)$")

_OPTION_TEXT = {
    ("conciseness", 0.0): "0: none",
    ("conciseness", 0.5): "−0.5: overly repetitive or exhaustive",
    ("inclusive", 0.0): "0: none",
    ("inclusive", 0.5): "−0.5: subjective comment on appearance",
    ("inclusive", 2.0): "−2: severe",
}

HISTOGRAM_FIGURE = "precision-recall-histograms"
TOTALS_FIGURE = "system-totals"


def _number_text(value: float) -> str:
    """A penalty as the form writes it: ``0``, ``0.5``, ``2``."""
    return f"{value:g}"


def _excerpt(text: str, length: int = 40) -> str:
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def _display_order(keys: list[str], *, seed: int, participant_id: int, item_id: int) -> list[str]:
    """The caption-group order one annotator sees for one item (stable across reloads)."""
    order = list(keys)
    random.Random(f"thumb:{seed}:{participant_id}:{item_id}").shuffle(order)
    return order


def _as_number(value: Any) -> Any:
    """Turn form text into a number for ``rubrics.thumb``; anything else passes through."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            number = float(text)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def _same_scores(a: dict[str, Any], b: dict[str, Any], field: str) -> bool:
    if field == "fluency":
        return _errors_text(a.get("fluency_errors") or {}) == _errors_text(
            b.get("fluency_errors") or {}
        ) and math.isclose(a.get("fluency", 0.0), b.get("fluency", 0.0), abs_tol=1e-9)
    return math.isclose(float(a[field]), float(b[field]), abs_tol=1e-9)


def _errors_text(errors: dict[str, float]) -> str:
    """Ticked fluency error types as one cell: ``casing;awkward_construction=0.3``."""
    parts = []
    for key in rubric.FLUENCY_ERRORS:
        if key in errors:
            error = rubric.FLUENCY_ERRORS[key]
            parts.append(key if error.is_fixed else f"{key}={_number_text(errors[key])}")
    return ";".join(parts)


@register
class ThumbMode(Mode):
    name = "thumb"
    label = "THumB rubric"
    exclusion_rules = (
        "Both stages are exported; the report uses stage 2 where present, else stage 1, and "
        "a fluency-only round's fluency when neither stage annotator was a native speaker."
    )
    default_settings = {
        "n_images": None,
        "stage2": True,
        "require_native_fluency": True,
        "bootstrap_resamples": 1000,
        "confidence": 0.90,
        "weight_precision": 0.5,
        "weight_recall": 0.5,
        # Images (stage 1 or stage 2 items) a crowd worker judges to earn the completion code.
        "completion_images": 5,
    }
    #: One image's caption set with P, R and penalties per caption: minutes of work.
    crowd_lease_seconds = 15 * 60

    intro_template = "modes/thumb/intro.html"
    item_template = "modes/thumb/item.html"
    report_template = "modes/thumb/report.html"
    figure_names = (HISTOGRAM_FIGURE, TOTALS_FIGURE)

    # ------------------------------------------------------------------ settings

    def clean_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        clean = super().clean_settings(raw)
        n_images = clean["n_images"]
        if n_images is not None and (
            isinstance(n_images, bool) or not isinstance(n_images, int) or n_images < 1
        ):
            raise ValueError("n_images must be a positive whole number or empty (all images).")
        for flag in ("stage2", "require_native_fluency"):
            if not isinstance(clean[flag], bool):
                raise ValueError(f"{flag} must be true or false.")
        resamples = clean["bootstrap_resamples"]
        if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
            raise ValueError("bootstrap_resamples must be a whole number of at least 100.")
        confidence = clean["confidence"]
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            raise ValueError("confidence must be a number between 0 and 1.")
        if not 0 < confidence < 1:
            raise ValueError("confidence must be a number between 0 and 1.")
        check_int(clean, "completion_images", 1, 10_000)
        for weight in ("weight_precision", "weight_recall"):
            value = clean[weight]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{weight} must be a non-negative number.")
        return clean

    # ------------------------------------------------------------------ items

    def build_items(self, study: Study) -> int:
        """One ``stage1`` (and ``stage2``) item per image with a Human and another caption."""
        captions = (
            Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
            .order_by("image_id", "id")
            .values_list("id", "image_id", "system", "raw_text", "text")
        )
        by_image: dict[int, dict[str, tuple]] = defaultdict(dict)
        for caption in captions:
            # One caption per system and image: the first imported (see the module docstring).
            by_image[caption[1]].setdefault(caption[2], caption)
        eligible = [
            image_id
            for image_id, systems in sorted(by_image.items())
            if Caption.HUMAN in systems and len(systems) >= 2
        ]
        n_images = study.settings.get("n_images")
        if n_images is not None and n_images < len(eligible):
            eligible = sorted(random.Random(study.seed).sample(eligible, n_images))
        names = dict(Image.objects.filter(pk__in=eligible).values_list("id", "name"))
        items = []
        for position, image_id in enumerate(eligible):
            spec = {
                "image_name": names[image_id],
                "groups": self._groups(by_image[image_id].values()),
            }
            items.append(
                Item(
                    study=study,
                    kind=STAGE1,
                    image_id=image_id,
                    position=position,
                    spec=spec,
                    target=1,
                )
            )
            if study.settings.get("stage2", True):
                # Same position as stage 1: the lease order then finishes images one by one.
                items.append(
                    Item(
                        study=study,
                        kind=STAGE2,
                        image_id=image_id,
                        position=position,
                        spec=spec,
                        target=1,
                    )
                )
        Item.objects.bulk_create(items)
        return len(items)

    @staticmethod
    def _groups(captions) -> list[dict[str, Any]]:
        """Caption groups of one image: one per normalised text, in import order."""
        groups: dict[str, dict[str, Any]] = {}
        for caption_id, _image_id, system, raw_text, text in sorted(captions):
            group = groups.setdefault(text, {"text": text, "captions": []})
            group["captions"].append({"id": caption_id, "system": system, "raw_text": raw_text})
        return [{"key": f"c{n}", **group} for n, group in enumerate(groups.values(), start=1)]

    def eligible_items(self, participant: Participant):
        study_items = Item.objects.filter(study_id=participant.study_id)
        stage1_done = Item.objects.filter(
            study_id=participant.study_id,
            kind=STAGE1,
            image_id=OuterRef("image_id"),
            judgment_count__gte=1,
        )
        # "Own" stage 1 includes every participant of the same browser: two crowd ids from
        # one browser must not check each other's work.
        same_person = Q(participant_id=participant.pk)
        if participant.browser_id:
            same_person |= Q(participant__browser_id=participant.browser_id)
        own_stage1 = Judgment.objects.filter(
            same_person,
            item__study_id=participant.study_id,
            item__kind=STAGE1,
            item__image_id=OuterRef("image_id"),
        )
        allowed = Q(kind=STAGE1) | Q(Exists(stage1_done), ~Exists(own_stage1), kind=STAGE2)
        if participant.user_id is not None and participant.user.native_english:
            allowed |= Q(kind=FLUENCY)
        return study_items.filter(allowed)

    def completion_earned(self, participant: Participant) -> bool:
        needed = self.settings_for(participant.study)["completion_images"]
        return Judgment.objects.filter(participant_id=participant.pk).count() >= needed

    def after_submit(self, participant: Participant, judgment: Judgment) -> None:
        """Route the image to a fluency round when no annotator of it is a native speaker."""
        item = judgment.item
        study = Study.objects.only("settings").get(pk=item.study_id)
        if not study.settings.get("require_native_fluency", True):
            return
        last_stage = STAGE2 if study.settings.get("stage2", True) else STAGE1
        if item.kind != last_stage:
            return
        image_items = Item.objects.filter(study_id=item.study_id, image_id=item.image_id)
        native_judged = Judgment.objects.filter(
            item__in=image_items.filter(kind__in=[STAGE1, STAGE2]),
            participant__user__native_english=True,
        ).exists()
        if native_judged or image_items.filter(kind=FLUENCY).exists():
            return
        Item.objects.create(
            study_id=item.study_id,
            kind=FLUENCY,
            image_id=item.image_id,
            position=item.position,
            spec=item.spec,
            target=1,
        )

    # ------------------------------------------------------------------ submissions

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
                else:
                    captions[key][field] = post.get(name)
            elif match := _FORM_AMOUNT.match(name):
                amounts[match.group(1)][match.group(2)] = post.get(name)
        for key, ticked in captions.items():
            for error in ticked["fluency_errors"]:
                if error in rubric.FLUENCY_ERRORS and not rubric.FLUENCY_ERRORS[error].is_fixed:
                    ticked["fluency_errors"][error] = amounts[key].get(error)
        return {"captions": {key: dict(value) for key, value in captions.items()}}

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """All or nothing: every caption group of the item must be complete and valid."""
        item = assignment.item
        if item.kind == STAGE2 and self._did_stage1(assignment.participant_id, item):
            raise SubmissionError(
                "You scored this image in stage 1; stage 2 must be done by another annotator. "
                "Nothing was saved.",
                status=403,
            )
        submitted = data.get("captions") if isinstance(data, dict) else None
        if not isinstance(submitted, dict):
            raise SubmissionError("The form did not contain any caption scores; nothing was saved.")
        groups = {group["key"]: group for group in item.spec["groups"]}
        unknown = sorted(set(submitted) - set(groups))
        if unknown:
            raise SubmissionError(
                f"Unknown caption field {unknown[0]}; reload the page. Nothing was saved."
            )
        study_seed = Study.objects.filter(pk=item.study_id).values_list("seed", flat=True)[0]
        order = _display_order(
            list(groups), seed=study_seed, participant_id=assignment.participant_id, item_id=item.pk
        )
        clean: dict[str, Any] = {}
        for number, key in enumerate(order, start=1):
            values = submitted.get(key) or {}
            if not isinstance(values, dict):
                values = {}
            who = f'Caption {number} ("{_excerpt(groups[key]["text"])}")'
            scores = self._validate_group(key, who, values, fluency_only=item.kind == FLUENCY)
            clean[key] = {"caption_ids": [c["id"] for c in groups[key]["captions"]], **scores}
        return {"captions": clean}

    @staticmethod
    def _did_stage1(participant_id: int, item: Item) -> bool:
        return Judgment.objects.filter(
            item__study_id=item.study_id,
            item__kind=STAGE1,
            item__image_id=item.image_id,
            participant_id=participant_id,
        ).exists()

    @staticmethod
    def _validate_group(
        key: str, who: str, values: dict[str, Any], *, fluency_only: bool
    ) -> dict[str, Any]:
        errors = values.get("fluency_errors") or {}
        if not isinstance(errors, dict):
            raise SubmissionError(
                f"{who}: the fluency errors are malformed.", field=f"{key}-fluency"
            )
        errors = {error: _as_number(amount) for error, amount in errors.items()}
        if fluency_only:
            try:
                resolved = rubric.validate_caption_scores(5, 5, errors)
            except ValueError as exc:
                raise SubmissionError(
                    f"{who}: {_friendly(exc)}", field=_error_field(key, exc)
                ) from exc
            return {"fluency_errors": resolved.fluency_errors, "fluency": resolved.fluency}
        for field in ("precision", "recall"):
            if values.get(field) in (None, ""):
                raise SubmissionError(
                    f"{who}: choose a {field} score from 1 to 5.", field=f"{key}-{field}"
                )
        try:
            scores = rubric.validate_caption_scores(
                _as_number(values["precision"]),
                _as_number(values["recall"]),
                errors,
                _as_number(values.get("conciseness") or 0),
                _as_number(values.get("inclusive") or 0),
            )
        except ValueError as exc:
            raise SubmissionError(f"{who}: {_friendly(exc)}", field=_error_field(key, exc)) from exc
        return scores.as_dict()

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """Stage 2: which fields differ from stage 1, per caption group (server-side)."""
        if item.kind != STAGE2:
            return {}
        stage1 = self._stage1_payload(item)
        modified = {}
        for key, scores in payload["captions"].items():
            before = (stage1 or {}).get("captions", {}).get(key)
            modified[key] = {
                field: before is None or not _same_scores(before, scores, field)
                for field in SCORE_FIELDS
            }
        return {"modified": modified}

    @staticmethod
    def _stage1_payload(item: Item) -> dict[str, Any] | None:
        return (
            Judgment.objects.filter(
                item__study_id=item.study_id,
                item__kind=STAGE1,
                item__image_id=item.image_id,
                excluded=False,
            )
            .order_by("id")
            .values_list("payload", flat=True)
            .first()
        )

    # ------------------------------------------------------------------ pages

    def page_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        item = assignment.item
        study = Study.objects.only("seed", "settings").get(pk=item.study_id)
        image = Image.objects.only("display", "alt_text", "width", "height").get(pk=item.image_id)
        stage1 = self._stage1_payload(item) if item.kind == STAGE2 else None
        prefill = (stage1 or {}).get("captions", {})
        groups = {group["key"]: group for group in item.spec["groups"]}
        order = _display_order(
            list(groups), seed=study.seed, participant_id=assignment.participant_id, item_id=item.pk
        )
        shown = [
            self._group_context(number, groups[key], prefill.get(key), kind=item.kind)
            for number, key in enumerate(order, start=1)
        ]
        return {
            "kind": item.kind,
            "stage_label": {
                STAGE1: "Stage 1",
                STAGE2: "Stage 2 (review)",
                FLUENCY: "Fluency check",
            }[item.kind],
            "image_url": (django_settings.MEDIA_URL + image.display) if image.display else "",
            "image_alt": image.alt_text
            or "The photograph the captions below describe (no description was supplied).",
            "image_width": image.width,
            "image_height": image.height,
            "groups": shown,
            "progress": self._progress(assignment, study),
            "precision_definition": rubric.PRECISION_DEFINITION,
            "recall_definition": rubric.RECALL_DEFINITION,
            "rules": rubric.RULES,
            "examples": rubric.EXAMPLES,
            "fluency_table": self._fluency_table(),
            "draft_key": f"capeval-thumb-draft-{assignment.token}",
        }

    @staticmethod
    def _fluency_table() -> list[dict[str, Any]]:
        return [
            {
                "key": error.key,
                "label": error.label,
                "example": error.example,
                "penalty": _number_text(error.penalty) if error.is_fixed else "",
                "low": _number_text(error.amount_range[0]) if error.amount_range else "",
                "high": _number_text(error.amount_range[1]) if error.amount_range else "",
                "step": _number_text(error.amount_range[2]) if error.amount_range else "",
            }
            for error in rubric.FLUENCY_ERRORS.values()
        ]

    @classmethod
    def _group_context(
        cls, number: int, group: dict[str, Any], before: dict[str, Any] | None, *, kind: str
    ) -> dict[str, Any]:
        """What the template needs for one caption group; stage 2 starts from stage 1."""
        key = group["key"]
        values = before or {}
        ticked = values.get("fluency_errors") or {}
        fluency = []
        for row in cls._fluency_table():
            error = rubric.FLUENCY_ERRORS[row["key"]]
            amount = ticked.get(row["key"])
            fluency.append(
                {
                    **row,
                    "field": f"{key}-amount-{row['key']}",
                    "checked": row["key"] in ticked,
                    "amount": _number_text(amount)
                    if amount is not None and not error.is_fixed
                    else row["low"],
                }
            )

        def options(field: str, choices, default=None) -> list[dict[str, Any]]:
            chosen = values.get(field, default)
            return [
                {
                    "value": _number_text(v),
                    "text": _OPTION_TEXT.get((field, v), _number_text(v)),
                    "checked": chosen is not None and math.isclose(float(chosen), float(v)),
                }
                for v in choices
            ]

        def was(field: str) -> str:
            if not (before and kind == STAGE2):
                return ""
            return _number_text(before[field])

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
            "stage1_fluency": (
                ", ".join(
                    rubric.FLUENCY_ERRORS[k].label for k in ticked if k in rubric.FLUENCY_ERRORS
                )
                or "none"
            )
            if before and kind == STAGE2
            else "",
            "total": _number_text(values["total"]) if before and kind == STAGE2 else "",
        }

    @staticmethod
    def _progress(assignment: Assignment, study: Study) -> dict[str, int]:
        done = Assignment.objects.filter(
            participant_id=assignment.participant_id, status=Assignment.Status.SUBMITTED
        ).count()
        remaining = Cast("target", IntegerField()) - Cast("judgment_count", IntegerField())
        totals = Item.objects.filter(study_id=study.pk).aggregate(
            images=Count("id", filter=Q(kind=STAGE1)),
            **{f"left_{kind}": Sum(remaining, filter=Q(kind=kind), default=0) for kind in KINDS},
        )
        return {
            "position": done + 1,
            "images": totals["images"],
            "left_stage1": totals[f"left_{STAGE1}"],
            "left_stage2": totals[f"left_{STAGE2}"],
            "left_fluency": totals[f"left_{FLUENCY}"],
            "left": sum(totals[f"left_{kind}"] for kind in KINDS),
        }

    # ------------------------------------------------------------------ report

    def report(self, study: Study, progress: Progress) -> dict[str, Any]:
        """Final scores per caption (stage 2 if present, else stage 1; fluency from a fluency
        round when there is one), then ``rubrics.thumb.report`` and ``stage_agreement``."""
        progress(5, "Reading judgments")
        settings = study.settings
        stages: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        rows = (
            Judgment.objects.filter(study=study, excluded=False)
            .order_by("id")
            .values_list("item__image_id", "item__kind", "payload")
        )
        for image_id, kind, payload in rows:
            # The first judgment of a kind counts (targets are 1; a later one is a repeat).
            stages[image_id].setdefault(kind, payload)
        stages = {image_id: s for image_id, s in stages.items() if STAGE1 in s}
        if not stages:
            raise ValueError("No stage-1 judgments yet: nothing to report.")
        captions = {
            caption_id: (image_id, system, metrics)
            for caption_id, image_id, system, metrics in Caption.objects.filter(
                study=study
            ).values_list("id", "image_id", "system", "metrics")
        }
        progress(20, "Combining stages")
        records: list[dict[str, Any]] = []
        metric_rows: list[dict[str, float]] = []
        stage1_rows: list[dict[str, Any]] = []
        stage2_rows: list[dict[str, Any]] = []
        fluency_rounds = 0
        for image_id in sorted(stages):
            by_kind = stages[image_id]
            final = by_kind.get(STAGE2, by_kind[STAGE1])["captions"]
            fluency = by_kind.get(FLUENCY, {}).get("captions", {})
            fluency_rounds += FLUENCY in by_kind
            if STAGE2 in by_kind:
                for key, scores in by_kind[STAGE1]["captions"].items():
                    if key in by_kind[STAGE2]["captions"]:
                        stage1_rows.append(scores)
                        stage2_rows.append(by_kind[STAGE2]["captions"][key])
            for key, scores in final.items():
                flu = fluency[key]["fluency"] if key in fluency else scores["fluency"]
                for caption_id in scores["caption_ids"]:
                    caption = captions[caption_id]
                    records.append(
                        {
                            "image_id": image_id,
                            "system": caption[1],
                            "precision": scores["precision"],
                            "recall": scores["recall"],
                            "fluency": flu,
                            "conciseness": scores["conciseness"],
                            "inclusive": scores["inclusive"],
                        }
                    )
                    metric_rows.append(caption[2] or {})
        metric_names = sorted({name for m in metric_rows for name in m})
        metrics = {
            name: np.array([_metric_value(m.get(name)) for m in metric_rows])
            for name in metric_names
        } or None
        progress(40, "Bootstrapping confidence intervals")
        result = rubric.report(
            rubric.CaptionJudgments.from_records(records),
            metrics=metrics,
            weights=(settings.get("weight_precision", 0.5), settings.get("weight_recall", 0.5)),
            n_resamples=settings.get("bootstrap_resamples", 1000),
            confidence=settings.get("confidence", 0.90),
            seed=study.seed,
        )
        progress(85, "Stage agreement")
        result["stage_agreement"] = (
            rubric.stage_agreement(_score_arrays(stage1_rows), _score_arrays(stage2_rows))
            if stage1_rows
            else None
        )
        stage1_images = Item.objects.filter(study=study, kind=STAGE1).values("image_id")
        result["workflow"] = {
            "images_judged": len(stages),
            "images_with_stage2": sum(STAGE2 in s for s in stages.values()),
            "fluency_rounds": fluency_rounds,
            "images_skipped": Image.objects.filter(study=study)
            .exclude(pk__in=stage1_images)
            .count(),
        }
        progress(100, "Done")
        return result

    def report_context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """Table rows for the page and a Total re-weighted with the form's P/R weights.

        Total is linear in P, R and the penalties, so the weighted mean per system follows
        from the stored means exactly; its bootstrap interval is only stored for the
        study's own weights.
        """
        stored = result.get("weights", {"precision": 0.5, "recall": 0.5})
        weights_error = ""
        try:
            w_p = float(query.get("wp", stored["precision"]))
            w_r = float(query.get("wr", stored["recall"]))
            if not (math.isfinite(w_p) and math.isfinite(w_r)) or w_p < 0 or w_r < 0:
                raise ValueError
        except ValueError:
            weights_error = "Weights must be non-negative numbers; showing the study's weights."
            w_p, w_r = stored["precision"], stored["recall"]
        rows = []
        for system in result["systems"]:
            entry = result["per_system"][system]
            means = {f: entry[f]["mean"] for f in (*SCORE_FIELDS, "total")}
            penalties = means["fluency"] + means["conciseness"] + means["inclusive"]
            rows.append(
                {
                    "system": system,
                    "entry": entry,
                    "weighted": w_p * means["precision"] + w_r * means["recall"] - penalties,
                    "histogram": result["histograms"]["per_system"].get(system),
                }
            )
        correlations = []
        for metric, values in (result.get("correlations") or {}).items():
            correlations.append({"metric": metric, **values})
        return {
            "rows": rows,
            "weights_form": {"wp": _number_text(w_p), "wr": _number_text(w_r)},
            "weights_error": weights_error,
            "weights_stored": stored,
            "weights_changed": not (
                math.isclose(w_p, stored["precision"]) and math.isclose(w_r, stored["recall"])
            ),
            "correlation_rows": correlations,
            "agreement": result.get("stage_agreement"),
            "workflow": result.get("workflow", {}),
            "ci_percent": round(result["bootstrap"]["confidence"] * 100),
        }

    def figure(self, name: str, result: dict[str, Any]):
        from matplotlib.figure import Figure

        if name == HISTOGRAM_FIGURE:
            figure = Figure(figsize=(8, 3.2))
            # No layout engine: savefig(bbox_inches="tight") trims the margins, and layout
            # engines triple the drawing time of these small figures.
            figure.subplots_adjust(wspace=0.08)
            axes = figure.subplots(1, 2, sharey=True)
            scores = np.arange(1, 6)
            for ax, field, title in zip(
                axes, ("precision", "recall"), ("Precision", "Recall"), strict=True
            ):
                for offset, group, colour in (
                    (-0.2, "human", "#0b57d0"),
                    (0.2, "machine", "#c2410c"),
                ):
                    counts = np.array(result["histograms"][group][field], dtype=float)
                    shares = counts / counts.sum() if counts.sum() else counts
                    ax.bar(
                        scores + offset,
                        shares,
                        width=0.4,
                        color=colour,
                        label="Human" if group == "human" else "Machines",
                    )
                ax.set_xticks(scores)
                ax.set_title(title)
                ax.set_xlabel("score")
            axes[0].set_ylabel("share of captions")
            axes[1].legend(frameon=False)
            return figure
        if name == TOTALS_FIGURE:
            systems = result["systems"]
            figure = Figure(figsize=(6, 0.5 + 0.45 * len(systems)))
            ax = figure.subplots()
            means = [result["per_system"][s]["total"]["mean"] for s in systems]
            lows = [result["per_system"][s]["total"]["ci_low"] for s in systems]
            highs = [result["per_system"][s]["total"]["ci_high"] for s in systems]
            y = np.arange(len(systems))[::-1]
            err = np.array(
                [
                    [m - lo for m, lo in zip(means, lows, strict=True)],
                    [hi - m for m, hi in zip(means, highs, strict=True)],
                ]
            )
            ax.errorbar(means, y, xerr=err, fmt="o", color="#0b57d0", capsize=3)
            ax.set_yticks(y, systems)
            percent = round(result["bootstrap"]["confidence"] * 100)
            ax.set_xlabel(f"mean Total with {percent}% bootstrap interval")
            return figure
        raise KeyError(name)

    # ------------------------------------------------------------------ export

    export_row_unit = "caption per stage (a judgment scores every caption of its image)"

    def export_columns(self) -> list[ExportColumn]:
        score = "Score of this caption's group in this stage"
        before = "Stage 2 rows: what stage 1 gave for"
        return [
            *judgment_export_columns(),
            ExportColumn(
                "stage", "str", "stage1, stage2 (a second annotator's review) or fluency."
            ),
            ExportColumn("image", "str", "Name of the image as cited by the import.", "images"),
            ExportColumn("caption_id", "int", "Id of the caption.", "captions"),
            ExportColumn("system", "str", "System that wrote the caption (Human for people)."),
            ExportColumn("caption", "str", "Caption as shown (THumB-normalised text)."),
            ExportColumn("raw_caption", "str", "Caption as imported."),
            ExportColumn("precision", "float", f"{score}: precision P, 1-5."),
            ExportColumn("recall", "float", f"{score}: recall R, 1-5."),
            ExportColumn("fluency", "float", f"{score}: fluency penalty (deducted, >= 0)."),
            ExportColumn(
                "fluency_errors",
                "str",
                "Fluency error types ticked, as a JSON object: type -> deduction.",
            ),
            ExportColumn("conciseness", "float", f"{score}: conciseness penalty (deducted)."),
            ExportColumn("inclusive", "float", f"{score}: inclusive-language penalty (deducted)."),
            ExportColumn("total", "float", f"{score}: Total = (P + R) / 2 - penalties."),
            ExportColumn(
                "changed",
                "str",
                "Stage 2 rows: the fields stage 2 changed, ';'-separated (empty: confirmed).",
            ),
            *[
                ExportColumn(f"stage1_{field}", "float", f"{before} {field}.")
                for field in ("precision", "recall", "fluency", "conciseness", "inclusive")
            ],
            *judgment_trailing_columns(),
        ]

    def export_query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        """One row per caption of each judged caption group: the payload's groups (and each
        group's caption ids) are unnested by the database, stage 2 rows joined with the
        image's first stage-1 judgment (the one stage 2 reviewed, see ``_stage1_payload``)."""
        if sql.postgresql:
            unnest = (
                "CROSS JOIN LATERAL jsonb_each(j.payload -> 'captions') AS g(key, value) "
                "CROSS JOIN LATERAL "
                "jsonb_array_elements_text(g.value -> 'caption_ids') AS e(value) "
                "JOIN annotation_caption c ON c.id = e.value::bigint"
            )

            def changed(field: str) -> str:
                return f"(j.result -> 'modified' -> g.key ->> '{field}')::boolean"

            def stage1(field: str) -> str:
                return f"(j1.payload -> 'captions' -> g.key ->> '{field}')::float8"

            errors = "(g.value -> 'fluency_errors')::text"
        else:
            unnest = (
                "JOIN json_each(j.payload, '$.captions') AS g "
                "JOIN json_each(g.value, '$.caption_ids') AS e "
                "JOIN annotation_caption c ON c.id = e.value"
            )

            def changed(field: str) -> str:
                return f"json_extract(j.result, '$.modified.' || g.key || '.{field}')"

            def stage1(field: str) -> str:
                return (
                    f"CAST(json_extract(j1.payload, '$.captions.' || g.key || '.{field}') AS REAL)"
                )

            errors = "json_extract(g.value, '$.fluency_errors')"
        changed_sql = " || ".join(
            f"CASE WHEN {changed(field)} THEN '{field};' ELSE '' END" for field in SCORE_FIELDS
        )
        scores = ", ".join(
            sql.float("g.value", field) if field != "fluency_errors" else errors
            for field in (
                "precision",
                "recall",
                "fluency",
                "fluency_errors",
                "conciseness",
                "inclusive",
                "total",
            )
        )
        before = ", ".join(
            stage1(field)
            for field in ("precision", "recall", "fluency", "conciseness", "inclusive")
        )
        query = (
            "WITH first_stage1 AS ("
            " SELECT i1.image_id AS image_id, MIN(j1.id) AS judgment_id"
            " FROM annotation_judgment j1 JOIN annotation_item i1 ON i1.id = j1.item_id"
            f" WHERE j1.study_id = %s AND i1.kind = '{STAGE1}' AND NOT j1.excluded"
            " GROUP BY i1.image_id) "
            f"SELECT {JUDGMENT_SELECT}, i.kind, im.name, c.id, c.system, c.text, c.raw_text, "
            f"{scores}, "
            f"CASE WHEN i.kind = '{STAGE2}' THEN rtrim({changed_sql}, ';') END, {before}, "
            f"{JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_item i ON i.id = j.item_id "
            "JOIN annotation_image im ON im.id = i.image_id "
            f"{unnest} "
            f"LEFT JOIN first_stage1 s1 ON i.kind = '{STAGE2}' AND s1.image_id = i.image_id "
            "LEFT JOIN annotation_judgment j1 ON j1.id = s1.judgment_id "
            "WHERE j.study_id = %s ORDER BY j.id, c.id"
        )
        return query, [study.pk, study.pk]


def _friendly(exc: ValueError) -> str:
    """A ``rubrics.thumb`` message with error-type keys replaced by their labels."""

    def label(match: re.Match) -> str:
        error = rubric.FLUENCY_ERRORS.get(match.group(1))
        return f"fluency error '{error.label}'" if error else match.group(0)

    return re.sub(r"fluency\[([a-z_]+)\]", label, str(exc))


def _error_field(key: str, exc: ValueError) -> str:
    """The form field a ``rubrics.thumb`` ValueError names (its message starts with it)."""
    head = str(exc).split(":", 1)[0]
    if match := re.fullmatch(r"fluency\[([a-z_]+)\]", head):
        error = rubric.FLUENCY_ERRORS.get(match.group(1))
        if error is not None and not error.is_fixed:
            return f"{key}-amount-{error.key}"
        return f"{key}-fluency"
    if head in SCORE_FIELDS:
        return f"{key}-{head}"
    return f"{key}-fluency" if head.startswith("fluency") else ""


def _metric_value(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _score_arrays(rows: list[dict[str, Any]]) -> rubric.ScoreArrays:
    return rubric.ScoreArrays(
        **{field: np.array([row[field] for row in rows], dtype=float) for field in SCORE_FIELDS}
    )
