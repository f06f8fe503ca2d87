"""The metrics page's references upload: queues an import job that shows its line errors."""

import pytest
from django.urls import reverse

from annotation.models import Job, Reference
from tests.annotation.test_api_study_data import import_images, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(client, researcher, make_study, django_capture_on_commit_callbacks):
    client.force_login(researcher)
    made = make_study("vicr")
    import_images(client, made, capture=django_capture_on_commit_callbacks)
    return made


def test_the_page_offers_the_upload_instead_of_a_command(client, study):
    page = client.get(reverse("study_metrics", args=[study.pk])).content.decode()

    assert reverse("study_references", args=[study.pk]) in page
    assert 'name="file"' in page and '<option value="thumb">' in page
    assert "manage.py import_references" not in page


def test_an_uploaded_file_is_imported_by_a_job(client, study, django_capture_on_commit_callbacks):
    refs = "image,reference\na.png,A red box.\nb.png,A green box.\n"

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("study_references", args=[study.pk]),
            {"file": upload("refs.csv", refs), "format": "csv"},
        )

    job = Job.objects.filter(params__has_key="references").get()
    assert response.status_code == 302 and response.url == reverse("job_status", args=[job.pk])
    assert job.status == Job.Status.DONE
    assert Reference.objects.filter(study=study).count() == 2
    status = client.get(response.url).content.decode()
    assert "2 reference(s) imported" in status


def test_a_bad_file_shows_the_importers_line_errors_and_stores_nothing(
    client, study, django_capture_on_commit_callbacks
):
    refs = "image,reference\na.png,A red box.\nmissing.png,Nope.\na.png,\n"

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("study_references", args=[study.pk]),
            {"file": upload("refs.csv", refs)},
            headers={"HX-Request": "true"},
        )

    assert response.status_code == 200
    job = Job.objects.filter(params__has_key="references").get()
    assert f'hx-get="{reverse("job_status", args=[job.pk])}"' in response.content.decode()
    polled = client.get(reverse("job_status", args=[job.pk]), headers={"HX-Request": "true"})
    page = polled.content.decode()
    assert "2 bad row(s) in refs.csv; nothing imported." in page
    assert "line 3: image &#x27;missing.png&#x27; is not an image of this study" in page
    assert "line 4: the reference is empty" in page
    assert not Reference.objects.exists()


def test_bad_requests_are_refused_clearly(client, study, other_researcher):
    url = reverse("study_references", args=[study.pk])

    missing = client.post(url, {})
    assert missing.status_code == 400 and b"Choose a references file." in missing.content
    bad_format = client.post(url, {"file": upload("r.csv", "image,reference\n"), "format": "x"})
    assert bad_format.status_code == 400 and b"Format must be one of" in bad_format.content
    assert client.get(url).status_code == 405
    client.force_login(other_researcher)
    assert client.post(url, {"file": upload("r.csv", "image,reference\n")}).status_code == 404
    assert not Job.objects.filter(params__has_key="references").exists()
