"""The study's crowd panel in the API, and a whole study run through the API alone (issue
46, row 4).

A researcher who drives CapEval from a script (HTTP Basic auth, no browser) must learn what
the study page's "Crowd workers" panel shows: the crowd link, the Prolific study URL and
completion URL, the completion codes (the failed-check and screen-out ones too) and MTurk's
ExternalQuestion. ``GET /api/studies/<id>/crowd/`` answers it for the study's owner and
members; anyone else gets the 404 a missing study gets.

The whole-study test talks to the live server over HTTP only: the researcher through the
API with Basic auth, the crowd workers through the crowd link the API gave, with their own
cookie jars, as Prolific sends them.
"""

import base64
import csv
import html
import io
import json
import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.urls import reverse
from PIL import Image as PILImage
from rest_framework.test import APIClient

from annotation.models import Judgment, Participant, Study
from tests.factories.core import vehicle_study
from tests.factories.vehicle import NAME as VEHICLE

pytestmark = pytest.mark.django_db(transaction=True)

CAPTIONS = (
    "image,system,caption\n"
    "a.png,base,A red square on a plain ground.\n"
    "a.png,ours,A small red picture with no detail.\n"
    "b.png,base,A green square on a plain ground.\n"
    "b.png,ours,A small green picture with no detail.\n"
)

#: The worker page's form: its action and CSRF token (Django's hidden field).
FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
EARNED = re.compile(r'id="completion-code">([^<]+)<')


def basic(user) -> str:
    return "Basic " + base64.b64encode(f"{user.username}:pw-{user.username}".encode()).decode()


def png(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 6), color).save(buffer, "PNG")
    return buffer.getvalue()


def crowd_panel(client: APIClient, study_id: int, user):
    return client.get(f"/api/studies/{study_id}/crowd/", HTTP_AUTHORIZATION=basic(user))


def test_the_crowd_panel_answers_the_owner_with_link_urls_codes_and_xml(researcher):
    study = vehicle_study(
        researcher,
        captions=2,
        failed_check_code="FAILEDCHK",
        screen_out_code="SCREENOUT",
        prolific_study_id="PSTUDY1",
    )
    answer = crowd_panel(APIClient(), study.pk, researcher)
    assert answer.status_code == 200, answer.content[:300]
    panel = answer.json()
    link = panel["crowd_link"]
    # The same link the study page shows: the signed entry path on this server.
    page = APIClient()
    page.force_login(researcher)
    shown = page.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert f'id="crowd-link" type="text" readonly value="{link}"' in shown
    assert link.startswith("http://testserver/p/")
    query = parse_qs(urlsplit(panel["prolific_study_url"]).query)
    assert panel["prolific_study_url"].startswith(link + "?")
    assert query == {
        "PROLIFIC_PID": ["{{%PROLIFIC_PID%}}"],
        "STUDY_ID": ["{{%STUDY_ID%}}"],
        "SESSION_ID": ["{{%SESSION_ID%}}"],
    }
    stored = Study.objects.get(pk=study.pk)
    assert panel["completion_code"] == stored.completion_code
    assert panel["prolific_completion_url"] == (
        f"https://app.prolific.com/submissions/complete?cc={stored.completion_code}"
    )
    assert panel["failed_check_code"] == "FAILEDCHK"
    assert panel["failed_check_url"].endswith("?cc=FAILEDCHK")
    assert panel["screen_out_code"] == "SCREENOUT"
    assert panel["prolific_study_id"] == "PSTUDY1"
    assert f"<ExternalURL>{link}</ExternalURL>" in panel["mturk_external_question"]
    assert panel["status"] == "live" and panel["crowd_link_expired"] is False
    assert panel["crowd_link_expires_at"]


def test_a_draft_has_codes_but_no_link_yet(researcher):
    study = vehicle_study(researcher, captions=2, live=False)
    panel = crowd_panel(APIClient(), study.pk, researcher).json()
    assert panel["status"] == "draft"
    assert panel["crowd_link"] is None and panel["prolific_study_url"] is None
    assert panel["mturk_external_question"] is None
    assert panel["completion_code"] == Study.objects.get(pk=study.pk).completion_code
    assert panel["failed_check_code"] == "" and panel["failed_check_url"] is None


def test_only_the_owner_and_members_see_the_crowd_panel(researcher, make_user, annotator):
    study = vehicle_study(researcher, captions=2)
    member = make_user("member-mia", researcher=True)
    rival = make_user("rival-rob", researcher=True)
    study.members.add(member)
    study.annotators.add(annotator)
    client = APIClient()
    assert crowd_panel(client, study.pk, member).status_code == 200
    assert crowd_panel(client, study.pk, rival).status_code == 404
    assert crowd_panel(client, study.pk, annotator).status_code in (403, 404)
    assert client.get(f"/api/studies/{study.pk}/crowd/").status_code in (401, 403)


