"""Exports: rows and columns, privacy, CSV injection, JSONL, the datasheet, atomic files,
access to the export view, downloads and the cleanup of old files."""

import csv
import io
import json
import os
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.http import Http404
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from hypothesis import given
from hypothesis import settings as settings_hypothesis
from hypothesis import strategies as st

from annotation.models import Caption, Image, Item, Job, Judgment, Participant, Study
from annotation.modes import Mode, SubmissionError, register
from annotation.modes.base import ExportColumn
from annotation.services import exports
from annotation.services.assignments import assignment_next
from annotation.services.exports import export_delete_old, export_request, export_run
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker, participant_for_user
from annotation.views.exports import job_datasheet
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("http://x","y")', "+cmd", "@SUM(1)", "-2+3", "\tTab", "\rCR"]
CROWD_ID = "PID-SECRET-5f3a"
ANNOTATOR_NAME = "anna"  # the conftest annotator's user name


@register
class ExportTestMode(Mode):
    """One item per caption, rated with ``rating`` plus a free-text ``comment``."""

    name = "test-export"
    label = "Export (tests only)"
    exclusion_rules = "Ratings of participants who failed the test check are excluded."

    def validate(self, assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("rating") not in range(1, 6):
            raise SubmissionError("rating 1-5", field="rating")
        return {"rating": data["rating"], "comment": data.get("comment", "")}

    def score(self, *, item, assignment, part, payload) -> dict[str, Any]:
        # Negative numbers and floats the server computes must stay numbers in the CSV.
        return {"delta": (payload["rating"] - 3) / 4, "points": payload["rating"] - 5}

    def export_columns(self):
        return [
            ExportColumn("label", lambda judgment: judgment.item.spec["label"]),
            ExportColumn("rating_twice", lambda judgment: judgment.payload["rating"] * 2),
        ]


@register
class ExportPerCaptionTestMode(ExportTestMode):
    """Like test-export, but each judgment gives one export row per caption of its item."""

    name = "test-export-rows"

    def export_columns(self):
        return [ExportColumn("caption_id", lambda judgment: None)]

    def export_rows(self, judgment):
        return [{"caption_id": cid} for cid in judgment.item.spec["caption_ids"]]


class ExportColumnFailed(Exception):
    pass


@register
class FailingExportTestMode(ExportTestMode):
    """Its export column fails on the fifth judgment, after earlier chunks were written."""

    name = "test-export-fail"

    def export_columns(self):
        def explode(judgment):
            if judgment.payload["comment"] == "judgment 5":
                raise ExportColumnFailed("the label of judgment 5 cannot be computed")
            return "ok"

        return [ExportColumn("label", explode)]


def build_study(make_study, annotator, *, mode="test-export", participants=2, items=3):
    """A study whose captions and comments carry formula-like text, judged by an annotator
    (account) and crowd workers; returns the study."""
    study = make_study(mode, name="@SUM(1) study")
    for number in range(items):
        image = Image.objects.create(
            study=study,
            name=f"=img{number}.png",
            sha256=f"{number:064x}",
            file=f"o/{number}",
            display=f"d/{number}",
            width=10,
            height=10,
            format="PNG",
        )
        raw = FORMULAS[number % len(FORMULAS)]
        first = Caption.objects.create(
            study=study, image=image, system="Human", raw_text=raw, text=raw.strip() + "."
        )
        second = Caption.objects.create(
            study=study,
            image=image,
            system="m1",
            raw_text=f"caption {number}",
            text=f"Caption {number}.",
        )
        Item.objects.create(
            study=study,
            kind="rate",
            image=image,
            position=number,
            target=participants,
            spec={"caption_ids": [first.pk, second.pk], "label": raw},
        )
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    people = [participant_for_user(study=study, user=annotator)]
    for number in range(participants - 1):
        person, _ = participant_for_crowd_worker(
            study=study,
            source=Participant.Source.PROLIFIC,
            external_id=f"{CROWD_ID}-{number}",
            meta={"PROLIFIC_PID": f"{CROWD_ID}-{number}", "SESSION_ID": "SESSION-SECRET"},
        )
        people.append(person)
    count = 0
    for person in people:
        while (assignment := assignment_next(participant=person)) is not None:
            count += 1
            judgment_submit(
                participant=person,
                token=assignment.token,
                data={
                    "rating": 1 + count % 5,
                    "comment": FORMULAS[count % len(FORMULAS)]
                    if mode != "test-export-fail"
                    else f"judgment {count}",
                },
            )
    return study


def run_export(study, user, export_format, capture):
    with capture(execute=True):
        job = export_request(study=study, user=user, export_format=export_format)
    job.refresh_from_db()
    return job


def export_path(job):
    return django_settings.CAPEVAL_EXPORT_DIR / job.result_file


def read_csv(job) -> list[dict[str, str]]:
    # newline="" keeps a carriage return inside a quoted cell as it was written.
    with export_path(job).open(encoding="utf-8", newline="") as data:
        return list(csv.DictReader(data))


def read_jsonl(job) -> list[dict[str, Any]]:
    lines = export_path(job).read_bytes().decode("utf-8").split("\n")
    assert lines[-1] == "", "the file ends with a newline"
    return [json.loads(line) for line in lines[:-1]]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The users of these tests never log in with a password; hashing them fast saves seconds."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def study(make_study, annotator):
    return build_study(make_study, annotator)


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def test_csv_has_one_row_per_judgment_with_the_common_payload_result_and_mode_columns(
    study, researcher, capture
):
    Judgment.objects.filter(pk=Judgment.objects.filter(study=study).first().pk).update(
        excluded=True, exclusion_reason="failed check"
    )
    job = run_export(study, researcher, "csv", capture)

    assert job.status == Job.Status.DONE, job.error
    rows = read_csv(job)
    judgments = list(
        Judgment.objects.filter(study=study)
        .select_related("participant", "assignment", "item__image")
        .order_by("id")
    )
    assert len(rows) == len(judgments) == 6
    assert list(rows[0]) == [
        "study_id",
        "study_name",
        "study_mode",
        "judgment_id",
        "item_id",
        "item_kind",
        "item_position",
        "image_name",
        "image_sha256",
        "caption_ids",
        "caption_systems",
        "caption_texts",
        "caption_raw_texts",
        "participant",
        "phase",
        "part",
        "payload.comment",
        "payload.rating",
        "result.delta",
        "result.points",
        "created_at",
        "served_at",
        "submitted_at",
        "dwell_ms",
        "excluded",
        "exclusion_reason",
        "label",
        "rating_twice",
    ]
    for row, judgment in zip(rows, judgments, strict=True):
        item = judgment.item
        captions = [Caption.objects.get(pk=pk) for pk in item.spec["caption_ids"]]
        assert int(row["judgment_id"]) == judgment.pk
        assert int(row["item_id"]) == item.pk and int(row["item_position"]) == item.position
        assert row["study_mode"] == "test-export" and row["item_kind"] == "rate"
        assert row["image_name"] == "'" + item.image.name
        assert row["image_sha256"] == item.image.sha256
        assert json.loads(row["caption_ids"]) == item.spec["caption_ids"]
        assert json.loads(row["caption_raw_texts"]) == [c.raw_text for c in captions]
        assert json.loads(row["caption_texts"]) == [c.text for c in captions]
        assert json.loads(row["caption_systems"]) == ["Human", "m1"]
        assert row["participant"] == judgment.participant.pseudonym
        assert row["phase"] == judgment.phase
        assert int(row["payload.rating"]) == judgment.payload["rating"]
        assert int(row["rating_twice"]) == 2 * judgment.payload["rating"]
        assert float(row["result.delta"]) == judgment.result["delta"]
        assert int(row["dwell_ms"]) == judgment.dwell_ms
        assert datetime.fromisoformat(row["created_at"]) == judgment.created_at
        assert datetime.fromisoformat(row["created_at"]).utcoffset() == timedelta(0)
        assert datetime.fromisoformat(row["served_at"]) == judgment.assignment.served_at
        assert datetime.fromisoformat(row["submitted_at"]) == judgment.assignment.submitted_at
        assert row["excluded"] == ("true" if judgment.excluded else "false")
        assert row["exclusion_reason"] == judgment.exclusion_reason
    assert sum(row["excluded"] == "true" for row in rows) == 1


@pytest.mark.parametrize("export_format", ["csv", "jsonl"])
def test_participants_appear_by_pseudonym_only(study, researcher, capture, export_format):
    job = run_export(study, researcher, export_format, capture)

    text = export_path(job).read_text(encoding="utf-8")
    sheet = (django_settings.CAPEVAL_EXPORT_DIR / job.result["datasheet"]).read_text()
    for secret in (CROWD_ID, "SESSION-SECRET", ANNOTATOR_NAME, "prolific"):
        assert secret not in text and secret not in sheet
    pseudonyms = set(Participant.objects.filter(study=study).values_list("pseudonym", flat=True))
    assert len(pseudonyms) == 2
    assert all(pseudonym in text for pseudonym in pseudonyms)


def test_csv_neutralises_formula_text_and_keeps_numbers_numeric(study, researcher, capture):
    job = run_export(study, researcher, "csv", capture)

    rows = read_csv(job)
    text_cells = [row[name] for row in rows for name in ("payload.comment", "label")]
    text_cells += [rows[0]["study_name"], rows[0]["image_name"]]
    assert {cell.lstrip("'") for cell in text_cells} >= {"@SUM(1) study", *FORMULAS[:3]}
    for cell in text_cells:
        assert cell.startswith("'"), f"formula-like text {cell!r} is not neutralised"
    judgments = {j.pk: j for j in Judgment.objects.filter(study=study)}
    for row in rows:
        judgment = judgments[int(row["judgment_id"])]
        assert row["payload.comment"] == "'" + judgment.payload["comment"]
        for name in ("result.delta", "result.points"):
            assert not row[name].startswith("'"), "numbers stay numbers"
            assert float(row[name]) == judgment.result[name.split(".")[1]]
    negative = [row["result.points"] for row in rows if row["result.points"].startswith("-")]
    assert negative, "the fixture has negative points to check"
    assert any(row["result.delta"] == "-0.5" for row in rows)


def test_jsonl_has_one_object_per_line_with_native_values_and_raw_text(study, researcher, capture):
    job = run_export(study, researcher, "jsonl", capture)

    records = read_jsonl(job)
    judgments = {j.pk: j for j in Judgment.objects.filter(study=study)}
    assert sorted(r["judgment_id"] for r in records) == sorted(judgments)
    for record in records:
        judgment = judgments[record["judgment_id"]]
        assert record["payload.comment"] == judgment.payload["comment"], "JSON is not neutralised"
        assert record["result.delta"] == judgment.result["delta"]
        assert isinstance(record["caption_ids"], list) and record["excluded"] is False
        assert record["exclusion_reason"] == ""
        assert record["study_name"] == "@SUM(1) study"


def test_datasheet_describes_the_export(study, researcher, capture):
    Judgment.objects.filter(pk__in=Judgment.objects.filter(study=study).values("pk")[:2]).update(
        excluded=True, exclusion_reason="check"
    )
    job = run_export(study, researcher, "csv", capture)

    sheet = json.loads((django_settings.CAPEVAL_EXPORT_DIR / job.result["datasheet"]).read_text())
    assert job.result["datasheet"] == job.result_file.replace(".csv", ".datasheet.json")
    assert sheet["data_file"] == job.result_file and sheet["format"] == "csv"
    assert sheet["counts"] == {
        "judgments": 6,
        "rows": 6,
        "excluded": 2,
        "participants": 2,
        "items": 3,
        "images": 3,
        "captions": 6,
    }
    assert sheet["study"]["mode"] == "test-export" and sheet["seeds"] == {"study": study.seed}
    assert ExportTestMode.exclusion_rules in sheet["exclusion_rules"]
    assert any("excluded=true" in rule for rule in sheet["exclusion_rules"])
    header = list(read_csv(job)[0])
    assert [c["name"] for c in sheet["columns"]] == header
    assert all(c["description"] for c in sheet["columns"])
    assert set(sheet["software"]) >= {"capeval", "django", "python", "numpy"}


def test_a_mode_may_give_a_judgment_several_rows(make_study, annotator, researcher, capture):
    study = build_study(make_study, annotator, mode="test-export-rows")

    job = run_export(study, researcher, "jsonl", capture)

    records = read_jsonl(job)
    assert len(records) == 2 * Judgment.objects.filter(study=study).count()
    for record in records:
        assert record["caption_id"] in record["caption_ids"]
    assert job.result["judgments"] == 6 and job.result["rows"] == 12


def test_small_chunks_give_the_same_rows_once_each_with_rising_progress(
    study, researcher, settings
):
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 4
    job = Job.objects.create(kind=Job.Kind.EXPORT, study=study, params={"format": "csv"})
    seen = []

    outcome = export_run(job=job, progress=lambda percent, message="": seen.append(percent))

    job.result_file = outcome["result_file"]
    ids = [int(row["judgment_id"]) for row in read_csv(job)]
    assert ids == sorted(Judgment.objects.filter(study=study).values_list("id", flat=True))
    assert seen == sorted(seen) and len(seen) == 3, "one update at the start and per chunk"


def test_data_file_appears_under_its_name_only_when_complete(study, researcher, settings):
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 2
    job = Job.objects.create(kind=Job.Kind.EXPORT, study=study, params={"format": "csv"})
    root = django_settings.CAPEVAL_EXPORT_DIR
    during = []

    def progress(percent, message=""):
        during.append(sorted(path.name for path in root.iterdir()) if root.exists() else [])

    outcome = export_run(job=job, progress=progress)

    final = outcome["result_file"]
    assert all(final not in names for names in during)
    assert any(f".{final}.part" in names for names in during[1:])
    assert sorted(p.name for p in root.iterdir()) == sorted([final, outcome["result"]["datasheet"]])


def test_failed_export_leaves_no_file_and_a_failed_job(
    make_study, annotator, researcher, capture, settings
):
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 2
    study = build_study(make_study, annotator, mode="test-export-fail")

    job = run_export(study, researcher, "csv", capture)

    assert job.status == Job.Status.FAILED
    assert "judgment 5 cannot be computed" in job.error
    assert job.result_file == ""
    root = django_settings.CAPEVAL_EXPORT_DIR
    assert list(root.iterdir()) == [], "neither the data file nor a .part file is left"


def test_unknown_format_is_refused_without_a_job(study, researcher):
    with pytest.raises(ValueError, match="xlsx"):
        export_request(study=study, user=researcher, export_format="xlsx")
    assert not Job.objects.exists()


# Views


def post_export(client, study, export_format="csv", **headers):
    return client.post(
        reverse("study_export", args=[study.pk]), {"format": export_format}, **headers
    )


def test_owner_starts_an_export_with_htmx_and_downloads_it(client, study, researcher, capture):
    client.force_login(researcher)
    with capture(execute=True):
        response = post_export(client, study, "jsonl", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    job = Job.objects.get(kind=Job.Kind.EXPORT, study=study)
    assert f'id="job-{job.pk}"' in response.content.decode()
    assert job.params == {"format": "jsonl"} and job.created_by == researcher
    job.refresh_from_db()
    download = client.get(reverse("job_download", args=[job.pk]))
    assert download.status_code == 200
    body = b"".join(download.streaming_content)
    assert body == export_path(job).read_bytes()
    assert len(body.decode().splitlines()) == 6
    assert job.result_file in download["Content-Disposition"]


def test_without_htmx_the_export_redirects_to_the_job_page(client, study, researcher, capture):
    client.force_login(researcher)
    with capture(execute=True):
        response = post_export(client, study)

    job = Job.objects.get(kind=Job.Kind.EXPORT)
    assert response.status_code == 302
    assert response["Location"] == reverse("job_status", args=[job.pk])


def test_member_and_admin_may_export_any_study_they_manage(
    client, study, make_user, other_researcher, capture
):
    study.members.add(other_researcher)
    admin = make_user("root", staff=True)
    for user in (other_researcher, admin):
        client.force_login(user)
        with capture(execute=True):
            assert post_export(client, study, HTTP_HX_REQUEST="true").status_code == 200
    assert Job.objects.filter(study=study, status=Job.Status.DONE).count() == 2


def test_another_researcher_and_an_annotator_get_404(client, study, other_researcher, annotator):
    for user in (other_researcher, annotator):
        client.force_login(user)
        assert post_export(client, study).status_code == 404
    client.logout()
    assert post_export(client, study).status_code == 302, "anonymous users go to the login"
    assert not Job.objects.exists()


def test_unknown_format_answers_400(client, study, researcher):
    client.force_login(researcher)
    response = post_export(client, study, "xlsx")
    assert response.status_code == 400 and "xlsx" in response.content.decode()
    assert not Job.objects.exists()


def test_datasheet_download(study, researcher, other_researcher, capture):
    job = run_export(study, researcher, "csv", capture)
    request = RequestFactory().get("/")
    request.user = researcher

    response = job_datasheet(request, job.pk)

    assert json.loads(b"".join(response.streaming_content))["data_file"] == job.result_file
    request.user = other_researcher
    with pytest.raises(Http404):
        job_datasheet(request, job.pk)


# Cleanup


def test_old_export_files_are_deleted_and_their_jobs_kept(study, researcher, capture):
    old = run_export(study, researcher, "csv", capture)
    recent = run_export(study, researcher, "jsonl", capture)
    root = django_settings.CAPEVAL_EXPORT_DIR
    stale_part = root / ".study-0-export-0.csv.part"
    stale_part.write_text("half")
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=8))
    old_files = [export_path(old), root / old.result["datasheet"]]
    now = timezone.now()
    eight_days_ago = (now - timedelta(days=8)).timestamp()
    os.utime(stale_part, (eight_days_ago, eight_days_ago))

    deleted = export_delete_old(days=7, now=now)

    assert deleted == 3
    assert not any(path.exists() for path in [*old_files, stale_part])
    old.refresh_from_db()
    assert old.result_file == "" and Job.objects.filter(pk=old.pk).exists()
    assert export_path(recent).exists() and recent.result_file


