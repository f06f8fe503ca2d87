"""The test-rating mode: its parts wired together and registered.

``AnnotationConfig.ready()`` imports this module of every installed mode app, this one
included once ``tests/conftest.py`` has installed it.
"""

from django.db.models import Q

from annotation.modes.base import WorkerChecks, register
from tests.ratingmode.dashboard import RatingDashboard
from tests.ratingmode.export import RatingExport
from tests.ratingmode.importers import RatingCsvImporter
from tests.ratingmode.pages import RatingPages
from tests.ratingmode.plan import RatingPlanner
from tests.ratingmode.protocol import RatingProtocol
from tests.ratingmode.report import RatingReport
from tests.ratingmode.simulate import simulated_answers


@register
class RatingTestMode(RatingProtocol):
    pages_class = RatingPages
    report_class = RatingReport
    export_class = RatingExport
    importer_classes = (RatingCsvImporter,)
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
