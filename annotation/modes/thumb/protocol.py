"""THumB's protocol: which items an image gets, who may judge which stage, what a valid
submission is, and when an image needs a fluency round.

The rules themselves (score values, fluency error types, totals) live in ``rubrics.thumb``;
this module maps them onto items, judgments and participants.
"""

from __future__ import annotations

import math
import random
import re
from collections import defaultdict
from typing import Any

from django.db.models import QuerySet

from annotation.errors import Forbidden, ServiceError
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study
from annotation.modes import catch
from annotation.modes.base import CompletionProgress, Mode, Outcome
from annotation.modes.thumb import integrity
from annotation.modes.thumb.captions import unjudged_caption_notes
from annotation.modes.thumb.catch import new_catch_item
from annotation.modes.thumb.eligible import Eligible
from annotation.modes.thumb.models import Rater
from annotation.modes.thumb.settings import ThumbSettings
from annotation.modes.thumb.stages import (
    CHECK,
    FLUENCY,
    REVIEWS,
    STAGE1,
    STAGE2,
    image_stages,
    judged_before,
    later_kinds,
    linked_names,
    reviewed_payload,
)
from rubrics import catch as catch_rules
from rubrics import thumb as rubric

SCORE_FIELDS = ("precision", "recall", "fluency", "conciseness", "inclusive")
# A score or amount as a form writes it: ASCII digits, a decimal part (0.5, 1.5) at most.
_DECIMAL = re.compile(r"[0-9]{1,7}(?:\.[0-9]{1,6})?")


def number_text(value: float) -> str:
    """A penalty as the form writes it: ``0``, ``0.5``, ``2``."""
    return f"{value:g}"


def display_order(keys: list[str], *, seed: int, participant_id: int, item_id: int) -> list[str]:
    """The caption-group order one annotator sees for one item (stable across reloads)."""
    order = list(keys)
    random.Random(f"thumb:{seed}:{participant_id}:{item_id}").shuffle(order)
    return order


