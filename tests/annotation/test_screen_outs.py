"""Screen-outs (issue 28): a crowd worker who fails the mode's entry check is sent to the
study's screen-out code, recorded as screened out (a flag with the reason, judgments kept),
shown so in the dashboard, and can never come back for the full completion code.

Everything a worker does goes through the real views (Django's test client); the VICR
gates are played through the services' ``play`` helper (its minimum time needs the server's
clock moved), then the pages are read through the views.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Assignment, Judgment, Participant
from annotation.modes import get_mode
from annotation.modes.base import SCREEN_OUT_FLAG
from annotation.modes.humanr.protocol import reference_on_left
from annotation.services.assignments import assignment_next
from annotation.services.exports.datasheet import REDACTED, public_settings
from annotation.services.participants import crowd_link_token
from annotation.views.participate import BROWSER_COOKIE
from tests.annotation.test_catch_trials import Player, catch_study
from tests.factories.humanr import humanr_study
from tests.factories.vicr import far, play_block, vicr_study

pytestmark = pytest.mark.django_db

SCREEN_URL = "https://app.prolific.com/submissions/complete?cc=SCRN42"
FULL_URL = "https://app.prolific.com/submissions/complete?cc=FULL77"


def arrive(client, study, pid="PID-1"):
    response = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X"},
    )
    assert response.status_code == 302, response.content.decode()[:300]
    return Participant.objects.get(study=study, external_id=pid)


def answer_group(client, study, answer):
    """Answer every trial of the next group through the pages; the last response."""
    page = client.get(reverse("participate_next", args=[study.public_id]))
    lease = page.context["assignment"]
    trials = len(lease.item.spec["trials"])
    for part in range(trials):
        if part:
            page = client.get(reverse("participate_next", args=[study.public_id]))
            assert page.context["assignment"].pk == lease.pk
        on_left = reference_on_left(lease.item.spec["seed"], lease.pk, part)
        response = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {"part": part, "raw": answer(on_left), "left": page.context["left_caption"].pk},
            follow=True,  # the feedback is a page after a redirect (issue 42)
        )
        assert response.status_code in (200, 302), response.content.decode()[:400]
    return response


def careless(on_left):
    return 5  # "both equally": fails every attention check


def honest(on_left):
    return 2 if on_left else 8


def screened(participant) -> list[dict]:
    participant.refresh_from_db()
    return [flag for flag in participant.flags if flag.get("kind") == SCREEN_OUT_FLAG]


# ------------------------------------------------------------------------------ HUMANr


def test_failing_the_first_humanr_check_sends_the_worker_to_the_screen_out_code(client, researcher):
    study = humanr_study(
        researcher, prolific_completion_url=FULL_URL, prolific_screen_out_url=SCREEN_URL
    )
    worker = arrive(client, study)

    last = answer_group(client, study, careless)

    html = last.content.decode()
    assert "SCRN42" in html and f'href="{SCREEN_URL}"' in html
    assert "FULL77" not in html, "no full completion code for a failed entry check"
    assert "did not pass this study's entry check" in html
    # The code comes first on the page, above the mode's own content.
    assert html.index('id="completion"') < html.index("<h1")
    flags = screened(worker)
    assert len(flags) == 1 and flags[0]["detail"] == "failed the attention check of the first group"
    assert worker.completed_at is None
    judgments = Judgment.objects.filter(participant=worker)
    assert judgments.count() == 10, "every answer is kept"
    assert set(judgments.values_list("excluded", flat=True)) == {True}
    # Nothing more is served: the finished page shows the screen-out code again.
    page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.context.get("assignment") is None
    assert "SCRN42" in page.content.decode() and "FULL77" not in page.content.decode()
    assert Assignment.objects.filter(participant=worker).count() == 1


def test_a_screened_out_worker_cannot_come_back_for_the_full_code(client, researcher):
    study = humanr_study(
        researcher, prolific_completion_url=FULL_URL, prolific_screen_out_url=SCREEN_URL
    )
    worker = arrive(client, study)
    answer_group(client, study, careless)
    browser = client.cookies[BROWSER_COOKIE].value

    # The same browser with a new session (the session cookie dropped), same worker id.
    again = Client()
    again.cookies[BROWSER_COOKIE] = browser
    assert arrive(again, study).pk == worker.pk, "the same participant, not a new one"
    page = again.get(reverse("participate_next", args=[study.public_id]))
    html = page.content.decode()
    assert page.context.get("assignment") is None
    assert "SCRN42" in html and "FULL77" not in html
    # Another browser with the same worker id is refused and shown no code at all.
    stranger = Client()
    refused = stranger.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": "PID-1", "STUDY_ID": "S", "SESSION_ID": "Y"},
    )
    assert refused.status_code == 403
    assert "FULL77" not in refused.content.decode() and "SCRN42" not in refused.content.decode()
    worker.refresh_from_db()
    assert worker.completed_at is None
    assert len(screened(worker)) == 1


def test_a_screened_out_worker_cannot_earn_the_full_code_by_submitting_more(client, researcher):
    study = humanr_study(
        researcher, prolific_completion_url=FULL_URL, prolific_screen_out_url=SCREEN_URL
    )
    worker = arrive(client, study)
    answer_group(client, study, careless)
    lease = Assignment.objects.get(participant=worker)

    # The stored last answer sent again, an answer past the group's end, a forged token.
    repeat = client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]),
        {"part": 9, "raw": 2},
        follow=True,
    )
    beyond = client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]),
        {"part": 10, "raw": 2},
    )
    forged = client.post(
        reverse("participate_submit", args=[study.public_id, "x" * 32]), {"part": 0, "raw": 2}
    )

    for response in (repeat, beyond, forged):
        assert "FULL77" not in response.content.decode()
    assert forged.status_code == 404 and beyond.status_code >= 400
    assert assignment_next(participant=worker) is None
    worker.refresh_from_db()
    assert worker.completed_at is None
    assert Judgment.objects.filter(participant=worker).count() == 10, "nothing more stored"


def test_a_group_answered_after_a_screen_out_never_stamps_completion(client, researcher):
    """A lease opened before the screen-out (a second tab) and answered after it, honestly,
    still earns no completion code: the service refuses completion to a screened worker."""
    study = humanr_study(
        researcher, prolific_completion_url=FULL_URL, prolific_screen_out_url=SCREEN_URL
    )
    worker = arrive(client, study)
    page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.context["assignment"] is not None
    # The screen-out recorded meanwhile (as another request's submission would).
    Participant.objects.filter(pk=worker.pk).update(
        flags=[{"kind": SCREEN_OUT_FLAG, "detail": "failed the entry check", "at": "now"}]
    )
    lease = page.context["assignment"]
    for part in range(len(lease.item.spec["trials"])):
        on_left = reference_on_left(lease.item.spec["seed"], lease.pk, part)
        response = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {"part": part, "raw": honest(on_left)},
            follow=True,  # the feedback is a page after a redirect (issue 42)
        )
    worker.refresh_from_db()
    assert worker.completed_at is None
    assert "FULL77" not in response.content.decode()
    assert "SCRN42" in response.content.decode()


def test_without_a_screen_out_code_a_failed_humanr_group_earns_no_code(client, researcher):
    # Issue 45, row 5: before, the paper's rule gave the code after every group, a failed
    # check included; now the excluded group earns nothing and the page says why.
    study = humanr_study(researcher, prolific_completion_url=FULL_URL)
    worker = arrive(client, study)

    last = answer_group(client, study, careless)

    assert "FULL77" not in last.content.decode()
    assert "attention check failed in 1 of your 1 group" in last.content.decode()
    assert screened(worker) == []
    worker.refresh_from_db()
    assert worker.completed_at is None


def test_passing_the_first_check_earns_the_full_code(client, researcher):
    study = humanr_study(
        researcher, prolific_completion_url=FULL_URL, prolific_screen_out_url=SCREEN_URL
    )
    worker = arrive(client, study)

    last = answer_group(client, study, honest)

    assert "FULL77" in last.content.decode() and "SCRN42" not in last.content.decode()
    assert screened(worker) == []


def test_the_dashboard_says_who_was_screened_out_and_why(client, researcher):
    study = humanr_study(researcher, prolific_screen_out_url=SCREEN_URL)
    worker = Client()
    arrive(worker, study)
    answer_group(worker, study, careless)

    client.force_login(researcher)
    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert "screened out: failed the attention check of the first group" in html


# ------------------------------------------------------------------------------ VICR


def test_a_vicr_player_the_gates_turn_away_is_screened_out(client, researcher):
    study = vicr_study(researcher, screen_out_code="VSCREEN9", completion_code="VFULL")
    worker = arrive(client, study)
    play_block(worker, 10, far)  # tutorial failed: probation
    play_block(worker, 20, far)  # first attempt failed
    play_block(worker, 20, far)  # last attempt failed: excluded
    assert worker.status == "excluded"

    page = client.get(reverse("participate_next", args=[study.public_id]))

    html = page.content.decode()
    assert "VSCREEN9" in html and "VFULL" not in html
    flags = screened(worker)
    assert len(flags) == 1 and flags[0]["detail"] == "failed probation (2 attempts)"
    assert Judgment.objects.filter(participant=worker).count() == 50


def test_without_a_screen_out_code_the_page_asks_for_a_return(client, researcher):
    study = vicr_study(researcher)
    worker = arrive(client, study)
    play_block(worker, 10, far)
    play_block(worker, 20, far)
    play_block(worker, 20, far)

    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()

    assert "did not pass this study's entry check" in html
    assert "return your submission" in html
    assert study.completion_code not in html
    assert len(screened(worker)) == 1, "recorded even when the study pays no screen-out"


def test_a_registered_annotator_is_never_screened_out(researcher, annotator):
    study = vicr_study(researcher, screen_out_code="VSCREEN9")
    study.annotators.add(annotator)
    participant = Participant.objects.create(
        study=study, user=annotator, source=Participant.Source.ACCOUNT
    )
    play_block(participant, 10, far)
    play_block(participant, 20, far)
    play_block(participant, 20, far)
    assert participant.status == "excluded"
    assert screened(participant) == []


# ------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/submissions/complete?cc=X",
        "https://evil.example\\@app.prolific.com/submissions/complete?cc=X",
        "https://user@app.prolific.com/?cc=X",
        "http://app.prolific.com/submissions/complete?cc=X",
    ],
)
def test_a_screen_out_url_off_prolific_is_refused(url):
    with pytest.raises(ServiceError) as refused:
        get_mode("humanr").clean_settings({"prolific_screen_out_url": url})
    assert refused.value.field == "prolific_screen_out_url"


def test_the_screen_out_code_comes_from_the_setting_or_the_url():
    mode = get_mode("humanr")
    from_url = mode.clean_settings({"prolific_screen_out_url": SCREEN_URL})
    typed = mode.clean_settings({"screen_out_code": "TYPED", "prolific_screen_out_url": SCREEN_URL})
    config = mode.settings_class
    assert config(**from_url).screen_out_code_for() == "SCRN42"
    assert config(**typed).screen_out_code_for() == "TYPED"
    assert not config().screens_out and config().screen_out_code_for() == ""


def test_exports_never_show_the_screen_out_code():
    public = public_settings({"screen_out_code": "TYPED", "prolific_screen_out_url": SCREEN_URL})
    assert public["screen_out_code"] == REDACTED
    assert "SCRN42" not in public["prolific_screen_out_url"]


# ------------------------------------------------------------------------------ catch trials


@pytest.mark.parametrize("pays", [True, False])
def test_a_crowd_worker_caught_by_catch_trials_is_screened_out_when_the_study_pays(
    researcher, pays
):
    settings = {"screen_out_code": "CSCREEN"} if pays else {}
    study = catch_study(
        researcher, catch_rate=0.5, catch_min_seen=3, catch_max_missed_share=0.5, **settings
    )
    bot = Player(study, "twos")

    bot.play(lambda item: 2)

    row = bot.participant
    row.refresh_from_db()
    kinds = [flag["kind"] for flag in row.flags]
    assert "catch_failed" in kinds
    assert (SCREEN_OUT_FLAG in kinds) is pays
    assert row.completed_at is None
    # Nothing more once caught, paid screen-out or not: every further answer would be
    # excluded.
    assert assignment_next(participant=row) is None
