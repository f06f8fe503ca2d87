"""The test-rating protocol: items, validation, scoring and the participant's state."""

from dataclasses import dataclass
from typing import Any

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study
from annotation.modes.base import Mode, Outcome
from annotation.modes.settings import CHECKS, CROWD, CrowdSettings, whole
from tests.ratingmode import NAME


@dataclass(frozen=True)
class RatingSettings(CrowdSettings):
    target: int = whole(2, label="Ratings per caption", low=1, high=1000)
    min_seconds: int = whole(0, label="Least seconds per rating", group=CHECKS, low=0, high=600)
    parts: int = whole(1, label="Ratings per item", low=1, high=20)
    # Ratings a crowd worker gives to earn the completion code.
    completion_after: int = whole(
        2, label="Ratings a crowd worker gives to earn the code", group=CROWD, low=1, high=1000
    )


class RatingProtocol(Mode):
    name = NAME
    label = "Rating (tests only)"
    settings_class = RatingSettings

    def build_items(self, study: Study) -> list[Item]:
        config = self.settings(study)
        captions = study.captions.filter(purpose=Caption.Purpose.STUDY).order_by("id")
        items = [
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
        return items

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
        if isinstance(raw, bool | float) or rating not in range(1, 6):
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
