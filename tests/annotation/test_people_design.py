"""The study's sampling design (issue 40, ``services/people_design.py``) on caption units
(the spans mode: one item per caption): uniform and uncertainty draws against hand-worked
probabilities, the refusals, the API (a rival member refused), the read for the estimate.
"""

from __future__ import annotations

import json
import random

import pytest
from django.urls import reverse

from annotation.errors import Conflict, Forbidden
from annotation.models import Item, Judgment
from annotation.services.judges import judge_import
from annotation.services.people_design import (
    people_design_apply,
    people_design_state,
    unit_sampling,
)
from tests.factories.spans import judge, spans_study, worker

pytestmark = pytest.mark.django_db


def answers(study, scores, *, name="judge", runs=(0,)):
    """A judge answering every caption item; ``scores(caption id, run)`` its score."""
    rows = [
        {"item_id": item.pk, "run": run, "answer": {"spans": [], "score": scores(item, run)}}
        for item in Item.objects.filter(study=study)
        for run in runs
    ]
    return judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name=name)


def snapshot(study):
    """What a design writes, per caption (never per item id)."""
    return {
        item.spec["caption"]: (item.target, item.sampling_probability, item.sampling_design)
        for item in Item.objects.filter(study=study)
    }


def test_uniform_draws_each_caption_with_the_share_from_the_seed(researcher):
    study = spans_study(researcher, images=20, people_design="uniform", people_share=0.3, target=2)
    answers(study, lambda item, run: 50)
    summary = people_design_apply(study=study, user=researcher)
    rows = snapshot(study)
    assert len(rows) == 40
    # The spec's rule, written out: one draw per unit seeded by the study's seed and the
    # unit's key (the caption id), in at probability share.
    drawn = {c for c in rows if random.Random(f"{study.seed}:{c}").random() < 0.3}
    assert {c for c, row in rows.items() if row[0] == 2} == drawn
    assert {c for c, row in rows.items() if row[0] == 0} == set(rows) - drawn
    assert all(row[1:] == (0.3, "uniform") for row in rows.values())
    assert summary["items_drawn"] == len(drawn) and summary["items_left_out"] == 40 - len(drawn)
    assert summary["items_expected"] == pytest.approx(12.0)
    assert summary["uncertainty"] == "" and summary["units"] == 40


def test_uniform_share_is_reached_on_average_over_seeds(researcher):
    """A count, not a copy of the code: over 60 captions and 10 seeds (600 draws at 0.4),
    the share drawn lies within four binomial standard deviations of 0.4."""
    drawn = total = 0
    for seed in range(10):
        study = spans_study(researcher, images=30, people_design="uniform", people_share=0.4)
        study.seed = seed
        study.save(update_fields=["seed"])
        answers(study, lambda item, run: 50)
        people_design_apply(study=study, user=researcher)
        rows = snapshot(study).values()
        drawn += sum(1 for row in rows if row[0] > 0)
        total += len(rows)
    sd = (0.4 * 0.6 / total) ** 0.5
    assert abs(drawn / total - 0.4) < 4 * sd


def test_uncertainty_from_repeated_runs_hand_worked(researcher):
    """Two runs: captions of image 0 spread by 10 (scores 40/60 and 30/50), those of image 1
    by 0. Share 0.5 and floor 0.1 over 4 units: 2c*10 + 2*0.1 = 2, so the unsure units get
    0.9 and the sure ones the floor, 0.1."""
    study = spans_study(
        researcher,
        images=2,
        people_design="uncertainty",
        people_share=0.5,
        people_floor=0.1,
        target=2,
    )
    items = list(Item.objects.filter(study=study).select_related("image").order_by("position"))
    first_image = items[0].image_id
    spread = {i.pk: i.image_id == first_image for i in items}
    answers(study, lambda item, run: 40 + 20 * run if spread[item.pk] else 70, runs=(0, 1))
    summary = people_design_apply(study=study, user=researcher)
    for item in Item.objects.filter(study=study):
        expected = 0.9 if spread[item.pk] else 0.1
        assert item.sampling_probability == pytest.approx(expected)
        assert item.sampling_design == "uncertainty"
        drawn = random.Random(f"{study.seed}:{item.spec['caption']}").random() < expected
        assert item.target == (2 if drawn else 0)
    assert summary["uncertainty"] == "runs"
    assert summary["expected_groups"] == pytest.approx(2.0)
    sampling = unit_sampling(study)
    assert set(sampling) == {item.spec["caption"] for item in items}
    for item in Item.objects.filter(study=study):
        assert sampling[item.spec["caption"]] == (item.sampling_probability, item.target > 0)


def test_uncertainty_refused_without_any_uncertainty(researcher):
    study = spans_study(researcher, people_design="uncertainty")
    answers(study, lambda item, run: 50)
    before = snapshot(study)
    with pytest.raises(Conflict, match="answered every unit once"):
        people_design_apply(study=study, user=researcher)
    assert snapshot(study) == before


def test_refused_when_a_unit_has_no_judge_answer(researcher):
    study = spans_study(researcher, images=3, people_design="uniform")
    item = Item.objects.filter(study=study).first()
    row = {"item_id": item.pk, "answer": {"spans": [], "score": 50}}
    judge_import(study=study, text=json.dumps(row), name="partial")
    before = snapshot(study)
    with pytest.raises(Conflict, match="has none for 5 of the 6 units"):
        people_design_apply(study=study, user=researcher)
    assert snapshot(study) == before


