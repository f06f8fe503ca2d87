"""The spans report's system table is ordered by the study's headline score (issue 47): an
ESA campaign's by its mean score, an MQM campaign's by its weighted errors, and the page
says which. Ordering the WMT23 ESA campaign by errors had put GPT4-5shot (88.6) above refA
(89.06).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from annotation.services.studies import study_close, study_update_settings
from tests.annotation.test_mode_spans import mark
from tests.annotation.test_spans_import import imported, report_of
from tests.factories.spans import judge, spans_study, worker

pytestmark = pytest.mark.django_db

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def answer(lease, text):
    """alpha: a high score with a major error; beta: a low score with none."""
    if text.startswith("A brown dog"):
        return {"spans": json.dumps([mark(text, "brown dog")]), "score": 90}
    return {"spans": "[]", "score": 60}


def order(result) -> list[str]:
    return [row["system"] for row in result["systems"]]


def test_the_table_follows_the_headline_score_and_the_page_says_which(researcher):
    study = spans_study(researcher, images=2, target=1, completion_captions=1)
    for number in range(4):
        judge(worker(study, f"r{number}"), answer)
    study_close(study=study)
    result = report_of(study, researcher)
    # auto: the judgments carry scores, so ESA's mean, highest first.
    assert result["ranking"]["by"] == "esa" and order(result) == ["alpha", "beta"]
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Ordered by the ESA score, highest first" in page

    study_update_settings(
        study=study, settings={**study.settings, "ranking": "mqm"}, changed_by=researcher
    )
    result = report_of(study, researcher)
    assert result["ranking"]["by"] == "mqm" and order(result) == ["beta", "alpha"]
    rows = {row["system"]: row for row in result["systems"]}
    assert rows["beta"]["mqm_per_caption"] < rows["alpha"]["mqm_per_caption"]
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Ordered by MQM per caption, fewest weighted errors first" in page


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/datasets")
@pytest.mark.parametrize("campaign", ["ESA", "MQM"])
def test_the_wmt23_campaigns_are_ordered_by_their_own_headline(researcher, campaign):
    folder = SHARED / "esa-wmt23"
    study, _ = imported(
        folder / f"240315rc5{campaign}.scores.csv",
        "esa-csv",
        researcher,
        "--batches",
        str(folder / "batches_wmt23_en-de_esa.json"),
    )
    assert study.status == Study.Status.CLOSED
    result = report_of(study, researcher)
    rows = result["systems"]
    if campaign == "ESA":
        assert result["ranking"]["by"] == "esa"
        assert [r["esa"] for r in rows] == sorted((r["esa"] for r in rows), reverse=True)
        names = [name.removeprefix("wmt23.") for name in order(result)]
        assert names.index("refA") < names.index("GPT4-5shot")
    else:  # every score of the MQM run is 0: the errors order it
        assert study.settings["ranking"] == "mqm" and result["ranking"]["by"] == "mqm"
        values = [r["mqm_per_caption"] for r in rows]
        assert values == sorted(values)
