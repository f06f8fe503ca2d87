"""The REST API: studies, their status, jobs and exports, and the OpenAPI schema."""

import csv
import io

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Job, Judgment, Study
from annotation.modes import get_mode
from annotation.modes.settings import defaults
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from tests.factories.core import crowd_participant, vehicle_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, researcher):
    client.force_login(researcher)
    return client


def post(client, url, data=None):
    return client.post(url, data or {}, content_type="application/json")


def test_the_list_shows_only_studies_the_user_owns_or_joined(
    api, researcher, other_researcher, make_study, make_user
):
    own = make_study("vicr", name="Own")
    joined = make_study("vicr", owner=other_researcher, name="Joined")
    joined.members.add(researcher)
    make_study("vicr", owner=other_researcher, name="Not mine")

    listing = api.get(reverse("api_studies")).json()

    assert listing["count"] == 2
    assert {s["id"] for s in listing["results"]} == {own.pk, joined.pk}
    page = api.get(reverse("api_studies"), {"limit": 1, "offset": 1}).json()
    assert len(page["results"]) == 1 and page["previous"] is not None
    api.force_login(make_user("admin", staff=True))
    assert api.get(reverse("api_studies")).json()["count"] == 3


def test_a_researcher_creates_a_draft_study_with_the_modes_default_settings(api, researcher):
    response = post(api, reverse("api_studies"), {"name": "  Captions 2025 ", "mode": "vicr"})

    assert response.status_code == 201
    body = response.json()
    study = Study.objects.get(pk=body["id"])
    assert (study.name, study.owner, study.status) == ("Captions 2025", researcher, "draft")
    assert body["settings"] == defaults(get_mode("vicr").settings_class)
    assert api.get(reverse("api_study", args=[study.pk])).json() == body


@pytest.mark.parametrize(
    "payload, field, words",
    [
        (
            {"name": "x", "mode": "vicr", "settings": {"no_such_setting": 1}},
            "settings",
            "no_such_setting",
        ),
        # A bad value is an error of the settings input, naming the setting in its text.
        ({"name": "x", "mode": "vicr", "settings": {"min_ratings": 0}}, "settings", "min_ratings"),
        # urlsplit raises ValueError on a broken IPv6 host: still a 400, never a 500.
        (
            {"name": "x", "mode": "humanr", "settings": {"prolific_completion_url": "https://[x"}},
            "settings",
            "prolific_completion_url",
        ),
        ({"name": "x", "mode": "nonsense"}, "mode", "not a valid choice"),
        ({"name": "", "mode": "vicr"}, "name", "blank"),
        ({"name": "x", "mode": "vicr", "seed": -1}, "seed", "greater than or equal"),
        ({"mode": "vicr"}, "name", "required"),
    ],
)
def test_bad_study_input_is_refused_naming_the_field(api, payload, field, words):
    response = post(api, reverse("api_studies"), payload)

    assert response.status_code == 400
    assert words in " ".join(response.json()[field])
    assert not Study.objects.exists()


def test_only_researchers_create_studies(client, annotator):
    assert post(client, reverse("api_studies"), {"name": "x", "mode": "vicr"}).status_code in (
        401,
        403,
    )
    client.force_login(annotator)
    response = post(client, reverse("api_studies"), {"name": "x", "mode": "vicr"})
    assert response.status_code == 403
    assert "researchers" in response.json()["detail"]
    assert not Study.objects.exists()


def test_open_builds_items_once_and_close_stops_the_study(api, researcher):
    study = vehicle_study(researcher, captions=3, live=False)

    opened = post(api, reverse("api_study_open", args=[study.pk]))
    assert (opened.status_code, opened.json()["status"]) == (200, "live")
    assert study.items.count() == 3
    assert post(api, reverse("api_study_open", args=[study.pk])).status_code == 200
    assert study.items.count() == 3, "opening again builds nothing new"

    closed = post(api, reverse("api_study_close", args=[study.pk]))
    assert (closed.status_code, closed.json()["status"]) == (200, "closed")
    reopened = post(api, reverse("api_study_open", args=[study.pk]))
    assert reopened.status_code == 409
    assert "cannot be reopened" in reopened.json()["detail"]
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED


def test_a_study_with_nothing_to_annotate_cannot_be_opened(api, researcher):
    study = vehicle_study(researcher, captions=0, live=False)

    response = post(api, reverse("api_study_open", args=[study.pk]))

    assert response.status_code == 409
    assert "import captions first" in response.json()["detail"]
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT
    # The page answers with the same status as the API: one error, one status.
    page = api.post(reverse("study_status", args=[study.pk]), {"action": "open"})
    assert page.status_code == 409 and "import captions first" in page.content.decode()


def test_the_jobs_of_a_study_show_import_status_and_can_be_filtered(api, researcher):
    study = vehicle_study(researcher)
    imported = Job.objects.create(
        kind=Job.Kind.IMPORT,
        study=study,
        created_by=researcher,
        status=Job.Status.RUNNING,
        progress=40,
        message="Images 4/10",
    )
    Job.objects.create(kind=Job.Kind.EXPORT, study=study, created_by=researcher)
    Job.objects.create(
        kind=Job.Kind.IMPORT, study=vehicle_study(researcher, name="Other"), created_by=researcher
    )

    everything = api.get(reverse("api_study_jobs", args=[study.pk])).json()
    imports = api.get(reverse("api_study_jobs", args=[study.pk]), {"kind": "import"}).json()

    assert len(everything) == 2
    assert [(j["id"], j["progress"], j["message"]) for j in imports] == [
        (imported.pk, 40, "Images 4/10")
    ]
    assert imports[0]["download_url"] is None
    bad = api.get(reverse("api_study_jobs", args=[study.pk]), {"kind": "bogus"})
    assert bad.status_code == 400 and "bogus" in bad.json()["kind"][0]


def test_an_export_is_requested_run_and_downloaded(
    api, researcher, django_capture_on_commit_callbacks
):
    study = vehicle_study(researcher, captions=1, target=1)
    participant = crowd_participant(study)
    lease = assignment_next(participant=participant)
    judgment_submit(participant=participant, token=lease.token, data={"rating": 5})

    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, reverse("api_study_exports", args=[study.pk]), {"format": "csv"})

    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.study, job.created_by, job.params) == (
        "export",
        study,
        researcher,
        {"format": "csv"},
    )
    polled = api.get(reverse("api_job", args=[job.pk])).json()
    assert polled["status"] == "done", polled
    download = api.get(polled["download_url"])
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert [row["judgment_id"] for row in rows] == [str(Judgment.objects.get().pk)]


def test_an_export_format_must_be_csv_or_jsonl(api, researcher):
    study = vehicle_study(researcher)

    response = post(api, reverse("api_study_exports", args=[study.pk]), {"format": "xlsx"})

    assert response.status_code == 400 and "format" in response.json()
    assert not Job.objects.exists()
    default = post(api, reverse("api_study_exports", args=[study.pk]))
    assert default.status_code == 202
    assert Job.objects.get().params == {"format": "csv"}


def test_the_schema_renders_and_validates_without_warnings(api, tmp_path):
    response = api.get(reverse("schema"))
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/studies/",
        "/api/studies/{study_id}/",
        "/api/studies/{study_id}/open/",
        "/api/studies/{study_id}/close/",
        "/api/studies/{study_id}/jobs/",
        "/api/studies/{study_id}/exports/",
        "/api/jobs/{job_id}/",
    } <= set(schema["paths"])
    exports = schema["paths"]["/api/studies/{study_id}/exports/"]["post"]
    assert "202" in exports["responses"]

    # Raises SchemaGenerationError on any warning.
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    assert api.get(reverse("api_docs")).status_code == 200
