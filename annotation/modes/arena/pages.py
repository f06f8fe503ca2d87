"""The arena's battle page: the image, two captions (A left, B right), four outcomes.

Which caption is A was drawn for this lease (``protocol.left_is_a``); the page is handed
texts only, never the caption rows or their systems, so a worker cannot tell which system
wrote which caption.
"""

from __future__ import annotations

import math
from typing import Any

from django.utils import timezone

from annotation import storage
from annotation.models import Assignment, Item, Participant
from annotation.modes.arena import integrity, shown
from annotation.modes.arena.protocol import (
    CATCH,
    CRITERION_LABELS,
    CRITERION_NAMES,
    OUTCOME_LABELS,
    battle_captions,
    left_is_a,
)
from annotation.modes.base import Pages

#: The key that chooses each outcome (listed on the page; ``arena.js`` binds them).
OUTCOME_KEYS = {"a": "1", "b": "2", "tie": "3", "bothbad": "4"}


class ArenaPages(Pages):
    item_template = "modes/arena/item.html"
    finished_template = "modes/arena/finished.html"
    keeps_answers = True

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        data = {"outcome": post.get("outcome")}
        for criterion in CRITERION_NAMES:
            if criterion in post:
                data[criterion] = post.get(criterion)
        return data

    def item_context(
        self, assignment: Assignment, part: int, answers: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        participant = assignment.participant
        study = participant.study
        config = self.mode.settings(study)
        item = assignment.item
        first, second = battle_captions(item)
        # Kept by the process when no admin change came since they were read (``shown``):
        # issue 48, the page's own read was a fifth of a battle's statements.
        texts, image = shown.page_rows(
            study, item, first, second, shown.stamp_of(participant), shown.pages_of(participant)
        )
        text_a, text_b = texts[first], texts[second]
        if item.kind == CATCH:
            text_b = item.spec["catch"]["text"]
        left, right = (text_a, text_b) if left_is_a(study, assignment) else (text_b, text_a)
        waited = (timezone.now() - assignment.served_at).total_seconds()
        remaining = max(0.0, float(config.min_seconds) - waited)
        answers = answers or {}
        return {
            "left": {"text": left, "words": len(left.split())},
            "right": {"text": right, "words": len(right.split())},
            "image": image,
            "image_url": storage.display_url(image.display) if image.display else "",
            "alt_text": image.alt_text or "Image the two captions describe",
            "outcomes": [
                {
                    "value": value,
                    "label": label,
                    "key": OUTCOME_KEYS[value],
                    "checked": answers.get("outcome") == value,
                }
                for value, label in OUTCOME_LABELS.items()
            ],
            "criteria": [
                {
                    "name": name,
                    "label": label,
                    "choices": [
                        {"value": v, "label": text, "checked": answers.get(name) == v}
                        for v, (_, text) in CRITERION_LABELS.items()
                    ],
                }
                for name, label in CRITERION_NAMES.items()
            ]
            if config.criteria
            else [],
            "remaining_seconds": math.ceil(remaining * 10) / 10,
            "minimum_seconds": config.min_seconds,
            # Gold battles count: they look like any battle, and a count that skipped them
            # would tell the worker which answers were checked.
            "battles_done": integrity.answered(participant.state),
            # A registered annotator's total; a crowd worker's is the code's count (capped by
            # what the study can serve one worker, issue 46, row 2), on the progress line
            # above every item page (participate/_progress.html). Nobody is served an image
            # twice, so an annotator judges at most one battle per image of the study.
            "battles_total": Item.objects.filter(study_id=study.pk)
            .values("image_id")
            .distinct()
            .count()
            if participant.source == Participant.Source.ACCOUNT
            else None,
        }

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        """Why nothing more is served, when the answer-pattern rules flagged them."""
        return {"pattern_failed": integrity.flag_reason(participant)}
