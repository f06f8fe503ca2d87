"""Judges in the dataset export: their own table and alignment file, never rows of the
judgments table; on SQLite and (with DATABASE_URL) PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from annotation.models import Caption, JudgeAnswer, Study
from tests.annotation.test_judge_import import JUDGE, RATINGS

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged(researcher, tmp_path) -> Study:
    path = tmp_path / "vicr.csv"
    lines = ["image,caption,ratings,rating_2,rating_3"]
    lines += [f"img{i}.jpg,caption {i},{a},{b},{c}" for i, (a, b, c) in enumerate(RATINGS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    call_command(
        "import_ratings", str(path), "--format", "vicr-csv", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    study = Study.objects.get(owner=researcher)
    captions = list(Caption.objects.filter(study=study).order_by("id"))
    answers = tmp_path / "judge.jsonl"
    answers.write_text(
        "\n".join(
            json.dumps({"caption_id": c.pk, "answer": {"rating": j}, "raw_reply": "=1+1"})
            for c, j in zip(captions, JUDGE, strict=True)
        )
    )
    call_command(
        "import_judge", str(study.pk), str(answers), "--judge", "toy", "--model", "m",
        stdout=io.StringIO(),
    )  # fmt: skip
    return study


def test_the_judges_table_holds_every_answer_and_the_judgments_table_none(judged, tmp_path):
    out = tmp_path / "judges.csv"
    call_command(
        "export_study", str(judged.pk), "--table", "judges", "--output", str(out),
        stdout=io.StringIO(),
    )  # fmt: skip
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    stored = list(JudgeAnswer.objects.order_by("id"))
    assert [int(r["answer_id"]) for r in rows] == [a.pk for a in stored]
    assert {r["judge"] for r in rows} == {"toy"}
    assert [json.loads(r["scores"]) for r in rows] == [a.scores for a in stored]
    assert rows[0]["raw_reply"] == "'=1+1"  # the CSV injection rule holds here too
    people = tmp_path / "judgments.csv"
    call_command("export_study", str(judged.pk), "--output", str(people), stdout=io.StringIO())
    text = people.read_text(encoding="utf-8")
    assert "toy" not in text and len(list(csv.DictReader(io.StringIO(text)))) == 24


def test_a_dataset_zip_holds_the_judges_table_and_the_alignment(judged, tmp_path):
    out = tmp_path / "dataset.zip"
    call_command(
        "export_study", str(judged.pk), "--format", "dataset", "--output", str(out),
        stdout=io.StringIO(),
    )  # fmt: skip
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        assert {"data/judgments.parquet", "data/judges.parquet", "judge_alignment.json"} <= names
        table = pq.read_table(io.BytesIO(archive.read("data/judges.parquet")))
        alignment = json.loads(archive.read("judge_alignment.json"))
        sheet = json.loads(archive.read("datasheet.json"))
    assert table.num_rows == 8 and table.column("judge").to_pylist() == ["toy"] * 8
    [judge] = alignment["judges"]
    assert judge["name"] == "toy" and "kendall_tau_c" in judge["scores"]["rating"]["correlation"]
    assert sheet["tables"]["judges"]["row"] == "judge answer"
    assert sheet["tables"]["judges"]["counts"]["rows"] == 8
