"""Crowd integrity, round two (issue 29): the platform's rows 4, 11, 12, 14, 15 and 16.

Each attack runs through the real views or commands, as the issue found it: a sharing
researcher's own browser (row 4, 15), crowd workers each with their own client and address
(rows 11, 12), files a careless or hostile uploader gives the importers (row 14), images
whose names Windows cannot unpack (row 16).
"""

import io
import json
import zipfile
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Image, Job, Participant
from annotation.services.participants import crowd_link_token
from tests.annotation.test_study_settings_form import base_post
from tests.factories.core import vehicle_study

pytestmark = pytest.mark.django_db


def browser(address="198.51.100.1", **extra) -> Client:
    return Client(REMOTE_ADDR=address, **extra)


def arrive(client, study, pid):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "st-1", "SESSION_ID": f"se-{pid}"},
    )


def next_page(client, study):
    return client.get(reverse("participate_next", args=[study.public_id]))


def participant_of(client, study) -> Participant:
    return Participant.objects.get(pk=client.session[f"capeval.participant.{study.pk}"])


# ---------------------------------------------------------------------- row 4: members' doors


@pytest.fixture
def shared_with_raw_export(researcher, other_researcher, settings, tmp_path):
    """A study shared with ``other_researcher``, whose owner exported raw worker ids."""
    settings.CAPEVAL_EXPORT_DIR = str(tmp_path / "exports")
    study = vehicle_study(researcher, captions=2)
    study.members.add(other_researcher)
    owner = Client()
    owner.force_login(researcher)
    with mock.patch("django.db.transaction.on_commit", lambda f, *a, **k: f()):
        raw = owner.post(
            reverse("study_export", args=[study.pk]),
            {"format": "csv", "table": "participants", "raw_ids": "on"},
        )
        plain = owner.post(
            reverse("study_export", args=[study.pk]), {"format": "csv", "table": "judgments"}
        )
    assert raw.status_code == 302 and plain.status_code == 302
    raw_job = Job.objects.get(study=study, params__raw_ids=True)
    plain_job = Job.objects.exclude(pk=raw_job.pk).get(study=study, kind=Job.Kind.EXPORT)
    assert raw_job.status == Job.Status.DONE, raw_job.message
    return study, raw_job, plain_job


def test_a_member_sees_jobs_but_never_the_owners_raw_id_export(
    shared_with_raw_export, researcher, other_researcher
):
    study, raw_job, plain_job = shared_with_raw_export
    member = Client()
    member.force_login(other_researcher)

    listed = [job["id"] for job in member.get(reverse("api_study_jobs", args=[study.pk])).json()]
    assert plain_job.pk in listed, "a member still sees the study's other jobs"
    assert raw_job.pk not in listed
    page = member.get(reverse("study_detail", args=[study.pk]))
    assert page.status_code == 200
    assert reverse("job_status", args=[plain_job.pk]) in page.content.decode()
    assert reverse("job_status", args=[raw_job.pk]) not in page.content.decode()
    for name in ("job_status", "job_download", "api_job"):
        assert member.get(reverse(name, args=[raw_job.pk])).status_code == 404, name
    assert member.get(reverse("job_download", args=[plain_job.pk])).status_code == 200

    # The owner (and staff, as today) still reach it.
    owner = Client()
    owner.force_login(researcher)
    assert raw_job.pk in [
        j["id"] for j in owner.get(reverse("api_study_jobs", args=[study.pk])).json()
    ]
    assert owner.get(reverse("job_download", args=[raw_job.pk])).status_code == 200


def settings_post(study, **changed) -> dict[str, str]:
    """The settings page's POST with the study's fieldset shown and ``changed`` typed in."""
    data = base_post(study.mode, **changed)
    return {k: v for k, v in data.items() if k.startswith(f"{study.mode}-")}


