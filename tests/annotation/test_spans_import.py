"""MQM TSV and ESA campaign CSV imported as closed spans studies (issue 24).

The published-data tests read ``../shared/datasets`` and skip when it is absent; when it is
there, the platform path (``import_ratings`` then the report job) must give the MQM
repository's published TED system scores, and the ESA campaign's per-system means and
span counts computed here with the csv module.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Item, Judgment, Study
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.rubrics.test_spans_published import PUBLISHED, ROUNDING

pytestmark = pytest.mark.django_db

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def imported(path, fmt, owner, *extra) -> tuple[Study, str]:
    out = io.StringIO()
    call_command(
        "import_ratings", str(path), "--format", fmt, "--owner", owner.username, *extra, stdout=out
    )
    return Study.objects.order_by("-pk").first(), out.getvalue()


def report_of(study, user):
    job = report_request(study=study, user=user)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return job.result


HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"
SMALL = HEADER + (
    "sysA\td1\t1\t1\tr1\tDer Hund.\tThe <v>cat</v>.\tAccuracy/Mistranslation\tMajor\n"
    "sysA\td1\t1\t1\tr1\tDer Hund.\tThe cat<v>.</v>\tFluency/Punctuation\tMinor\n"
    "sysA\td1\t1\t2\tr1\tJa.\tYes.\tNo-error\tNo-error\n"
    "sysB\td1\t1\t1\tr1\tDer <v>Hund</v>.\tThe.\tAccuracy/Omission\tMajor\n"
    "sysB\td1\t1\t2\tr1\tJa.\tJa.\tNon-translation\tMajor\n"
)


def test_a_small_mqm_file_becomes_a_closed_study_with_freitag_weights(tmp_path, researcher):
    path = tmp_path / "small.tsv"
    path.write_text(SMALL, encoding="utf-8")
    study, out = imported(path, "mqm-tsv", researcher)
    assert study.status == Study.Status.CLOSED and study.mode == "spans"
    assert "source text" in out
    assert Item.objects.filter(study=study).count() == 4
    cat = Judgment.objects.get(
        study=study, item__spec__system="sysA", item__spec__source="Der Hund."
    )
    assert [(m["start"], m["end"], m["text"]) for m in cat.payload["spans"]] == [
        (4, 7, "cat"),
        (7, 8, "."),
    ]
    result = report_of(study, researcher)
    rows = {row["system"]: row for row in result["systems"]}
    # sysA: (5 + 0.1) and 0 over two segments; sysB: 5 (omission) and 25 (non-translation).
    assert rows["sysA"]["mqm_per_caption"] == pytest.approx(5.1 / 2)
    assert rows["sysB"]["mqm_per_caption"] == pytest.approx(30 / 2)
    # The page of an imported item shows the source text, there is no image.
    assert cat.item.spec["source"] == "Der Hund."


def test_a_broken_mqm_file_is_refused_and_nothing_is_written(tmp_path, researcher):
    path = tmp_path / "bad.tsv"
    path.write_text(SMALL + "sysA\td1\t1\t3\tr1\tX\t<v>a</v> <v>b</v>\tOther\tMinor\n")
    before = Study.objects.count()
    with pytest.raises(CommandError, match="line 7"):
        imported(path, "mqm-tsv", researcher)
    assert Study.objects.count() == before


def test_esa_needs_its_batches(tmp_path, researcher):
    path = tmp_path / "esa.csv"
    path.write_text("x\n")
    with pytest.raises(CommandError, match="--batches"):
        imported(path, "esa-csv", researcher)


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/datasets")
@pytest.mark.parametrize("pair", ["ende", "zhen"])
def test_mqm_ted_gives_the_published_system_scores(researcher, pair):
    # The README's TED tables as printed (tests/rubrics/test_spans_published.py), reached
    # here through the platform: import_ratings, then the report job.
    printed = PUBLISHED[pair]
    study, _ = imported(SHARED / "wmt-mqm-ted" / f"mqm_ted_{pair}.tsv", "mqm-tsv", researcher)
    result = report_of(study, researcher)
    ours = {row["system"]: row["mqm_per_caption"] for row in result["systems"]}
    assert set(ours) == set(printed)
    for system, value in printed.items():
        assert abs(ours[system] - float(value)) <= 0.01, (system, ours[system])
    # The same ranking, and the only last-digit differences are the two rounding ones the
    # pure-path test names (en-de eTranslation, zh-en Borderline).
    assert [r["system"] for r in result["systems"]] == sorted(
        printed, key=lambda s: float(printed[s])
    )
    decimals = {s: len(v.split(".")[1]) for s, v in printed.items()}
    off = {s for s, v in ours.items() if round(v, decimals[s]) != float(printed[s])}
    assert off == {system for p, system in ROUNDING if p == pair}
    # Every system judged on the same segments, as the MQM campaign did.
    assert len({row["judgments"] for row in result["systems"]}) == 1


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/datasets")
def test_the_esa_campaign_gives_the_independent_means_and_span_counts(researcher):
    folder = SHARED / "esa-wmt23"
    path = folder / "240315rc5ESA.scores.csv"
    study, _ = imported(
        path, "esa-csv", researcher, "--batches", str(folder / "batches_wmt23_en-de_esa.json")
    )
    # Independently: the campaign's rule with the csv module (last submission of each login
    # and item; TGT items, no tutorials, no #duplicate repeats).
    last = {}
    with path.open(encoding="utf-8", newline="") as fh:
        for line, row in enumerate(csv.reader(fh), start=1):
            key = (row[0], int(row[2]))
            if key not in last or (float(row[11]), line) >= last[key][0]:
                last[key] = ((float(row[11]), line), row)
    sums, counts, spans = defaultdict(float), Counter(), defaultdict(Counter)
    for _, row in last.values():
        if row[3] != "TGT" or "tutorial" in row[7] or "#duplicate" in row[7]:
            continue
        sums[row[1]] += float(row[6])
        counts[row[1]] += 1
        for span in json.loads(row[9]):
            spans[row[1]][span["severity"]] += 1
    result = report_of(study, researcher)
    rows = {row["system"]: row for row in result["systems"]}
    assert set(rows) == set(counts)
    for system, n in counts.items():
        assert rows[system]["judgments"] == n
        assert rows[system]["esa"] == pytest.approx(sums[system] / n, abs=1e-9)
        assert rows[system]["esa_low"] <= rows[system]["esa"] <= rows[system]["esa_high"]
        assert rows[system]["minor"] == spans[system]["minor"]
        assert rows[system]["major"] == spans[system]["major"]
    # The one item two ESA logins share gives a span agreement (or says why not).
    assert result["span_agreement"] is not None or result["span_agreement_error"]
