"""Who rates (issue 43): the vision question, asked once with consent by a mode that asks it,
through the real views; the crowd link's group; the simulated crowd's declarations; and
the protection of the answer (no researcher's page, no generic export shows it).

No test names a mode that asks: the vehicle is made to ask by
setting ``asks_vision`` on its class for one test (monkeypatch puts it back)."""

import csv
import io
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Judgment, Participant
from annotation.modes import get_mode
from annotation.services.exports.files import export_file
from annotation.services.participants import crowd_link_token
from annotation.services.simulation import crowd_simulate
from tests.factories.core import caption_study, vehicle_study
from tests.factories.vehicle import NAME as VEHICLE

pytestmark = pytest.mark.django_db

#: Every way a page could show a participant's declared vision or screen-reader use.
VISION_WORDS = ("low_vision", "low vision", "blind", "screen_reader", "screen reader")


@pytest.fixture
def asking(monkeypatch):
    """The vehicle mode asks the vision question for this test."""
    monkeypatch.setattr(type(get_mode(VEHICLE)), "asks_vision", True)


def arrive(client, study, pid="w-1", **params):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "st-1", "SESSION_ID": f"se-{pid}", **params},
    )


def participant_of(client, study) -> Participant:
    return Participant.objects.get(pk=client.session[f"capeval.participant.{study.pk}"])


def vision_url(study) -> str:
    return reverse("participate_vision", args=[study.public_id])


def next_url(study) -> str:
    return reverse("participate_next", args=[study.public_id])


def declare(client, study, **data):
    return client.post(vision_url(study), data)


GOOD = {"vision": "low_vision", "screen_reader": "yes", "consent": "yes"}


def test_the_question_comes_before_the_first_item_and_is_answered_once(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study)
    participant = participant_of(client, study)

    first = client.get(next_url(study))
    page = client.get(vision_url(study))
    # Nothing was served before the answer.
    assert not Assignment.objects.filter(participant=participant).exists()
    saved = declare(client, study, **GOOD)
    item = client.get(next_url(study))
    again = client.get(vision_url(study))

    assert first.status_code == 302 and first.url == vision_url(study)
    html = page.content.decode()
    assert page.status_code == 200
    assert "never shown an image" in html and "reported apart" in html
    assert "never exported with your worker id" in html
    assert saved.status_code == 302 and saved.url == next_url(study)
    participant.refresh_from_db()
    assert (participant.vision, participant.screen_reader) == ("low_vision", True)
    assert participant.vision_group == "blv"
    assert item.status_code == 200 and "Rate a caption" in item.content.decode()
    # Asked once: the question's address now goes on to the items.
    assert again.status_code == 302 and again.url == next_url(study)


def test_a_second_declaration_is_refused_and_changes_nothing(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study)
    declare(client, study, **GOOD)

    second = declare(client, study, vision="sighted", screen_reader="no", consent="yes")

    assert second.status_code == 409
    assert "already answered" in second.content.decode()
    participant = participant_of(client, study)
    assert (participant.vision, participant.screen_reader) == ("low_vision", True)


def test_bad_values_are_named_beside_their_fields_and_nothing_is_stored(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study)

    refused = declare(client, study, vision="purple", screen_reader="maybe")

    html = refused.content.decode()
    assert refused.status_code == 400
    assert "Choose blind, low vision or sighted." in html
    assert "Choose whether you use a screen reader." in html
    assert "Tick the box to agree" in html
    # Each error is linked to its field and announced.
    assert 'role="alert"' in html
    assert 'aria-describedby="vision-help vision-error"' in html
    assert 'aria-describedby="screen_reader-error"' in html
    assert "consent-help consent-error" in html
    assert html.count('aria-invalid="true"') == 3 + 2 + 1
    participant = participant_of(client, study)
    assert (participant.vision, participant.screen_reader) == ("", None)


def test_without_consent_nothing_is_stored(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study)

    refused = declare(client, study, vision="blind", screen_reader="yes")
    html = refused.content.decode()

    assert refused.status_code == 400
    assert "Tick the box to agree" in html
    # The answers given are kept on the form, only consent is marked.
    assert html.count('aria-invalid="true"') == 1
    assert 'value="blind" required checked' in html
    participant = participant_of(client, study)
    assert (participant.vision, participant.screen_reader) == ("", None)
    assert client.get(next_url(study)).url == vision_url(study)


