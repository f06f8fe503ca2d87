"""HUMANr's planner takes the study's own comparisons as its pilot once the Human baseline
and every model have kept comparisons on enough images; before that, or for another
number of workers per comparison than the study's own, it keeps to the stated assumptions.

The prediction from the pilot is checked against an independent path: the report's own
t-interval over the same judgments (``summarize``), at the pilot's own number of images.
"""

from __future__ import annotations

import random

import pytest
from django.urls import reverse

from annotation.models import Judgment
from annotation.modes.humanr.plan import PLAN_PILOT_MIN_IMAGES
from annotation.modes.humanr.protocol import CHECK
from annotation.modes.humanr.report import report_rows, summarize
from tests.factories.humanr import answer_every_group, crowd, do_group, honest, humanr_study

pytestmark = pytest.mark.django_db

IMAGES = 20
#: The pilot's crowd (``answer_every_group``): one slider step of noise, half the stated
#: assumptions' 2 steps, so a prediction from them would be about twice as wide (0.22-0.23
#: at 20 images, against the pilot's 0.11-0.13).
MEANS = {"Human": 0.0, "GIT": -0.3, "ClipCap": -0.6}


def plan(client, study, **params):
    query = {"sizes": str(IMAGES), "simulations": "40", **params}
    return client.get(reverse("api_study_plan", args=[study.pk]), query).json()


def test_an_answered_study_is_its_own_pilot_and_predicts_its_own_widths(client, researcher):
    study = humanr_study(researcher, images=IMAGES, systems=("GIT", "ClipCap"))
    answer_every_group(study, MEANS, seed=3)
    client.force_login(researcher)

    data = plan(client, study)

    assert data["pilot"] == "study"
    predicted = data["points"][0]["half_width"]
    rows = report_rows(Judgment.objects.filter(study=study, item__kind="group"))
    report = summarize(rows, people={}, seed=1, n_bootstrap=100, n_splits=100, n_permutations=100)[
        "humanr"
    ]
    entries = {**report["systems"], "Human": report["baseline"]}
    for name in MEANS:
        low, high = entries[name]["t_interval"]
        # Resampling the pilot's images at its own size gives about the report's width
        # (the resamples' spread is (n - 1) / n of the pilot's on average).
        assert predicted[name] == pytest.approx((high - low) / 2, rel=0.15), name
    html = client.get(
        reverse("study_plan", args=[study.pk]), {"sizes": str(IMAGES), "simulations": "5"}
    ).content.decode()
    assert "this study&#x27;s own kept comparisons, resampled by image" in html


def test_another_number_of_workers_per_comparison_keeps_to_the_assumptions(client, researcher):
    study = humanr_study(researcher, images=IMAGES, systems=("GIT", "ClipCap"))
    answer_every_group(study, MEANS, seed=4)
    client.force_login(researcher)
    assert plan(client, study, judgments_per_item="2")["pilot"] == "assumptions"


def test_too_few_answered_images_keep_to_the_assumptions(client, researcher):
    study = humanr_study(researcher, images=IMAGES, systems=("GIT", "ClipCap"))
    rng = random.Random(5)

    def answer(trial, on_left):
        return honest(trial, on_left) if trial["kind"] == CHECK else rng.randint(1, 9)

    do_group(crowd(study, "PID-only"), answer)  # one group: 9 comparisons at most
    compared = Judgment.objects.filter(study=study).exclude(result__kind=CHECK)
    assert len({j.result["image_id"] for j in compared}) < PLAN_PILOT_MIN_IMAGES
    client.force_login(researcher)
    assert plan(client, study)["pilot"] == "assumptions"
