"""Who changes the people + judge settings, and when (issue 40): the design's settings
change on an open study until its first judgment (a judge can only be run once the items
exist) and only by the owner; the report's choice of judge is any researcher's of the
study; items a design left out never count towards a crowd worker's code."""

from __future__ import annotations

import json

import pytest

from annotation.errors import Conflict, Forbidden
from annotation.models import Item, Participant
from annotation.modes import get_mode
from annotation.services.judges import judge_import
from annotation.services.people_design import people_design_apply
from annotation.services.people_judges import people_judge_report
from annotation.services.studies import study_update_settings
from tests.factories.spans import judge, spans_study, worker

pytestmark = pytest.mark.django_db


def _settings(study, **changes):
    return {**study.settings, **changes}


def _judge_every_caption(study):
    rows = [
        {"item_id": item.pk, "answer": {"spans": [], "score": 50}}
        for item in Item.objects.filter(study=study)
    ]
    judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name="judge")


def test_owner_sets_the_design_on_an_open_study_before_its_first_judgment(researcher):
    study = spans_study(researcher, images=4)
    assert study.status == study.Status.LIVE
    study_update_settings(
        study=study,
        settings=_settings(study, people_design="uniform", people_share=0.5),
        changed_by=researcher,
    )
    study.refresh_from_db()
    assert get_mode(study.mode).settings(study).people_design == "uniform"
    _judge_every_caption(study)
    people_design_apply(study=study, user=researcher)
    lease, _ = judge(worker(study), lambda lease, text: {"spans": "[]", "score": 80})
    assert lease is not None
    with pytest.raises(Conflict, match="until the first judgment"):
        study_update_settings(
            study=study, settings=_settings(study, people_share=0.9), changed_by=researcher
        )
    study.refresh_from_db()
    assert get_mode(study.mode).settings(study).people_share == 0.5


def test_a_member_changes_the_reports_judge_but_not_the_design(researcher, other_researcher):
    """The rival researcher who shares the study: the report's choice is theirs too, what
    people answer is the owner's."""
    study = spans_study(researcher, images=2)
    study.members.add(other_researcher)
    study_update_settings(
        study=study,
        settings=_settings(study, people_judge_score="score"),
        changed_by=other_researcher,
    )
    study.refresh_from_db()
    assert study.settings["people_judge_score"] == "score"
    for change in ({"people_design": "uniform"}, {"people_share": 0.2}, {"people_floor": 0.3}):
        with pytest.raises(Forbidden, match="Only the study's owner"):
            study_update_settings(
                study=study, settings=_settings(study, **change), changed_by=other_researcher
            )
    study.refresh_from_db()
    assert "people_design" not in study.settings or study.settings["people_design"] == ""


def test_left_out_captions_do_not_count_towards_the_code(researcher):
    """Spans: 4 images x 2 systems, a code after 8 captions; a design leaving some out
    caps the count at the captions people can still be served."""
    study = spans_study(
        researcher,
        images=4,
        completion_captions=8,
        people_design="uniform",
        people_share=0.5,
    )
    _judge_every_caption(study)
    people_design_apply(study=study, user=researcher)
    served = Item.objects.filter(study=study, target__gt=0).count()
    assert 0 < served < 8  # the study's seed draws some out (a draw, checked, not assumed)
    mode = get_mode(study.mode)
    assert str(served) in mode.completion_reach(study)
    participant = worker(study)
    for _ in range(served):
        lease, _ = judge(participant, lambda lease, text: {"spans": "[]", "score": 70})
        assert lease is not None
    participant = Participant.objects.get(pk=participant.pk)
    assert mode.completion_earned(participant)


def test_the_report_counts_drawn_items_nobody_has_answered(researcher):
    """Until every drawn item is answered the weighted estimate is not final: the section
    says how many are left, counted from the items a person can still be served."""
    study = spans_study(researcher, images=5, people_design="uniform", people_share=0.6)
    _judge_every_caption(study)
    people_design_apply(study=study, user=researcher)
    drawn = Item.objects.filter(study=study, target__gt=0).count()
    assert drawn >= 2
    assert people_judge_report(study)["design"]["drawn_unanswered"] == drawn
    lease, _ = judge(worker(study), lambda lease, text: {"spans": "[]", "score": 80})
    assert lease is not None
    assert people_judge_report(study)["design"]["drawn_unanswered"] == drawn - 1
