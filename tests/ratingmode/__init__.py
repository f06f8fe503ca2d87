"""A tiny protocol used only by the tests of the mode-agnostic core, built by the recipe of
``docs/architecture.md`` ("How to add a mode") exactly as a real mode is.

"test-rating": one item per caption, each answered with a whole-number ``rating`` from 1 to
5, in ``parts`` consecutive parts, no faster than ``min_seconds`` per part. Importing this
package registers the mode (``tests/conftest.py`` does, and puts its template folder on the
template path).
"""

from django.db.models import Q

from annotation.modes.base import WorkerChecks, register
from tests.ratingmode.dashboard import RatingDashboard
from tests.ratingmode.export import RatingExport
from tests.ratingmode.pages import RatingPages
from tests.ratingmode.plan import RatingPlanner
from tests.ratingmode.protocol import NAME, RatingProtocol, RatingSettings
from tests.ratingmode.report import RatingReport
from tests.ratingmode.simulate import simulated_answers

__all__ = ["NAME", "RatingSettings", "RatingTestMode"]


@register
class RatingTestMode(RatingProtocol):
    pages_class = RatingPages
    report_class = RatingReport
    export_class = RatingExport
    planner_class = RatingPlanner
    dashboard_class = RatingDashboard
    kind_labels = {"rating": "Captions to rate"}
    # A rating of 1 counts as a failed check of the worker (only so the dashboard's check
    # columns have something to count in tests).
    worker_checks = WorkerChecks(
        "ratings of 1",
        counted=Q(judgments__payload__has_key="rating"),
        failed=Q(judgments__payload__rating=1),
    )
    simulate = simulated_answers