class ThumbProtocol(Mode):
    """One image's caption set per item, scored in two stages (see the package docstring)."""

    name = "thumb"
    label = "THumB rubric"
    settings_class = ThumbSettings
    #: One image's caption set with P, R and penalties per caption: minutes of work.
    crowd_lease_seconds = 15 * 60

    # ------------------------------------------------------------------ items

    def caption_notes(self, study: Study) -> list[str]:
        return unjudged_caption_notes(study)

    def build_items(self, study: Study) -> list[Item]:
        """One ``stage1`` (and ``stage2``) item per image with a Human and another caption."""
        config = self.settings(study)
        captions = (
            Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
            .order_by("image_id", "id")
            .values_list("id", "image_id", "system", "raw_text", "text")
        )
        by_image: dict[int, dict[str, tuple]] = defaultdict(dict)
        for caption in captions:
            # One caption per system and image: the first imported (see the package docstring).
            by_image[caption[1]].setdefault(caption[2], caption)
        eligible = [
            image_id
            for image_id, systems in sorted(by_image.items())
            if Caption.HUMAN in systems and len(systems) >= 2
        ]
        if config.n_images is not None and config.n_images < len(eligible):
            eligible = sorted(random.Random(study.seed).sample(eligible, config.n_images))
        names = dict(Image.objects.filter(pk__in=eligible).values_list("id", "name"))
        specs = [
            {"image_name": names[image_id], "groups": self._groups(by_image[image_id].values())}
            for image_id in eligible
        ]
        checked = self._check_keys(specs, config, seed=study.seed)
        items = []
        for position, (image_id, spec) in enumerate(zip(eligible, specs, strict=True)):
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
            if config.stage2:
                # Same position as stage 1: the lease order then finishes images one by one.
                # The stage-2 item carries the image's captions in the check sample, so the
                # check item can be made when stage 2 is stored (see after_submit).
                items.append(
                    Item(
                        study=study,
                        kind=STAGE2,
                        image_id=image_id,
                        position=position,
                        spec={**spec, "check_keys": checked[position]}
                        if checked.get(position)
                        else spec,
                        target=1,
                    )
                )
        return items

    @staticmethod
    def _check_keys(
        specs: list[dict[str, Any]], config: ThumbSettings, *, seed: int
    ) -> dict[int, list[str]]:
        """The third annotator's sample: position -> keys of that image's checked groups.

        Drawn once, when the study opens, among every caption text that gets a stage 2 (a
        group, as an annotator scores it), so which captions are checked depends on the
        seed alone, never on which images happen to finish stage 2 first.
        """
        if not config.stage2 or not config.third_check_captions:
            return {}
        population = [
            (position, group["key"])
            for position, spec in enumerate(specs)
            for group in spec["groups"]
        ]
        chosen: dict[int, list[str]] = defaultdict(list)
        for index in rubric.check_sample(len(population), config.third_check_captions, seed=seed):
            position, key = population[index]
            chosen[position].append(key)
        return chosen

    @staticmethod
    def _groups(captions) -> list[dict[str, Any]]:
        """Caption groups of one image: one per normalised text, in import order."""
        groups: dict[str, dict[str, Any]] = {}
        for caption_id, _image_id, system, raw_text, text in sorted(captions):
            group = groups.setdefault(text, {"text": text, "captions": []})
            group["captions"].append({"id": caption_id, "system": system, "raw_text": raw_text})
        return [{"key": f"c{n}", **group} for n, group in enumerate(groups.values(), start=1)]

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        # Stage 1 to anyone; stage 2 once stage 1 has a judgment, to no one linked to its
        # annotator; the check to a third annotator, no one linked to either stage's; the
        # fluency round to a native speaker: one written-out condition (eligible.py says why).
        allowed = Item.objects.filter(Eligible(participant))
        if not self.settings(participant.study).catch_rate:
            return allowed
        # A catch trial reserved for the annotator comes first; no item of an image they
        # met in a catch trial is served to them afterwards.
        reserved = catch.pending(participant)
        if reserved.exists():
            return reserved
        return allowed.exclude(image_id__in=catch.used_images(participant))

    # ------------------------------------------------------------------ submissions

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """All or nothing: every caption group of the item must be complete and valid."""
        item = assignment.item
        if item.kind == STAGE2 and self._did(assignment, [STAGE1]):
            raise Forbidden(
                "You scored this image in stage 1; stage 2 must be done by another annotator. "
                "Nothing was saved.",
            )
        if item.kind == CHECK and self._did(assignment, [STAGE1, STAGE2]):
            raise Forbidden(
                "You scored this image in stage 1 or stage 2; its check must be done by a "
                "third annotator. Nothing was saved.",
            )
        submitted = data.get("captions") if isinstance(data, dict) else None
        if not isinstance(submitted, dict):
            raise ServiceError("The form did not contain any caption scores; nothing was saved.")
        groups = {group["key"]: group for group in item.spec["groups"]}
        unknown = sorted(set(submitted) - set(groups))
        if unknown:
            raise ServiceError(
                f"Unknown caption field {unknown[0]}; reload the page. Nothing was saved."
            )
        # The services hand the lease over with its participant and study loaded.
        order = display_order(
            list(groups),
            seed=assignment.participant.study.seed,
            participant_id=assignment.participant_id,
            item_id=item.pk,
        )
        clean: dict[str, Any] = {}
        # Every caption is checked before refusing, so one round trip lists every problem
        # (an empty form has two scores per caption missing, not just the first).
        problems: list[ServiceError] = []
        for position, key in enumerate(order, start=1):
            values = submitted.get(key) or {}
            if not isinstance(values, dict):
                values = {}
            who = f'Caption {position} ("{_excerpt(groups[key]["text"])}")'
            try:
                scores = self._validate_group(
                    key,
                    who,
                    values,
                    fluency_only=item.kind == FLUENCY,
                    review=item.kind in REVIEWS,
                )
            except ServiceError as exc:
                problems.extend(_problems_of(exc))
                continue
            clean[key] = {"caption_ids": [c["id"] for c in groups[key]["captions"]], **scores}
        if problems:
            raise _refusal(problems)
        return {"captions": clean}

    @staticmethod
    def _did(assignment: Assignment, kinds: list[str]) -> bool:
        """Whether the participant or an id linked to them (their browser or network, as
        in eligible_items) judged one of ``kinds`` of the lease's image."""
        return any(s.linked and s.kind in kinds for s in image_stages(assignment))

    @staticmethod
    def _validate_group(
        key: str, who: str, values: dict[str, Any], *, fluency_only: bool, review: bool = False
    ) -> dict[str, Any]:
        errors = values.get("fluency_errors") or {}
        if not isinstance(errors, dict):
            raise ServiceError(f"{who}: the fluency errors are malformed.", field=f"{key}-fluency")
        errors = {error: _as_number(amount) for error, amount in errors.items()}
        if fluency_only:
            try:
                resolved = rubric.validate_caption_scores(5, 5, errors)
            except ValueError as exc:
                raise ServiceError(
                    f"{who}: {_friendly(exc)}", field=_error_field(key, exc)
                ) from exc
            return {"fluency_errors": resolved.fluency_errors, "fluency": resolved.fluency}
        missing = [
            ServiceError(f"{who}: choose a {field} score from 1 to 5.", field=f"{key}-{field}")
            for field in ("precision", "recall")
            if values.get(field) in (None, "")
        ]
        # The paper's second annotator "checks and modifies the scores when necessary"
        # (section 2.1): a review counts only with each caption confirmed as checked, so a
        # reviewer cannot pass the pre-filled scores on without looking (protocol-choices.md).
        if review and values.get("confirmed") is not True:
            missing.append(
                ServiceError(
                    f"{who}: tick “I checked this caption” once you have compared "
                    "its scores with the image.",
                    field=f"{key}-confirm",
                )
            )
        if missing:
            raise _refusal(missing)
        try:
            scores = rubric.validate_caption_scores(
                _as_number(values["precision"]),
                _as_number(values["recall"]),
                errors,
                _as_number(values.get("conciseness") or 0),
                _as_number(values.get("inclusive") or 0),
            )
        except ValueError as exc:
            raise ServiceError(f"{who}: {_friendly(exc)}", field=_error_field(key, exc)) from exc
        return scores.as_dict()

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """Stage 2 and the check: which fields differ from the stage they review (stage 1,
        resp. stage 2), per caption group (server-side). A catch trial: whether it was caught
        (precision <= 2 for its altered caption, or a fluency error for T_WP)."""
        if item.kind == catch.CATCH:
            made = item.spec["catch"]
            scores = payload["captions"][made["key"]]
            caught = integrity.catch_answered_right(made["kind"], scores)
            return {"catch": {"kind": made["kind"], "gamma": made["gamma"], "caught": caught}}
        if item.kind not in REVIEWS:
            return {}
        reviewed = reviewed_payload(assignment)
        modified = {}
        for key, scores in payload["captions"].items():
            before = (reviewed or {}).get("captions", {}).get(key)
            modified[key] = {
                field: before is None or not _same_scores(before, scores, field)
                for field in SCORE_FIELDS
            }
        return {"modified": modified}

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        """After the image's last stage: its fluency round when no annotator of it is a
        native speaker, and after stage 2 its check when some of its captions are in the
        third annotator's sample.

        Called before ``judgment`` is stored, so its own annotator (``participant``) is
        asked about directly; the other stage's annotator through the stored judgments.
        """
        item = judgment.item
        config = self.settings(participant.study)
        # The submission's reads in one statement, or none (stages.submission_reads): the
        # stages a review's validation read, the linked ids, the count of their judgments,
        # the image's fluency round and check when its last stage was judged before.
        lease = judgment.assignment
        names = linked_names(lease)
        before = judged_before(lease)
        fields = self._catch_outcome(participant, judgment, config, before)
        # The count of their judgments, kept with them: no page or answer counts the rows.
        fields["state"] = integrity.judged_state(participant, before)
        linked = integrity.linked_flag(participant, item, names)
        if linked:
            fields = {**fields, "flags": (*fields.get("flags", ()), linked)}
        last_stage = STAGE2 if config.stage2 else STAGE1
        if item.kind != last_stage:
            return Outcome(**fields)
        # The image's fluency round and check are made only here, by its one last-stage item
        # (build_items): none before its first judgment, else read with the other reads.
        later = later_kinds(lease)
        shown = {key: value for key, value in item.spec.items() if key != "check_keys"}
        new_items = []
        if config.require_native_fluency and FLUENCY not in later:
            native_judged = _is_native(participant) or any(
                s.native for s in image_stages(judgment.assignment)
            )
            if not native_judged:
                new_items.append(
                    Item(
                        study_id=item.study_id,
                        kind=FLUENCY,
                        image_id=item.image_id,
                        position=item.position,
                        spec=shown,
                        target=1,
                    )
                )
        checked = set(item.spec.get("check_keys") or ())
        if item.kind == STAGE2 and checked and CHECK not in later:
            # Created after the fluency round: the final scores need that one, the check
            # only measures them, so at equal position the fluency round is served first.
            groups = [group for group in shown["groups"] if group["key"] in checked]
            new_items.append(
                Item(
                    study_id=item.study_id,
                    kind=CHECK,
                    image_id=item.image_id,
                    position=item.position,
                    spec={**shown, "groups": groups},
                    target=1,
                )
            )
        return Outcome(**{**fields, "new_items": (*new_items, *fields.get("new_items", ()))})

    @staticmethod
    def _catch_outcome(
        participant: Participant, judgment: Judgment, config: ThumbSettings, before: int
    ) -> dict[str, Any]:
        """The catch-trial parts of the outcome (see ``annotation.modes.catch``): the rule
        after a catch trial, and maybe the next catch trial after any other item."""
        if judgment.item.kind == catch.CATCH:
            return catch.rule_outcome(
                participant,
                caught=judgment.result["catch"]["caught"],
                kind=judgment.result["catch"]["kind"],
                min_seen=config.catch_min_seen,
                max_missed_share=config.catch_max_missed_share,
            )
        fields: dict[str, Any] = (
            {"exclusion": catch.LATER_REASON} if catch.is_flagged(participant) else {}
        )
        if config.catch_rate:
            made = new_catch_item(
                participant,
                rate=config.catch_rate,
                gammas=catch_rules.parse_gammas(config.catch_gammas),
                draw=before,
            )
            if made is not None:
                fields["new_items"] = (made,)
        return fields

    def min_seconds(self, assignment: Assignment) -> float:
        return integrity.crowd_min_seconds(assignment, self.settings(assignment.participant.study))

    def completion_earned(self, participant: Participant) -> bool:
        return integrity.completion_earned(participant, self.settings(participant.study))

    def completion_progress(self, participant: Participant) -> CompletionProgress:
        return integrity.completion_progress(participant, self.settings(participant.study))


