"""The test-rating item page: the caption and a number field."""

from typing import Any

from annotation.models import Assignment, Caption
from annotation.modes.base import Pages


class RatingPages(Pages):
    item_template = "modes/ratingmode/item.html"

    def item_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        caption = Caption.objects.get(pk=assignment.item.spec["caption"])
        return {"caption": caption, "parts": self.mode.parts(assignment.item)}
