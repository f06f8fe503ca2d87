"""Exports: each mode's tidy table read back from every format and compared cell by cell
with the database, the datasheet's counts against the file, queries that do not grow with
the study, privacy (pseudonyms, raw ids for the owner only, no secrets), CSV injection,
line separators in JSONL, the dataset folder loaded by Hugging Face ``datasets``, the
participants table, the page, the API, the command, atomic files and old-file cleanup."""

import csv
import io
import json
import math
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Caption, Image, Item, Job, Judgment, Participant, Study
from annotation.modes.base import Mode, Outcome, get_mode, register
from annotation.services import exports
from annotation.services.assignments import assignment_next
from annotation.services.exports import (
    export_delete_old,
    export_file,
    export_request,
    table_columns,
)
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_open
from annotation.tasks import enqueue
from tests.factories.core import skip_or_fail
from tests.factories.humanr import careless, crowd, do_group, honest, humanr_study
from tests.factories.thumb import make_annotator, tiny_study  # noqa: F401
from tests.factories.vicr import exact, far, in_game, play, player, vicr_study

pytestmark = pytest.mark.django_db

FORMATS = ("csv", "jsonl", "parquet", "dataset")
FORMULAS = ('=HYPERLINK("http://x","y")', "+cmd", "@SUM(1)", "-2+3", "\tTab", "\rCR")
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
RELEASE = SHARED / "thumb-1.0" / "mscoco_THumB-1.0.jsonl"
TABLE_2 = {  # THumB paper Table 2: system -> (P, R)
    "Human": (4.82, 4.35),
    "VinVL-large": (4.54, 3.97),
    "VinVL-base": (4.47, 3.95),
    "Unified-VLP": (4.35, 3.77),
    "Up-Down": (4.29, 3.50),
}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


# ---------------------------------------------------------------------- studies


def vicr_data(owner, *, game_ratings=2, players=2):
    """Tutorial ratings of one player, game ratings of others; a formula-like caption,
    a caption with line separators, a player who completed with integrity flags."""
    study = vicr_study(owner, game=max(4, game_ratings))
    odd = Caption.objects.filter(study=study, purpose="study").order_by("id")
    odd.filter(pk=odd[0].pk).update(text=FORMULAS[0])
    odd.filter(pk=odd[1].pk).update(text='two\u2028lines\x85and\u2029more,"quoted"\n')
    learner = player(study, "PID-LEARNER")
    for _ in range(3):
        play(learner, answer=exact)
    # A player who fails the tutorial rates probation pairs: the attempt column is 1.
    failing = player(study, "PID-PROBATION")
    for _ in range(get_mode("vicr").settings(study).tutorial_pairs):
        play(failing, answer=far)
    for _ in range(2):
        play(failing, answer=exact)
    assert Judgment.objects.filter(study=study, item__kind="probation").count() == 2
    for n in range(players):
        gamer = in_game(study, f"PID-GAME-{n}")
        for rating in range(game_ratings):
            play(gamer, 1 + (rating + n) % 5)
    Participant.objects.filter(pk=learner.pk).update(
        completed_at=timezone.now(),
        flags=[
            {"kind": "rate_limit", "at": "2025-01-01T00:00:00Z", "detail": "x"},
            {"kind": "foreign_browser", "at": "2025-01-01T00:00:01Z", "detail": "y"},
            {"kind": "rate_limit", "at": "2025-01-01T00:00:02Z", "detail": "z"},
        ],
        address="203.0.113.7",
        browser_id="BROWSER-SECRET-1",
    )
    return study


def humanr_data(owner):
    study = humanr_study(owner, images=18, systems=("GIT",), workers_per_comparison=2)
    do_group(crowd(study, "PID-H1"), honest)
    do_group(crowd(study, "PID-H2"), careless)  # a failed check flags the group
    do_group(
        crowd(
            study,
            "WORKER-M",
            source=Participant.Source.MTURK,
            meta={"workerId": "WORKER-M", "assignmentId": "ASSIGN-M", "hitId": "H"},
        ),
        honest,
        parts=4,
    )
    return study


def thumb_data(make_study, make_annotator):  # noqa: F811
    return tiny_study(make_study, make_annotator)


