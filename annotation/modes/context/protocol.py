"""The context protocol: items, who gets which, validation and the rater's progress.

An item is one description (a study caption) in one context (a caption of the mode's
purpose ``context`` on the same image, ``captions.py``) for one group of raters::

    kind = "blv" | "sighted"
    spec = {"caption": <description id>, "context": <context id>, "domain": "news",
            "parts": 1 (blv) | 2 (sighted)}

Part 0, for every rater, shows the context and the description without the image; part 1,
for sighted raters only, shows the image. An item is served only to participants whose
declared vision group is its kind, so a blind or low-vision (BLV) rater never meets part
1, and ``validate`` refuses part 1 from anyone but a sighted rater of a sighted item
besides (the service refuses it first: a BLV item has one part). A worker never rates one
description in two contexts: the second context would be read in the light of the first.

Payloads (every rating a whole number from 1 to 5, Kreiss et al., EMNLP 2022):
part 0 ``{"overall", "imaginability", "relevance", "irrelevance"}``, part 1
``{"overall", "accuracy", "missing"}`` ("missing": free text, may be empty).
"""

from __future__ import annotations

import math
from typing import Any

from django.db.models import Q, QuerySet

from annotation.errors import Forbidden, InvalidInput, ServiceError
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study
from annotation.modes.base import CompletionProgress, Mode, Outcome, parse_choice
from annotation.modes.context import integrity
from annotation.modes.context.captions import CONTEXT, DOMAIN, TITLE
from annotation.modes.context.settings import ContextSettings
from annotation.text import text_problem
from rubrics.context.questions import AFTER, BEFORE, QUESTIONS, SCALE_MAX, SCALE_MIN

BLV, SIGHTED = "blv", "sighted"
GROUPS = (BLV, SIGHTED)
MISSING = "missing"
#: The "what is missing" answer: a few sentences; a page of text is past any answer.
MISSING_MAX = 2000


def words(text: str) -> int:
    """Words of a text as a reader meets them (white-space separated)."""
    return len(text.split())


def item_texts(item: Item) -> tuple[Caption, Caption]:
    """The item's (description, context) captions."""
    by_pk = Caption.objects.in_bulk([item.spec["caption"], item.spec["context"]])
    return by_pk[item.spec["caption"]], by_pk[item.spec["context"]]


def reading_seconds(description: Caption, context: Caption, config: ContextSettings) -> float:
    """The least seconds part 0 takes: its words (the page's title, the passage and the
    description) at the study's fastest reading rate (``settings.READING_RATE`` says why)."""
    shown = words(context.spec.get(TITLE, "")) + words(context.raw_text) + words(description.text)
    return shown * 60.0 / config.reading_rate


def shown_seconds(seconds: float) -> int:
    """Whole seconds a page states for a minimum time: rounded up, so waiting that long is
    always enough."""
    return math.ceil(seconds - 1e-9) if seconds > 0 else 0