def test_delete_old_exports_task_calls_the_service(study, researcher, capture):
    from annotation.tasks import delete_old_exports

    old = run_export(study, researcher, "csv", capture)
    Job.objects.filter(pk=old.pk).update(finished_at=datetime(2000, 1, 1, tzinfo=UTC))

    assert delete_old_exports.delay().get() == 2
    assert not export_path(old).exists()


def test_formula_prefixes_are_the_owasp_set():
    assert [exports.neutralise(text) for text in FORMULAS] == ["'" + text for text in FORMULAS]
    assert exports.neutralise("A dog.") == "A dog."
    assert exports.neutralise("") == ""


# Streaming: the PostgreSQL worker path, the caches of the CSV hot loop


def export_bytes(study, *, mode_in_transaction: bool) -> bytes:
    job = Job.objects.create(kind=Job.Kind.EXPORT, study=study, params={"format": "csv"})
    if mode_in_transaction:
        with transaction.atomic():
            outcome = export_run(job=job, progress=lambda percent, message="": None)
    else:
        outcome = export_run(job=job, progress=lambda percent, message="": None)
    return (django_settings.CAPEVAL_EXPORT_DIR / outcome["result_file"]).read_bytes()


@pytest.mark.django_db(transaction=True)
def test_worker_path_on_its_own_connection_writes_the_same_file_as_in_a_transaction(
    make_study, annotator, researcher, settings
):
    # A worker runs in autocommit: on PostgreSQL the rows then come from a dedicated
    # connection fetched by a thread; inside a transaction, from the caller's connection.
    if connection.vendor != "postgresql":
        skip_or_fail("the dedicated-connection export path needs PostgreSQL")
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 2
    study = build_study(make_study, annotator, participants=3)
    threads_before = threading.active_count()

    streamed = export_bytes(study, mode_in_transaction=False)
    in_transaction = export_bytes(study, mode_in_transaction=True)

    assert streamed == in_transaction
    rows = list(csv.DictReader(streamed.decode("utf-8").splitlines()))
    assert len(rows) == Judgment.objects.filter(study=study).count() == 9
    assert threading.active_count() == threads_before, "the fetching thread has ended"


