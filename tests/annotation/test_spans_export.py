"""The error-span export's two tidy tables (issue 24): one row per judged caption and one
row per marked error, in every format, through the job, the page, the API and the command.

The expected span rows are built here from the stored payloads with plain loops (not the
export's SQL), so a wrong unnesting, order or column shows.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Caption, Job, Judgment
from annotation.services.exports import export_request, study_tables, table_columns
from annotation.tasks import enqueue
from tests.annotation.test_exports import parse_csv_cell, read_table
from tests.factories.spans import judge, spans_study, worker

pytestmark = pytest.mark.django_db

FORMATS = ["csv", "jsonl", "parquet", "dataset"]


def marks_answer(lease, text):
    """Two spans (one with a note) and an omission, so every column has a value."""
    first = text.index(text.split()[1])
    word = text.split()[1]
    last_word = text.split()[-1]
    last = text.rindex(last_word)
    return {
        "spans": json.dumps(
            [
                {
                    "start": last,
                    "end": last + len(last_word),
                    "text": last_word,
                    "severity": "minor",
                    "category": "spatial relation",
                    "note": "=not where it is",
                },
                {
                    "start": first,
                    "end": first + len(word),
                    "text": word,
                    "severity": "major",
                    "category": "attribute",
                },
            ]
        ),
        "omission": {
            "omission": True,
            "note": "the lamp",
            "severity": "minor",
            "category": "object",
        },
        "score": 40,
    }


def spans_data(researcher):
    study = spans_study(researcher, images=1)
    for name in ("w1", "w2"):
        participant = worker(study, name)
        judge(participant, marks_answer)
        judge(participant, lambda lease, text: {"spans": "[]", "score": 90})
    return study


def expected_span_rows(study) -> list[dict]:
    rows = []
    for j in Judgment.objects.filter(study=study).select_related("participant", "item"):
        text = Caption.objects.get(pk=j.item.spec["caption"]).text
        for n, m in enumerate(j.payload["spans"], start=1):
            rows.append(
                {
                    "judgment_id": j.pk,
                    "participant": j.participant.pseudonym,
                    "item_id": j.item_id,
                    "caption_id": j.item.spec["caption"],
                    "mark": n,
                    "start": m["start"],
                    "end": m["end"],
                    "span_text": "" if m["omission"] else text[m["start"] : m["end"]],
                    "severity": m["severity"],
                    "category": m["category"],
                    "note": m["note"],
                    "omission": m["omission"],
                    "excluded": j.excluded,
                    "exclusion_reason": j.exclusion_reason,
                }
            )
    return sorted(rows, key=lambda r: (r["judgment_id"], r["mark"]))


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def run(study, user, capture, export_format, **options) -> Job:
    with capture(execute=True):
        job = enqueue(
            export_request(study=study, user=user, export_format=export_format, **options)
        )
    job.refresh_from_db()
    assert job.status == "done", job.error
    return job


def job_path(job) -> Path:
    return Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file


def comparable(rows, export_format):
    """CSV has no null text (an empty cell) and neutralises formula-like text."""
    if export_format != "csv":
        return rows
    out = []
    for row in rows:
        row = dict(row)
        for key in ("span_text", "note", "exclusion_reason"):
            value = row[key] or ""
            row[key] = "'" + value if value.startswith(("=", "+", "-", "@")) else value
        out.append(row)
    return out


@pytest.mark.parametrize("export_format", FORMATS)
def test_the_spans_table_has_one_row_per_mark_in_every_format(researcher, capture, export_format):
    study = spans_data(researcher)
    expected = expected_span_rows(study)
    # Two annotators, each two spans and an omission on one caption, nothing on the other.
    assert len(expected) == 6 and sum(r["omission"] for r in expected) == 2
    columns = table_columns(study, "spans")
    if export_format == "dataset":
        job = run(study, researcher, capture, "dataset")
        got = read_table(job_path(job), "dataset", columns, table="spans")
    else:
        job = run(study, researcher, capture, export_format, table="spans")
        got = read_table(job_path(job), export_format, columns)
    assert got == comparable(expected, export_format)
    for row in got:
        if not row["omission"]:
            text = Caption.objects.get(pk=row["caption_id"]).text
            assert row["span_text"] == text[row["start"] : row["end"]]


def test_the_dataset_folder_holds_both_tables_and_names_their_rows(researcher, capture):
    study = spans_data(researcher)
    job = run(study, researcher, capture, "dataset")
    with zipfile.ZipFile(job_path(job)) as archive:
        names = set(archive.namelist())
        sheet = json.loads(archive.read("datasheet.json"))
        card = archive.read("README.md").decode()
        judgments = pq.read_table(io.BytesIO(archive.read("data/judgments.parquet")))
    assert {"data/judgments.parquet", "data/spans.parquet", "data/participants.parquet"} <= names
    assert judgments.num_rows == Judgment.objects.filter(study=study).count() == 4
    assert sheet["tables"]["spans"]["row"] == "marked error (span or omission)"
    assert sheet["tables"]["spans"]["counts"]["rows"] == 6
    assert sheet["tables"]["spans"]["counts"]["judgments"] == 2
    assert "config_name: spans" in card
    assert job.result["table"] == "judgments+participants+judges+caption_metrics+spans"


def test_the_datasheet_of_a_spans_download_describes_its_columns(researcher, capture):
    study = spans_data(researcher)
    job = run(study, researcher, capture, "csv", table="spans")
    sheet = json.loads(
        (Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result["datasheet"]).read_text()
    )
    assert list(sheet["tables"]) == ["spans"]
    described = [c["name"] for c in sheet["tables"]["spans"]["columns"]]
    assert described == [c.name for c in table_columns(study, "spans")]
    assert job.result_file.endswith("-spans.csv")


def test_the_export_page_and_the_api_offer_the_spans_table(client, researcher, capture):
    study = spans_data(researcher)
    client.force_login(researcher)
    page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert '<option value="spans">' in page
    with capture(execute=True):
        answer = client.post(
            reverse("api_study_exports", args=[study.pk]),
            {"format": "jsonl", "table": "spans"},
            content_type="application/json",
        )
    assert answer.status_code == 202
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.status == "done" and job.params["table"] == "spans"
    lines = job_path(job).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(expected_span_rows(study))


def test_an_unknown_table_is_refused_by_name_and_no_job_is_made(client, researcher, make_study):
    study = spans_data(researcher)
    other = make_study("thumb")
    client.force_login(researcher)
    url = reverse("api_study_exports", args=[study.pk])
    answer = client.post(url, {"table": "spanz"}, content_type="application/json")
    assert answer.status_code == 400 and "Unknown table 'spanz'" in answer.json()["table"][0]
    # The spans table is the spans mode's: another mode's study has none (404: a table the
    # schema lists, but not this study's).
    url = reverse("api_study_exports", args=[other.pk])
    answer = client.post(url, {"table": "spans"}, content_type="application/json")
    assert answer.status_code == 404 and "spans" not in study_tables(other)
    assert "Unknown table 'spans'" in answer.json()["table"][0]
    assert not Job.objects.filter(kind=Job.Kind.EXPORT).exists()
    with pytest.raises(ServiceError, match="Unknown table"):
        export_request(study=other, user=researcher, export_format="csv", table="spans")


def test_the_command_writes_the_spans_table(researcher, tmp_path):
    study = spans_data(researcher)
    out = io.StringIO()
    call_command(
        "export_study",
        str(study.pk),
        "--table",
        "spans",
        "--output",
        str(tmp_path / "s.csv"),
        stdout=out,
    )
    assert "Wrote 6 rows" in out.getvalue()
    rows = read_table(tmp_path / "s.csv", "csv", table_columns(study, "spans"))
    assert rows == comparable(expected_span_rows(study), "csv")
    with pytest.raises(CommandError, match="Unknown table 'nope'"):
        call_command(
            "export_study", str(study.pk), "--table", "nope", "--output", str(tmp_path / "x")
        )


def test_csv_cells_parse_back(researcher):
    # read_table's parser is shared with test_exports; this pins the bool cells it reads.
    assert parse_csv_cell("true", "bool") is True and parse_csv_cell("", "int") is None
