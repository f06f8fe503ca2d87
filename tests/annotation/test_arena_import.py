"""Battle logs and ImageInWords side-by-side files imported as closed arena studies.

The ImageInWords tests read ``../shared/datasets/imageinwords`` and skip when ``../shared``
is absent; when it is there, every count must match a count of the file made here.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Item, Judgment, Study
from annotation.modes.arena.protocol import IIW_NAMES
from annotation.services.reports import report_request
from annotation.services.runner import job_run

pytestmark = pytest.mark.django_db

IIW = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "imageinwords"


def imported(path, fmt, owner) -> tuple[Study, str]:
    out = io.StringIO()
    call_command(
        "import_ratings", str(path), "--format", fmt, "--owner", owner.username, stdout=out
    )
    return Study.objects.order_by("-pk").first(), out.getvalue()


def report_of(study, user):
    job = report_request(study=study, user=user)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return job.result


def test_a_battle_log_becomes_a_closed_study_in_canonical_order(tmp_path, researcher):
    log = tmp_path / "arena.jsonl"
    battles = [
        {"model_a": "zeta", "model_b": "alpha", "winner": "model_a", "judge": "j1",
         "caption_a": "a long zeta caption here", "caption_b": "alpha's", "image": "i1"},
        {"model_a": "alpha", "model_b": "zeta", "winner": "model_a", "judge": "j2",
         "caption_a": "alpha text", "caption_b": "zeta text", "image": "i2"},
        {"model_a": "alpha", "model_b": "mu", "winner": "tie (bothbad)", "image": "i1",
         "caption_a": "alpha's", "caption_b": "mu words"},
        {"model_a": "mu", "model_b": "zeta", "winner": "model_b"},
    ]  # fmt: skip
    log.write_text("\n".join(json.dumps(b) for b in battles) + "\n")

    study, out = imported(log, "battles", researcher)

    assert study.mode == "arena" and study.status == Study.Status.CLOSED
    assert "4 battles" in out
    assert "Missing: the image of some battles" in out
    judgments = list(Judgment.objects.filter(study=study).order_by("item__position"))
    # Battle 1: zeta was shown left and won; canonically alpha is a, so model_b won.
    first = judgments[0]
    assert (first.item.spec["system_a"], first.item.spec["system_b"]) == ("alpha", "zeta")
    assert first.payload == {"left": "b", "outcome": "a"}
    assert first.result["winner"] == "model_b"
    assert judgments[1].result["winner"] == "model_a"
    assert judgments[1].payload["left"] == "a"
    assert judgments[2].result["winner"] == "tie (bothbad)"
    # mu vs zeta, zeta (b) won: canonical order unchanged.
    assert judgments[3].result["winner"] == "model_b"
    assert {j.participant.external_id for j in judgments} == {"j1", "j2", "dataset-judge"}
    # The same text of one system on one image is one caption.
    assert study.captions.filter(system="alpha", image__name="i1").count() == 1
    assert Item.objects.filter(study=study).count() == 4


def test_a_bad_battle_log_names_the_line_and_writes_nothing(tmp_path, researcher):
    log = tmp_path / "bad.jsonl"
    log.write_text(
        json.dumps({"model_a": "a", "model_b": "b", "winner": "model_a"})
        + "\n"
        + json.dumps({"model_a": "a", "model_b": "b", "winner": "left"})
        + "\n"
    )
    before = Study.objects.count()

    with pytest.raises(CommandError) as refused:
        imported(log, "battles", researcher)

    assert "line 2" in str(refused.value) and "winner" in str(refused.value)
    assert Study.objects.count() == before


def iiw_file(name: str) -> Path:
    path = IIW / name
    if not path.exists():
        pytest.skip(f"ImageInWords file not found at {path} (../shared is absent)")
    return path


def independent_counts(path: Path) -> dict[tuple[str, str, str], Counter]:
    """Per (system a, system b, criterion) in the arena's canonical order (the name that
    sorts first is a), the labels counted from the file's raw strings: +2 = a substantially
    better ... -2 = b substantially better."""
    columns = {
        "DCI_Test": [(None, "IIW", "DCI")],
        "DOCCI_Test": [(None, "IIW", "DOCCI")],
        "IIW-400": [
            ("iiw-human-sxs-gpt4v", "IIW-Human", "GPT-4V"),
            ("iiw-human-sxs-iiw-p5b", "IIW-Human", "IIW-P5B"),
        ],
    }[path.stem]
    counts: dict[tuple[str, str, str], Counter] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        for column, one, other in columns:
            metrics = row if column is None else row.get(column)
            if not metrics:
                continue
            a, b = sorted((one, other))
            for key, iiw in IIW_NAMES.items():
                label = metrics[f"metrics/{iiw}"]
                code = {
                    f"{a} is substantially better": 2,
                    f"{a} is marginally better": 1,
                    "Neutral": 0,
                    f"{b} is marginally better": -1,
                    f"{b} is substantially better": -2,
                }[label]
                counts.setdefault((a, b, key), Counter())[code] += 1
    return counts


def test_dci_test_comprehensiveness_matches_the_papers_counts(researcher):
    study, out = imported(iiw_file("DCI_Test.jsonl"), "iiw-sxs", researcher)
    report = report_of(study, researcher)

    row = next(c for c in report["criteria"] if c["criterion"] == "comprehensiveness")
    # The numbers: DCI substantially 3, marginally 8, neutral 21, IIW marginally 34,
    # IIW substantially 46 (DCI sorts first, so it is side a: +2 is "DCI substantially").
    assert (row["system_a"], row["system_b"]) == ("DCI", "IIW")
    assert [row["counts"][str(v)] for v in (2, 1, 0, -1, -2)] == [3, 8, 21, 34, 46]
    assert row["n"] == 112
    # IIW wins comprehensiveness: the interval of the mean label is below 0.
    assert row["high"] < 0 and row["winner"] == "IIW"
    assert "Missing: caption texts of DCI (not in the file)." in out
    assert "Missing: an overall verdict" in out
    assert report["battles"] == 0 and report["without_verdict"] == 112


@pytest.mark.parametrize(
    ("name", "comparisons"),
    [("DCI_Test.jsonl", 112), ("DOCCI_Test.jsonl", 100), ("IIW-400.jsonl", 200)],
)
def test_every_criterion_count_equals_an_independent_count(researcher, name, comparisons):
    path = iiw_file(name)
    study, _ = imported(path, "iiw-sxs", researcher)
    report = report_of(study, researcher)

    expected = independent_counts(path)
    got = {(c["system_a"], c["system_b"], c["criterion"]): c for c in report["criteria"]}
    assert set(got) == set(expected)
    assert sum(c["n"] for c in report["criteria"]) == comparisons * len(IIW_NAMES)
    for key, counter in expected.items():
        assert {int(k): v for k, v in got[key]["counts"].items() if v} == dict(counter)
        assert got[key]["low"] <= got[key]["mean"] <= got[key]["high"]