def _is_native(participant: Participant) -> bool:
    """Whether the participant is a registered annotator who is a native English speaker."""
    # One query, as reading ``participant.user`` was: the flag is on THumB's own row.
    return (
        participant.user_id is not None
        and Rater.objects.filter(user_id=participant.user_id, native_english=True).exists()
    )


def _problems_of(exc: ServiceError) -> list[ServiceError]:
    """The single problems a refusal of ``_refusal`` carries (itself when it is one)."""
    return [
        ServiceError(problem["message"], field=problem["field"])
        for problem in (exc.details or {}).get("fields", [])
    ] or [exc]


def _refusal(problems: list[ServiceError]) -> ServiceError:
    """One ServiceError for every problem of a submission.

    One problem is refused as it is. Several: the message counts them, ``field`` names the
    first (the page's "go to" link) and ``details["fields"]`` lists each field with its
    message, which the page shows beside the field.
    """
    if len(problems) == 1:
        return problems[0]
    return ServiceError(
        f"{len(problems)} answers are missing or invalid; nothing was saved. "
        f"First: {problems[0].message}",
        field=problems[0].field,
        details={"fields": [{"field": p.field, "message": p.message} for p in problems]},
    )


def _excerpt(text: str, length: int = 40) -> str:
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def _as_number(value: Any) -> Any:
    """Turn form text into a number for ``rubrics.thumb``; anything else passes through.

    Only digits with an optional decimal part are read, as every number a form carries:
    ``float()`` also reads "1e0", "0_4", "+4" and "4." (issue 45) and "３" (issue 26).
    Other text passes through and ``rubrics.thumb`` refuses it, naming the field."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if not _DECIMAL.fullmatch(text):
            return value
        parsed = float(text)
        return int(parsed) if parsed.is_integer() else parsed
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
            parts.append(key if error.is_fixed else f"{key}={number_text(errors[key])}")
    return ";".join(parts)


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
