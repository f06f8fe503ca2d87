"""Every mode's system table in the order of the study's headline score, which the page
names (issue 47): HUMANr's by HUMANr after the baseline, the context mode's by the blind
and low-vision raters' overall rating. (Spans: ``test_spans_ranking.py``; THumB, VICR and
the arena were already in their headline's order, and their pages now say so.)
"""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from annotation.modes.context.report import headline_order
from annotation.modes.humanr.report import summarize
from tests.annotation.test_mode_context_report import compute_report
from tests.annotation.test_mode_humanr import simulated_rows, specs
from tests.factories.context import context_study
from tests.factories.humanr import humanr_study

pytestmark = pytest.mark.django_db


def test_humanr_rows_follow_humanr_after_the_baseline(researcher):
    """GIT is preferred to ClipCap here, against the order of their names."""
    study = humanr_study(researcher, images=45, systems=("GIT", "ClipCap"))
    favours_low = np.array([8, 8, 6, 4, 2, 1, 1, 0.5, 0.5])
    probs = {"Human": np.full(9, 1 / 9), "GIT": favours_low[::-1], "ClipCap": favours_low}
    probs = {k: v / v.sum() for k, v in probs.items()}
    rows = simulated_rows(
        specs(study),
        rng=np.random.default_rng(4),
        run=0,
        workers=12,
        groups_per_worker=3,
        oriented_probs=probs,
    )
    humanr = summarize(rows, people={}, seed=4, n_bootstrap=50, n_splits=5)["humanr"]
    names = [row["system"] for row in humanr["rows"]]
    values = {row["system"]: row["humanr"] for row in humanr["rows"]}
    assert humanr["rows"][0]["baseline"]
    assert values["GIT"] > values["ClipCap"]
    assert names[1:] == ["GIT", "ClipCap"]


def cell(blv_overall):
    return {"all": {"groups": {"blv": {"before": {"overall": {"mean": blv_overall}}}}}}


def test_context_systems_follow_the_blv_overall_rating_and_the_page_says_so(researcher, client):
    entries = {"a": cell(2.0), "b": cell(4.5), "c": cell(None), "d": cell(3.0)}
    ordered = [name for name, _ in sorted(entries.items(), key=headline_order)]
    assert ordered == ["b", "d", "a", "c"]  # highest first, unrated last

    from tests.annotation.test_mode_context_report import answer_study

    study = context_study(researcher, images=3, blv_ratings=2, sighted_ratings=2)
    answer_study(study)
    result = compute_report(study, researcher)
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Systems ordered by the blind and low-vision raters" in page
    blv = {
        name: entry["all"]["groups"]["blv"]["before"]["overall"]["mean"]
        for name, entry in result["systems"].items()
    }
    first, second = sorted(blv, key=lambda name: -blv[name])
    assert page.index(f"{first} · All domains") < page.index(f"{second} · All domains")