def test_the_blv_link_refuses_a_sighted_answer_and_serves_nothing(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study, group="blv")
    participant = participant_of(client, study)

    refused = declare(client, study, vision="sighted", screen_reader="no", consent="yes")
    after = client.get(next_url(study))

    assert participant.link_group == "blv"
    html = refused.content.decode()
    assert refused.status_code == 403
    assert "for blind and low-vision participants only" in html
    assert "return your submission" in html  # the way out on Prolific
    assert "unavailable-next" not in html  # no link on to items
    participant.refresh_from_db()
    assert (participant.vision, participant.screen_reader) == ("", None)
    assert after.status_code == 302 and after.url == vision_url(study)
    assert not Assignment.objects.filter(participant=participant).exists()


def test_the_sighted_link_refuses_a_blind_answer(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study, group="sighted")

    refused = declare(client, study, vision="blind", screen_reader="yes", consent="yes")

    assert refused.status_code == 403
    assert "for sighted participants only" in refused.content.decode()
    assert participant_of(client, study).vision == ""


def test_the_blv_link_admits_a_low_vision_answer(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study, group=" BLV ")

    saved = declare(client, study, vision="low_vision", screen_reader="no", consent="yes")

    assert saved.status_code == 302
    participant = participant_of(client, study)
    assert (participant.link_group, participant.vision_group) == ("blv", "blv")
    assert participant.screen_reader is False


def test_a_link_with_an_unknown_group_admits_nobody(client, researcher):
    study = vehicle_study(researcher, captions=2)

    refused = arrive(client, study, group="everyone")

    assert refused.status_code == 400
    assert "group=blv or group=sighted" in refused.content.decode()
    assert not Participant.objects.filter(study=study).exists()


def test_a_study_whose_mode_does_not_ask_never_asks(client, researcher):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study, group="blv")

    item = client.get(next_url(study))
    question = client.get(vision_url(study))
    posted = declare(client, study, **GOOD)

    assert item.status_code == 200 and "Rate a caption" in item.content.decode()
    assert question.status_code == 302 and question.url == next_url(study)
    assert posted.status_code == 409
    assert participant_of(client, study).vision == ""


def test_a_stranger_cannot_answer_for_anyone(researcher, asking):
    study = vehicle_study(researcher, captions=2)

    answer = Client().post(vision_url(study), GOOD)

    assert answer.status_code == 404
    assert not Participant.objects.filter(study=study).exists()


def test_researchers_pages_and_exports_never_show_a_participants_vision(
    client, researcher, other_researcher, asking, tmp_path
):
    study = vehicle_study(researcher, captions=2, target=2)
    study.members.add(other_researcher)
    for number, answer in enumerate(("blind", "low_vision")):
        worker = Client(REMOTE_ADDR=f"198.51.100.{number + 1}")
        arrive(worker, study, pid=f"w-{number}")
        declare(worker, study, vision=answer, screen_reader="yes", consent="yes")
        worker.get(next_url(study))
        token = Assignment.objects.get(participant=participant_of(worker, study)).token
        worker.post(reverse("participate_submit", args=[study.public_id, token]), {"rating": 3})
    assert Judgment.objects.filter(study=study).count() == 2
    assert set(Participant.objects.values_list("vision", flat=True)) == {"blind", "low_vision"}

    pages = ["study_detail", "study_dashboard", "study_items", "study_crowd_review"]
    # The API's reads of the same things (the data browser's, the crowd panel and review).
    pages += ["api_study_items", "api_study_judgments", "api_study_people"]
    pages += ["api_study_crowd"]
    owner_only = {"study_crowd_review", "api_study_crowd"}
    for user in (other_researcher, researcher):
        client.force_login(user)
        for name in pages:
            response = client.get(reverse(name, args=[study.pk]))
            if response.status_code in (403, 404):  # a page only the owner sees
                assert user == other_researcher and name in owner_only, name
                continue
            assert response.status_code == 200, (name, response.status_code)
            html = response.content.decode().lower()
            # The crowd panel names the groups of its per-group links: words about the
            # links, not about anyone (test_mode_context checks the links).
            html = re.sub(r"study url for [\w -]+ raters only", "", html)
            for word in VISION_WORDS:
                assert word not in html, (user.username, name, word)

    # The generic tables, with raw ids as only the owner may ask: no vision column or cell.
    for table in ("participants", "judgments"):
        for raw_ids in (False, True):
            path = tmp_path / f"{table}-{raw_ids}.csv"
            export_file(study=study, path=path, export_format="csv", table=table, raw_ids=raw_ids)
            rows = list(csv.DictReader(io.StringIO(path.read_text())))
            assert len(rows) == 2
            cells = ";".join([*rows[0], *(value or "" for row in rows for value in row.values())])
            sheet = path.with_name(f"{path.stem}.datasheet.json").read_text()
            for word in VISION_WORDS:
                assert word not in cells.lower(), (table, raw_ids, word)
                assert word not in sheet.lower(), (table, raw_ids, word)


