"""Participant pages through Django's test client (issue 11, annotators): every missing
THumB score at once with the answers kept, a stage-2 review that must confirm each caption,
VICR feedback that repeats the pair and says what the consensus rests on, HUMANr's own
message and A/B wording, end pages that lead somewhere, and friendly pages with meaningful
statuses for closed studies and refused crowd entries (never Django's DEBUG pages).
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Caption, Judgment
from annotation.services.assignments import assignment_next
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_close
from tests.factories.humanr import do_group, humanr_study
from tests.factories.thumb import CAPTIONS, member, thumb_study
from tests.factories.thumb import make_annotator as make_annotator  # noqa: F401 (fixture)
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

MINUS = "\u2212"


def submit_url(study, lease):
    return reverse("participate_submit", args=[study.public_id, lease.token])


def next_url(study):
    return reverse("participate_next", args=[study.public_id])


def arrive(client, study, pid, **extra):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X", **extra},
    )


# ---------------------------------------------------------------------- THumB


def test_an_empty_thumb_page_names_every_missing_score_at_once(client, make_study, annotator):
    # "dog" has two caption texts: an empty page misses 2 x 2 scores.
    study = thumb_study(make_study, captions={"dog": CAPTIONS["dog"]})
    member(study, annotator)
    client.force_login(annotator)
    client.get(next_url(study))
    lease = Assignment.objects.get()

    response = client.post(submit_url(study, lease), {"part": "0"})

    assert response.status_code == 400
    html = response.content.decode()
    expected = {f"{key}-{field}" for key in ("c1", "c2") for field in ("precision", "recall")}
    listed = {problem["field"] for problem in response.context["field_errors"]}
    assert listed == expected
    assert "4 answers are missing" in html
    for field in expected:
        assert f'id="{field}-err"' in html, f"{field}: its error is shown by the field"
        assert f'href="#{field}"' in html, f"{field}: the summary links to it"
    assert not Judgment.objects.exists()


def test_a_refused_thumb_page_keeps_the_answers_without_javascript(client, make_study, annotator):
    study = thumb_study(make_study, captions={"dog": CAPTIONS["dog"]})
    member(study, annotator)
    client.force_login(annotator)
    client.get(next_url(study))
    lease = Assignment.objects.get()
    body = {
        "part": "0",
        "c1-precision": "4",
        "c1-recall": "2",
        "c1-fluency": "broken_sentence",
        "c1-amount-broken_sentence": "1.5",
        "c2-precision": "5",
        "c2-conciseness": "0.5",
    }

    response = client.post(submit_url(study, lease), body)

    assert response.status_code == 400
    html = response.content.decode()
    assert [p["field"] for p in response.context["field_errors"]] == ["c2-recall"]
    for name, value in [("c1-precision", "4"), ("c1-recall", "2"), ("c2-precision", "5")]:
        assert re.search(rf'name="{name}" value="{value}" checked', html), name
    assert re.search(r'name="c2-conciseness" value="0.5" checked', html)
    assert re.search(r'name="c1-fluency" value="broken_sentence"[^>]* checked', html)
    assert 'id="c1-amount-broken_sentence" name="c1-amount-broken_sentence" min' in html
    assert 'value="1.5"' in html


def review_lease(client, study, make_annotator):
    first = member(study, make_annotator("ann", native=True))
    lease = assignment_next(participant=first)
    body = {"part": "0"}
    for group in lease.item.spec["groups"]:
        body |= {f"{group['key']}-precision": "4", f"{group['key']}-recall": "3"}
    client.force_login(first.user)
    assert client.post(submit_url(study, lease), body).status_code == 302
    reviewer = make_annotator("bob", native=True)
    member(study, reviewer)
    client.force_login(reviewer)
    page = client.get(next_url(study))
    return page.context["assignment"], body


def test_a_stage2_review_is_refused_until_every_caption_is_confirmed(
    client, make_study, make_annotator
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    review, body = review_lease(client, study, make_annotator)
    assert review.item.kind == "stage2"
    keys = [group["key"] for group in review.item.spec["groups"]]

    # Clicking straight through: the pre-filled scores, nothing confirmed.
    refused = client.post(submit_url(study, review), body)
    assert refused.status_code == 400
    assert {p["field"] for p in refused.context["field_errors"]} == {f"{k}-confirm" for k in keys}
    assert "I checked this caption" in refused.content.decode()
    # One caption confirmed is not enough.
    partly = client.post(submit_url(study, review), {**body, f"{keys[0]}-confirm": "yes"})
    assert partly.status_code == 400
    assert [p["field"] for p in partly.context["field_errors"]] == [f"{keys[1]}-confirm"]
    assert not Judgment.objects.filter(item__kind="stage2").exists()

    confirmed = {**body, **{f"{k}-confirm": "yes" for k in keys}}
    assert client.post(submit_url(study, review), confirmed).status_code == 302
    assert Judgment.objects.filter(item__kind="stage2").count() == 1


def test_the_registered_annotators_end_page_leads_on(client, make_study, annotator):
    study = thumb_study(make_study, captions={"dog": CAPTIONS["dog"]}, settings={"stage2": False})
    member(study, annotator)
    client.force_login(annotator)
    client.get(next_url(study))
    lease = Assignment.objects.get()
    body = {"part": "0", "c1-precision": "4", "c1-recall": "3"}
    body |= {"c2-precision": "4", "c2-recall": "3"}
    client.post(submit_url(study, lease), body)

    finished = client.get(next_url(study))

    html = finished.content.decode()
    assert "Thank you" in html
    assert f'href="{reverse("home")}" id="finished-home"' in html
    assert f'href="{next_url(study)}" id="finished-more"' in html


# ---------------------------------------------------------------------- VICR


def rate(client, study, rating):
    client.get(next_url(study))
    lease = Assignment.objects.get(status="open")
    Assignment.objects.filter(pk=lease.pk).update(served_at=timezone.now() - timedelta(seconds=5))
    # The feedback is a page of its own after a redirect (issue 42): follow it.
    return client.post(submit_url(study, lease), {"rating": str(rating)}, follow=True), lease


def test_vicr_game_feedback_repeats_the_pair_and_says_what_the_consensus_rests_on(
    client, researcher
):
    study = vicr_study(researcher, game=2, primes=(4, 4), tutorial_pairs=1, tutorial_pass=0)
    arrive(client, study, "W1")
    rate(client, study, 3)  # the tutorial pair; 0 points pass
    response, lease = rate(client, study, 2)

    html = response.content.decode()
    caption = lease.item.spec["caption_id"]
    shown = Caption.objects.select_related("image").get(pk=caption)
    assert f"“{shown.text}”" in html, "the caption is repeated"
    assert f'alt="{shown.image.alt_text}"' in html, "the image is repeated"
    # 2 against a consensus of 4 from two primes is -1 point, with a true minus sign.
    assert f'<span aria-hidden="true">{MINUS}1</span>' in html
    assert '<span class="visually-hidden">minus 1</span>' in html
    assert ">-1<" not in html and "-1 point" not in html
    assert "0 player ratings" not in html and "raters so far" not in html
    assert (
        "No other player has rated this pair yet: the consensus rests only on 2 starting "
        "ratings made before any player rated it." in html
    )


def test_vicr_game_feedback_after_another_player_counts_them(client, researcher):
    study = vicr_study(researcher, game=1, primes=(4, 4), tutorial_pairs=1, tutorial_pass=0)
    other = Client()
    arrive(other, study, "W0")
    rate(other, study, 3)
    rate(other, study, 4)
    arrive(client, study, "W1")
    rate(client, study, 3)
    response, _ = rate(client, study, 4)

    html = response.content.decode()
    assert "The consensus rests on 1 earlier player rating and 1 starting rating." in html


def test_vicr_game_progress_counts_towards_the_code(client, researcher):
    study = vicr_study(researcher, tutorial_pairs=1, tutorial_pass=0, completion_game_ratings=7)
    arrive(client, study, "W1")
    rate(client, study, 3)

    html = client.get(next_url(study)).content.decode()

    assert "Game: 0 ratings" in html and "the completion code after 7" in html
    assert '<progress class="vicr-bar" max="7" value="0"' in html


# ---------------------------------------------------------------------- HUMANr


def test_humanr_trial_page_uses_its_own_message_and_a_b_words(client, researcher):
    study = humanr_study(researcher)
    arrive(client, study, "P1")

    html = client.get(next_url(study)).content.decode()

    form = re.search(r'<form method="post"[^>]*class="hr-form"[^>]*>', html).group(0)
    assert "novalidate" in form, "the browser's bubble would hide the page's own message"
    assert 'id="hr-missing" role="alert"' in html
    assert "Caption A</h2>" in html and "Caption B</h2>" in html
    assert 'aria-label="1: only caption A matches"' in html
    assert 'aria-label="9: only caption B matches"' in html
    assert "left" not in re.sub(r"<[^>]+>", " ", html).lower()


def test_do_another_group_is_offered_only_when_there_is_one(client, researcher):
    # 12 images: a group of 10 trials meets most of them, and a worker never meets an image
    # twice, so nothing is left after one group.
    small = humanr_study(researcher, images=12)
    arrive(client, small, "P1")
    worker = small.participants.get(external_id="P1")
    lease = do_group(worker, parts=9)
    last = client.get(next_url(small))
    response = client.post(
        submit_url(small, lease),
        {"part": 9, "raw": 3, "left": last.context["left_caption"].pk},
        follow=True,
    )
    html = response.content.decode()
    assert "Group complete" in html
    assert 'id="hr-another"' not in html
    assert "There is no further group for you" in html
    assert assignment_next(participant=worker) is None, "the page told the truth"


def test_do_another_group_leads_to_a_group_when_one_is_left(client, researcher):
    large = humanr_study(researcher, images=60, systems=("GIT",))
    arrive(client, large, "P2")
    worker = large.participants.get(external_id="P2")
    lease = do_group(worker, parts=9)
    last = client.get(next_url(large))
    response = client.post(
        submit_url(large, lease),
        {"part": 9, "raw": 3, "left": last.context["left_caption"].pk},
        follow=True,
    )
    html = response.content.decode()
    assert f'href="{next_url(large)}" id="hr-another"' in html
    assert client.get(next_url(large)).context["assignment"] is not None


# ---------------------------------------------------------------------- closed and refused


@pytest.fixture
def debug(settings):
    """DEBUG on, as in `make demo`: an Http404 would show Django's technical page."""
    settings.DEBUG = True


