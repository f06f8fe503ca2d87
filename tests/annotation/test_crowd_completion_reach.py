"""Completion codes a crowd worker can earn (issue 46, row 2), through the real views: each
worker is a Django test client of its own, arriving through the crowd link and answering
through the pages.

At the arena's defaults (the code after 20 battles) a 6-image study could never pay anyone
(no worker sees an image twice, and gold battles use images too), opened without a word,
and told workers who did every battle offered to return their submission; an MTurk worker
arriving with 3 battles left got no code.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Caption, Image, Item, Participant
from annotation.modes import get_mode
from annotation.modes.arena.protocol import BATTLE, CATCH
from tests.factories.arena import MODE, arena_study, judge, worker
from tests.factories.arena_crowd import RETURN, honest, link, mturk, play, prolific
from tests.factories.spans import judge as spans_judge
from tests.factories.spans import spans_study
from tests.factories.spans import worker as spans_worker

pytestmark = pytest.mark.django_db

CODE = "ARENA-PAID-46"
# ------------------------------------------------------------------ row 2 (a): at opening


def test_opening_a_study_whose_code_no_worker_can_reach_warns_with_the_numbers(client, researcher):
    # The defaults: the code after 20 battles; 6 images of 3 systems.
    study = arena_study(researcher, live=False, completion_code=CODE)
    needed = MODE.settings(study).completion_battles
    images = Image.objects.filter(study=study).count()
    assert images < needed
    client.force_login(researcher)

    page = client.post(reverse("study_status", args=[study.pk]), {"action": "open"}, follow=True)

    assert page.status_code == 200
    warnings = [str(m) for m in page.context["messages"] if "completion code" in str(m)]
    assert warnings, "the study opened without a word on its completion code"
    # The numbers: what the code asks for, and what one worker can be served (one image
    # each, so the images are the most any worker can answer).
    assert f"{needed} battles" in warnings[0] and f"{images} images" in warnings[0]
    # The dashboard keeps saying it while the study is live.
    dashboard = client.get(reverse("study_dashboard", args=[study.pk])).content.decode()
    assert 'id="completion-reach"' in dashboard and f"{images} images" in dashboard


def test_a_study_whose_code_is_reachable_opens_without_that_warning(client, researcher):
    study = arena_study(
        researcher, systems=("alpha", "beta", "gamma", "delta"), images=30, live=False
    )
    client.force_login(researcher)

    page = client.post(reverse("study_status", args=[study.pk]), {"action": "open"}, follow=True)

    assert not [m for m in page.context["messages"] if "completion code" in str(m)]
    dashboard = client.get(reverse("study_dashboard", args=[study.pk])).content.decode()
    assert 'id="completion-reach"' not in dashboard


# ------------------------------------------------------------------ row 2 (b), (c): paid


def test_a_worker_who_answers_every_battle_offered_gets_the_code_not_return(researcher):
    # Issue 46 row 2: the defaults, 6 images; nobody could ever reach 20 battles.
    study = arena_study(researcher, completion_code=CODE, prolific_study_id="S46")
    images = Image.objects.filter(study=study).count()

    answered, last = play(study, Client(REMOTE_ADDR="10.46.2.1"), prolific("all-offered"))

    person = Participant.objects.get(study=study, external_id="all-offered")
    # Every image the study has, one answer each: everything the server could serve.
    assert answered == images
    assert CODE in last, last[last.find("<main") :][:1500]
    assert RETURN not in last
    assert person.completed_at is not None
    # The checks still ran: the gold rule saw gold battles, the answers are counted.
    assert Item.objects.filter(study=study, kind=CATCH, judgment_count=1).exists()
    assert not person.judgments.filter(excluded=True).exists()


def test_an_mturk_worker_arriving_with_three_battles_left_is_paid_the_code(researcher):
    # Plenty of images (the code is reachable), but the others have taken all but three
    # battles when this worker arrives.
    study = arena_study(
        researcher,
        systems=("alpha", "beta"),
        images=40,
        completion_code=CODE,
    )
    others = [worker(study, f"early-{k}") for k in range(3)]
    free = Item.objects.filter(study=study, kind=BATTLE, judgment_count=0, open_lease_count=0)
    turn = 0
    while free.count() > 3:
        assert others, "the early workers ran out before leaving three battles"
        person = others[turn % len(others)]
        if judge(person, honest)[0] is None:
            others.remove(person)
        turn += 1
    assert free.count() == 3

    client = Client(REMOTE_ADDR="10.46.2.2")
    answered, last = play(study, client, mturk("LATE46"))

    late = Participant.objects.get(study=study, external_id="LATE46")
    assert CODE in last, last[last.find("<main") :][:1500]
    assert "workersandbox.mturk.com/mturk/externalSubmit" in last
    assert "return the HIT" not in last
    assert late.completed_at is not None
    # It did all three battles: no gold battle took the image of one it could still do.
    assert late.judgments.filter(item__kind=BATTLE).count() == 3 and answered >= 3


def test_an_id_that_answered_nothing_in_a_finished_study_gets_no_code(researcher):
    # Paying for everything offered must not pay for nothing: an id arriving after the
    # last battle went answers nothing and earns nothing (throwaway ids harvesting codes).
    study = arena_study(researcher, systems=("alpha", "beta"), images=12, catch_rate=0)
    early = worker(study, "took-all")
    while judge(early, honest)[0] is not None:
        pass

    answered, last = play(study, Client(REMOTE_ADDR="10.46.2.3"), prolific("latecomer"))

    assert answered == 0
    assert Participant.objects.get(study=study, external_id="latecomer").completed_at is None
    assert CODE not in last


def test_a_worker_who_ran_out_having_failed_the_gold_battles_gets_the_screen_out_code(
    researcher,
):
    # As above, eight battles left; this worker picks the altered caption of every gold
    # battle (the two scheduled within the first eight battles): the gold rule, applied to
    # the gold battles they saw when the work ran out, pays Prolific's screen-out instead.
    study = arena_study(
        researcher,
        systems=("alpha", "beta"),
        images=40,
        completion_code=CODE,
        screen_out_code="SCREENED-46",
    )
    early = [worker(study, f"early-{k}") for k in range(3)]
    free = Item.objects.filter(study=study, kind=BATTLE, judgment_count=0, open_lease_count=0)
    turn = 0
    while free.count() > 8:
        assert judge(early[turn % 3], honest)[0] is not None
        turn += 1

    def misses_gold(lease):
        chosen = honest(lease)
        if lease.item.kind != CATCH:
            return chosen
        return "b" if chosen == "a" else "a"

    answered, last = play(
        study, Client(REMOTE_ADDR="10.46.2.4"), prolific("misses-gold"), choose=misses_gold
    )

    person = Participant.objects.get(study=study, external_id="misses-gold")
    missed = person.judgments.filter(item__kind=CATCH, result__catch__caught=False).count()
    assert missed >= 1 and answered == person.judgments.count()
    assert "SCREENED-46" in last and CODE not in last
    assert person.completed_at is None
    assert not person.judgments.filter(excluded=False).exists()


# ------------------------------------------------------------------ the same contract: spans


def mark_none(study, client: Client, params: dict[str, str]) -> tuple[int, str]:
    """Arrive and submit every caption offered with no mark and a score of 90."""
    assert client.get(link(study), params).status_code == 302
    done, html = 0, ""
    while True:
        html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
        found = re.search(r'action="([^"]*/submit/[^"]+)"', html)
        if found is None:
            return done, html
        page = client.post(found.group(1), {"part": "0", "spans": "[]", "score": "90"})
        assert page.status_code == 302, page.content[:400]
        done += 1


def test_spans_warns_at_opening_and_pays_a_worker_who_marked_every_caption(client, researcher):
    # 2 images x 2 systems: 4 captions, fewer than the 10 the code asks for by default.
    study = spans_study(researcher, live=False, completion_code=CODE)
    wanted = get_mode("spans").settings(study).completion_captions
    captions = Caption.objects.filter(study=study).count()
    assert captions < wanted
    client.force_login(researcher)

    page = client.post(reverse("study_status", args=[study.pk]), {"action": "open"}, follow=True)

    warnings = [str(m) for m in page.context["messages"] if "completion code" in str(m)]
    assert warnings and f"{wanted} captions" in warnings[0]
    assert f"at most {captions}" in warnings[0]

    done, last = mark_none(study, Client(REMOTE_ADDR="10.46.2.5"), prolific("spans-all"))

    assert done == captions
    assert CODE in last and RETURN not in last


def test_spans_pays_a_worker_arriving_when_the_last_captions_remain(researcher):
    study = spans_study(researcher, images=8, target=1, completion_code=CODE)
    early = spans_worker(study, "spans-early")
    free = Item.objects.filter(study=study, judgment_count=0, open_lease_count=0)
    while free.count() > 2:
        assert spans_judge(early, lambda lease, text: {"spans": "[]", "score": 90})[0]

    done, last = mark_none(study, Client(REMOTE_ADDR="10.46.2.6"), prolific("spans-late"))

    assert done == 2
    assert CODE in last and RETURN not in last
