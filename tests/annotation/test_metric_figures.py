"""Issue 26, row 12: the metrics page's robustness figures (served as SVG files, as report
figures are) and its system-level table with a row per metric and a column per system."""

import re

import pytest
from django.urls import reverse

from annotation.services.studies import study_create
from tests.factories.metrics import finished_metrics_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(researcher):
    study = study_create(owner=researcher, name="Wide", mode="thumb", settings={})
    finished_metrics_job(study, researcher)
    return study


def figure_url(study, kind):
    return reverse("study_metrics_robustness", args=[study.pk, kind])


def test_page_links_a_figure_per_transformation_and_keeps_the_numbers(lab, client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("study_metrics", args=[lab.pk])).content.decode()
    for kind in ("T_RC", "T_WP", "T_RW"):
        assert f'src="{figure_url(lab, kind)}"' in page
    assert "1.00 · 0.95" not in page  # no curve printed as text (T_WP: 1.00 · 0.95 · ...) any more
    # The fallback table: T_WP is the factory's second kind (k=1), its curve
    # 1 - 0.2 * gamma, so 0.90 at gamma 0.5; its area 1 - 2 * 0.05 = 0.900.
    assert "T_WP γ=0.5" in page
    assert ">0.90</td>" in page and ">0.900</td>" in page
    # Strict CSP kept: no inline style or script on the page.
    assert not re.search(r"<script(?![^>]*\bsrc=)|<style|\sstyle=", page)


def test_system_table_has_a_row_per_metric_and_labels_each_value(lab, client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("study_metrics", args=[lab.pk])).content.decode()
    # GoodBot is the factory's second system (s=1), ROUGE-L (rouge-score) its second metric
    # (m=1): mean 0.1 * 2 + 0.001 = 0.201, shown x100 as 20.1.
    assert re.search(
        r'<th scope="row">ROUGE-L \(rouge-score\) ×100</th>.*?'
        r'<td class="num" data-label="GoodBot">20.1</td>',
        page,
    )
    # sacrebleu's BLEU is not scaled: BadBot (s=0), m=0: 0.1 -> "0.100".
    assert re.search(
        r'<th scope="row">BLEU-4 \(sacrebleu\)</th><td class="num" data-label="BadBot">0.100</td>',
        page,
    )
    assert page.count('<th scope="row">') >= 12


def test_figure_is_an_svg_that_may_only_style_itself(lab, client, researcher):
    client.force_login(researcher)
    answer = client.get(figure_url(lab, "T_WP"))
    assert answer.status_code == 200
    assert answer["Content-Type"] == "image/svg+xml"
    body = answer.content.decode()
    assert body.lstrip().startswith("<?xml") and "<svg" in body
    policy = answer["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'none'" in policy


def test_unknown_kind_missing_job_and_other_researcher_get_404(
    lab, client, researcher, other_researcher
):
    client.force_login(researcher)
    assert client.get(figure_url(lab, "T_XX")).status_code == 404
    bare = study_create(owner=researcher, name="Bare", mode="thumb", settings={})
    assert client.get(figure_url(bare, "T_WP")).status_code == 404
    client.force_login(other_researcher)
    assert client.get(figure_url(lab, "T_WP")).status_code in (403, 404)