@pytest.fixture
def studies(researcher, make_study, make_annotator):  # noqa: F811
    """Build a case's fixture study (each builder takes what it needs of these)."""
    return lambda case: case.build(researcher, make_study, make_annotator)


# ---------------------------------------------------------------------- expected rows
# Computed from model instances, independently of the export's SQL.


def common(judgment) -> dict[str, Any]:
    return {
        "judgment_id": judgment.pk,
        "participant": judgment.participant.pseudonym,
    }


def trailing(judgment) -> dict[str, Any]:
    return {
        "created_at": judgment.created_at,
        "dwell_ms": judgment.dwell_ms,
        "excluded": judgment.excluded,
        "exclusion_reason": judgment.exclusion_reason,
        "sampling_probability": judgment.item.sampling_probability,
        "sampling_design": judgment.item.sampling_design,
    }


def judgments_of(study):
    return (
        Judgment.objects.filter(study=study)
        .select_related("participant", "assignment", "item", "item__image")
        .order_by("id")
    )


def expected_vicr(study) -> list[dict[str, Any]]:
    rows = []
    for j in judgments_of(study):
        caption = Caption.objects.select_related("image").get(pk=j.item.spec["caption_id"])
        r = j.result
        rows.append(
            {
                **common(j),
                "phase": j.item.kind,
                "attempt": r.get("attempt", j.assignment.round),
                "caption_id": caption.pk,
                "image": caption.image.name,
                "system": caption.system,
                "caption": caption.text,
                "rating": j.payload["rating"],
                **{
                    k: r.get(src)
                    for k, src in (
                        ("points", "points"),
                        ("truth", "truth"),
                        ("consensus", "consensus"),
                        ("pool_size", "pool_size"),
                        ("pool_human", "pool_human"),
                        ("pool_primed", "pool_primed"),
                        ("score_after", "score_after"),
                    )
                },
                "player_status": j.participant.status,
                "final_view": j.item.kind == "game"
                and not j.excluded
                and j.participant.status == "game",
                **trailing(j),
            }
        )
    return rows


def expected_humanr(study) -> list[dict[str, Any]]:
    rows = []
    for j in judgments_of(study):
        r = j.result
        left = Caption.objects.get(pk=r["left_caption_id"])
        right = Caption.objects.get(pk=r["right_caption_id"])
        trial = j.item.spec["trials"][j.part]
        if trial["kind"] == "attention_check":
            # A check is drawn per lease (humanr/checks.py): the spec holds only its place.
            # The shown image is the one of exactly one of its two captions.
            assert left.image_id != right.image_id
            trial = {
                **trial,
                "image_name": Image.objects.get(pk=r["image_id"]).name,
                "reference_caption_id": left.pk if left.image_id == r["image_id"] else right.pk,
            }
        rows.append(
            {
                **common(j),
                "group": j.item.spec["group"],
                "trial": j.part + 1,
                "trial_kind": j.item.spec["trials"][j.part]["kind"],
                "image": trial["image_name"],
                "system": trial["system"],
                "left_caption_id": left.pk,
                "left_caption": left.text,
                "left_system": r["left_system"],
                "right_caption_id": right.pk,
                "right_caption": right.text,
                "right_system": r["right_system"],
                "human_side": "left" if trial["reference_caption_id"] == left.pk else "right",
                "raw": j.payload["raw"],
                "score": r["value"],
                "is_attention_check": j.item.spec["trials"][j.part]["kind"] == "attention_check",
                "attention_check_failed": r["check_failed"],
                "group_finished": j.assignment.status == "submitted",
                **trailing(j),
            }
        )
    return rows


