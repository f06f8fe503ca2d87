"""Crowd integrity, round two (issue 29), THumB rows 3, 6 and 13, attacked through the real
pages: each browser is a Django test client of its own (its own cookie jar) with a client
address (REMOTE_ADDR), arriving through the study's signed Prolific link.

- Row 3: one person as two worker ids in two browsers (cookies cleared) from one address.
- Row 6: junk answered as fast as possible, then junk at an allowed pace.
- Row 13: mathematical and full-width digits as scores.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Judgment, Participant
from annotation.modes import get_mode
from annotation.services.participants import crowd_link_token
from tests.factories.thumb import form_for, thumb_study

pytestmark = pytest.mark.django_db

#: Arrivals and leases per address are not what these tests are about.
OPEN_DOORS = {"crowd_arrivals_per_address_per_hour": 1000, "crowd_open_leases_per_address": 1000}


def browser(address: str) -> Client:
    """A fresh browser (empty cookie jar) at a client address."""
    return Client(REMOTE_ADDR=address)


def arrive(client, study, pid):
    response = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "st-1", "SESSION_ID": f"se-{pid}"},
    )
    assert response.status_code == 302, response.content[:300]
    return response


def next_page(client, study):
    return client.get(reverse("participate_next", args=[study.public_id]))


def submit(client, study, token, data):
    return client.post(reverse("participate_submit", args=[study.public_id, token]), data)


def participant_of(client, study) -> Participant:
    return Participant.objects.get(pk=client.session[f"capeval.participant.{study.pk}"])


def wait_on(lease, seconds: float) -> None:
    """Pretend the page was read for ``seconds``: the server measures from ``served_at``."""
    Assignment.objects.filter(pk=lease.pk).update(
        served_at=lease.served_at - timedelta(seconds=seconds)
    )


def lease_of(page):
    return page.context.get("assignment") if page.context else None


# ---------------------------------------------------------------------- row 3


def test_the_same_person_as_two_ids_in_two_browsers_is_never_served_their_own_stage2(
    make_study,
):
    study = thumb_study(
        make_study, extra_images=2, settings={**OPEN_DOORS, "seconds_per_caption": 0}
    )
    first = browser("203.0.113.40")
    arrive(first, study, "first-id")
    lease = lease_of(next_page(first, study))
    assert lease.item.kind == "stage1"
    assert submit(first, study, lease.token, form_for(lease.item)).status_code == 302
    own_image = lease.item.image_id

    # Cookies cleared (a fresh client), same address: a new browser id, the same network.
    second = browser("203.0.113.40")
    arrive(second, study, "second-id")
    served = []
    for _ in range(20):
        lease = lease_of(next_page(second, study))
        if lease is None:
            break
        served.append((lease.item.kind, lease.item.image_id))
        assert submit(second, study, lease.token, form_for(lease.item)).status_code == 302

    assert served, "the second id was given work"
    assert ("stage2", own_image) not in served
    row = participant_of(second, study)
    assert row.browser_id != participant_of(first, study).browser_id
    linked = [flag for flag in row.flags if flag["kind"] == "linked_annotator"]
    assert len(linked) == 1
    assert participant_of(first, study).pseudonym in linked[0]["detail"]
    # Someone on another network and browser still gets that stage 2.
    other = browser("198.51.100.90")
    arrive(other, study, "third-id")
    lease = lease_of(next_page(other, study))
    assert (lease.item.kind, lease.item.image_id) == ("stage2", own_image)


def test_a_linked_id_posting_to_a_stage2_lease_it_holds_is_refused(make_study):
    """The submit check (validate) uses the same links as serving: a lease given before the
    link existed (a worker changes networks) still cannot review their own stage 1."""
    study = thumb_study(make_study, settings={**OPEN_DOORS, "seconds_per_caption": 0})
    reviewer = browser("198.51.100.30")
    arrive(reviewer, study, "reviewer")
    first = browser("203.0.113.41")
    arrive(first, study, "first-id")
    lease = lease_of(next_page(first, study))
    assert submit(first, study, lease.token, form_for(lease.item)).status_code == 302
    # The reviewer leases the stage 2 of that image, then turns out to share the network.
    stage2 = None
    for _ in range(5):
        candidate = lease_of(next_page(reviewer, study))
        if candidate.item.kind == "stage2" and candidate.item.image_id == lease.item.image_id:
            stage2 = candidate
            break
        assert submit(reviewer, study, candidate.token, form_for(candidate.item)).status_code == 302
    assert stage2 is not None
    Participant.objects.filter(external_id="reviewer").update(network="203.0.113.41")

    response = submit(reviewer, study, stage2.token, form_for(stage2.item))

    assert response.status_code == 403
    assert not Judgment.objects.filter(item=stage2.item).exists()


# ---------------------------------------------------------------------- row 6


def thumb_crowd_study(make_study, **settings):
    return thumb_study(
        make_study,
        captions={},
        extra_images=12,
        settings={
            **OPEN_DOORS,
            "stage2": False,
            "require_native_fluency": False,
            "completion_images": 5,
            "seconds_per_caption": 3,
            **settings,
        },
    )


def test_the_minimum_time_default_is_three_seconds_per_caption():
    # PROTOCOLS.md's minimum per VICR rating (3 s, one caption against one image), per
    # caption group: the THumB paper states no pace (docs/protocol-choices.md).
    assert get_mode("thumb").settings_class().seconds_per_caption == 3


def test_junk_as_fast_as_possible_is_refused_and_earns_no_code(make_study):
    study = thumb_crowd_study(make_study, catch_rate=0.5)
    bot = browser("203.0.113.50")
    arrive(bot, study, "speedy")
    statuses = []
    for _ in range(8):
        lease = lease_of(next_page(bot, study))
        statuses.append(
            submit(bot, study, lease.token, form_for(lease.item, precision=5)).status_code
        )

    assert statuses == [429] * 8
    assert not Judgment.objects.exists()
    # Two caption groups per set at 3 s each: the refusal says how long to take.
    assert (
        "at least 6 seconds"
        in submit(bot, study, lease.token, form_for(lease.item)).content.decode()
    )
    page = next_page(bot, study).content.decode()
    assert "completion-code" not in page and study.completion_code not in page
    assert participant_of(bot, study).completed_at is None


def play_paced(client, study, answer, *, limit=30):
    """Judge items at exactly the minimum time; ``answer(item)`` gives the form. The pages."""
    pages = []
    for _ in range(limit):
        page = next_page(client, study)
        pages.append(page.content.decode())
        lease = lease_of(page)
        if lease is None:
            break
        wait_on(lease, 3 * len(lease.item.spec["groups"]))
        assert submit(client, study, lease.token, answer(lease.item)).status_code == 302
    return pages


def test_junk_at_the_allowed_pace_earns_no_code_while_the_catch_rule_has_not_passed(make_study):
    study = thumb_crowd_study(make_study, catch_rate=0.5, catch_min_seen=3)
    bot = browser("203.0.113.51")
    arrive(bot, study, "junk")

    pages = play_paced(bot, study, lambda item: form_for(item, precision=5))

    row = participant_of(bot, study)
    assert Judgment.objects.filter(participant=row).count() >= 5
    assert [flag["kind"] for flag in row.flags] == ["catch_failed"]
    assert row.completed_at is None
    assert not any(study.completion_code in page for page in pages)


def test_an_honest_worker_at_the_allowed_pace_earns_the_code(make_study):
    study = thumb_crowd_study(make_study, catch_rate=0.5, catch_min_seen=3)
    worker = browser("198.51.100.52")
    arrive(worker, study, "honest")

    def answer(item):
        made = item.spec.get("catch") or {}
        body = form_for(item, precision=4)
        if made and made["kind"] != "control":
            body[f"{made['key']}-precision"] = "1"
        return body

    pages = play_paced(worker, study, answer)

    row = participant_of(worker, study)
    assert row.flags == [] and row.completed_at is not None
    assert any(study.completion_code in page for page in pages)


def test_registered_annotators_have_no_minimum_time(make_study, make_user):
    study = thumb_crowd_study(make_study)
    assert get_mode("thumb").settings(study).seconds_per_caption == 3
    user = make_user("team")
    study.annotators.add(user)
    client = Client()
    client.force_login(user)
    lease = lease_of(next_page(client, study))
    assert submit(client, study, lease.token, form_for(lease.item)).status_code == 302


# ---------------------------------------------------------------------- row 13


@pytest.mark.parametrize("value", ["𝟑", "３", "٣", "³"])
def test_thumb_refuses_digits_that_are_not_ascii_with_a_400_naming_the_field(make_study, value):
    study = thumb_study(make_study, settings={**OPEN_DOORS, "seconds_per_caption": 0})
    worker = browser("198.51.100.60")
    arrive(worker, study, "w1")
    lease = lease_of(next_page(worker, study))
    body = form_for(lease.item)
    key = lease.item.spec["groups"][0]["key"]
    body[f"{key}-precision"] = value

    response = submit(worker, study, lease.token, body)

    assert response.status_code == 400
    text = response.content.decode()
    assert "precision" in text and f'id="{key}-precision"' in text
    assert not Judgment.objects.exists()


def test_the_item_page_says_the_minimum_time_to_crowd_workers_only(make_study, make_user):
    study = thumb_crowd_study(make_study)
    worker = browser("198.51.100.70")
    arrive(worker, study, "reader")
    crowd_page = next_page(worker, study).content.decode()
    user = make_user("team2")
    study.annotators.add(user)
    member_client = Client()
    member_client.force_login(user)
    member_page = next_page(member_client, study).content.decode()

    # Two caption groups per set, 3 s each.
    assert "Please take at least 6 seconds on this set" in crowd_page
    assert 'id="thumb-minimum"' not in member_page
