"""The context mode (issue 43) through its real services and views: import, items, who
gets which, validation, the reading floor, the after-image part's protection.

Studies are built through the real import service (``tests/factories/context.py``) and
raters declare their vision through ``participant_declare_vision``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Caption, Item, Judgment
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from tests.factories.context import (
    AFTER_ANSWER,
    BEFORE_ANSWER,
    CONTEXTS,
    DESCRIPTIONS,
    context_study,
    rate,
    rater,
)

pytestmark = pytest.mark.django_db
MODE = get_mode("context")


def test_import_stores_contexts_with_domain_and_title(researcher):
    study = context_study(researcher, images=2, live=False)
    contexts = Caption.objects.filter(study=study, purpose="context").order_by("id")
    assert contexts.count() == 2 * len(CONTEXTS)
    first = contexts[0]
    system, domain, title, passage = CONTEXTS[0]
    assert first.spec == {"domain": domain.lower(), "title": title}
    assert first.raw_text == passage
    assert first.system == f"{system}-0"
    assert Caption.objects.filter(study=study, purpose="study").count() == 2 * len(DESCRIPTIONS)


def test_items_one_per_description_context_and_group(researcher):
    study = context_study(researcher, images=2, blv_ratings=2, sighted_ratings=3)
    items = list(Item.objects.filter(study=study))
    # 2 images x 2 descriptions x 2 contexts x 2 groups.
    assert len(items) == 2 * len(DESCRIPTIONS) * len(CONTEXTS) * 2
    by_kind = {kind: [i for i in items if i.kind == kind] for kind in ("blv", "sighted")}
    assert {i.target for i in by_kind["blv"]} == {2}
    assert {i.target for i in by_kind["sighted"]} == {3}
    assert {i.spec["parts"] for i in by_kind["blv"]} == {1}
    assert {i.spec["parts"] for i in by_kind["sighted"]} == {2}
    for item in items:
        description = Caption.objects.get(pk=item.spec["caption"])
        context = Caption.objects.get(pk=item.spec["context"])
        assert description.purpose == "study" and context.purpose == "context"
        assert description.image_id == context.image_id == item.image_id
        assert item.spec["domain"] == context.spec["domain"]
    # The same image in two contexts is two items (per group).
    pairs = {(i.spec["caption"], i.spec["context"], i.kind) for i in items}
    assert len(pairs) == len(items)


def test_a_group_with_no_target_has_no_items(researcher):
    study = context_study(researcher, images=1, blv_ratings=0, sighted_ratings=1)
    assert set(Item.objects.filter(study=study).values_list("kind", flat=True)) == {"sighted"}


def test_no_group_at_all_is_refused(researcher):
    with pytest.raises(ServiceError) as refused:
        MODE.clean_settings({"blv_ratings": 0, "sighted_ratings": 0})
    assert refused.value.field == "blv_ratings"


def test_a_context_without_domain_or_title_is_refused_with_its_line(researcher, tmp_path):
    from annotation.services.imports import study_import
    from annotation.services.studies import study_create

    study = context_study(researcher, images=1, live=False)
    image = study.images.first().name
    path = tmp_path / "contexts.csv"
    path.write_text(
        f"image,system,domain,title,caption\n{image},x,,A title,A passage.\n"
        f"{image},y,news,,Another passage.\n",
        encoding="utf-8",
    )
    with pytest.raises(ServiceError) as refused:
        study_import(study=study, captions=path, purpose="context")
    errors = refused.value.details["errors"]
    assert any(e.startswith("line 2:") and "domain is empty" in e for e in errors)
    assert any(e.startswith("line 3:") and "title is empty" in e for e in errors)
    del study_create


def test_worker_is_served_only_their_group_and_never_a_description_twice(researcher):
    study = context_study(researcher, images=2, blv_ratings=3, sighted_ratings=3)
    for vision, kind in (("blind", "blv"), ("low_vision", "blv"), ("sighted", "sighted")):
        participant = rater(study, vision)
        seen = []
        while (lease := rate(participant)) is not None:
            assert lease.item.kind == kind
            seen.append(lease.item.spec["caption"])
        # Every description once, never in its second context.
        assert sorted(seen) == sorted(
            Caption.objects.filter(study=study, purpose="study").values_list("pk", flat=True)
        )


def test_undeclared_participant_gets_nothing(researcher):
    from tests.factories.core import crowd_participant

    study = context_study(researcher, images=1)
    assert assignment_next(participant=crowd_participant(study, "nobody")) is None


def test_validation_names_each_field(researcher):
    study = context_study(researcher, images=1)
    participant = rater(study, "sighted")
    lease = assignment_next(participant=participant)
    later = timezone.now() + timedelta(minutes=5)
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={"overall": "6", "imaginability": "", "relevance": "3", "irrelevance": "x"},
            part=0,
            now=later,
        )
    named = [p["field"] for p in refused.value.details["fields"]]
    assert named == ["overall", "imaginability", "irrelevance"]
    assert refused.value.field == "overall"
    assert not Judgment.objects.filter(item__study=study).exists()
    judgment_submit(
        participant=participant, token=lease.token, data=BEFORE_ANSWER, part=0, now=later
    )
    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=participant,
            token=lease.token,
            data={**AFTER_ANSWER, "missing": "bad \u202e text"},
            part=1,
            now=later + timedelta(minutes=1),
        )
    assert refused.value.field == "missing"


def test_stored_payloads_are_the_spec(researcher):
    study = context_study(researcher, images=1, blv_ratings=0)
    participant = rater(study, "sighted")
    rate(participant)
    before, after = Judgment.objects.filter(participant=participant).order_by("part")
    assert before.payload == {k: int(v) for k, v in BEFORE_ANSWER.items()}
    assert after.payload == {"overall": 3, "accuracy": 4, "missing": "The umbrella's colour."}
    participant.refresh_from_db()
    assert participant.state["rated"] == 1