def expected_thumb(study) -> list[dict[str, Any]]:
    fields = ("precision", "recall", "fluency", "conciseness", "inclusive")
    first_stage1: dict[int, Judgment] = {}
    for j in judgments_of(study):
        if j.item.kind == "stage1" and not j.excluded:
            first_stage1.setdefault(j.item.image_id, j)
    rows = []
    for j in judgments_of(study):
        before = first_stage1.get(j.item.image_id) if j.item.kind == "stage2" else None
        per_caption = []
        for key, scores in j.payload["captions"].items():
            for caption_id in scores["caption_ids"]:
                caption = Caption.objects.get(pk=caption_id)
                modified = (j.result or {}).get("modified", {}).get(key, {})
                earlier = before.payload["captions"][key] if before else {}
                per_caption.append(
                    {
                        **common(j),
                        "stage": j.item.kind,
                        "image": j.item.image.name,
                        "caption_id": caption.pk,
                        "system": caption.system,
                        "caption": caption.text,
                        "raw_caption": caption.raw_text,
                        **{f: scores.get(f) for f in ("precision", "recall", "fluency")},
                        "fluency_errors": scores.get("fluency_errors"),
                        **{f: scores.get(f) for f in ("conciseness", "inclusive", "total")},
                        "changed": ";".join(f for f in fields if modified.get(f))
                        if j.item.kind == "stage2"
                        else None,
                        **{f"stage1_{f}": earlier.get(f) for f in fields},
                        **trailing(j),
                    }
                )
        rows += sorted(per_caption, key=lambda row: row["caption_id"])
    return rows


@dataclass(frozen=True)
class Case:
    """A mode's round trip: its fixture study, the rows its export must hold, and whether a
    judgment gives several rows (a THumB judgment scores every caption of its image)."""

    build: Callable[..., Study]  # (researcher, make_study, make_annotator) -> the study
    expected: Callable[[Study], list[dict[str, Any]]]
    several_rows_per_judgment: bool


CASES = [
    Case(lambda _r, make, annotator: thumb_data(make, annotator), expected_thumb, True),
    Case(lambda researcher, *_: vicr_data(researcher), expected_vicr, False),
    Case(lambda researcher, *_: humanr_data(researcher), expected_humanr, False),
]


# ---------------------------------------------------------------------- reading files back


def read_table(path: Path, export_format: str, columns, table="judgments") -> list[dict]:
    """The file's rows with typed values (CSV and JSONL parsed by the column types)."""
    types = {c.name: c.type for c in columns}
    if export_format == "parquet":
        return pq.read_table(path).to_pylist()
    if export_format == "dataset":
        with zipfile.ZipFile(path) as archive:
            return pq.read_table(io.BytesIO(archive.read(f"data/{table}.parquet"))).to_pylist()
    if export_format == "jsonl":
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()  # what the readers do
        rows = [json.loads(line) for line in lines]
        for row in rows:
            for name, kind in types.items():
                if kind == "timestamp" and row[name] is not None:
                    row[name] = datetime.fromisoformat(row[name])
        return rows
    with path.open(encoding="utf-8", newline="") as data:
        reader = csv.DictReader(data)
        assert reader.fieldnames == list(types), "the header names every column in order"
        rows = []
        for raw in reader:
            rows.append({name: parse_csv_cell(raw[name], types[name]) for name in types})
        return rows


def parse_csv_cell(cell: str, kind: str) -> Any:
    if kind == "str":
        return cell
    if cell == "":
        return None
    if kind == "int":
        return int(cell)
    if kind == "float":
        return float(cell)
    if kind == "bool":
        return {"true": True, "false": False}[cell]
    return datetime.fromisoformat(cell)


