"""The test-rating mode's panel of the live dashboard: how many ratings of each value so
far, so that a mode outside ``annotation/modes/`` shows a panel of its own (issue 44)."""

from django.db.models import Count, Q

from annotation.models import Judgment
from annotation.modes.base import Dashboard


class RatingDashboard(Dashboard):
    panel_template = "modes/ratingmode/_dashboard_panel.html"
    item_words = "caption to rate"

    def panel_context(self, study):
        values = range(1, 6)  # the ratings validate accepts
        counts = Judgment.objects.filter(study=study).aggregate(
            **{f"r{value}": Count("id", filter=Q(payload__rating=value)) for value in values}
        )
        return {"ratings": [(value, counts[f"r{value}"]) for value in values]}