class ContextProtocol(Mode):
    name = "context"
    label = "Descriptions in context (BLV and sighted raters)"
    settings_class = ContextSettings
    asks_vision = True
    # Items are numbered description by description: by position, every worker would begin
    # on one image's contexts.
    order_per_worker = True

    def build_items(self, study: Study) -> list[Item]:
        """One item per description, context of its image and group asked (``target`` > 0)."""
        config = self.settings(study)
        targets = {BLV: config.blv_ratings, SIGHTED: config.sighted_ratings}
        contexts: dict[int, list[tuple[int, str]]] = {}
        rows = study.captions.filter(purpose=CONTEXT).order_by("id")
        for pk, image_id, spec in rows.values_list("id", "image_id", "spec"):
            contexts.setdefault(image_id, []).append((pk, spec.get(DOMAIN, "")))
        descriptions = (
            study.captions.filter(purpose=Caption.Purpose.STUDY)
            .order_by("id")
            .values_list("id", "image_id")
        )
        items = []
        for caption_id, image_id in descriptions:
            for context_id, domain in contexts.get(image_id, ()):
                for group in GROUPS:
                    if targets[group] <= 0:
                        continue
                    items.append(
                        Item(
                            study=study,
                            kind=group,
                            image_id=image_id,
                            position=len(items),
                            target=targets[group],
                            spec={
                                "caption": caption_id,
                                "context": context_id,
                                "domain": domain,
                                "parts": 1 if group == BLV else 2,
                            },
                        )
                    )
        if not items:
            raise InvalidInput(
                "A context study needs descriptions of images that have a context; it has "
                "none. Import the descriptions (purpose study) and the contexts (purpose "
                "context) of the same images.",
                field="captions",
            )
        return items

    def caption_notes(self, study: Study) -> list[str]:
        """Descriptions of images without a context are never asked about: say how many."""
        with_context = study.captions.filter(purpose=CONTEXT).values("image_id")
        alone = (
            study.captions.filter(purpose=Caption.Purpose.STUDY)
            .exclude(image_id__in=with_context)
            .count()
        )
        if not alone:
            return []
        return [
            f"{alone} description(s) are of images with no context; nobody will rate them "
            "until a context of their image is imported."
        ]

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        """Items of the participant's declared group, minus every description they already
        met in another context (none before they declare)."""
        if integrity.is_flagged(participant):
            # Flagged by the constant-rating rule: no more slots for work that is excluded.
            return Item.objects.none()
        # Undeclared ("") is no item's kind: such a participant is served nothing.
        items = Item.objects.filter(study_id=participant.study_id, kind=participant.vision_group)
        # Any lease, whatever its status: an unanswered one showed its description. A
        # worker is a browser (docs/protocol-choices.md, crowd workers): what the browser's
        # other crowd ids were served counts too.
        worker = Q(participant_id=participant.pk)
        if participant.browser_id:
            worker |= Q(
                participant__study_id=participant.study_id,
                participant__browser_id=participant.browser_id,
            )
        met = set(Assignment.objects.filter(worker).values_list("item__spec__caption", flat=True))
        if not met:
            return items
        # Their own leases stay: a lapsed one is reopened by the assignment service, and
        # items already answered are excluded there.
        served = Assignment.objects.filter(participant_id=participant.pk).values("item_id")
        return items.exclude(Q(spec__caption__in=sorted(met)) & ~Q(pk__in=served))

    def parts(self, item: Item) -> int:
        return item.spec["parts"]

    def min_seconds(self, assignment: Assignment) -> float:
        """Part 0: the reading time of what it shows; part 1: the study's floor with the image."""
        config = self.settings(assignment.participant.study)
        if self.parts(assignment.item) > 1 and assignment.judgments.exists():
            return float(config.min_seconds_with_image)
        return reading_seconds(*item_texts(assignment.item), config)

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """Each rating a whole number from 1 to 5, ``missing`` text; every problem named."""
        group = assignment.participant.vision_group
        if group != assignment.item.kind:
            raise Forbidden(
                "This description is for another group of raters; nothing was saved.",
                field="part",
            )
        if part == 1 and (group != SIGHTED or self.parts(assignment.item) < 2):
            # Never reached through the service (a BLV item has one part, a BLV rater only
            # BLV items): refused here too, so no path shows or stores an after-image part
            # for a rater who declared blind or low vision.
            raise Forbidden(
                "The ratings with the image are only for raters who see it; nothing was saved.",
                field="part",
            )
        names = BEFORE if part == 0 else AFTER
        clean: dict[str, Any] = {}
        problems: list[ServiceError] = []
        for name in names:
            question = QUESTIONS[part][name]
            message = (
                f"{question.short}: choose one of the ratings from {SCALE_MIN} to {SCALE_MAX}."
            )
            try:
                clean[name] = parse_choice(
                    data.get(name), low=SCALE_MIN, high=SCALE_MAX, field=name, message=message
                )
            except ServiceError as exc:
                problems.append(exc)
        if part == 1:
            missing = data.get(MISSING, "")
            problem = text_problem(missing, max_length=MISSING_MAX, multiline=True)
            if problem is not None:
                problems.append(
                    ServiceError(f"What is missing: the answer {problem}.", field=MISSING)
                )
            else:
                clean[MISSING] = missing.strip()
        if problems:
            raise _refusal(problems)
        return clean

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        """Count a description as rated once its item's last part is in."""
        state = dict(participant.state or {})
        if judgment.part == self.parts(judgment.item) - 1:
            state["rated"] = state.get("rated", 0) + 1
        fields: dict[str, Any] = {}
        if integrity.is_flagged(participant):
            # A part of a lease answered after the flag: excluded like the rest.
            fields = {"exclusion": "rating pattern: flagged earlier"}
        elif state.get("rated", 0) >= self._needed(participant.study):
            # At the code's count: the constant-rating rule over every rating given.
            latest = judgment.payload if judgment.part == 0 else {}
            config = self.settings(participant.study)
            fields = integrity.pattern_fields(participant, config, state, latest)
        return Outcome(state=state, **fields)

    def simulated_vision(self, worker: Any) -> str:
        """Half the simulated crowd blind or low vision, half sighted, from the worker's
        own seeded draws (so the same seed gives the same crowd)."""
        draw = worker.rng.random()
        if draw < 0.25:
            return "blind"
        return "low_vision" if draw < 0.5 else "sighted"

    # Nobody rates a description twice, so one worker can rate at most one item per
    # description: a study of fewer descriptions than the code's count could pay nobody
    # (issue 46, as in the spans mode). The count is capped by the descriptions, and a
    # worker the study runs out of items for is paid for those they rated.

    def _needed(self, study: Study) -> int:
        wanted = self.settings(study).completion_after
        descriptions = (
            # Items a people + judge design left out (target 0) are never served.
            Item.objects.filter(study_id=study.pk, target__gt=0)
            .order_by()
            .values("spec__caption")
            .distinct()
        ).count()
        return min(wanted, descriptions) if descriptions else wanted

    def completion_earned(self, participant: Participant) -> bool:
        state = participant.state or {}
        if integrity.is_flagged(participant):
            return False
        return bool(state.get("exhausted")) or state.get("rated", 0) >= self._needed(
            participant.study
        )

    def completion_withheld(self, participant: Participant) -> str:
        return integrity.withheld(participant)

    def completion_progress(self, participant: Participant) -> CompletionProgress:
        done = (participant.state or {}).get("rated", 0)
        return CompletionProgress(done, self._needed(participant.study), "descriptions")

    def completion_reach(self, study: Study) -> str:
        wanted = self.settings(study).completion_after
        needed = self._needed(study)
        if needed >= wanted:
            return ""
        return (
            f"The completion code asks for {wanted} descriptions, but one crowd worker can "
            f"be served at most {needed} (nobody rates a description in two contexts, and "
            f"the study has {needed}). Workers are given the code after {needed}. For the "
            'count you set, import more descriptions, or lower "Descriptions a crowd worker '
            'rates to earn the code".'
        )

    def completion_exhausted(self, participant: Participant) -> Outcome | None:
        state = dict(participant.state or {})
        if not state.get("rated") or state.get("exhausted") or integrity.is_flagged(participant):
            return None  # nothing rated (an id arriving after the work is gone), paid, flagged
        state["exhausted"] = True
        fields = integrity.pattern_fields(participant, self.settings(participant.study), state, {})
        return Outcome(state=state, **fields)


def _refusal(problems: list[ServiceError]) -> ServiceError:
    """One refusal for every problem of a submission: the first field named (the page's
    link to it) and ``details["fields"]`` listing each, which the page shows by its field."""
    if len(problems) == 1:
        return InvalidInput(problems[0].message, field=problems[0].field)
    return InvalidInput(
        f"{len(problems)} answers are missing or invalid; nothing was saved. "
        f"First: {problems[0].message}",
        field=problems[0].field,
        details={"fields": [{"field": p.field, "message": p.message} for p in problems]},
    )