def neutralised(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def as_file_value(value: Any, kind: str, export_format: str) -> Any:
    """What the expected value looks like once written in ``export_format``."""
    if kind == "str" and isinstance(value, dict):
        return value  # compared as parsed JSON
    if kind == "str" and export_format == "csv":
        return neutralised(value) if value else ""
    if kind == "float" and value is not None:
        return float(value)
    if kind == "timestamp" and value is not None:
        return value.astimezone(UTC)
    return value


def assert_same_rows(got: list[dict], expected: list[dict], columns, export_format) -> None:
    assert len(got) == len(expected)
    for n, (row, want) in enumerate(zip(got, expected, strict=True)):
        assert list(row) == [c.name for c in columns]
        for column in columns:
            value = row[column.name]
            target = as_file_value(want[column.name], column.type, export_format)
            if isinstance(target, dict):
                value = json.loads(value)
            if isinstance(value, float) and isinstance(target, float):
                assert math.isclose(value, target), (n, column.name, value, target)
            else:
                assert value == target, (n, column.name, value, target)


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


def datasheet_of(job) -> dict:
    if job.result["format"] == "dataset":
        with zipfile.ZipFile(job_path(job)) as archive:
            return json.loads(archive.read("datasheet.json"))
    return json.loads(
        (Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result["datasheet"]).read_text()
    )


# ---------------------------------------------------------------------- round trips


@pytest.mark.parametrize("export_format", FORMATS)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.expected.__name__)
def test_every_cell_reads_back_as_the_database_holds_it(
    case, export_format, studies, researcher, capture
):
    study = studies(case)
    columns = table_columns(study, "judgments")

    job = run(study, researcher, capture, export_format)

    got = read_table(job_path(job), export_format, columns)
    expected = case.expected(study)
    assert expected, "the fixture has rows"
    assert_same_rows(got, expected, columns, export_format)
    if export_format == "parquet":
        schema = pq.read_schema(job_path(job))
        assert [f.type for f in schema] == [exports.ARROW_TYPES[c.type] for c in columns]
        assert all(f.metadata[b"description"] for f in schema)

    counts = datasheet_of(job)["tables"]["judgments"]["counts"]
    assert counts["rows"] == len(got)
    assert counts["judgments"] == len({row["judgment_id"] for row in got})
    assert counts["judgments"] == Judgment.objects.filter(study=study).count()
    assert counts["excluded_rows"] == sum(bool(row["excluded"]) for row in got)
    assert counts["participants"] == len({row["participant"] for row in got})
    assert counts["images"] == len({row["image"] for row in got})
    caption_columns = [c.name for c in columns if c.counts == "captions"]
    assert counts["captions"] == len({row[name] for row in got for name in caption_columns})
    assert case.several_rows_per_judgment == (counts["rows"] > counts["judgments"])


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.expected.__name__)
def test_no_column_is_always_empty_and_none_repeats_another(case, studies, researcher, capture):
    study = studies(case)
    columns = table_columns(study, "judgments")
    job = run(study, researcher, capture, "parquet")
    table = pq.read_table(job_path(job))

    for column in columns:
        if column.name == "exclusion_reason" and not pc.any(table["excluded"]).as_py():
            continue  # empty exactly when nothing is excluded
        if column.name.startswith("sampling_"):
            continue  # empty exactly when the study draws no design (test_people_design_*)
        values = table[column.name]
        assert values.null_count < len(values), f"{column.name} is always null"
        if column.type == "str":
            assert pc.any(pc.not_equal(values, "")).as_py(), f"{column.name} is always empty"
    names = [c.name for c in columns]
    assert len(names) == len(set(names))
    assert not any(n.startswith(("payload", "result")) for n in names), "no JSON blobs"


def test_the_default_table_of_a_mode_without_one(researcher, make_study, capture):
    study = make_study("test-default")
    image = Image.objects.create(
        study=study, name="i.png", sha256="0" * 64, file="o", display="d", width=1, height=1,
        format="PNG",
    )  # fmt: skip
    Caption.objects.create(study=study, image=image, system="Human", raw_text="x", text="x")

    study_open(study=study)
    worker = crowd(study, "PID-D")
    lease = assignment_next(participant=worker)
    judgment_submit(participant=worker, token=lease.token, data={"rating": 4})

    job = run(study, researcher, capture, "jsonl")

    (row,) = read_table(job_path(job), "jsonl", table_columns(study, "judgments"))
    judgment = Judgment.objects.get()
    assert json.loads(row["payload"]) == judgment.payload == {"rating": 4}
    assert json.loads(row["result"]) == judgment.result
    assert row["participant"] == worker.pseudonym


@register
class DefaultTableTestMode(Mode):
    name = "test-default"

    def build_items(self, study):
        return [
            Item(study=study, kind="rate", image_id=c.image_id, spec={"caption_id": c.pk})
            for c in Caption.objects.filter(study=study)
        ]

    def validate(self, assignment, part, data):
        if data.get("rating") not in range(1, 6):
            raise ServiceError("rating 1-5", field="rating")
        return {"rating": data["rating"]}

    def after_submit(self, participant, judgment):
        return Outcome()


# ---------------------------------------------------------------------- queries, formats