def test_a_closed_study_gives_its_crowd_worker_a_410_page_with_what_to_do(
    client, researcher, debug
):
    study = humanr_study(researcher)
    arrive(client, study, "P1")
    assert client.get(next_url(study)).status_code == 200
    study_close(study=study)

    for response in (
        client.get(next_url(study)),
        client.get(reverse("participate_intro", args=[study.public_id])),
    ):
        html = response.content.decode()
        assert response.status_code == 410
        assert "This study is closed" in html and "return your submission" in html
        assert "URLconf" not in html and "Traceback" not in html
        assert 'href="/static/capeval/capeval.css"' in html or "capeval.css" in html


def test_a_closed_study_tells_strangers_nothing(client, researcher, annotator, debug):
    study = humanr_study(researcher)
    study_close(study=study)
    client.force_login(annotator)

    response = client.get(next_url(study))

    assert response.status_code == 404
    html = response.content.decode()
    assert "HUMANr test" not in html and "closed" not in html
    assert "URLconf" not in html


def test_a_closed_studys_link_answers_410_with_the_way_back(client, researcher, debug):
    study = humanr_study(researcher)
    study_close(study=study)

    response = arrive(client, study, "P9")

    assert response.status_code == 410
    html = response.content.decode()
    assert "not open" in html and "return your submission" in html


