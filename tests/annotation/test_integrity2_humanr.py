"""Crowd integrity, round two (issue 29): HUMANr (rows 2 and 10) and the planner (row 5).

Row 2: three scout ids record which caption goes with which image; a bot with their records
must not pass attention checks better than a random answerer, because each worker's check
is drawn for them when the group is served, from the whole study's images they have not met.
Row 10: eighteen sybil ids (one network, or one browser) answering "equal" must not settle
a system under ``adaptive_target_half_width``; the next honest worker is served, and when
settled systems do leave no work, the finished page and the dashboard say so.
Row 5: the planner's dearest accepted request costs under 10 s of CPU.

Every attack goes through the real views: the signed crowd link, ``/next/`` and the
submit form, each worker with its own client (cookies) and address.
"""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from annotation.forms import MAX_SIZES, MAX_STUDY_SIZE, PlanForm
from rubrics import planner

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------------- row 5: the planner

ISSUE_REQUEST = {
    # The request of the issue: 8 sizes of the largest study, 20 judgments, 100 simulations.
    "sizes": ",".join(str(MAX_STUDY_SIZE - k) for k in range(MAX_SIZES)),
    "judgments_per_item": "20",
    "simulations": "100",
}


def test_the_issue_s_planner_request_is_refused_at_once_with_what_to_lower(client, researcher):
    from tests.factories.humanr import humanr_study

    study = humanr_study(researcher, images=6)
    client.force_login(researcher)
    started = time.process_time()
    page = client.get(reverse("study_plan", args=[study.pk]), ISSUE_REQUEST)
    api = client.get(reverse("api_study_plan", args=[study.pk]), ISSUE_REQUEST)
    spent = time.process_time() - started
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="id_simulations-error"' in html and "at most 2,000,000" in html
    assert "Planner curve" not in html
    assert api.status_code == 400 and "simulations" in api.json()
    assert spent < 2, f"refusing took {spent:.1f} s of CPU"


def _largest(sizes: list[int], judgments: int) -> dict[str, str]:
    """The most simulations the form accepts for these sizes and judgments."""
    work = sum(sizes) * (judgments + planner.IMAGE_OVERHEAD)
    simulations = min(100, planner.MAX_SIMULATED_JUDGMENTS // work)
    return {
        "sizes": ",".join(map(str, sizes)),
        "judgments_per_item": str(judgments),
        "simulations": str(simulations),
    }


@pytest.mark.parametrize(
    "query",
    [
        # Every corner of the accepted region at the form's upper bounds: the most images,
        # the most judgments per item, the most simulations of the smallest studies.
        _largest([MAX_STUDY_SIZE - k for k in range(MAX_SIZES)], 1),
        _largest([MAX_STUDY_SIZE], 20),
        _largest(list(range(2, 2 + MAX_SIZES)), 20),
    ],
    ids=["most-images", "most-judgments", "most-simulations"],
)
def test_the_dearest_accepted_humanr_plan_costs_under_ten_seconds_of_cpu(researcher, query):
    from tests.factories.humanr import humanr_study

    study = humanr_study(researcher, images=6)
    form = PlanForm(query, mode="humanr")
    assert form.is_valid(), form.errors
    # One step more is refused, so this is the largest request of its kind.
    more = {**query, "simulations": str(int(query["simulations"]) + 1)}
    if int(query["simulations"]) < 100:
        assert not PlanForm(more, mode="humanr").is_valid()
    started = time.process_time()
    plan = form.plan(study)
    spent = time.process_time() - started
    assert len(plan["points"]) == len(query["sizes"].split(","))
    assert spent < 10, f"the planner took {spent:.1f} s of CPU for {query}"