@pytest.mark.parametrize("export_format", ["csv", "dataset"])
def test_queries_do_not_grow_with_the_judgments(researcher, tmp_path, export_format, settings):
    settings.CAPEVAL_EXPORT_CHUNK_SIZE = 3  # several chunks, so a per-chunk query would show
    counts = []
    for size in (2, 7):
        study = vicr_data(researcher, game_ratings=size, players=size)
        with CaptureQueriesContext(connection) as queries:
            summary = export_file(
                study=study, path=tmp_path / f"{size}.{export_format}", export_format=export_format
            )
        assert summary.judgments == Judgment.objects.filter(study=study).count()
        counts.append((summary.judgments, len(queries)))
    (small, small_queries), (large, large_queries) = counts
    assert large > 3 * small > 0
    assert small_queries == large_queries


def test_jsonl_escapes_line_separators_so_splitlines_gives_one_object_a_line(researcher, capture):
    study = vicr_data(researcher)
    job = run(study, researcher, capture, "jsonl")

    raw = job_path(job).read_bytes().decode("utf-8")
    assert "\u2028" not in raw and "\u2029" not in raw and "\x85" not in raw
    rows = [json.loads(line) for line in raw.splitlines()]
    assert len(rows) == Judgment.objects.filter(study=study).count()
    assert any(row["caption"] == 'two\u2028lines\x85and\u2029more,"quoted"\n' for row in rows)


def test_csv_neutralises_formula_text_and_keeps_numbers(researcher, capture):
    study = vicr_data(researcher)
    job = run(study, researcher, capture, "csv")

    with job_path(job).open(encoding="utf-8", newline="") as data:
        rows = list(csv.DictReader(data))
    formula = [row for row in rows if row["caption"].startswith("'=")]
    assert formula and formula[0]["caption"] == "'" + FORMULAS[0]
    negative = [row["points"] for row in rows if row["points"].startswith("-")]
    assert negative and all(int(p) < 0 for p in negative), "numbers are never prefixed"


def test_formula_prefixes_are_the_owasp_set():
    assert set(exports.FORMULA_PREFIXES) == {"=", "+", "-", "@", "\t", "\r"}
    for text in FORMULAS:
        assert exports.neutralise(text) == "'" + text
    assert exports.neutralise("a cat") == "a cat"


# ---------------------------------------------------------------------- participants, privacy


def test_participants_table_gives_completion_and_flags_without_raw_ids(researcher, capture):
    study = vicr_data(researcher)
    columns = table_columns(study, "participants")
    job = run(study, researcher, capture, "csv", table="participants")

    rows = read_table(job_path(job), "csv", columns)
    people = Participant.objects.filter(study=study).order_by("id")
    assert [row["participant"] for row in rows] == [p.pseudonym for p in people]
    for row, person in zip(rows, people, strict=True):
        kinds = sorted({flag["kind"] for flag in person.flags})
        assert row["source"] == person.source and row["status"] == person.status
        assert row["completed_at"] == person.completed_at
        assert row["completed"] is (person.completed_at is not None)
        assert row["judgments"] == person.judgments.count()
        assert (row["flag_count"], row["flag_kinds"]) == (len(person.flags), ";".join(kinds))
    learner = next(row for row in rows if row["flag_count"])
    assert learner["flag_count"] == 3 and learner["flag_kinds"] == "foreign_browser;rate_limit"
    assert "worker_id" not in rows[0]


def test_the_owner_may_add_raw_crowd_ids_and_nobody_else(
    researcher, other_researcher, capture, client
):
    study = humanr_data(researcher)
    study.members.add(other_researcher)
    with pytest.raises(ServiceError) as refused_here:
        export_request(
            study=study, user=other_researcher, export_format="csv", table="participants",
            raw_ids=True,
        )  # fmt: skip
    assert (refused_here.value.status, refused_here.value.field) == (403, "raw_ids")
    client.force_login(other_researcher)
    refused = client.post(
        reverse("study_export", args=[study.pk]),
        {"format": "csv", "table": "participants", "raw_ids": "on"},
    )
    assert refused.status_code == 403 and not Job.objects.exists()

    job = run(study, researcher, capture, "csv", table="participants", raw_ids=True)

    rows = read_table(job_path(job), "csv", table_columns(study, "participants", raw_ids=True))
    by_id = {row["worker_id"]: row for row in rows}
    assert set(by_id) == {"PID-H1", "PID-H2", "WORKER-M"}
    assert by_id["WORKER-M"]["submission_id"] == "ASSIGN-M"
    assert by_id["PID-H1"]["submission_id"] == "X"
    assert "raw Prolific/MTurk ids" in datasheet_of(job)["privacy"]