def test_only_the_owner_changes_crowd_settings_and_completion_hosts_are_prolifics(
    researcher, other_researcher, settings
):
    study = vehicle_study(researcher, captions=2)
    study.members.add(other_researcher)
    member = Client()
    member.force_login(other_researcher)
    evil = "https://evil.example/prolific-login?cc=ABC"
    response = member.post(
        reverse("study_settings", args=[study.pk]),
        settings_post(study, prolific_completion_url=evil),
    )
    assert response.status_code == 200
    # Even a Prolific URL (and any other crowd setting) is the owner's to change.
    for changed in (
        {"prolific_completion_url": "https://app.prolific.com/submissions/complete?cc=M"},
        {"completion_code": "MEMBERS"},
    ):
        refused = member.post(
            reverse("study_settings", args=[study.pk]), settings_post(study, **changed)
        )
        assert (
            refused.status_code == 200 and "Only the study&#x27;s owner" in refused.content.decode()
        )
    study.refresh_from_db()
    assert study.settings.get("prolific_completion_url", "") == ""
    assert study.settings.get("completion_code", "") == ""

    owner = Client()
    owner.force_login(researcher)
    for bad in (
        evil,
        "https://app.prolific.com.evil.example/submissions/complete?cc=A",
        "https://app.prolific.com@evil.example/?cc=A",
        "https://evil.example\\@app.prolific.com/?cc=A",
        "https://app.prolific.com:8443/submissions/complete?cc=A",
    ):
        refused = owner.post(
            reverse("study_settings", args=[study.pk]),
            settings_post(study, prolific_completion_url=bad),
        )
        study.refresh_from_db()
        assert study.settings.get("prolific_completion_url", "") == "", bad
        assert "app.prolific.com" in refused.content.decode(), bad

    good = "https://app.prolific.com/submissions/complete?cc=C0DE"
    assert (
        owner.post(
            reverse("study_settings", args=[study.pk]),
            settings_post(study, prolific_completion_url=good),
        )
    ).status_code == 302
    study.refresh_from_db()
    assert study.settings["prolific_completion_url"] == good

    # A host the admin allows in CAPEVAL_COMPLETION_HOSTS is accepted too.
    settings.CAPEVAL_COMPLETION_HOSTS = ["panel.example.org"]
    other = "https://panel.example.org/done?cc=C0DE"
    assert (
        owner.post(
            reverse("study_settings", args=[study.pk]),
            settings_post(study, prolific_completion_url=other),
        )
    ).status_code == 302
    study.refresh_from_db()
    assert study.settings["prolific_completion_url"] == other


# ---------------------------------------------------------------------- row 12: addresses


