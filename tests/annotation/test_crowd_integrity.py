"""Crowd integrity: the attacks a paid crowd worker holding only the public link would try.

Each test performs its attack through the real pages (crowd link, /next/, submit) as a
browser would, with its own Django test client (one client = one browser, one cookie jar)
and a client address of its own (REMOTE_ADDR). The VICR gates and HUMANr exposure attacks
live in test_crowd_vicr_gates.py and test_crowd_humanr_exposure.py.
"""

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, CrowdRefusal, Item, Judgment, Participant
from annotation.modes import get_mode
from annotation.selectors import completion_code
from annotation.services.participants import crowd_link_token
from tests.factories.core import vehicle_study
from tests.factories.humanr import honest_on_page, humanr_study
from tests.factories.thumb import form_for, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db


def browser(address="198.51.100.1") -> Client:
    """A fresh browser (empty cookie jar) at a client address."""
    return Client(REMOTE_ADDR=address)


def arrive(client, study, pid, **params):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "st-1", "SESSION_ID": f"se-{pid}", **params},
    )


def next_page(client, study):
    return client.get(reverse("participate_next", args=[study.public_id]))


def submit(client, study, token, data, **extra):
    return client.post(reverse("participate_submit", args=[study.public_id, token]), data, **extra)


def participant_of(client, study) -> Participant:
    return Participant.objects.get(pk=client.session[f"capeval.participant.{study.pk}"])


# ---------------------------------------------------------------------- 1. squatting


def test_throwaway_ids_from_one_address_cannot_take_every_lease(researcher):
    study = vehicle_study(researcher, captions=4, target=1)
    squatter = "203.0.113.7"
    statuses = []
    for n in range(12):
        client = browser(squatter)
        arrived = arrive(client, study, f"throwaway-{n}")
        statuses.append(arrived.status_code)
        if arrived.status_code == 302:
            assert next_page(client, study).status_code in (200, 429)

    real = browser("198.51.100.20")
    assert arrive(real, study, "real-worker").status_code == 302
    page = next_page(real, study)
    assert page.status_code == 200 and page.context.get("assignment") is not None, (
        "a real worker still gets an item after the squatter's burst"
    )
    limit = get_mode(study.mode).settings(study).crowd_arrivals_per_address_per_hour
    assert statuses.count(302) == limit
    assert statuses.count(429) == 12 - limit
    refused = arrive(browser(squatter), study, "throwaway-late")
    assert refused.status_code == 429
    assert "Too many new participants" in refused.content.decode()
    assert CrowdRefusal.objects.filter(study=study, reason="address_rate").count() == 13 - limit
    assert Participant.objects.filter(study=study, address=squatter).count() == limit


def test_one_address_holds_at_most_the_allowed_open_leases(researcher):
    study = vehicle_study(researcher, captions=6, target=1, crowd_open_leases_per_address=2)
    pages = []
    for n in range(3):
        client = browser("203.0.113.8")
        assert arrive(client, study, f"w{n}").status_code == 302
        pages.append(next_page(client, study))

    assert [page.status_code for page in pages] == [200, 200, 429]
    assert "Please wait" in pages[2].content.decode()
    assert Assignment.objects.filter(status=Assignment.Status.OPEN).count() == 2


def test_lapsed_leases_never_block_a_claim_without_celery_beat(researcher):
    study = vehicle_study(researcher, captions=2, target=1)
    for n in range(2):
        client = browser(f"198.51.100.{30 + n}")
        arrive(client, study, f"walks-away-{n}")
        assert next_page(client, study).context["assignment"] is not None
    late = browser("198.51.100.40")
    arrive(late, study, "late")
    assert next_page(late, study).context.get("assignment") is None, "every slot is held now"

    lease_length = get_mode(study.mode).crowd_lease_seconds
    later = timezone.now() + timedelta(seconds=lease_length + 1)
    with mock.patch("django.utils.timezone.now", return_value=later):
        page = next_page(late, study)

    assert page.context.get("assignment") is not None, "a lapsed lease gave its slot back"
    assert Assignment.objects.filter(status=Assignment.Status.RELEASED).count() == 2
    assert sorted(Item.objects.values_list("open_lease_count", flat=True)) == [0, 1]