def all_text(job) -> str:
    """Every byte the export wrote, Parquet decoded to values, as one text."""
    path = job_path(job)
    texts = []
    if job.result["format"] == "dataset":
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                data = archive.read(name)
                if name.endswith(".parquet"):
                    texts.append(
                        json.dumps(pq.read_table(io.BytesIO(data)).to_pylist(), default=str)
                    )
                elif not name.startswith("images/"):
                    texts.append(data.decode())
        return "\n".join(texts)
    if job.result["format"] == "parquet":
        texts.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    else:
        texts.append(path.read_text(encoding="utf-8"))
    texts.append((Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result["datasheet"]).read_text())
    return "\n".join(texts)


@pytest.mark.parametrize("export_format", FORMATS)
def test_no_secret_leaves_in_any_format(export_format, researcher, capture):
    study = vicr_data(researcher)
    study.settings = {
        **study.settings,
        "completion_code": "CC-SETTING-SECRET",
        "prolific_completion_url": "https://app.prolific.com/submissions/complete?cc=CC-URL-SECRET",
    }
    study.description = "Why we collected this."
    study.save()

    text = all_text(run(study, researcher, capture, export_format))
    text += all_text(run(study, researcher, capture, export_format, table="participants"))

    for secret in (
        study.completion_code,
        "CC-SETTING-SECRET",
        "CC-URL-SECRET",
        "203.0.113.7",
        "BROWSER-SECRET-1",
        "PID-LEARNER",
        "PID-GAME-0",
        researcher.username,
    ):
        assert secret not in text, secret
    assert "Why we collected this." in text


# ---------------------------------------------------------------------- the dataset folder


def test_dataset_folder_loads_with_hugging_face_datasets(
    researcher, capture, tmp_path, monkeypatch
):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    study = vicr_data(researcher)
    media = Path(django_settings.MEDIA_ROOT)
    first = Image.objects.filter(study=study).order_by("id").first()
    (media / first.file).parent.mkdir(parents=True, exist_ok=True)
    (media / first.file).write_bytes(b"the-original-bytes")

    job = run(study, researcher, capture, "dataset", images=True)
    folder = tmp_path / "folder"
    with zipfile.ZipFile(job_path(job)) as archive:
        archive.extractall(folder)

    loaded = datasets.load_dataset(str(folder), "judgments", cache_dir=str(tmp_path / "cache"))
    people = datasets.load_dataset(str(folder), "participants", cache_dir=str(tmp_path / "cache"))
    table = pq.read_table(folder / "data" / "judgments.parquet")
    assert (
        loaded["train"].num_rows == table.num_rows == Judgment.objects.filter(study=study).count()
    )
    assert loaded["train"]["judgment_id"] == table["judgment_id"].to_pylist()
    assert people["train"].num_rows == Participant.objects.filter(study=study).count()
    assert (folder / "images" / first.name).read_bytes() == b"the-original-bytes"
    card = (folder / "README.md").read_text()
    for section in ("## Motivation", "## Composition", "## Protocol", "## Collection",
                    "## Exclusion rules", "## Agreement", "## Licence and citation"):  # fmt: skip
        assert section in card
    assert "min_ratings" in card and "| `rating` | int |" in card


@pytest.mark.skipif(not RELEASE.is_file(), reason="THumB 1.0 release absent (../shared)")
def test_the_published_thumb_release_exported_to_parquet_gives_table_2(researcher, tmp_path):
    call_command("import_thumb", str(RELEASE), "--owner", researcher.username, stdout=io.StringIO())
    study = Study.objects.get(mode="thumb")

    export_file(study=study, path=tmp_path / "thumb.parquet", export_format="parquet")

    table = pq.read_table(tmp_path / "thumb.parquet")
    assert table.num_rows == 2500, "500 images x 5 systems"
    means = table.group_by("system").aggregate([("precision", "mean"), ("recall", "mean")])
    got = {
        row["system"]: (round(row["precision_mean"], 2), round(row["recall_mean"], 2))
        for row in means.to_pylist()
    }
    assert got == TABLE_2


# ---------------------------------------------------------------------- page, API, command


