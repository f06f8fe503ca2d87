"""The vehicle: the smallest mode the mode-agnostic tests run their studies on.

Leases, submissions, access, crowd platforms, the dashboard, exports and reports are the
platform's, not a mode's; their tests need a study of some mode, and one of a real mode
would tie them to it. This mode rates a caption: one item per caption, each answered with a
whole-number ``rating`` from 1 to 5, in ``parts`` consecutive parts, no faster than
``min_seconds`` per part; a crowd worker earns the code after ``completion_after`` ratings.
Its report counts the ratings of each value; its export is the default table.

It is no app and has no importer, script, stylesheet or dashboard panel of its own (a
test-only mode app shows those, and may be removed without touching these tests):
importing this module registers it, and its one template, the item page, is in
``templates/`` beside it (``template_dirs``). ``tests/conftest.py`` does both for every test.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import Q
from matplotlib.figure import Figure

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study
from annotation.modes.base import (
    Export,
    Mode,
    Outcome,
    Pages,
    Report,
    SimulatedAnswer,
    WorkerChecks,
    register,
)
from annotation.modes.settings import CHECKS, CROWD, CrowdSettings, whole
from annotation.modes.simulated import system_quality

#: The mode's name (``Study.mode``).
NAME = "test-vehicle"
#: The folder of its item page, for the template loader.
TEMPLATES = Path(__file__).resolve().parent / "templates"
RATINGS = range(1, 6)


def template_dirs(templates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``TEMPLATES`` (the setting) with the vehicle's folder added to the first engine's."""
    first, *rest = templates
    return [{**first, "DIRS": [*first.get("DIRS", []), TEMPLATES]}, *rest]


@dataclass(frozen=True)
class VehicleSettings(CrowdSettings):
    target: int = whole(2, label="Ratings per caption", low=1, high=1000)
    min_seconds: int = whole(0, label="Least seconds per rating", group=CHECKS, low=0, high=600)
    parts: int = whole(1, label="Ratings per item", low=1, high=20)
    completion_after: int = whole(
        2, label="Ratings a crowd worker gives to earn the code", group=CROWD, low=1, high=1000
    )


class VehiclePages(Pages):
    item_template = "modes/vehicle/item.html"

    def item_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        caption = Caption.objects.get(pk=assignment.item.spec["caption"])
        return {"caption": caption, "parts": self.mode.parts(assignment.item)}


class VehicleReport(Report):
    figure_names = ("ratings",)
    summary_keys = ("histogram",)

    def human_scores(self, study: Study) -> tuple[dict[str, list[tuple[int, float]]], str]:
        """Every kept rating of a caption, with Kendall's tau-c (ratings are 5 levels)."""
        rows = Judgment.objects.filter(study=study, excluded=False).values_list(
            "item__spec", "payload"
        )
        return {
            "rating": [(spec["caption"], float(payload["rating"])) for spec, payload in rows]
        }, "kendall_tau_c"

    def run(self, study: Study, progress) -> dict[str, Any]:
        ratings = [j.payload["rating"] for j in Judgment.objects.filter(study=study)]
        return {"histogram": [ratings.count(value) for value in RATINGS]}

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        if name != "ratings":
            raise KeyError(name)
        figure = Figure(figsize=(3, 2))
        figure.add_subplot().bar(RATINGS, result["histogram"])
        return figure


class VehicleExport(Export):
    row_unit = "rating"
    exclusion_rules = "Nothing is excluded."


@register
class VehicleMode(Mode):
    name = NAME
    label = "Vehicle (tests only)"
    settings_class = VehicleSettings
    pages_class = VehiclePages
    report_class = VehicleReport
    export_class = VehicleExport
    kind_labels = {"rating": "Captions to rate"}
    # A rating of 1 counts as a failed check, so that the dashboard's check columns have
    # something to count.
    worker_checks = WorkerChecks(
        "ratings of 1",
        counted=Q(judgments__payload__has_key="rating"),
        failed=Q(judgments__payload__rating=1),
    )

    def build_items(self, study: Study) -> list[Item]:
        config = self.settings(study)
        captions = study.captions.filter(purpose=Caption.Purpose.STUDY).order_by("id")
        return [
            Item(
                study=study,
                kind="rating",
                image_id=caption.image_id,
                position=position,
                spec={"caption": caption.pk, "parts": config.parts},
                target=config.target,
            )
            for position, caption in enumerate(captions)
        ]

    def current_round(self, participant: Participant) -> int:
        return participant.state.get("round", 0)

    def parts(self, item: Item) -> int:
        return item.spec["parts"]

    def min_seconds(self, assignment: Assignment) -> float:
        return float(self.settings(assignment.participant.study).min_seconds)

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        raw = data.get("rating")
        try:
            rating = int(raw)
        except (TypeError, ValueError):
            rating = None
        if isinstance(raw, bool | float) or rating not in RATINGS:
            raise ServiceError("Choose a rating from 1 to 5.", field="rating")
        return {"rating": rating}

    def score(self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]):
        return {"judgments_before": item.judgment_count}

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        answered = participant.state.get("answered", 0) + 1
        return Outcome(state={**participant.state, "answered": answered})

    def completion_earned(self, participant: Participant) -> bool:
        needed = self.settings(participant.study).completion_after
        return participant.state.get("answered", 0) >= needed

    def simulate(self, lease: Assignment, worker: Any, context: dict[str, Any]):
        """One rating per part near the caption's system's hidden quality: so the
        platform's simulated crowd (services/simulation.py) can be tested on the vehicle."""
        system = context["systems"].get(lease.item.spec["caption"], "")
        rating = worker.level(system_quality(system), 1, 5)
        return [
            SimulatedAnswer(part, {"rating": rating}, 1.0) for part in range(self.parts(lease.item))
        ]
