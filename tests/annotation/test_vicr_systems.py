"""Issue 26: the VICR report names the systems: each system's mean game rating with its
interval and the differences between systems, on the page, in the figure and in
``GET /api/studies/<id>/report/``."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import TestCase
from django.urls import reverse
from django.utils import timezone

from annotation.models import Assignment, Caption, Judgment
from annotation.modes import get_mode
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from tests.factories.vicr import in_game, vicr_study

pytestmark = pytest.mark.django_db

MODE = get_mode("vicr")

# Two images, one caption of each system per image; ratings of players P1, P2, P3.
RATINGS = {
    (0, "GoodBot"): (5, 4, 5),
    (0, "MidBot"): (3, 3, 2),
    (0, "BadBot"): (1, 2, 1),
    (1, "GoodBot"): (4, 4, 4),
    (1, "MidBot"): (3, 4, 4),
    (1, "BadBot"): (2, 1, 1),
}


def systems_study(researcher):
    """The ratings above, plus ratings that must not count: excluded judgments and a
    player who is no longer in good standing, rating every pair 1."""
    study = vicr_study(researcher, game=len(RATINGS), primes=())
    items = list(study.items.filter(kind="game").order_by("position"))
    captions = {item.pk: Caption.objects.get(pk=item.spec["caption_id"]) for item in items}
    images = [captions[items[0].pk].image, captions[items[1].pk].image]
    players = [in_game(study) for _ in range(3)]
    outcast = in_game(study)
    outcast.status = "excluded"
    outcast.save()
    flagged = in_game(study)  # in good standing, but every rating of theirs is excluded
    now = timezone.now()

    def rate(participant, item, rating, *, excluded=False):
        lease = Assignment.objects.create(
            participant=participant,
            item=item,
            status="submitted",
            served_at=now,
            expires_at=now,
            submitted_at=now,
        )
        Judgment.objects.create(
            study=study,
            item=item,
            participant=participant,
            assignment=lease,
            payload={"rating": rating},
            result={"points": 0},
            dwell_ms=5000,
            excluded=excluded,
            exclusion_reason="test" if excluded else "",
        )

    for item, ((image, system), ratings) in zip(items, RATINGS.items(), strict=True):
        caption = captions[item.pk]
        caption.system, caption.image = system, images[image]
        caption.save()
        item.image = images[image]
        item.save()
        for participant, rating in zip(players, ratings, strict=True):
            rate(participant, item, rating)
        rate(outcast, item, 1)
        rate(flagged, item, 1, excluded=True)
    return study


def test_the_report_gives_each_system_its_mean_and_the_differences(researcher):
    study = systems_study(researcher)
    result = MODE.report.run(study, lambda *args: None)

    section = result["systems"]
    assert section["error"] == ""
    # Independently: a pair's score is its mean rating, a system's the mean of its pairs.
    pair = {key: np.mean(r) for key, r in RATINGS.items()}
    expected = {s: np.mean([pair[(i, s)] for i in (0, 1)]) for s in ("GoodBot", "MidBot", "BadBot")}
    assert [row["system"] for row in section["systems"]] == ["GoodBot", "MidBot", "BadBot"]
    for row in section["systems"]:
        assert row["mean"] == pytest.approx(expected[row["system"]])
        assert (row["pairs"], row["images"]) == (2, 2)
        # Two images: every resample's mean lies between the two images' scores.
        scores = [pair[(i, row["system"])] for i in (0, 1)]
        assert min(scores) - 1e-9 <= row["ci_low"] <= row["ci_high"] <= max(scores) + 1e-9
    differences = {(d["upper"], d["lower"]): d for d in section["differences"]}
    assert set(differences) == {
        ("GoodBot", "MidBot"),
        ("GoodBot", "BadBot"),
        ("MidBot", "BadBot"),
    }
    for (upper, lower), d in differences.items():
        per_image = [pair[(i, upper)] - pair[(i, lower)] for i in (0, 1)]
        assert d["difference"] == pytest.approx(np.mean(per_image))
        assert min(per_image) - 1e-9 <= d["ci_low"] <= d["ci_high"] <= max(per_image) + 1e-9
        assert d["images"] == 2
    assert differences[("GoodBot", "BadBot")]["excludes_zero"] is True
    assert section["confidence"] == 0.95 and section["n_resamples"] == 1000

    figure = MODE.report.figure("systems", result)
    axes = figure.axes[0]
    height = {
        t.get_text(): y for t, y in zip(axes.get_yticklabels(), axes.get_yticks(), strict=True)
    }
    assert height["GoodBot"] > height["MidBot"] > height["BadBot"]  # the best on top


def test_the_page_and_the_api_name_the_systems(client, researcher):
    study = systems_study(researcher)
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))

    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Rating by system" in html
    for system in ("GoodBot", "MidBot", "BadBot"):
        assert f'<tr data-system="{system}">' in html
    assert 'data-upper="GoodBot" data-lower="BadBot"' in html
    # The shared ranking-robustness table: GoodBot leads MidBot by 2 and 1/3 on the two
    # images, so removing one image (at most 1 of 2) never puts MidBot ahead.
    assert 'id="robustness-table"' in html
    row = html.split('<tr data-upper="GoodBot" data-lower="MidBot"><td>')[1].split("</tr>")[0]
    assert "none can" in row
    assert f"{np.mean([np.mean(RATINGS[(i, 'GoodBot')]) for i in (0, 1)]):.2f}" in html
    svg = client.get(reverse("report_figure", args=[study.pk, "systems", "svg"]))
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"

    body = client.get(f"/api/studies/{study.pk}/report/").json()
    names = [row["system"] for row in body["result"]["systems"]["systems"]]
    assert names == ["GoodBot", "MidBot", "BadBot"]
    assert len(body["result"]["systems"]["differences"]) == 3


def test_a_study_without_kept_ratings_says_why(client, researcher):
    study = vicr_study(researcher, game=2, primes=())
    result = MODE.report.run(study, lambda *args: None)
    assert result["systems"] == {"error": "no game pair has a rating in the final view yet"}
    figure = MODE.report.figure("systems", result)
    assert "Not computed" in figure.axes[0].texts[0].get_text()


def test_a_report_stored_before_the_systems_section_still_renders(client, researcher):
    study = systems_study(researcher)
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    job = study.jobs.get(kind="report")
    job.result = {key: value for key, value in job.result.items() if key != "systems"}
    job.save()
    page = client.get(reverse("study_report", args=[study.pk]))
    assert page.status_code == 200
    assert "Compute the report again to see each system" in page.content.decode()
    svg = client.get(reverse("report_figure", args=[study.pk, "systems", "svg"]))
    assert svg.status_code == 200