def test_the_page_starts_a_parquet_export_of_the_participants(client, researcher, capture):
    study = vicr_data(researcher)
    client.force_login(researcher)
    page = client.get(reverse("study_detail", args=[study.pk]))
    assert b'value="parquet"' in page.content and b'name="raw_ids"' in page.content

    with capture(execute=True):
        response = client.post(
            reverse("study_export", args=[study.pk]),
            {"format": "parquet", "table": "participants"},
            HTTP_HX_REQUEST="true",
        )
    assert response.status_code == 200
    job = Job.objects.get(kind="export")
    assert job.params == {"format": "parquet", "table": "participants"}
    download = client.get(reverse("job_download", args=[job.pk]))
    table = pq.read_table(io.BytesIO(b"".join(download.streaming_content)))
    assert table.num_rows == Participant.objects.filter(study=study).count()
    bad = client.post(reverse("study_export", args=[study.pk]), {"format": "xlsx"})
    assert bad.status_code == 400


def test_the_api_exports_a_dataset_and_refuses_raw_ids_to_a_member(
    client, researcher, other_researcher, capture
):
    study = humanr_data(researcher)
    study.members.add(other_researcher)
    client.force_login(researcher)
    url = reverse("api_study_exports", args=[study.pk])
    with capture(execute=True):
        response = client.post(url, {"format": "dataset"}, content_type="application/json")
    assert response.status_code == 202, response.content
    polled = client.get(reverse("api_job", args=[response.json()["id"]])).json()
    assert polled["status"] == "done" and polled["result"]["format"] == "dataset"
    client.force_login(other_researcher)
    refused = client.post(
        url, {"format": "csv", "table": "participants", "raw_ids": True},
        content_type="application/json",
    )  # fmt: skip
    assert refused.status_code == 403


@pytest.mark.parametrize("export_format", FORMATS)
def test_the_command_writes_the_same_table(export_format, researcher, tmp_path):
    study = humanr_data(researcher)
    output = tmp_path / f"out.{export_format}"
    out = io.StringIO()

    call_command(
        "export_study", str(study.pk), "--format", export_format, "--output", str(output),
        stdout=out,
    )  # fmt: skip

    columns = table_columns(study, "judgments")
    assert_same_rows(
        read_table(output, export_format, columns), expected_humanr(study), columns, export_format
    )
    assert "Wrote" in out.getvalue()
    if export_format != "dataset":
        assert (tmp_path / "out.datasheet.json").is_file()
    with pytest.raises(CommandError):
        call_command("export_study", "999999", "--output", str(output))


# ---------------------------------------------------------------------- files


def test_a_failed_export_leaves_no_file_and_a_failed_job(researcher, capture, monkeypatch):
    study = vicr_data(researcher)

    def explode(self, batch):
        raise RuntimeError("disk full")

    monkeypatch.setattr(exports._CsvSink, "write", explode)
    with capture(execute=True):
        job = enqueue(export_request(study=study, user=researcher, export_format="csv"))
    job.refresh_from_db()
    assert job.status == "failed" and "disk full" in job.error
    assert not list(Path(django_settings.CAPEVAL_EXPORT_DIR).iterdir())


def test_old_export_files_are_deleted_and_their_jobs_kept(researcher, capture):
    study = vicr_data(researcher)
    job = run(study, researcher, capture, "dataset")
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(finished_at=now - timedelta(days=8))

    assert export_delete_old(days=7, now=now) == 1
    job.refresh_from_db()
    assert job.result_file == "" and not list(Path(django_settings.CAPEVAL_EXPORT_DIR).iterdir())


@pytest.mark.django_db(transaction=True)
def test_the_worker_path_on_its_own_connection_writes_what_a_transaction_writes(
    researcher, tmp_path
):
    if connection.vendor != "postgresql":
        skip_or_fail("the COPY pipe of a worker needs PostgreSQL (set DATABASE_URL)")

    study = vicr_data(researcher)
    for export_format in ("csv", "parquet"):
        export_file(
            study=study, path=tmp_path / f"worker.{export_format}", export_format=export_format
        )
        with transaction.atomic():
            export_file(
                study=study, path=tmp_path / f"atomic.{export_format}", export_format=export_format
            )
        columns = table_columns(study, "judgments")
        worker = read_table(tmp_path / f"worker.{export_format}", export_format, columns)
        assert worker == read_table(tmp_path / f"atomic.{export_format}", export_format, columns)
        assert_same_rows(worker, expected_vicr(study), columns, export_format)