def test_forwarded_ip_port_and_bracketed_ipv6_are_parsed_and_garbage_shares_one_bucket(
    researcher, settings
):
    settings.CAPEVAL_TRUSTED_PROXIES = 1
    study = vehicle_study(researcher, captions=12, target=3)
    limit = 3  # crowd_arrivals_per_address_per_hour's default

    def via_proxy(forwarded):
        return browser("10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)

    # One client behind a proxy writing ip:port (a new source port every connection).
    ports = [arrive(via_proxy(f"203.0.113.9:{40000 + n}"), study, f"p-{n}") for n in range(5)]
    assert [r.status_code for r in ports] == [302] * limit + [429] * (5 - limit)
    assert set(
        Participant.objects.filter(external_id__startswith="p-").values_list("address", flat=True)
    ) == {"203.0.113.9"}

    v6 = [arrive(via_proxy(f"[2001:db8:1:2::{n}]:443"), study, f"v-{n}") for n in range(5)]
    assert [r.status_code for r in v6] == [302] * limit + [429] * (5 - limit)

    garbage = [arrive(via_proxy(f"unknown-{n}"), study, f"g-{n}") for n in range(5)]
    assert [r.status_code for r in garbage] == [302] * limit + [429] * (5 - limit), (
        "an unparseable forwarded address is one shared bucket, never unlimited"
    )


def test_eight_addresses_of_one_ipv6_64_count_as_one_network(researcher):
    study = vehicle_study(researcher, captions=12, target=3)
    statuses = [
        arrive(browser(f"2001:db8:aa:bb::{n + 1:x}"), study, f"six-{n}").status_code
        for n in range(8)
    ]
    assert statuses == [302] * 3 + [429] * 5
    # A different /64 is a different network.
    assert arrive(browser("2001:db8:aa:cc::1"), study, "other-64").status_code == 302


def test_open_lease_limit_counts_an_ipv6_64_as_one_network(researcher):
    study = vehicle_study(
        researcher, captions=12, target=3, crowd_arrivals_per_address_per_hour=100
    )
    served = []
    for n in range(6):
        client = browser(f"2001:db8:aa:bb::{n + 1:x}")
        assert arrive(client, study, f"lease-{n}").status_code == 302
        served.append(next_page(client, study).status_code)
    assert served == [200] * 3 + [429] * 3


# ---------------------------------------------------------------------- row 11: squatting


def test_squatters_reclaiming_lapsed_leases_cannot_starve_an_honest_worker(researcher):
    """2 networks x 3 ids hold every slot and re-claim as leases lapse (a clock that moves
    5 s per round, squatters polling before the honest worker every round)."""
    study = vehicle_study(researcher, captions=6, target=1, crowd_lease_seconds=30)
    start = timezone.now()
    squatters = []
    for net in ("203.0.113.1", "203.0.113.2"):
        for n in range(3):
            client = browser(net)
            assert arrive(client, study, f"sq-{net}-{n}").status_code == 302
            squatters.append(client)
    with mock.patch("django.utils.timezone.now", return_value=start):
        assert all(next_page(c, study).status_code == 200 for c in squatters)
    honest = browser("198.51.100.77")
    assert arrive(honest, study, "honest").status_code == 302

    served_at = None
    refusals = 0
    for step in range(1, 25):
        now = start + timedelta(seconds=5 * step)
        with mock.patch("django.utils.timezone.now", return_value=now):
            for client in squatters:
                page = next_page(client, study)
                refusals += page.status_code == 429
            page = next_page(honest, study)
        if page.status_code == 200 and page.context.get("assignment") is not None:
            served_at = now
            break
    assert served_at is not None, "the honest worker was never served"
    # The squatters' leases lapse at start + 30 s; the honest worker is served at the first
    # poll after that, within one poll interval (5 s).
    assert served_at - start <= timedelta(seconds=35)
    assert refusals >= 6
    honest_lease = Assignment.objects.get(participant=participant_of(honest, study))
    assert honest_lease.status == Assignment.Status.OPEN


def test_lapse_rule_counts_a_linked_identity_and_ends_after_the_wait(researcher, settings):
    settings.CAPEVAL_LAPSE_WAIT_SECONDS = 120
    study = vehicle_study(researcher, captions=6, target=2, crowd_lease_seconds=30)
    start = timezone.now()
    first, mate = browser("203.0.113.5"), browser("203.0.113.5")
    assert arrive(first, study, "first").status_code == 302
    assert arrive(mate, study, "mate").status_code == 302
    with mock.patch("django.utils.timezone.now", return_value=start):
        assert next_page(first, study).status_code == 200
    lapsed = start + timedelta(seconds=31)
    with mock.patch("django.utils.timezone.now", return_value=lapsed):
        refused = next_page(mate, study)
    # The same network's other id is refused too: the rule is per linked identity.
    assert refused.status_code == 429
    assert "let a task lapse" in refused.content.decode()
    later = start + timedelta(seconds=30 + 121)
    with mock.patch("django.utils.timezone.now", return_value=later):
        assert next_page(mate, study).status_code == 200
        assert next_page(first, study).status_code == 200


def test_repeated_lapses_bar_a_linked_identity_for_longer(researcher, settings):
    settings.CAPEVAL_LAPSE_WAIT_SECONDS = 60
    settings.CAPEVAL_LAPSE_LIMIT = 3
    settings.CAPEVAL_LAPSE_WINDOW_SECONDS = 3600
    settings.CAPEVAL_LAPSE_BAR_SECONDS = 1800
    study = vehicle_study(researcher, captions=6, target=2, crowd_lease_seconds=30)
    client = browser("203.0.113.6")
    assert arrive(client, study, "repeat").status_code == 302
    now = timezone.now()
    for _ in range(3):
        with mock.patch("django.utils.timezone.now", return_value=now):
            assert next_page(client, study).status_code == 200
        now += timedelta(seconds=30 + 61)  # lease lapses, then the short wait passes
    # Three lapses within the hour: barred for 30 minutes from the last one.
    with mock.patch("django.utils.timezone.now", return_value=now):
        assert next_page(client, study).status_code == 429
    with mock.patch("django.utils.timezone.now", return_value=now + timedelta(seconds=1800)):
        assert next_page(client, study).status_code == 200


# ---------------------------------------------------------------------- row 14: imports


def deep_json(depth=100_000) -> str:
    return "[" * depth + "]" * depth


def command_error(*args) -> str:
    """The command's error and what it wrote to stderr (import_study lists problems there)."""
    stderr, stdout = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command(*args, stderr=stderr, stdout=stdout)
    message = "\n".join([str(refused.value), stderr.getvalue(), stdout.getvalue()])
    assert "Traceback" not in message
    return message


@pytest.fixture
def draft(researcher):
    return vehicle_study(researcher, captions=2, live=False)


def test_import_references_refuses_deep_json_and_huge_csv_fields_with_a_line(draft, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text(deep_json())
    assert "line 1" in command_error("import_references", draft.pk, str(deep))
    deep_object = tmp_path / "deep-object.json"
    deep_object.write_text('{"annotations": ' + deep_json() + ', "images": []}')
    assert "line 1" in command_error("import_references", draft.pk, str(deep_object))
    thumb = tmp_path / "refs.jsonl"
    thumb.write_text('{"seg_id": "a", "refs": ["x"]}\n' + deep_json() + "\n")
    assert "line 2" in command_error("import_references", draft.pk, str(thumb), "--format", "thumb")
    huge = tmp_path / "refs.csv"
    huge.write_text("image,reference\nimg0.jpg,short\nimg1.jpg," + "x" * 2_000_000 + "\n")
    message = command_error("import_references", draft.pk, str(huge))
    assert "line 3" in message and "longer" in message
    bad_bytes = tmp_path / "latin.csv"
    bad_bytes.write_bytes("image,reference\nimg0.jpg,caf\xe9\n".encode("latin-1"))
    assert "UTF-8" in command_error("import_references", draft.pk, str(bad_bytes))


def test_import_study_captions_refuse_deep_json_and_huge_csv_fields(draft, tmp_path):
    huge = tmp_path / "captions.csv"
    huge.write_text("image,system,caption\nimg0.jpg,s," + "y" * 2_000_000 + "\n")
    message = command_error("import_study", "--study", draft.pk, "--captions", str(huge))
    assert "line 2" in message and "longer" in message
    deep = tmp_path / "captions.json"
    deep.write_text(deep_json())
    message = command_error(
        "import_study", "--study", draft.pk, "--captions", str(deep), "--system", "s"
    )
    assert "line 1" in message


def test_import_ratings_refuses_deep_json_and_huge_csv_fields(researcher, tmp_path):
    researcher.is_superuser = True
    researcher.save()
    deep = tmp_path / "expert.json"
    deep.write_text('{"a": ' + deep_json() + "}")
    assert "line 1" in command_error("import_ratings", str(deep), "--format", "flickr8k-expert")
    huge = tmp_path / "vicr.csv"
    huge.write_text("image,caption,ratings\nhttp://x/a.jpg," + "z" * 2_000_000 + ",3\n")
    message = command_error("import_ratings", str(huge), "--format", "vicr-csv")
    assert "line 2" in message and "longer" in message
    release = tmp_path / "release.jsonl"
    release.write_text(deep_json() + "\n")
    assert "line 1" in command_error("import_thumb", str(release))


def test_import_page_shows_the_huge_field_error(draft, researcher, client, tmp_path):
    client.force_login(researcher)
    huge = io.BytesIO(("image,system,caption\nimg0.jpg,s," + "y" * 2_000_000 + "\n").encode())
    huge.name = "captions.csv"
    with mock.patch("django.db.transaction.on_commit", lambda f, *a, **k: f()):
        response = client.post(
            reverse("study_import", args=[draft.pk]),
            {"captions": huge, "purpose": "study"},
            follow=True,
        )
    text = response.content.decode()
    assert "Traceback" not in text
    job = Job.objects.filter(study=draft, kind=Job.Kind.IMPORT).order_by("-pk").first()
    shown = text if job is None else text + job.message + json.dumps(job.result)
    assert "longer" in shown and "line 2" in shown


# ---------------------------------------------------------------------- row 16: zip names


def test_member_names_are_safe_on_windows_unique_and_deterministic():
    from annotation.zipnames import safe_member_names

    names = [
        "CON.jpg",
        "aux.png",
        "NUL.jpg",
        "com1.tar.gz",
        "LPT9",
        "a:b*c?.jpg",
        'q"<>|.png',
        "trailing. .",
        "dir/sub\\x.jpg",
        "dir_sub_x.jpg",
        "Same.JPG",
        "same.jpg",
        "_CON.jpg",
        "..",
        "tab\there.jpg",
        "console.jpg",
    ]
    mapping = safe_member_names(names)
    assert mapping == safe_member_names(list(reversed(names)))
    assert set(mapping) == set(names)
    members = list(mapping.values())
    assert len({m.casefold() for m in members}) == len(members)
    reserved = {"CON", "PRN", "AUX", "NUL"} | {
        f"{p}{n}" for p in ("COM", "LPT") for n in "123456789"
    }
    for member in members:
        stem = member.split(".")[0].rstrip(" ").upper()
        assert stem not in reserved, member
        assert not set(member) & set('<>:"/\\|?*'), member
        assert all(ord(ch) >= 32 for ch in member), member
        assert member and member[-1] not in ". ", member
    assert mapping["console.jpg"] == "console.jpg", "a name that is safe is kept"
    assert mapping["CON.jpg"] != "CON.jpg"


def test_dataset_zip_renames_windows_reserved_images_and_records_them(
    researcher, settings, tmp_path
):
    settings.CAPEVAL_EXPORT_DIR = str(tmp_path / "exports")
    study = vehicle_study(researcher, captions=3)
    media = Path(settings.MEDIA_ROOT)
    for image, name in zip(
        Image.objects.filter(study=study).order_by("pk"),
        ("CON.jpg", "aux.png", "NUL.jpg"),
        strict=True,
    ):
        (media / image.file).parent.mkdir(parents=True, exist_ok=True)
        (media / image.file).write_bytes(b"jpeg")
        Image.objects.filter(pk=image.pk).update(name=name)
    owner = Client()
    owner.force_login(researcher)
    with mock.patch("django.db.transaction.on_commit", lambda f, *a, **k: f()):
        owner.post(
            reverse("study_export", args=[study.pk]),
            {"format": "dataset", "table": "judgments", "images": "on"},
        )
    job = Job.objects.get(study=study, kind=Job.Kind.EXPORT)
    assert job.status == Job.Status.DONE, job.message
    data = b"".join(owner.get(reverse("job_download", args=[job.pk])).streaming_content)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = [n for n in archive.namelist() if n.startswith("images/")]
        datasheet = json.loads(archive.read("datasheet.json"))
    stems = {m.removeprefix("images/").split(".")[0].upper() for m in members}
    assert len(members) == 3 and not stems & {"CON", "AUX", "NUL"}
    renamed = datasheet["images_folder"]["renamed"]
    assert set(renamed) == {"CON.jpg", "aux.png", "NUL.jpg"}
    assert {"images/" + v for v in renamed.values()} == set(members)
    assert set(Image.objects.filter(study=study).values_list("name", flat=True)) == set(renamed)