def test_crowd_leases_fit_each_modes_unit_of_work(settings):
    # One VICR rating is seconds of work, a THumB caption set or a HUMANr group minutes; all
    # are shorter than an account's lease, so a squatted slot comes back soon.
    vicr, thumb, humanr = (get_mode(m).crowd_lease_seconds for m in ("vicr", "thumb", "humanr"))
    assert vicr <= 5 * 60 < thumb <= humanr < settings.CAPEVAL_LEASE_SECONDS


def test_a_crowd_lease_lasts_the_setting_and_an_account_lease_the_site_default(
    researcher, annotator, settings
):
    study = vehicle_study(researcher, captions=2, crowd_lease_seconds=90)
    study.annotators.add(annotator)
    worker = browser()
    arrive(worker, study, "w1")
    crowd_lease = next_page(worker, study).context["assignment"]
    account = Client()
    account.force_login(annotator)
    account_lease = next_page(account, study).context["assignment"]

    assert (crowd_lease.expires_at - crowd_lease.served_at).total_seconds() == 90
    assert (account_lease.expires_at - account_lease.served_at).total_seconds() == (
        settings.CAPEVAL_LEASE_SECONDS
    )


def test_the_researcher_sees_open_leases_and_releases_one(researcher, other_researcher):
    study = vehicle_study(researcher, captions=2, target=1)
    worker = browser()
    arrive(worker, study, "w1")
    lease = next_page(worker, study).context["assignment"]
    owner = Client()
    owner.force_login(researcher)

    page = owner.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert participant_of(worker, study).pseudonym in page
    release_url = reverse("study_release_lease", args=[study.pk, lease.pk])
    assert release_url in page

    rival = Client()
    rival.force_login(other_researcher)
    assert rival.post(release_url).status_code == 404
    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.OPEN

    assert owner.post(release_url).status_code == 302
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.RELEASED
    assert lease.released_by == researcher.username
    assert Item.objects.get(pk=lease.item_id).open_lease_count == 0
    late = submit(worker, study, lease.token, {"part": "0", "rating": "3"})
    assert late.status_code == 409 and not Judgment.objects.exists()


def test_x_forwarded_for_is_ignored_unless_proxies_are_trusted(researcher, settings):
    study = vehicle_study(researcher, captions=6, target=1)
    # Every arrival claims another address in X-Forwarded-For; with no trusted proxy the
    # limit still counts the real one.
    codes = [
        arrive(browser("203.0.113.9"), study, f"x{n}", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}")
        for n in range(5)
    ]
    limit = get_mode(study.mode).settings(study).crowd_arrivals_per_address_per_hour
    assert [c.status_code for c in codes].count(302) == limit

    settings.CAPEVAL_TRUSTED_PROXIES = 1
    client = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 192.0.2.44")
    assert arrive(client, study, "behind-proxy").status_code == 302
    assert participant_of(client, study).address == "192.0.2.44"


# ---------------------------------------------------------------------- 2. the code


def _do_humanr_group(client, study):
    response = None
    for number in range(10):
        page = next_page(client, study)
        assert page.context.get("assignment") is not None, f"trial {number + 1} served"
        assert "completion-code" not in page.content.decode(), "no code before the work"
        response = submit(
            client,
            study,
            page.context["assignment"].token,
            {
                "part": number,
                "raw": honest_on_page(page.context),  # the check passed: the code is earned
                "left": page.context["left_caption"].pk,
            },
            follow=True,  # the feedback is a page after a redirect (issue 42)
        )
    return response