@pytest.mark.django_db(transaction=True)
def test_worker_path_failing_mid_way_stops_its_thread_and_leaves_no_file(
    make_study, annotator, researcher, settings
):
    if connection.vendor != "postgresql":
        skip_or_fail("the dedicated-connection export path needs PostgreSQL")
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 2
    study = build_study(make_study, annotator, mode="test-export-fail")
    threads_before = threading.active_count()
    job = Job.objects.create(kind=Job.Kind.EXPORT, study=study, params={"format": "csv"})

    with pytest.raises(ExportColumnFailed):
        export_run(job=job, progress=lambda percent, message="": None)

    assert threading.active_count() == threads_before
    assert list(django_settings.CAPEVAL_EXPORT_DIR.iterdir()) == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


def csv_writer_fragment(cells) -> str:
    """What csv.writer writes for ``cells`` after a first cell (the export joins lines itself
    and must write them exactly as the csv module would)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["first", *cells])
    return buffer.getvalue().removeprefix("first").removesuffix("\r\n")


@settings_hypothesis(max_examples=300, deadline=None)
@given(cells=st.lists(st.text() | st.integers() | st.floats(allow_nan=False), max_size=4))
def test_line_fragments_are_written_as_the_csv_module_writes_them(cells):
    assert exports._csv_fragment(cells) == csv_writer_fragment(cells)


@settings_hypothesis(max_examples=200, deadline=None)
@given(payload=st.dictionaries(st.sampled_from(["a", "b", "=c"]), json_values) | json_values)
def test_remembered_json_fragments_equal_the_cells_of_each_value(payload):
    keys = ["=c", "a", "b", "missing"]
    text = json.dumps(payload)
    cache: dict[str, str] = {}
    values = payload if isinstance(payload, dict) else {}
    expected = csv_writer_fragment([exports._csv_cell(values.get(key)) for key in keys])

    first = exports._json_fragment(text, keys, cache)
    again = cache.get(text) or exports._json_fragment(text, keys, cache)

    assert first == again == expected


def test_json_cell_cache_is_bounded_and_skips_long_texts(monkeypatch):
    monkeypatch.setattr(exports, "JSON_CELL_CACHE_SIZE", 2)
    cache: dict[str, str] = {}
    for rating in range(5):
        exports._json_fragment(json.dumps({"rating": rating}), ["rating"], cache)
        assert len(cache) <= 2
    long_text = json.dumps({"comment": "x" * (exports.JSON_CELL_CACHE_TEXT + 1)})
    exports._json_fragment(long_text, ["comment"], cache)
    assert long_text not in cache


def reference_spec_caption_ids(spec):
    """The rule as first written (sort caption_ids first, then dict order), kept to check the
    faster version against."""
    if not isinstance(spec, dict):
        return []
    suffixes = tuple("_" + name for name in exports.CAPTION_KEYS)
    found = []
    for key in sorted(spec, key=lambda key: key != "caption_ids"):
        if key in exports.CAPTION_KEYS or key.endswith(suffixes):
            value = spec[key]
            found.extend(value if isinstance(value, list) else [value])
    ids = []
    for value in found:
        if type(value) is int and value not in ids:
            ids.append(value)
    return ids


spec_keys = st.sampled_from(
    ["caption_ids", "caption", "caption_id", "captions", "left_caption", "right_caption_id",
     "label", "x_captions", "captionless", "kind"]
)  # fmt: skip
spec_values = (
    st.integers(0, 9)
    | st.booleans()
    | st.text(max_size=2)
    | st.lists(st.integers(0, 9) | st.booleans() | st.none(), max_size=4)
)


@settings_hypothesis(max_examples=300, deadline=None)
@given(spec=st.dictionaries(spec_keys, spec_values) | st.none() | st.lists(st.integers()))
def test_caption_ids_of_a_spec_follow_the_documented_rule(spec):
    assert exports._spec_caption_ids(spec) == reference_spec_caption_ids(spec)


def test_item_cache_cells_split_back_into_four_cells(study, researcher, capture):
    # The CSV cache keeps an item's four caption cells as one string; a caption holding
    # control characters (JSON-escaped) must not split it wrongly.
    # PostgreSQL text cannot hold NUL (the separator); SQLite can.
    nul = "\x00" if connection.vendor == "sqlite" else "\x01"
    caption = Caption.objects.filter(study=study).first()
    Caption.objects.filter(pk=caption.pk).update(text=f"a{nul}b\tc", raw_text=nul)
    job = run_export(study, researcher, "csv", capture)

    rows = [row for row in read_csv(job) if caption.pk in json.loads(row["caption_ids"])]
    assert rows
    for row in rows:
        assert len(json.loads(row["caption_systems"])) == len(json.loads(row["caption_ids"]))
        assert f"a{nul}b\tc" in json.loads(row["caption_texts"])
        assert nul in json.loads(row["caption_raw_texts"])
