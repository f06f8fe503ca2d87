"""An arena report without a Bradley-Terry fit links no figure it cannot draw (issue 46).

The detailed-caption study (tests/e2e/test_detailed_caption_study.py) met it: three honest
workers, each always preferring the better system, left a system that never lost; the
report said why the leaderboard was not computed, yet linked three figures that answered
500 (``KeyError`` in ``arena/figures.py``).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.factories import arena

pytestmark = pytest.mark.django_db


def test_a_report_without_scores_links_no_figure_and_none_answers_500(client, researcher):
    study = arena.arena_study(researcher, systems=("best", "worst"), images=3, catch_rate=0)
    worker = arena.worker(study)
    # "best" wins every battle: its score is unbounded, the fit does not exist.
    for _ in range(3):
        lease, _ = arena.judge(worker, lambda lease: "a" if arena.shown_left(lease) == "a" else "b")
        assert lease is not None
    job = report_request(study=study, user=researcher)
    job_run(job=job)
    client.force_login(researcher)

    page = client.get(reverse("study_report", args=[study.pk])).content.decode()

    assert "Not computed" in page
    for name in ("leaderboard", "win-rate", "battle-count"):
        url = reverse("report_figure", args=[study.pk, name, "svg"])
        assert url not in page
        assert f"{name}: not enough data yet" in page
        assert client.get(url).status_code == 404
