"""Who may see what: every researcher URL, HTML and API, answers 404 to anyone who may not
manage the study (never 403, never another study's data), and works for those who may."""

from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.models import Job, Study
from tests.factories.core import vehicle_study

pytestmark = pytest.mark.django_db

SECRET = "Rita's confidential study"


@pytest.fixture
def owned(researcher, settings):
    """Rita's live study with a finished report and a finished export with its file."""
    study = vehicle_study(researcher, name=SECRET)
    export_dir = Path(settings.CAPEVAL_EXPORT_DIR)
    export_dir.mkdir(parents=True, exist_ok=True)
    (export_dir / "rita-export.csv").write_text("secret,data\n")
    done = {"status": Job.Status.DONE, "progress": 100, "finished_at": timezone.now()}
    Job.objects.create(
        kind=Job.Kind.REPORT,
        study=study,
        created_by=researcher,
        result={"histogram": [0, 1, 2, 0, 0]},
        **done,
    )
    export = Job.objects.create(
        kind=Job.Kind.EXPORT,
        study=study,
        created_by=researcher,
        result_file="rita-export.csv",
        message="secret export",
        **done,
    )
    return study, export


def html_requests(study, job):
    """(method, url, data) of every researcher page that names a study or a job."""
    sid = study.pk
    return [
        ("get", reverse("study_detail", args=[sid]), None),
        ("post", reverse("study_status", args=[sid]), {"action": "close"}),
        ("get", reverse("study_import", args=[sid]), None),
        ("post", reverse("study_import", args=[sid]), {"purpose": "study"}),
        ("post", reverse("study_export", args=[sid]), {"format": "csv"}),
        ("get", reverse("study_report", args=[sid]), None),
        ("post", reverse("study_report", args=[sid]), None),
        ("get", reverse("report_figure", args=[sid, "ratings", "svg"]), None),
        ("get", reverse("job_status", args=[job.pk]), None),
        ("get", reverse("job_download", args=[job.pk]), None),
        ("get", reverse("study_dashboard", args=[sid]), None),
        ("get", reverse("study_settings", args=[sid]), None),
        ("post", reverse("study_settings", args=[sid]), {}),
        ("get", reverse("study_close_confirm", args=[sid]), None),
        ("post", reverse("study_people", args=[sid]), {"annotators": ""}),
        ("get", reverse("study_metrics", args=[sid]), None),
        ("post", reverse("study_metrics", args=[sid]), None),
    ]


def api_requests(study, job):
    sid = study.pk
    return [
        ("get", reverse("api_study", args=[sid]), None),
        ("post", reverse("api_study_open", args=[sid]), None),
        ("post", reverse("api_study_close", args=[sid]), None),
        ("get", reverse("api_study_jobs", args=[sid]), None),
        ("post", reverse("api_study_exports", args=[sid]), {"format": "csv"}),
        ("get", reverse("api_job", args=[job.pk]), None),
        ("post", reverse("api_study_reopen", args=[sid]), None),
        ("get", reverse("api_study_metrics", args=[sid]), None),
        ("post", reverse("api_study_metrics", args=[sid]), None),
    ]


def send(client, method, url, data):
    if method == "get":
        return client.get(url)
    return (
        client.post(url, data or {}, content_type="application/json")
        if "/api/" in url
        else client.post(url, data or {})
    )


def assert_untouched(study, jobs_before):
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE
    assert Job.objects.count() == jobs_before


@pytest.mark.parametrize("who", ["other_researcher", "annotator"])
def test_someone_who_may_not_manage_the_study_gets_404_everywhere(client, owned, who, request):
    study, job = owned
    user = request.getfixturevalue(who)
    # Annotating a study gives no access to its researcher pages.
    study.annotators.add(user)
    client.force_login(user)
    jobs_before = Job.objects.count()

    for method, url, data in html_requests(study, job) + api_requests(study, job):
        response = send(client, method, url, data)
        assert response.status_code == 404, f"{method.upper()} {url}: {response.status_code}"
        body = response.content.decode()
        assert SECRET not in body and "secret" not in body, url

    assert_untouched(study, jobs_before)
    listing = client.get(reverse("api_studies")).json()
    assert listing["count"] == 0 and listing["results"] == []
    assert study not in client.get(reverse("home")).context["studies"]


