"""The API's study data endpoints: imports of images and captions, references, people."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image as PILImage

from annotation.models import Caption, Image, Job, Reference, Study
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.people import invitation_accept
from tests.factories.core import crowd_participant, vehicle_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, researcher):
    client.force_login(researcher)
    return client


def png(color) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 6), color).save(buffer, "PNG")
    return buffer.getvalue()


def upload(name: str, content: bytes | str, kind="text/csv") -> SimpleUploadedFile:
    data = content.encode() if isinstance(content, str) else content
    return SimpleUploadedFile(name, data, content_type=kind)


CAPTIONS = (
    "image,system,caption\n"
    "a.png,base,A red square.\n"
    "a.png,ours,A small red picture.\n"
    "b.png,base,A green square.\n"
    "b.png,ours,A small green picture.\n"
)


def import_images(api, study, captions=CAPTIONS, capture=None):
    files = [upload("a.png", png((200, 0, 0)), "image/png"), upload("b.png", png((0, 200, 0)))]
    data = {"image_files": files, "captions": upload("caps.csv", captions)}
    with capture(execute=True):
        return api.post(reverse("api_study_imports", args=[study.pk]), data)


def test_images_and_captions_import_through_a_job(
    api, make_study, django_capture_on_commit_callbacks
):
    study = make_study("vicr")

    response = import_images(api, study, capture=django_capture_on_commit_callbacks)

    assert response.status_code == 202, response.content
    job = api.get(reverse("api_job", args=[response.json()["id"]])).json()
    assert (job["kind"], job["status"]) == ("import", "done"), job
    # Two images, each with a caption of two systems: hand-counted from CAPTIONS.
    assert sorted(Image.objects.filter(study=study).values_list("name", flat=True)) == [
        "a.png",
        "b.png",
    ]
    assert Caption.objects.filter(study=study, system="ours").count() == 2
    assert Caption.objects.filter(study=study).count() == 4


def test_a_bad_captions_row_fails_the_job_with_its_line_and_stores_nothing(
    api, make_study, django_capture_on_commit_callbacks
):
    study = make_study("vicr")
    bad = CAPTIONS + "zebra.png,base,No such image.\n"  # line 6 of the file

    response = import_images(api, study, bad, capture=django_capture_on_commit_callbacks)

    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.FAILED
    assert any("line 6" in e and "zebra.png" in e for e in job.result["errors"]), job.result
    assert not Image.objects.filter(study=study).exists()
    assert not Caption.objects.exists()


def test_an_import_needs_files_a_draft_and_access(api, make_study, other_researcher):
    study = make_study("vicr")
    url = reverse("api_study_imports", args=[study.pk])

    empty = api.post(url, {})
    assert empty.status_code == 400 and "captions" in empty.json()
    bad_format = api.post(url, {"captions": upload("c.csv", CAPTIONS), "caption_format": "xml"})
    assert bad_format.status_code == 400 and "caption_format" in bad_format.json()
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    live = api.post(url, {"captions": upload("c.csv", CAPTIONS)})
    assert live.status_code == 409 and "draft" in live.json()["detail"]
    api.force_login(other_researcher)
    assert api.post(url, {"captions": upload("c.csv", CAPTIONS)}).status_code == 404
    assert not Job.objects.exists()


def test_references_import_through_a_job(api, make_study, django_capture_on_commit_callbacks):
    study = make_study("vicr")
    import_images(api, study, capture=django_capture_on_commit_callbacks)
    refs = "image,reference\na.png,A red box.\nb.png,A green box.\nb.png,A green tile.\n"
    url = reverse("api_study_references", args=[study.pk])

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(url, {"file": upload("refs.csv", refs), "format": "csv"})

    assert response.status_code == 202, response.content
    job = api.get(reverse("api_job", args=[response.json()["id"]])).json()
    assert job["status"] == "done", job
    assert job["result"]["imported"] == 3
    texts = sorted(Reference.objects.filter(study=study).values_list("image__name", "text"))
    assert texts == [("a.png", "A red box."), ("b.png", "A green box."), ("b.png", "A green tile.")]


def test_a_bad_references_line_fails_the_job_and_stores_nothing(
    api, make_study, django_capture_on_commit_callbacks
):
    study = make_study("vicr")
    import_images(api, study, capture=django_capture_on_commit_callbacks)
    refs = "image,reference\na.png,A red box.\nnope.png,Missing.\n"

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            reverse("api_study_references", args=[study.pk]), {"file": upload("r.csv", refs)}
        )

    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.FAILED
    assert job.result["errors"] == ["line 3: image 'nope.png' is not an image of this study"]
    assert not Reference.objects.exists()


def test_references_input_and_access_are_checked(api, make_study, other_researcher):
    study = make_study("vicr")
    url = reverse("api_study_references", args=[study.pk])

    missing = api.post(url, {})
    assert missing.status_code == 400 and "file" in missing.json()
    bad = api.post(url, {"file": upload("r.csv", "image,reference\n"), "format": "xlsx"})
    assert bad.status_code == 400 and "format" in bad.json()
    api.force_login(other_researcher)
    assert api.post(url, {"file": upload("r.csv", "image,reference\n")}).status_code == 404
    assert not Job.objects.exists()


def test_people_are_read_and_invited_by_name(api, make_study, make_user, other_researcher):
    study = make_study("vicr")
    ann1, ann2 = make_user("ann1"), make_user("ann2")
    url = reverse("api_study_people", args=[study.pk])

    assert api.get(url).json() == {"annotators": [], "members": [], "invited": []}
    body = {"annotators": ["ann2", "ann1"], "members": [other_researcher.username]}
    saved = api.put(url, body, content_type="application/json")

    assert saved.status_code == 200, saved.content
    assert saved.json() == api.get(url).json()
    assert saved.json()["annotators"] == [] and saved.json()["members"] == []
    invited = [(row["name"], row["role"], row["invited_by"]) for row in saved.json()["invited"]]
    assert invited == [
        ("ann2", "annotator", "rita"),
        ("ann1", "annotator", "rita"),
        (other_researcher.username, "member", "rita"),
    ]
    for user in (ann1, ann2):
        invitation_accept(invitation_id=user.study_invitations.get().pk, user=user)
    answer = api.put(url, body, content_type="application/json").json()
    assert answer["annotators"] == ["ann1", "ann2"]
    assert [row["name"] for row in answer["invited"]] == [other_researcher.username]


def test_bad_people_are_refused_naming_the_field_and_nothing_changes(
    api, make_study, make_user, other_researcher
):
    study = make_study("vicr")
    make_user("ann1")
    url = reverse("api_study_people", args=[study.pk])
    api.put(url, {"annotators": ["ann1"]}, content_type="application/json")

    malformed = api.put(url, {"annotators": ["ann1", "gh ost"]}, content_type="application/json")
    assert malformed.status_code == 400, malformed.content
    assert malformed.json()["annotators"] == {"1": ["Not a user name or e-mail address."]}
    bad_member = api.put(
        url, {"annotators": [], "members": ["<b>"]}, content_type="application/json"
    )
    assert bad_member.status_code == 400 and "members" in bad_member.json()
    wrong_type = api.put(url, {"annotators": "ann1"}, content_type="application/json")
    assert wrong_type.status_code == 400 and "annotators" in wrong_type.json()
    assert list(study.invitations.values_list("name", flat=True)) == ["ann1"]


def test_a_member_sets_annotators_but_not_members_and_a_rival_gets_404(
    client, make_study, make_user, other_researcher
):
    study = make_study("vicr")
    study.members.add(other_researcher)
    make_user("ann1")
    rival = make_user("rival", researcher=True)
    url = reverse("api_study_people", args=[study.pk])
    client.force_login(other_researcher)

    ok = client.put(url, {"annotators": ["ann1"]}, content_type="application/json")
    refused = client.put(
        url, {"annotators": ["ann1"], "members": []}, content_type="application/json"
    )

    assert ok.status_code == 200
    assert refused.status_code == 403 and "members" in refused.json()
    assert study.members.get() == other_researcher
    client.force_login(rival)
    assert client.get(url).status_code == 404
    assert client.put(url, {"annotators": []}, content_type="application/json").status_code == 404


def test_a_report_is_requested_through_the_api(
    api, researcher, other_researcher, django_capture_on_commit_callbacks
):
    study = vehicle_study(researcher, captions=1, target=1)
    participant = crowd_participant(study)
    lease = assignment_next(participant=participant)
    judgment_submit(participant=participant, token=lease.token, data={"rating": 4})
    url = reverse("api_study_report", args=[study.pk])
    assert api.get(url).status_code == 404  # nothing computed yet

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(url)

    assert response.status_code == 202
    job = api.get(reverse("api_job", args=[response.json()["id"]])).json()
    assert (job["kind"], job["status"]) == ("report", "done"), job
    report = api.get(url).json()
    assert report["job"] == job["id"] and report["study"] == study.pk
    api.force_login(other_researcher)
    assert api.post(url).status_code == 404
    assert Job.objects.filter(kind=Job.Kind.REPORT).count() == 1