def test_unknown_options_are_refused_without_a_job(researcher):
    study = vicr_data(researcher)
    with pytest.raises(ServiceError, match="xlsx"):
        enqueue(export_request(study=study, user=researcher, export_format="xlsx"))
    with pytest.raises(ServiceError, match="items"):
        enqueue(export_request(study=study, user=researcher, export_format="csv", table="items"))
    assert not Job.objects.exists()
    assert get_mode("vicr").export.columns()[0].name == "judgment_id"


# ---------------------------------------------------------------------- bounded memory helpers


def test_datasheet_counts_of_ids_across_many_batches_with_nulls():
    columns = [exports.ExportColumn("caption_id", "int", "Caption.", "captions")]
    schema = exports._schema(columns)
    tally = exports._Tally(columns)
    seen = set()
    for start in range(0, 5000, 100):  # ids repeat across batches; every 7th is null
        values = [None if n % 7 == 0 else n % 1234 for n in range(start, start + 100)]
        seen |= {v for v in values if v is not None}
        batch = pa.RecordBatch.from_arrays([pa.array(values)], schema=schema)
        tally.observe(batch.slice(1))  # an offset, as sliced batches have
        tally.observe(batch.slice(0, 1))
    assert tally.counts()["captions"] == len(seen)
    assert len(tally.ids["captions"]) < 50, "batches' ids are merged as they come"


def test_jsonl_timestamps_match_python_datetimes():
    when = [datetime(2025, 1, 2, 3, 4, 5, 678, tzinfo=UTC), None, datetime(2025, 1, 2, tzinfo=UTC)]
    column = pa.array(when, exports.ARROW_TYPES["timestamp"])
    assert exports._iso_column(column.slice(1)) == [None, "2025-01-02T00:00:00+00:00"]
    assert exports._iso_column(column)[0] == when[0].isoformat()


def test_parquet_gathers_small_batches_into_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(exports._ParquetSink, "ROW_GROUP_ROWS", 1000)
    columns = [exports.ExportColumn("n", "int", "A number.")]
    schema = exports._schema(columns)
    with (tmp_path / "t.parquet").open("wb") as out:
        sink = exports._ParquetSink(out)
        sink.open(schema)
        for start in range(0, 2500, 100):
            values = pa.array(range(start, start + 100), pa.int64())
            sink.write(pa.RecordBatch.from_arrays([values], schema=schema))
        sink.close()
    parquet = pq.ParquetFile(tmp_path / "t.parquet")
    assert parquet.metadata.num_row_groups == 3
    assert parquet.read().column("n").to_pylist() == list(range(2500))


# The libraries the export path does not use and must not load: each costs 30-60 MB of the
# export process's 200 MB (issue 27: importing the exports alone took 254 MB).
STATISTICS_LIBRARIES = ("pandas", "scipy", "matplotlib", "crowdkit", "choix", "sklearn")
# The metric lab's libraries: the job runner imports a kind's service when it first runs.
METRIC_LIBRARIES = ("sacrebleu", "portalocker")
ROOT = Path(__file__).resolve().parents[2]


def test_the_export_path_imports_no_statistics_library():
    """A fresh interpreter (this one has them all loaded by other tests) sets Django up,
    imports the exports, the job runner, the worker's tasks and every mode's export table,
    and lists which statistics and metric libraries are in ``sys.modules``."""
    program = (
        "import os, sys, json, django\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'capeval.settings')\n"
        "django.setup()\n"
        "import annotation.services.exports, annotation.services.runner, annotation.tasks\n"
        "from annotation.registry import MODES\n"
        "tables = [mode.export.columns() for mode in MODES.values()]\n"
        f"names = {STATISTICS_LIBRARIES + METRIC_LIBRARIES!r}\n"
        "print(json.dumps([len(tables), [n for n in names if n in sys.modules]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'platform'}"}
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    modes, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert modes >= 5, "every mode's export table was imported"
    assert loaded == [], f"the export path loaded {loaded}"
