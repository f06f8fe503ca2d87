"""The context mode's pages, screen-reader first (issue 43; WCAG 2.2 AA).

Part 0 shows where the image appears (the page's title, its domain and the passage) and
the description, each a region with its own heading, and asks the before-image ratings;
it never names, shows or links the image, so its context holds no image and no image
URL. Part 1 (sighted raters only: a BLV item has no part 1) shows the image and asks the
after-image ratings and what is missing. Every rating is a native radio group whose
legend is the question and whose radios are labelled with the number and the scale's
word; the minimum reading time is stated in seconds in the page and announced by its
script when it is over.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from annotation import storage
from annotation.models import Assignment, Participant, Study
from annotation.modes.base import Pages
from annotation.modes.context.captions import domain as domain_of
from annotation.modes.context.captions import title as title_of
from annotation.modes.context.protocol import (
    MISSING,
    MISSING_MAX,
    SIGHTED,
    item_texts,
    reading_seconds,
    shown_seconds,
    words,
)
from rubrics.context.questions import MISSING_QUESTION, QUESTIONS


def question_groups(part: int, answers: dict[str, Any]):
    """Each rating of ``part`` as the page lists it: the question, its radios (number and
    scale word) and the answer kept from a refused submission (the template puts each
    field's error, from the view's ``field_errors``, in its legend)."""
    groups = []
    for name, question in QUESTIONS[part].items():
        chosen = str(answers.get(name) or "")
        groups.append(
            {
                "name": name,
                "question": question.text,
                "levels": [
                    {"value": str(number), "word": word, "checked": chosen == str(number)}
                    for number, word in enumerate(question.scale, start=1)
                ],
            }
        )
    return groups


class ContextPages(Pages):
    intro_template = "modes/context/intro.html"
    item_template = "modes/context/item.html"
    finished_template = "modes/context/finished.html"
    keeps_answers = True

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        names = list(QUESTIONS.get(part, {}))
        if part == 1:
            names.append(MISSING)
        return {name: post.get(name) for name in names}

    def intro_context(self, study: Study) -> dict[str, Any]:
        config = self.mode.settings(study)
        return {"reading_rate": config.reading_rate, "asks_sighted": config.sighted_ratings > 0}

    def item_context(
        self, assignment: Assignment, part: int, answers: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        item = assignment.item
        participant = assignment.participant
        config = self.mode.settings(participant.study)
        description, context = item_texts(item)
        minimum = (
            float(config.min_seconds_with_image)
            if part == 1
            else reading_seconds(description, context, config)
        )
        waited = (timezone.now() - assignment.part_shown_at(part)).total_seconds()
        page: dict[str, Any] = {
            "context_title": title_of(context),
            "context_domain": domain_of(context),
            "passage": context.raw_text,
            "description": description.text,
            "minimum_seconds": shown_seconds(minimum),
            "remaining_seconds": shown_seconds(max(0.0, minimum - waited)),
            "reading_words": words(title_of(context))
            + words(context.raw_text)
            + words(description.text),
            "reading_rate": config.reading_rate,
            "questions": question_groups(part, answers or {}),
            "after_image": part == 1,
            "parts": self.mode.parts(item),
        }
        # Only part 1 of a sighted rater's item knows the image: part 0, and every page of
        # a blind or low-vision rater, has no image, URL or id of it anywhere.
        if part == 1 and item.kind == SIGHTED and participant.vision_group == SIGHTED:
            image = item.image
            page.update(
                {
                    "image": image,
                    "image_url": storage.display_url(image.display) if image.display else "",
                    "alt": "The photograph the description is of",
                    "missing_question": MISSING_QUESTION,
                    "missing_name": MISSING,
                    "missing_max": MISSING_MAX,
                    "missing_answer": str((answers or {}).get(MISSING) or ""),
                }
            )
        return page

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        return {"rated": (participant.state or {}).get("rated", 0)}