def test_the_humanr_completion_code_is_a_secret_earned_by_the_work(researcher):
    study = humanr_study(researcher)
    link = reverse("crowd_entry", args=[crowd_link_token(study)])
    public = {study.public_id.hex[:8].upper(), "CAPEVAL-" + study.public_id.hex[:8].upper()}
    worker = browser()
    arrive(worker, study, "w1")
    intro = worker.get(reverse("participate_intro", args=[study.public_id])).content.decode()

    html = _do_humanr_group(worker, study).content.decode()

    code = re.search(r'id="completion-code">([^<]+)<', html).group(1)
    assert not any(part in code for part in public), "nothing public gives the code away"
    assert code not in link and code not in intro
    other = humanr_study(researcher)
    assert completion_code(other) != code, "each study has its own"
    assert "app.prolific.com/submissions/complete?cc=" + code in html
    assert participant_of(worker, study).completed_at is not None


def test_the_code_a_researcher_sets_is_the_one_shown(researcher):
    study = humanr_study(researcher, completion_code="MY-CODE-42")
    worker = browser()
    arrive(worker, study, "w1")

    html = _do_humanr_group(worker, study).content.decode()

    assert 'id="completion-code">MY-CODE-42<' in html


def test_thumb_gives_the_code_after_the_configured_number_of_images(make_study):
    study = thumb_study(
        make_study, settings={"completion_images": 2, "stage2": False}, extra_images=3
    )
    worker = browser()
    arrive(worker, study, "w1")
    shown = []
    for _ in range(3):
        page = next_page(worker, study)
        shown.append("completion-code" in page.content.decode())
        lease = page.context["assignment"]
        assert submit(worker, study, lease.token, form_for(lease.item)).status_code == 302

    finished = next_page(worker, study)
    assert shown == [False, False, True], "shown from the page after the second image on"
    assert participant_of(worker, study).completed_at is not None
    assert f'id="completion-code">{study.completion_code}<' in finished.content.decode()


def test_a_registered_annotator_is_never_shown_a_crowd_code(researcher, annotator):
    study = humanr_study(researcher)
    study.annotators.add(annotator)
    client = Client()
    client.force_login(annotator)

    html = _do_humanr_group(client, study).content.decode()

    assert "Group complete" in html and "completion-code" not in html


# ---------------------------------------------------------------------- 3. impersonation


def test_another_workers_id_from_a_fresh_browser_does_not_resume_them(researcher):
    study = vehicle_study(researcher, captions=3)
    victim = browser("198.51.100.5")
    arrive(victim, study, "victim-pid")
    victim_lease = next_page(victim, study).context["assignment"]

    attacker = browser("203.0.113.66")
    response = arrive(attacker, study, "victim-pid")

    assert response.status_code == 403
    assert "another browser" in response.content.decode()
    assert next_page(attacker, study).status_code == 404, "the attacker is nobody here"
    assert submit(attacker, study, victim_lease.token, {"rating": "1"}).status_code == 404
    assert not Judgment.objects.exists()
    victim_row = participant_of(victim, study)
    assert [flag["kind"] for flag in victim_row.flags] == ["foreign_browser"]
    assert CrowdRefusal.objects.get(reason="foreign_browser").participant_id == victim_row.pk
    # The real worker, in their own browser, carries on as before.
    assert arrive(victim, study, "victim-pid").status_code == 302
    assert next_page(victim, study).context["assignment"].token == victim_lease.token


def test_the_browser_cookie_is_signed_and_http_only(researcher):
    study = vehicle_study(researcher)
    client = browser()
    response = arrive(client, study, "w1")
    cookie = response.cookies["capeval_browser"]

    assert cookie["httponly"]
    # A forged (unsigned) cookie naming the worker's browser id is not believed.
    bound = participant_of(client, study).browser_id
    forger = browser("203.0.113.67")
    forger.cookies["capeval_browser"] = bound
    assert arrive(forger, study, "w1").status_code == 403


