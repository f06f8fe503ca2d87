"""THumB's eligibility written out as SQL (issue 48, ``annotation/modes/thumb/eligible.py``)
serves exactly the items the ORM's queryset served: every stage, linked ids (one network,
one browser), accounts native or not, and the condition used inside another query as a
subquery (where its item alias is relabelled)."""

import pytest
from django.db.models import Exists, OuterRef, Q

from annotation.identities import linked_q
from annotation.models import Item, Judgment, Participant
from annotation.modes import get_mode
from annotation.modes.thumb.models import Rater
from annotation.modes.thumb.stages import CHECK, FLUENCY, STAGE1, STAGE2
from tests.annotation.test_thumb_hot_path import five_caption_study
from tests.factories.core import crowd_participant
from tests.factories.thumb import all_scores, judge, member
from tests.factories.thumb import make_annotator as make_annotator_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

MODE = get_mode("thumb")


def orm_eligible(participant):
    """The rule as the ORM built it before it was written out (commit 66a0f61)."""
    study_items = Item.objects.filter(study_id=participant.study_id)
    stage1_done = Item.objects.filter(
        study_id=participant.study_id,
        kind=STAGE1,
        image_id=OuterRef("image_id"),
        judgment_count__gte=1,
    )
    same_person = linked_q(participant, prefix="participant__")
    own_stage1 = Judgment.objects.filter(
        same_person,
        item__study_id=participant.study_id,
        item__kind=STAGE1,
        item__image_id=OuterRef("image_id"),
    )
    own_stage = Judgment.objects.filter(
        same_person,
        item__study_id=participant.study_id,
        item__kind__in=[STAGE1, STAGE2],
        item__image_id=OuterRef("image_id"),
    )
    allowed = (
        Q(kind=STAGE1)
        | Q(Exists(stage1_done), ~Exists(own_stage1), kind=STAGE2)
        | Q(~Exists(own_stage), kind=CHECK)
    )
    native = Rater.objects.filter(user_id=participant.user_id, native_english=True)
    if participant.user_id is not None and native.exists():
        allowed |= Q(kind=FLUENCY)
    return study_items.filter(allowed)


def _placed(study, pid, *, browser="", network=""):
    participant = crowd_participant(study, pid)
    Participant.objects.filter(pk=participant.pk).update(browser_id=browser, network=network)
    participant.refresh_from_db()
    return participant


def test_the_written_out_rule_serves_what_the_orm_served(make_study, make_annotator):
    study = five_caption_study(make_study, images=5)
    native = member(study, make_annotator("nat", native=True))
    other = member(study, make_annotator("oth"))
    first = _placed(study, "w1", network="198.51.100.7")
    same_network = _placed(study, "w2", network="198.51.100.7")
    browser = _placed(study, "w3", browser="b-1", network="203.0.113.1")
    same_browser = _placed(study, "w4", browser="b-1", network="203.0.113.2")
    alone = _placed(study, "w5")
    for _ in range(3):
        judge(first, all_scores, STAGE1)
    for participant in (other, browser, native, alone):  # reviews and a check among them
        judge(participant, all_scores)
    kinds = set(Item.objects.filter(study=study).values_list("kind", flat=True))
    assert {STAGE1, STAGE2, FLUENCY, CHECK} <= kinds

    everyone = (native, other, first, same_network, browser, same_browser, alone)
    served = {}
    for participant in everyone:
        participant.study = study
        new = set(MODE.eligible_items(participant).values_list("pk", flat=True))
        assert new == set(orm_eligible(participant).values_list("pk", flat=True))
        served[participant.pk] = new
        # Inside another query on the item table (its alias relabelled to U0 there).
        inside = Item.objects.filter(pk__in=MODE.eligible_items(participant).values("pk"))
        assert set(inside.values_list("pk", flat=True)) == new
    # The cases differ: the rule is not trivially the same for everyone.
    assert len({frozenset(s) for s in served.values()}) >= 4