def test_a_refused_mturk_arrival_is_told_to_return_the_hit(client, researcher, debug):
    study = humanr_study(researcher, crowd_arrivals_per_address_per_hour=1)
    params = {"assignmentId": "A1", "hitId": "H1", "turkSubmitTo": "https://www.mturk.com"}
    url = reverse("crowd_entry", args=[crowd_link_token(study)])
    assert client.get(url, {"workerId": "M1", **params}).status_code == 302
    response = Client().get(url, {"workerId": "M2", **params})

    assert response.status_code == 429
    html = response.content.decode()
    assert "return the HIT" in html and "try again later" in html


def test_a_thumb_mturk_worker_ends_on_the_form_back_to_mturk(client, make_study):
    study = thumb_study(
        make_study,
        captions={"dog": CAPTIONS["dog"]},
        settings={"completion_images": 1, "stage2": False},
    )
    client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {
            "workerId": "M1",
            "assignmentId": "ASSIGN-1",
            "hitId": "H1",
            "turkSubmitTo": "https://www.mturk.com",
        },
    )
    client.get(next_url(study))
    lease = Assignment.objects.get()
    body = {"part": "0", "c1-precision": "4", "c1-recall": "3"}
    body |= {"c2-precision": "4", "c2-recall": "3"}
    assert client.post(submit_url(study, lease), body).status_code == 302

    html = client.get(next_url(study)).content.decode()

    assert "Thank you" in html
    assert 'action="https://www.mturk.com/mturk/externalSubmit"' in html
    assert 'name="assignmentId" value="ASSIGN-1"' in html
    assert "by submitting the task to MTurk with the button at the top of this page" in html
