"""Issue 26, row 4: the metric lab's per-caption scores leave the platform, in every export
format (the ``caption_metrics`` table, one column per metric named by implementation) and in
``GET /api/studies/<id>/metrics/``, with the values the lab stored.

Expected values: ``Caption.metrics`` as stored, which the metric lab's own tests check against
sacrebleu and rouge-score; here the BLEU scores are also recomputed with sacrebleu.
"""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import sacrebleu
from django.conf import settings as django_settings
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Caption, Job, Study
from annotation.services import metrics as lab
from annotation.services.exports import export_file, export_request, table_columns
from annotation.services.exports.captions import metric_column_names
from annotation.services.imports.releases import release_import
from annotation.tasks import enqueue
from tests.factories.metrics import IMAGES, write_references_csv, write_release

pytestmark = pytest.mark.django_db

BLEU, ROUGE = "BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)"
BLEU_COLUMN, ROUGE_COLUMN = "metric_bleu_4_sacrebleu", "metric_rouge_l_rouge_score"
ODD = 'It\'s "odd" %s'


@pytest.fixture
def scored(researcher, tmp_path, django_capture_on_commit_callbacks) -> Study:
    """A THumB study (4 images x 3 systems) with references and BLEU and ROUGE-L computed
    by the metric lab's job."""
    study = release_import(
        fmt="thumb-1.0",
        owner=researcher,
        path=write_release(tmp_path / "release.jsonl"),
        name="Lab",
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    with django_capture_on_commit_callbacks(execute=True):
        call_command(
            "compute_metrics", study.pk, "--metrics", BLEU, ROUGE, "--resamples", "20", "--no-wait"
        )
    job = lab.metrics_latest(study)
    assert job is not None and job.status == Job.Status.DONE, job and job.error
    return study


def stored(study) -> dict[int, dict]:
    return {c.pk: c.metrics for c in Caption.objects.filter(study=study)}


def read(path: Path, export_format: str) -> list[dict]:
    if export_format == "parquet":
        return pq.read_table(path).to_pylist()
    if export_format == "jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    with path.open(encoding="utf-8", newline="") as data:
        return [
            {k: (float(v) if k.startswith("metric_") and v else v or None) for k, v in row.items()}
            | {"caption_id": int(row["caption_id"])}
            for row in csv.DictReader(data)
        ]


def test_column_names_name_the_implementation_and_never_collide():
    assert metric_column_names(
        ["CIDEr (pycocoevalcap)", BLEU, "METEOR 1.5 (pycocoevalcap)", "a b", "a-b", "???"]
    ) == {
        "CIDEr (pycocoevalcap)": "metric_cider_pycocoevalcap",
        BLEU: BLEU_COLUMN,
        "METEOR 1.5 (pycocoevalcap)": "metric_meteor_1_5_pycocoevalcap",
        "a b": "metric_a_b",
        "a-b": "metric_a_b_2",
        "???": "metric_unnamed",
    }


@pytest.mark.parametrize("export_format", ["csv", "jsonl", "parquet"])
def test_each_format_carries_every_stored_score(scored, researcher, export_format, tmp_path):
    path = tmp_path / f"out.{export_format}"
    summary = export_file(
        study=scored, path=path, export_format=export_format, table="caption_metrics"
    )

    rows = read(path, export_format)
    want = stored(scored)
    assert summary.rows == len(rows) == len(want) == 12
    assert [row["caption_id"] for row in rows] == sorted(want)
    refs = {name: r for name, r in IMAGES.values()}
    for row in rows:
        metrics = want[row["caption_id"]]
        assert row[BLEU_COLUMN] == pytest.approx(metrics[BLEU], abs=1e-12)
        assert row[ROUGE_COLUMN] == pytest.approx(metrics[ROUGE], abs=1e-12)
        # and, independently of the lab, sacrebleu on the same texts
        caption = Caption.objects.select_related("image").get(pk=row["caption_id"])
        expected = sacrebleu.sentence_bleu(caption.raw_text, refs[caption.image.name]).score
        assert row[BLEU_COLUMN] == pytest.approx(expected, abs=1e-9)
        assert (row["image"], row["system"]) == (caption.image.name, caption.system)
    if export_format == "parquet":
        schema = pq.read_schema(path)
        assert schema.field(BLEU_COLUMN).metadata[b"description"].startswith(BLEU.encode())
    sheet = json.loads(path.with_name(f"{path.stem}.datasheet.json").read_text())
    table = sheet["tables"]["caption_metrics"]
    assert table["row"] == "caption" and table["counts"]["captions"] == 12
    assert {c["name"] for c in table["columns"]} >= {BLEU_COLUMN, ROUGE_COLUMN}


def test_the_dataset_folder_loads_with_the_metric_columns(scored, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    export_file(study=scored, path=tmp_path / "set.zip", export_format="dataset")
    folder = tmp_path / "folder"
    with zipfile.ZipFile(tmp_path / "set.zip") as archive:
        archive.extractall(folder)

    loaded = datasets.load_dataset(str(folder), "caption_metrics", cache_dir=str(tmp_path / "c"))
    judgments = datasets.load_dataset(str(folder), "judgments", cache_dir=str(tmp_path / "c"))
    rows = loaded["train"]
    assert {BLEU_COLUMN, ROUGE_COLUMN} <= set(rows.column_names)
    want = stored(scored)
    for caption_id, bleu in zip(rows["caption_id"], rows[BLEU_COLUMN], strict=True):
        assert bleu == pytest.approx(want[caption_id][BLEU], abs=1e-12)
    # Every caption of the judgments table finds its scores (the join a researcher does).
    assert set(judgments["train"]["caption_id"]) <= set(rows["caption_id"])
    assert "caption_metrics" in (folder / "README.md").read_text()


def test_a_study_without_scores_exports_its_captions_and_bad_values_as_empty(scored, tmp_path):
    junk = Caption.objects.filter(study=scored).order_by("id").first()
    # Text and booleans are no score; a name with quotes and a placeholder is only data.
    junk.metrics = {**junk.metrics, BLEU: "n/a", "Imported (x)": True, ODD: 0.25}
    junk.raw_text = "=HYPERLINK(1)"
    junk.save()
    path = tmp_path / "out.csv"
    export_file(study=scored, path=path, export_format="csv", table="caption_metrics")
    rows = read(path, "csv")
    first = next(row for row in rows if row["caption_id"] == junk.pk)
    assert first[BLEU_COLUMN] is None and first["metric_imported_x"] is None
    assert first["metric_it_s_odd_s"] == 0.25
    assert all(row["metric_it_s_odd_s"] is None for row in rows if row is not first)
    assert first["raw_caption"] == "'=HYPERLINK(1)"  # neutralised like every CSV text

    Caption.objects.filter(study=scored).update(metrics={})
    names = [c.name for c in table_columns(scored, "caption_metrics")]
    assert not any(name.startswith("metric_") for name in names)
    export_file(study=scored, path=path, export_format="parquet", table="caption_metrics")
    assert pq.read_table(path).num_rows == 12


def test_the_page_offers_the_table_and_the_job_exports_it(
    scored, client, researcher, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    page = client.get(reverse("study_detail", args=[scored.pk])).content.decode()
    assert '<option value="caption_metrics">' in page
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(
            export_request(
                study=scored, user=researcher, export_format="csv", table="caption_metrics"
            )
        )
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    rows = read(Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file, "csv")
    assert len(rows) == 12 and BLEU_COLUMN in rows[0]


def test_the_api_pages_through_each_captions_scores(scored, client, researcher, other_researcher):
    client.force_login(researcher)
    url = f"/api/studies/{scored.pk}/metrics/"
    body = client.get(url).json()["captions"]
    want = stored(scored)
    assert body["count"] == 12 and body["next"] is None
    assert body["columns"] == {BLEU: BLEU_COLUMN, ROUGE: ROUGE_COLUMN}
    assert [row["caption_id"] for row in body["results"]] == sorted(want)
    for row in body["results"]:
        assert row["metrics"][BLEU_COLUMN] == pytest.approx(want[row["caption_id"]][BLEU])
        assert row["metrics"][ROUGE_COLUMN] == pytest.approx(want[row["caption_id"]][ROUGE])

    page = client.get(url, {"limit": 5, "offset": 10}).json()["captions"]
    assert [row["caption_id"] for row in page["results"]] == sorted(want)[10:]
    assert page["next"] is None and "offset=5" in page["previous"]
    first = client.get(url, {"limit": 5}).json()["captions"]
    assert len(first["results"]) == 5 and "offset=5" in first["next"]
    # Nonsense paging falls back to the default page, never an error.
    assert (
        len(client.get(url, {"limit": "many", "offset": "-3"}).json()["captions"]["results"]) == 12
    )
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "metric_cider_pycocoevalcap" in schema

    client.force_login(other_researcher)
    assert client.get(url).status_code == 404
