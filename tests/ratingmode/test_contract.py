"""The test-rating mode through every part of the platform that asks a mode for its facts:
the live dashboard, the planner, the metric lab, the simulated crowd and every export
format. Nothing outside ``tests/ratingmode/`` names this mode (issue 22): if one of these
places still knew modes by name, the rating mode would fall through it here.
"""

import json
import zipfile
from collections import Counter

import pyarrow.parquet as pq
import pytest
from django.urls import reverse
from scipy import stats

from annotation.models import Caption, JudgeAnswer, Judgment, Participant
from annotation.services.exports import EXPORT_FORMATS, EXPORT_TABLES, export_file
from annotation.services.metrics import WITH_HUMAN, metaeval_report
from annotation.services.reports import report_request
from annotation.services.simulation import crowd_simulate
from annotation.tasks import enqueue
from tests.factories.core import caption_study
from tests.ratingmode import NAME

pytestmark = pytest.mark.django_db

#: A planner query small enough to run in well under a second.
SMALL = {"sizes": "5, 10", "simulations": "5"}


def simulated(researcher, captions=4, target=2):
    study = caption_study(researcher, NAME, captions=captions, target=target)
    summary = crowd_simulate(study=study, workers=3, seed=7)
    return study, summary


def test_the_simulated_crowd_answers_every_item_through_the_services(researcher):
    study, summary = simulated(researcher)

    # 4 items x target 2, one part each: every lease a worker can take is answered.
    assert summary.judgments == Judgment.objects.filter(study=study).count() == 8
    assert summary.refusals == {}
    assert sum(summary.per_worker.values()) == 8
    for judgment in Judgment.objects.filter(study=study):
        assert judgment.payload["rating"] in range(1, 6)


def test_the_dashboard_names_the_kinds_and_counts_the_modes_checks(client, researcher):
    study, _ = simulated(researcher)
    client.force_login(researcher)

    html = client.get(reverse("study_dashboard", args=[study.pk])).content.decode()

    assert '<th scope="row">Captions to rate</th>' in html
    assert "ratings of 1" in html
    # The check column counts each worker's ratings of 1, computed here from the rows.
    for participant in Participant.objects.filter(study=study):
        ratings = [j.payload["rating"] for j in participant.judgments.all()]
        assert f"{ratings.count(1)} of {len(ratings)}" in html
    # The mode's own panel (mode.dashboard), counted here from the rows, and its words.
    counts = Counter(Judgment.objects.filter(study=study).values_list("payload__rating", flat=True))
    for value in range(1, 6):
        assert f"<li>Rated {value}: {counts[value]}</li>" in html
    assert "finishing one caption to rate;" in html


def test_the_planner_reads_the_modes_unit_default_and_least(client, researcher):
    study = caption_study(researcher, NAME, captions=2)
    client.force_login(researcher)

    api = client.get(reverse("api_study_plan", args=[study.pk]), SMALL)
    page = client.get(reverse("study_plan", args=[study.pk]), SMALL).content.decode()
    refused = client.get(
        reverse("api_study_plan", args=[study.pk]), {**SMALL, "judgments_per_item": "1"}
    )

    assert api.status_code == 200, api.content
    plan = api.json()
    assert [p["n_images"] for p in plan["points"]] == [5, 10]
    # The mode's default of 3 ratings per caption: 3 judgments per item of each size.
    assert [p["judgments"] for p in plan["points"]] == [15, 30]
    assert '<th scope="col">Captions</th>' in page
    assert refused.status_code == 400
    assert refused.json() == {
        "judgments_per_item": ["The test-rating planner needs at least 2 ratings per caption."]
    }


def test_the_metric_lab_correlates_a_metric_with_the_modes_human_scores(researcher):
    study, _ = simulated(researcher, captions=6, target=2)
    for caption in Caption.objects.filter(study=study):
        caption.metrics = {"toy": float(caption.pk % 4)}
        caption.save(update_fields=["metrics"])

    report = metaeval_report(study, resamples=0)

    # Independently: every kept rating against its caption's metric, Kendall's tau-c.
    rows = [
        (Caption.objects.get(pk=j.item.spec["caption"]).metrics["toy"], j.payload["rating"])
        for j in Judgment.objects.filter(study=study).select_related("item")
    ]
    expected = stats.kendalltau(*zip(*rows, strict=True), variant="c").statistic
    assert report["coefficient"] == "kendall_tau_c"
    cell = report["correlations"]["rating"]["toy"][WITH_HUMAN]
    assert cell["n"] == len(rows) == 12
    assert cell["value"] == pytest.approx(expected)


@pytest.mark.parametrize("export_format", EXPORT_FORMATS)
@pytest.mark.parametrize("table", EXPORT_TABLES)
def test_every_export_format_carries_the_modes_rows_and_report_summary(
    researcher, tmp_path, django_capture_on_commit_callbacks, export_format, table
):
    study, _ = simulated(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    ratings = Counter(j.payload["rating"] for j in Judgment.objects.filter(study=study))

    summary = export_file(
        study=study, path=tmp_path / "out", export_format=export_format, table=table
    )

    # A dataset folder holds every table; its summary counts the judgments table's rows.
    # The judges table holds judge answers (none here: this study has no judge).
    by_table = {
        "judgments": 8,
        "participants": Participant.objects.filter(study=study).count(),
        "judges": JudgeAnswer.objects.filter(judge__study=study).count(),
        "caption_metrics": Caption.objects.filter(study=study).count(),
    }[table]
    expected_rows = 8 if export_format == "dataset" else by_table
    assert summary.rows == expected_rows
    if export_format == "dataset":
        with zipfile.ZipFile(summary.path) as folder:
            sheet = json.loads(folder.read("datasheet.json"))
            parquet = [n for n in folder.namelist() if n.endswith(".parquet")]
            assert parquet
    else:
        sheet = json.loads(summary.datasheet.read_text())
        if export_format == "parquet":
            assert pq.read_table(summary.path).num_rows == expected_rows
    assert sheet["agreement"]["histogram"] == [ratings[value] for value in range(1, 6)]