class Worker:
    """A crowd worker's browser: a cookie jar of its own, talking HTTP to the live server."""

    def __init__(self, link: str, worker: str):
        self.http = httpx.Client(follow_redirects=True, timeout=60)
        # What Prolific opens: the study URL with the placeholders filled in.
        self.page = self.http.get(
            link, params={"PROLIFIC_PID": worker, "STUDY_ID": "PSTUDY1", "SESSION_ID": "s1"}
        )
        assert self.page.status_code == 200, self.page.text[:500]
        self.next_url = self.page.url.join("next/")

    def rate(self, rating: int) -> str:
        item = self.http.get(self.next_url)
        assert item.status_code == 200, item.text[:500]
        action, token = FORM_ACTION.search(item.text), CSRF.search(item.text)
        assert action and token, item.text[:1000]
        answer = self.http.post(
            item.url.join(html.unescape(action.group(1))),
            data={"csrfmiddlewaretoken": token.group(1), "part": "0", "rating": str(rating)},
        )
        assert answer.status_code == 200, answer.text[:500]
        return answer.text


def test_a_whole_study_runs_through_the_api_alone_with_basic_auth(live_server, make_user):
    user = make_user("api-only-rita", researcher=True)
    with httpx.Client(
        base_url=live_server.url, auth=(user.username, "pw-" + user.username), timeout=60
    ) as api:
        # Create.
        created = api.post(
            "/api/studies/",
            json={
                "name": "API-only study",
                "mode": VEHICLE,
                "settings": {"completion_after": 2, "prolific_study_id": "PSTUDY1"},
            },
        )
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        base = f"/api/studies/{study_id}"

        # Import images and captions.
        files = [
            ("image_files", ("a.png", png((200, 0, 0)), "image/png")),
            ("image_files", ("b.png", png((0, 200, 0)), "image/png")),
            ("captions", ("captions.csv", CAPTIONS.encode(), "text/csv")),
        ]
        queued = api.post(f"{base}/imports/", files=files)
        assert queued.status_code == 202, queued.text
        imported = api.get(f"/api/jobs/{queued.json()['id']}/").json()
        assert imported["status"] == "done", imported

        # Open, then read the crowd panel.
        opened = api.post(f"{base}/open/")
        assert opened.status_code == 200 and opened.json()["status"] == "live", opened.text
        panel = api.get(f"{base}/crowd/")
        assert panel.status_code == 200, panel.text
        crowd = panel.json()
        assert crowd["crowd_link"].startswith(live_server.url + "/p/")
        code = crowd["completion_code"]
        assert code and crowd["prolific_completion_url"].endswith(f"?cc={code}")

        # Crowd workers answer through the link the API gave, and earn the code it named.
        # Two ratings earn the code (completion_after); four captions, two ratings each.
        earned = []
        for number in range(2):
            worker = Worker(crowd["crowd_link"], f"prolific-{number}")
            pages = [worker.rate(rating=3 + number) for _ in range(2)]
            shown = EARNED.search(pages[-1])
            assert shown, pages[-1][:2000]
            earned.append(shown.group(1))
        assert earned == [code, code]
        done = Participant.objects.filter(study_id=study_id, completed_at__isnull=False)
        assert done.count() == 2
        judged = api.get(f"{base}/judgments/").json()
        assert judged["count"] == 4 == Judgment.objects.filter(study_id=study_id).count()

        # Close, report, export, download.
        closed = api.post(f"{base}/close/")
        assert closed.status_code == 200 and closed.json()["status"] == "closed"
        assert api.get(f"{base}/crowd/").json()["crowd_link"] is None
        assert api.post(f"{base}/report/").status_code == 202
        report = api.get(f"{base}/report/")
        assert report.status_code == 200 and report.json()["study"] == study_id, report.text
        export = api.post(f"{base}/exports/", json={"format": "csv", "table": "judgments"})
        assert export.status_code == 202, export.text
        job = api.get(f"/api/jobs/{export.json()['id']}/").json()
        assert job["status"] == "done" and job["download_url"], job
        download = api.get(job["download_url"])
        assert download.status_code == 200, download.text[:300]
        rows = list(csv.DictReader(io.StringIO(download.text)))
        stored = Judgment.objects.filter(study_id=study_id).values_list("pk", flat=True)
        assert sorted(int(row["judgment_id"]) for row in rows) == sorted(stored)
        # Each worker's answers, as they typed them on the pages (worker 0 said 3, worker 1 4).
        ratings = sorted(json.loads(row["payload"])["rating"] for row in rows)
        assert ratings == [3, 3, 4, 4]