def test_refused_when_some_runs_are_missing(researcher):
    study = spans_study(researcher, people_design="uncertainty")
    first = Item.objects.filter(study=study).first()
    answers(study, lambda item, run: 40 + run, runs=(0,))
    rows = [{"item_id": first.pk, "run": 1, "answer": {"spans": [], "score": 10}}]
    judge_import(study=study, text=json.dumps(rows[0]), name="judge")
    with pytest.raises(Conflict, match="answered once 3 of the 4 units"):
        people_design_apply(study=study, user=researcher)


def test_refused_without_a_judge(researcher):
    study = spans_study(researcher, people_design="uniform")
    with pytest.raises(Conflict, match="no judge"):
        people_design_apply(study=study, user=researcher)


def test_refused_once_anyone_has_answered(researcher):
    study = spans_study(researcher, people_design="uniform")
    answers(study, lambda item, run: 50)
    lease, _ = judge(worker(study), lambda lease, text: {"spans": "[]", "score": 80})
    assert lease is not None and Judgment.objects.filter(study=study).count() == 1
    before = snapshot(study)
    with pytest.raises(Conflict, match="before the first judgment"):
        people_design_apply(study=study, user=researcher)
    assert snapshot(study) == before


def test_a_member_is_refused_by_the_service(researcher, other_researcher):
    study = spans_study(researcher, people_design="uniform")
    study.members.add(other_researcher)
    answers(study, lambda item, run: 50)
    with pytest.raises(Forbidden):
        people_design_apply(study=study, user=other_researcher)
    assert all(row[1] is None for row in snapshot(study).values())


def test_default_design_changes_nothing_and_removes_an_earlier_one(researcher):
    study = spans_study(researcher, images=10, people_share=0.3, target=3)
    answers(study, lambda item, run: 50)
    before = snapshot(study)
    assert people_design_apply(study=study, user=researcher)["applied"] == ""
    assert snapshot(study) == before and unit_sampling(study) == {}
    # A uniform design, then a wider one, then none: targets come back as they were.
    study.settings = {**study.settings, "people_design": "uniform"}
    study.save(update_fields=["settings"])
    people_design_apply(study=study, user=researcher)
    first = snapshot(study)
    assert {row[0] for row in first.values()} == {0, 3}
    study.settings = {**study.settings, "people_share": 0.9}
    study.save(update_fields=["settings"])
    people_design_apply(study=study, user=researcher)
    wider = snapshot(study)
    for caption, row in wider.items():
        drawn = random.Random(f"{study.seed}:{caption}").random() < 0.9
        assert row == ((3 if drawn else 0), 0.9, "uniform")
    study.settings = {**study.settings, "people_design": ""}
    study.save(update_fields=["settings"])
    people_design_apply(study=study, user=researcher)
    assert snapshot(study) == before


def test_floor_above_share_is_refused_with_the_settings_named(researcher):
    study = spans_study(
        researcher, people_design="uncertainty", people_share=0.05, people_floor=0.2
    )
    answers(study, lambda item, run: 40 + 10 * run, runs=(0, 1))
    with pytest.raises(Conflict, match="people_floor"):
        people_design_apply(study=study, user=researcher)


# ------------------------------------------------------------------------------- the API


def test_api_owner_applies_and_reads(client, researcher):
    study = spans_study(researcher, images=5, people_design="uniform", people_share=0.4)
    answers(study, lambda item, run: 50)
    client.force_login(researcher)
    url = reverse("api_study_people_design", args=[study.pk])
    before = client.get(url)
    assert before.status_code == 200
    assert before.json()["applied"] == "" and before.json()["items_in_design"] == 0
    applied = client.post(url)
    assert applied.status_code == 200, applied.content
    body = applied.json()
    assert body["applied"] == "uniform" and body["items_in_design"] == 10
    assert body["items_drawn"] + body["items_left_out"] == 10
    assert body["items_drawn"] == Item.objects.filter(study=study, target__gt=0).count()
    assert client.get(url).json() == {k: body[k] for k in client.get(url).json()}


def test_api_rival_member_posting_the_design_is_refused(client, researcher, other_researcher):
    """Attack: a researcher the study is shared with posts the design (to send people only
    where it suits them). Refused 403 and nothing changes; a stranger is told 404."""
    study = spans_study(researcher, images=4, people_design="uniform", people_share=0.25)
    study.members.add(other_researcher)
    answers(study, lambda item, run: 50)
    before = snapshot(study)
    client.force_login(other_researcher)
    url = reverse("api_study_people_design", args=[study.pk])
    refused = client.post(url)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert snapshot(study) == before
    assert client.get(url).status_code == 200  # a member reads the design
    client.logout()
    assert client.post(url).status_code in (401, 403)
    assert snapshot(study) == before


def test_api_stranger_gets_404(client, researcher, make_user):
    study = spans_study(researcher, people_design="uniform")
    answers(study, lambda item, run: 50)
    client.force_login(make_user("stranger", researcher=True))
    url = reverse("api_study_people_design", args=[study.pk])
    assert client.post(url).status_code == 404 and client.get(url).status_code == 404
    assert all(row[1] is None for row in snapshot(study).values())


def test_api_refusal_is_a_409_with_the_reason(client, researcher):
    study = spans_study(researcher, people_design="uncertainty")
    answers(study, lambda item, run: 50)
    client.force_login(researcher)
    response = client.post(reverse("api_study_people_design", args=[study.pk]))
    assert response.status_code == 409 and response.json()["code"] == "conflict"
    assert "answered every unit once" in response.json()["people_design"][0]
    assert people_design_state(study)["items_in_design"] == 0
