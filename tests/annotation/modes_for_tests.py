"""A tiny protocol used only by the tests of the mode-agnostic core.

"test-rating": one item per caption, each answered with an integer ``rating`` from 1 to 5,
in ``parts`` consecutive parts, no faster than ``min_seconds`` per part. Importing this
module registers the mode. ``rating_study`` builds a live study of it without importing
files, so the tests of leases, submissions and access do not depend on the importer.
"""

from datetime import datetime
from typing import Any

from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study
from annotation.modes import Mode, SubmissionError, register

NAME = "test-rating"


@register
class RatingTestMode(Mode):
    name = NAME
    label = "Rating (tests only)"
    default_settings = {"target": 2, "min_seconds": 0, "parts": 1, "completion_after": 2}
    item_template = "tests/rating_item.html"

    def build_items(self, study: Study) -> int:
        captions = study.captions.filter(purpose=Caption.Purpose.STUDY).order_by("id")
        items = [
            Item(
                study=study,
                kind="rating",
                image_id=caption.image_id,
                position=position,
                spec={"caption": caption.pk, "parts": study.settings["parts"]},
                target=study.settings["target"],
            )
            for position, caption in enumerate(captions)
        ]
        Item.objects.bulk_create(items)
        return len(items)

    def current_round(self, participant: Participant) -> int:
        return participant.state.get("round", 0)

    def parts(self, item: Item) -> int:
        return item.spec["parts"]

    def served_at(self, assignment: Assignment, part: int) -> datetime:
        # A later part is shown when the previous one is stored.
        if part == 0:
            return assignment.served_at
        return assignment.judgments.get(part=part - 1).created_at

    def min_seconds(self, assignment: Assignment) -> float:
        return float(assignment.item.study.settings["min_seconds"])

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        raw = data.get("rating")
        try:
            rating = int(raw)
        except (TypeError, ValueError):
            rating = None
        if isinstance(raw, bool | float) or rating not in range(1, 6):
            raise SubmissionError("Choose a rating from 1 to 5.", field="rating")
        return {"rating": rating}

    def score(self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]):
        return {"judgments_before": item.judgment_count}

    def after_submit(self, participant: Participant, judgment: Judgment) -> None:
        participant.state["answered"] = participant.state.get("answered", 0) + 1
        participant.save(update_fields=["state"])

    def page_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        caption = Caption.objects.get(pk=assignment.item.spec["caption"])
        return {"caption": caption, "parts": self.parts(assignment.item)}

    def completion_earned(self, participant: Participant) -> bool:
        return (
            participant.state.get("answered", 0) >= study_settings(participant)["completion_after"]
        )

    figure_names = ("ratings",)

    def report(self, study: Study, progress) -> dict[str, Any]:
        ratings = [j.payload["rating"] for j in Judgment.objects.filter(study=study)]
        return {"histogram": [ratings.count(value) for value in range(1, 6)]}

    def figure(self, name: str, result: dict[str, Any]):
        if name != "ratings":
            raise KeyError(name)
        from matplotlib.figure import Figure

        figure = Figure(figsize=(3, 2))
        figure.add_subplot().bar(range(1, 6), result["histogram"])
        return figure


def study_settings(participant: Participant) -> dict[str, Any]:
    return {**RatingTestMode.default_settings, **participant.study.settings}


def rating_study(
    owner, *, captions: int = 3, live: bool = True, name: str = "Rating study", **settings
) -> Study:
    """A study of ``captions`` captions (one image each), opened unless ``live`` is False."""
    from annotation.services.studies import study_create, study_open

    study = study_create(owner=owner, name=name, mode=NAME, settings=settings)
    for number in range(captions):
        image = Image.objects.create(
            study=study,
            name=f"img{number}.jpg",
            sha256=f"{number:064d}",
            file=f"images/{number}.jpg",
            display=f"display/{number}.jpg",
            width=640,
            height=480,
            format="JPEG",
            alt_text=f"Picture {number}",
        )
        Caption.objects.create(
            study=study,
            image=image,
            system=f"sys{number % 2}",
            raw_text=f"a caption {number}",
            text=f"A caption {number}.",
            line=number + 1,
        )
    if live:
        study_open(study=study)
    return study


def crowd_participant(study: Study, worker: str = "worker-1") -> Participant:
    from annotation.services.participants import participant_for_crowd_worker

    participant, _ = participant_for_crowd_worker(
        study=study, source=Participant.Source.PROLIFIC, external_id=worker, meta={}
    )
    return participant
