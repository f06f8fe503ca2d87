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
from annotation.models import Caption, Judgment
from rubrics import planner
from tests.annotation.test_crowd_humanr_exposure import MemoryBot, read_trial
from tests.factories.humanr import humanr_study

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------------- row 5: the planner

ISSUE_REQUEST = {
    # The request of the issue: 8 sizes of the largest study, 20 judgments, 100 simulations.
    "sizes": ",".join(str(MAX_STUDY_SIZE - k) for k in range(MAX_SIZES)),
    "judgments_per_item": "20",
    "simulations": "100",
}


def test_the_issue_s_planner_request_is_refused_at_once_with_what_to_lower(client, researcher):
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


# ---------------------------------------------------------------------- row 2: attention checks

# Many workers come from few test addresses in some tests; the per-address crowd limits are
# not what these tests are about.
OPEN_LIMITS = {
    "crowd_arrivals_per_address_per_hour": 10_000,
    "crowd_open_leases_per_address": 10_000,
}


def _play_groups(bot, groups: int) -> None:
    """Answer whole groups through the views until ``groups`` are complete (or none is left)."""
    url = reverse("participate_next", args=[bot.study.public_id])
    for _ in range(groups * 10):
        if bot.groups_finished >= groups:
            return
        page = bot.client.get(url)
        assert page.status_code == 200, page.content[:300]
        if read_trial(page) is None:
            return
        bot.answer(page)


def _checks_of(pid: str) -> list[dict]:
    return list(
        Judgment.objects.filter(
            participant__external_id=pid, result__kind="attention_check"
        ).values_list("result", flat=True)
    )


class _Equal:
    """A junk bot's answer to every trial it does not recognise: "both match equally" (5),
    which fails any attention check (neutral counts as a failure)."""

    def integers(self, low, high):
        return 5


def test_scouts_records_do_not_pass_a_bot_s_attention_checks(researcher):
    """Row 2. Three scout ids (three browsers, three addresses) do every group they can and
    record which caption goes with which image: a human scout can tell the foreign caption
    of a check. A bot (a fourth browser and address) with their records answers "equal"
    (junk) except on a trial showing a caption the records place with another image: then
    against it. The study draws 45 of its 600 imported images (``n_images``), each group
    judged by 4 workers, so the bot is served groups the scouts were served.

    Before: a group's check was built once, the same for every worker of the group, from
    the 45 drawn images, so the scouts had met the bot's checks: it recognised and passed
    nearly all of them. Now each worker's check is drawn when the group is served, from
    every imported image that worker has not met (the large pool). The scouts met the 45
    images and the 2 images of each of their own checks, so of the ~550 images a bot's
    check may come from they met about 30, and the recorded distractor must also be the
    very caption the bot's draw picked (1 of 3): about 0.02 per check, so 2 of the bot's few
    checks happen with probability below 0.005. A bot answering "equal" passes only what it
    recognises: it fails its checks as a random answerer would, or worse.
    """
    study = humanr_study(
        researcher,
        images=900,
        humans=3,
        systems=("GIT",),
        n_images=90,
        workers_per_comparison=4,
        **OPEN_LIMITS,
    )
    caption_image = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    records: dict[int, int] = {}
    for number in range(3):
        scout = MemoryBot(study, f"scout-{number}", address=f"10.1.0.{number + 1}", seed=number)
        scout.enter()
        _play_groups(scout, 10)
        assert scout.groups_finished >= 2
        # A scout reads every caption it was shown and knows the image it describes.
        for trial in scout.trials:
            for caption in trial["captions"]:
                records[caption] = caption_image[caption]

    bot = MemoryBot(study, "bot", address="10.2.0.1", seed=99, memory=dict(records))
    bot.rng = _Equal()
    bot.enter()
    _play_groups(bot, 10)
    checks = _checks_of("bot")
    assert len(checks) == bot.groups_finished >= 3, "one attention check per group"
    passed = sum(not r["check_failed"] for r in checks)
    assert len(bot.recognised) <= 1, (
        f"the bot recognised {len(bot.recognised)} of its {len(checks)} checks from the "
        "scouts' records"
    )
    assert passed <= 1, f"the bot passed {passed} of {len(checks)} checks answering junk"
    # The protocol holds: the bot met no image twice, its checks' included.
    per_trial = [
        {trial["image"], *(caption_image[c] for c in trial["captions"])} for trial in bot.trials
    ]
    assert sum(len(images) for images in per_trial) == len(set().union(*per_trial)), (
        "an image was met twice"
    )