def test_two_ids_in_one_browser_are_flagged_and_never_check_their_own_thumb_stage1(
    make_study,
):
    study = thumb_study(make_study)
    client = browser()
    arrive(client, study, "first-id")
    page = next_page(client, study)
    lease = page.context["assignment"]
    assert lease.item.kind == "stage1"
    assert submit(client, study, lease.token, form_for(lease.item)).status_code == 302
    first_image = lease.item.image_id

    arrive(client, study, "second-id")
    second = participant_of(client, study)
    served = []
    while True:
        page = next_page(client, study)
        lease = page.context.get("assignment")
        if lease is None:
            break
        served.append((lease.item.kind, lease.item.image_id))
        assert submit(client, study, lease.token, form_for(lease.item)).status_code == 302

    assert ("stage2", first_image) not in served
    first = Participant.objects.get(study=study, external_id="first-id")
    assert [flag["kind"] for flag in first.flags] == ["shared_browser"]
    assert [flag["kind"] for flag in second.flags] == ["shared_browser"]


# ---------------------------------------------------------------------- 8. study id


def test_a_prolific_study_id_of_another_study_is_refused(researcher):
    study = vehicle_study(researcher, prolific_study_id="st-1")

    wrong = arrive(browser(), study, "w1", STUDY_ID="st-other")
    right = arrive(browser("198.51.100.77"), study, "w2", STUDY_ID="st-1")

    assert wrong.status_code == 403
    assert "another Prolific study" in wrong.content.decode()
    assert right.status_code == 302
    assert list(Participant.objects.values_list("external_id", flat=True)) == ["w2"]
    assert CrowdRefusal.objects.get().reason == "wrong_study_id"


# ---------------------------------------------------------------------- 9. digits


NOT_ASCII_THREE = ["²", "٣", "３", "𝟑", "³"]


@pytest.mark.parametrize("value", NOT_ASCII_THREE)
def test_vicr_refuses_digits_that_are_not_ascii_with_a_400_naming_the_field(researcher, value):
    study = vicr_study(researcher, seconds_before_submit=0)
    worker = browser()
    arrive(worker, study, "w1")
    lease = next_page(worker, study).context["assignment"]

    response = submit(worker, study, lease.token, {"rating": value})

    assert response.status_code == 400
    assert "Choose a rating from 1 to 5" in response.content.decode()
    assert not Judgment.objects.exists()


def post_first_humanr_trial(researcher, *, part: str, raw: str):
    """A crowd worker answers the first trial of a HUMANr group with these form values."""
    study = humanr_study(researcher)
    worker = browser()
    arrive(worker, study, "w1")
    page = next_page(worker, study)
    token = page.context["assignment"].token
    left = page.context["left_caption"].pk
    return submit(worker, study, token, {"part": part, "raw": raw, "left": left})


@pytest.mark.parametrize("value", [*NOT_ASCII_THREE, "④"])
def test_humanr_refuses_digits_that_are_not_ascii_with_a_400_naming_the_field(researcher, value):
    response = post_first_humanr_trial(researcher, part="0", raw=value)

    assert response.status_code == 400
    assert "Choose a value from 1" in response.content.decode()
    assert not Judgment.objects.exists()


def test_a_part_number_that_is_not_ascii_is_refused(researcher):
    response = post_first_humanr_trial(researcher, part="０", raw="3")

    assert response.status_code == 400
    assert not Judgment.objects.exists()


def test_the_study_page_gives_the_researcher_the_code_and_prolific_completion_url(researcher):
    study = vehicle_study(researcher)
    owner = Client()
    owner.force_login(researcher)

    page = owner.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert study.completion_code in page
    assert f"https://app.prolific.com/submissions/complete?cc={study.completion_code}" in page


def test_refusals_are_listed_in_the_admin_and_cannot_be_changed_or_deleted(researcher, make_user):
    study = vehicle_study(researcher, prolific_study_id="st-1")
    arrive(browser(), study, "w1", STUDY_ID="st-other")
    refusal = CrowdRefusal.objects.get()
    admin = Client()
    admin.force_login(make_user("root", staff=True))

    listing = admin.get(reverse("admin:annotation_crowdrefusal_changelist"))
    delete = admin.post(
        reverse("admin:annotation_crowdrefusal_delete", args=[refusal.pk]), {"post": "yes"}
    )

    assert listing.status_code == 200 and "wrong_study_id" in listing.content.decode()
    assert delete.status_code == 403
    assert CrowdRefusal.objects.filter(pk=refusal.pk).exists()