def test_the_simulated_crowd_declares_through_the_service(researcher, monkeypatch):
    mode_class = type(get_mode(VEHICLE))
    monkeypatch.setattr(mode_class, "asks_vision", True)
    # Half the crowd blind (the seeded bias's sign), so both groups are present.
    monkeypatch.setattr(
        mode_class,
        "simulated_vision",
        lambda self, worker: "blind" if worker.bias < 0 else "sighted",
    )
    study = caption_study(researcher, VEHICLE, captions=4, target=2)

    summary = crowd_simulate(study=study, workers=6, seed=7)

    participants = list(Participant.objects.filter(study=study))
    assert len(participants) == 6 and summary.judgments > 0
    declared = {(p.vision, p.screen_reader) for p in participants}
    assert declared == {("blind", True), ("sighted", False)}


def test_the_simulated_crowd_of_a_mode_that_does_not_ask_declares_nothing(researcher):
    study = caption_study(researcher, VEHICLE, captions=2, target=1)

    crowd_simulate(study=study, workers=2, seed=3)

    assert set(Participant.objects.values_list("vision", "screen_reader")) == {("", None)}


def test_a_returning_worker_keeps_the_group_of_the_first_link(client, researcher, asking):
    study = vehicle_study(researcher, captions=2)
    arrive(client, study, group="blv")

    arrive(client, study, group="sighted")  # the same browser, another group's link
    refused = declare(client, study, vision="sighted", screen_reader="no", consent="yes")

    assert participant_of(client, study).link_group == "blv"
    assert refused.status_code == 403
    assert participant_of(client, study).vision == ""


def test_a_registered_annotator_is_asked_too(client, researcher, annotator, asking):
    study = vehicle_study(researcher, captions=2)
    study.annotators.add(annotator)
    client.force_login(annotator)

    first = client.get(next_url(study))
    saved = declare(client, study, vision="sighted", screen_reader="no", consent="yes")
    item = client.get(next_url(study))

    assert first.status_code == 302 and first.url == vision_url(study)
    assert saved.status_code == 302
    participant = Participant.objects.get(study=study, user=annotator)
    assert (participant.vision, participant.screen_reader, participant.link_group) == (
        "sighted",
        False,
        "",
    )
    assert item.status_code == 200 and "Rate a caption" in item.content.decode()


def test_the_admin_neither_shows_nor_edits_a_participants_vision(client, researcher, make_user):
    study = vehicle_study(researcher, captions=1)
    worker = Client()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(get_mode(VEHICLE)), "asks_vision", True)
        arrive(worker, study, group="blv")
        declare(worker, study, vision="low_vision", screen_reader="yes", consent="yes")
    participant = participant_of(worker, study)
    client.force_login(make_user("ada", staff=True))
    url = reverse("admin:annotation_participant_change", args=[participant.pk])

    html = client.get(url).content.decode().lower()

    for word in VISION_WORDS:
        assert word not in html, word
    assert participant.vision == "low_vision"