def test_anonymous_visitors_are_sent_to_log_in_or_refused(client, owned):
    study, job = owned
    jobs_before = Job.objects.count()

    for method, url, data in html_requests(study, job):
        response = send(client, method, url, data)
        assert response.status_code == 302 and "/accounts/login/" in response.url, url
    for method, url, data in api_requests(study, job):
        response = send(client, method, url, data)
        assert response.status_code in (401, 403), url
        assert SECRET not in response.content.decode()
    assert_untouched(study, jobs_before)


@pytest.mark.parametrize("role", ["owner", "member", "staff"])
def test_those_who_may_manage_the_study_reach_every_page(
    client, owned, role, researcher, other_researcher, make_user
):
    study, job = owned
    user = {
        "owner": researcher,
        "member": other_researcher,
        "staff": make_user("admin", staff=True),
    }[role]
    if role == "member":
        study.members.add(other_researcher)
    client.force_login(user)

    requests = html_requests(study, job) + api_requests(study, job)
    reads = [r for r in requests if r[0] == "get"]
    for method, url, data in reads:
        response = send(client, method, url, data)
        assert response.status_code in (200, 409), f"{url}: {response.status_code}"
    # The import page answers 409 for a live study (imports are for drafts): reached, not hidden.
    assert client.get(reverse("job_download", args=[job.pk])).getvalue() == b"secret,data\n"
    assert client.get(reverse("api_study", args=[study.pk])).json()["name"] == SECRET

    close = client.post(reverse("study_status", args=[study.pk]), {"action": "close"})
    assert close.status_code == 302
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED


def test_a_researcher_removed_from_a_study_loses_the_jobs_they_started(
    client, owned, other_researcher, settings
):
    study, _ = owned
    study.members.add(other_researcher)
    started = Job.objects.create(
        kind=Job.Kind.EXPORT,
        study=study,
        created_by=other_researcher,
        status=Job.Status.DONE,
        result_file="rita-export.csv",
    )
    client.force_login(other_researcher)
    assert client.get(reverse("job_download", args=[started.pk])).status_code == 200

    study.members.remove(other_researcher)

    for url in (
        reverse("job_status", args=[started.pk]),
        reverse("job_download", args=[started.pk]),
        reverse("api_job", args=[started.pk]),
    ):
        assert client.get(url).status_code == 404, url


def test_a_job_of_no_study_is_seen_by_its_starter_only(client, researcher, other_researcher):
    job = Job.objects.create(kind=Job.Kind.REPORT, study=None, created_by=researcher)

    client.force_login(other_researcher)
    assert client.get(reverse("api_job", args=[job.pk])).status_code == 404
    client.force_login(researcher)
    assert client.get(reverse("api_job", args=[job.pk])).json()["id"] == job.pk


def test_a_job_file_outside_the_export_folder_is_never_served(client, owned, researcher):
    study, _ = owned
    escaping = Job.objects.create(
        kind=Job.Kind.EXPORT,
        study=study,
        created_by=researcher,
        status=Job.Status.DONE,
        result_file="../../etc/passwd",
    )
    client.force_login(researcher)

    assert client.get(reverse("job_download", args=[escaping.pk])).status_code == 404


def test_missing_ids_answer_404_like_forbidden_ones(client, researcher):
    client.force_login(researcher)
    for url in (
        reverse("study_detail", args=[999999]),
        reverse("api_study", args=[999999]),
        reverse("job_status", args=[999999]),
        reverse("api_job", args=[999999]),
    ):
        assert client.get(url).status_code == 404
