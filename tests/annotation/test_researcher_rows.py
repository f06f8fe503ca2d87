"""Issue 26, rows 11, 16 and 21 (parts): the study page and the small researcher pages.

Through the real views (Django test client). Each test was first seen failing on the code
before its fix: a closed study's estimated end, a draft's empty dashboard sections, the
``/api/`` 404, the empty 405 of GET on the people URL, and the missing favicon.
"""

import re
from html import unescape

import pytest
from django.urls import reverse

from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_close
from tests.factories.core import crowd_participant, vehicle_study

pytestmark = pytest.mark.django_db


def text_of(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def answer(participant, rating=3):
    lease = assignment_next(participant=participant)
    assert lease is not None
    judgment_submit(participant=participant, token=lease.token, data={"rating": rating})


# --- Row 11: a closed study says it is closed and gives no estimate -------------------------


def test_a_closed_study_shows_no_estimated_end(client, researcher):
    # 4 captions, target 2: 8 answers needed; 2 given this hour, so a live study has an ETA.
    study = vehicle_study(researcher, captions=4, target=2)
    answer(crowd_participant(study, "w1"))
    answer(crowd_participant(study, "w2"))
    client.force_login(researcher)
    live = text_of(client.get(reverse("study_detail", args=[study.pk])).content.decode())
    assert "the remaining 6 answers take" in live  # the estimate the live study has

    study_close(study=study)
    closed = text_of(client.get(reverse("study_detail", args=[study.pk])).content.decode())
    assert "remaining 6 answers take" not in closed
    assert "Estimated end closed" in closed
    assert "The study is closed, so it has no estimated end" in closed


# --- Row 21: the API index, GET on the people URL, the favicon -------------------------------


def test_the_api_root_lists_the_named_endpoints(client, researcher):
    from annotation import api_urls

    client.force_login(researcher)
    response = client.get("/api/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    endpoints = {row["name"]: row for row in response.json()["endpoints"]}
    # Every named route of annotation/api_urls.py is listed, with its path.
    named = {p.name for p in api_urls.urlpatterns if p.name and p.name != "api_root"}
    assert named and named <= set(endpoints)
    assert endpoints["api_studies"]["path"] == "/api/studies/"
    assert endpoints["api_studies"]["url"] == "http://testserver/api/studies/"
    # A route with a parameter is shown as a template, not a link that would 404.
    assert endpoints["api_study_report"]["path"] == "/api/studies/{study_id}/report/"
    assert endpoints["api_study_report"]["url"] is None
    assert response.json()["schema"] == "http://testserver/api/schema/"
    assert response.json()["docs"] == "http://testserver/api/docs/"


def test_the_api_root_is_a_browsable_page(client, researcher):
    client.force_login(researcher)
    response = client.get("/api/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert '<a href="http://testserver/api/studies/">/api/studies/</a>' in response.content.decode()


def test_get_on_the_people_url_leads_to_the_people_section(client, researcher):
    study = vehicle_study(researcher, captions=1, live=False)
    client.force_login(researcher)
    response = client.get(reverse("study_people", args=[study.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("study_detail", args=[study.pk]) + "#people-heading"
    page = client.get(response["Location"]).content.decode()
    assert 'id="people-heading"' in page


def test_get_on_the_people_url_of_someone_elses_study_is_404(client, researcher, other_researcher):
    study = vehicle_study(other_researcher, captions=1, live=False)
    client.force_login(researcher)
    assert client.get(reverse("study_people", args=[study.pk])).status_code == 404


def test_every_page_links_a_local_svg_favicon(client, researcher):
    from django.contrib.staticfiles import finders

    client.force_login(researcher)
    html = client.get(reverse("home")).content.decode()
    link = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', html)
    assert link, "no SVG favicon link"
    assert link[1].startswith("/static/")
    found = finders.find(link[1].removeprefix("/static/"))
    assert found, f"{link[1]} is not among the static files"
    with open(found, encoding="utf-8") as svg:
        assert svg.read().lstrip().startswith("<svg")


# --- Row 16: a draft study shows no empty dashboard ------------------------------------------


def test_a_draft_study_hides_progress_rate_and_integrity(client, researcher):
    study = vehicle_study(researcher, captions=2, live=False)
    client.force_login(researcher)
    html = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert 'id="dashboard-heading"' not in html
    assert "<h3>Rate</h3>" not in html
    assert "<h3>Crowd integrity</h3>" not in html
    assert "Progress, rate and crowd integrity appear here once the study is open" in text_of(html)
