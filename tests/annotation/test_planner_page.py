"""The planner page and API (issue 15): access, bad parameters, what the page shows.

The planner's numbers are tested in ``tests/rubrics``; here: a stranger gets a 404 (page,
figure, API), every refused parameter answers 400 naming its field, a valid query renders
the curve, the recommendation and the costs, and the page and the API give the same plan.
"""

from __future__ import annotations

import pytest
import yaml
from django.urls import reverse

from annotation.forms import PlanForm
from annotation.models import Judgment
from annotation.modes import get_mode
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db

SMALL = {"sizes": "20, 60", "simulations": "5"}


@pytest.fixture
def thumb_study(make_study):
    return make_study("thumb")


def urls(study):
    return [
        reverse("study_plan", args=[study.pk]),
        reverse("study_plan_figure", args=[study.pk]),
        reverse("api_study_plan", args=[study.pk]),
    ]


def test_a_stranger_gets_404_everywhere(client, thumb_study, other_researcher):
    client.force_login(other_researcher)
    for url in urls(thumb_study):
        assert client.get(url, SMALL).status_code == 404, url


def test_an_anonymous_visitor_is_sent_to_log_in_or_refused(client, thumb_study):
    for url in urls(thumb_study):
        assert client.get(url, SMALL).status_code in (302, 401, 403), url


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sizes", "20, x"),
        ("sizes", "1"),  # below 2 images
        ("sizes", "20, 99999"),  # above the bound
        ("sizes", ",".join(str(n) for n in range(10, 100, 10))),  # 9 sizes: too many
        ("simulations", "100000"),
        ("simulations", "2"),
        ("price_per_judgment", "-1"),
        ("price_per_judgment", "nan"),
        ("judgments_per_item", "0"),
        ("target_half_width", "0"),
        ("mean", "9"),
    ],
)
def test_a_bad_parameter_is_refused_naming_the_field(client, researcher, thumb_study, field, value):
    client.force_login(researcher)
    query = {**SMALL, field: value}
    page = client.get(reverse("study_plan", args=[thumb_study.pk]), query)
    assert page.status_code == 200  # the form again, the error beside the field
    html = page.content.decode()
    assert f'id="id_{field}-error"' in html and 'aria-invalid="true"' in html
    assert "Planner curve" not in html  # nothing computed
    api = client.get(reverse("api_study_plan", args=[thumb_study.pk]), query)
    assert api.status_code == 400
    assert field in api.json()
    figure = client.get(reverse("study_plan_figure", args=[thumb_study.pk]), query)
    assert figure.status_code == 400


def test_vicr_needs_three_ratings_per_pair(client, researcher, make_study):
    study = make_study("vicr")
    client.force_login(researcher)
    response = client.get(
        reverse("api_study_plan", args=[study.pk]), {**SMALL, "judgments_per_item": "2"}
    )
    assert response.status_code == 400 and "judgments_per_item" in response.json()


def test_the_page_shows_the_curve_the_recommendation_and_the_cost(client, researcher, thumb_study):
    client.force_login(researcher)
    query = {**SMALL, "price_per_judgment": "0.5", "seconds_per_judgment": "36"}
    page = client.get(reverse("study_plan", args=[thumb_study.pk]), query)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Predicted Total per system" in html
    # THumB, two systems A and B, 2 judgments per caption: 20 images x 2 x 2 = 80 judgments,
    # 40.00 at 0.5 each, 80 x 36 s = 0.8 crowd hours; 60 images: 240, 120.00, 2.4 hours.
    assert "<td>80</td><td>40.00</td><td>0.8</td>" in html
    assert "<td>240</td><td>120.00</td><td>2.4</td>" in html
    assert "± A" in html and "± B" in html
    assert 'id="plan-recommended"' in html
    assert reverse("study_plan_figure", args=[thumb_study.pk]) in html
    figure = client.get(reverse("study_plan_figure", args=[thumb_study.pk]), query)
    assert figure.status_code == 200 and figure["Content-Type"] == "image/svg+xml"
    assert b"<svg" in figure.content


def test_the_api_returns_the_plan_as_json(client, researcher, thumb_study):
    client.force_login(researcher)
    query = {**SMALL, "price_per_judgment": "0.5", "target_half_width": "0.5"}
    data = client.get(reverse("api_study_plan", args=[thumb_study.pk]), query).json()
    assert data["mode"] == "thumb" and data["pilot"] == "assumptions"
    assert [p["n_images"] for p in data["points"]] == [20, 60]
    assert [p["judgments"] for p in data["points"]] == [80, 240]
    assert [p["money"] for p in data["points"]] == [40.0, 120.0]
    assert set(data["points"][0]["half_width"]) == {"A", "B"}
    # Wider intervals with fewer images (the same simulation seed for both sizes).
    assert data["points"][0]["half_width"]["A"] > data["points"][1]["half_width"]["A"]
    if data["recommended"] is not None:
        assert data["recommended"]["n_images"] in (20, 60)


def test_a_vicr_study_with_ratings_is_its_own_pilot(client, researcher):
    from annotation.modes.vicr.plan import PLAN_PILOT_MIN_PAIRS

    study = vicr_study(researcher, game=PLAN_PILOT_MIN_PAIRS, min_ratings=2, max_ratings=2)
    for rating in (4, 5):
        player = in_game(study)
        for _ in range(PLAN_PILOT_MIN_PAIRS):
            play(player, rating)
    client.force_login(researcher)
    data = client.get(reverse("api_study_plan", args=[study.pk]), SMALL).json()
    assert data["pilot"] == "study"
    # No seconds given: the median of the stored dwell times (play rates after 3 s).
    assert data["seconds_per_judgment"] == pytest.approx(3.0)
    assert [p["judgments"] for p in data["points"]] == [60, 180]  # n x 3 ratings


def test_the_study_page_links_the_planner(client, researcher, thumb_study):
    client.force_login(researcher)
    html = client.get(reverse("study_detail", args=[thumb_study.pk])).content.decode()
    assert reverse("study_plan", args=[thumb_study.pk]) in html


def test_the_schema_lists_the_planner(client, researcher):
    client.force_login(researcher)
    schema = yaml.safe_load(client.get(reverse("schema")).content)
    assert "/api/studies/{study_id}/plan/" in schema["paths"]


def _vicr_with_ratings(researcher):
    from annotation.modes.vicr.plan import PLAN_PILOT_MIN_PAIRS

    study = vicr_study(researcher, game=PLAN_PILOT_MIN_PAIRS, min_ratings=2, max_ratings=2)
    for rating in (4, 5):
        player = in_game(study)
        for _ in range(PLAN_PILOT_MIN_PAIRS):
            play(player, rating)
    return study


def test_judgments_without_dwell_are_not_timed_ones(client, researcher):
    """Issue 27: imported judgments store no dwell (0); counted, they pulled the median to
    0 s. Most of this study's judgments lose their dwell; the rest were played at 3 s."""
    study = _vicr_with_ratings(researcher)
    ids = list(Judgment.objects.filter(study=study).order_by("id").values_list("id", flat=True))
    untimed = ids[: len(ids) * 2 // 3]
    Judgment.objects.filter(id__in=untimed).update(dwell_ms=0)
    client.force_login(researcher)
    data = client.get(reverse("api_study_plan", args=[study.pk]), SMALL).json()
    assert data["seconds_source"] == "study"
    assert data["seconds_per_judgment"] == pytest.approx(3.0)


def test_a_study_without_timed_judgments_plans_with_the_stated_default(client, researcher):
    study = _vicr_with_ratings(researcher)
    Judgment.objects.filter(study=study).update(dwell_ms=0)  # as an import stores them
    default = get_mode("vicr").planner.default_seconds
    client.force_login(researcher)
    data = client.get(reverse("api_study_plan", args=[study.pk]), SMALL).json()
    assert data["seconds_source"] == "default"
    assert data["seconds_per_judgment"] == default > 0
    for point in data["points"]:
        assert point["crowd_hours"] == pytest.approx(point["judgments"] * default / 3600)
        assert point["crowd_hours"] > 0
    page = client.get(reverse("study_plan", args=[study.pk]), SMALL).content.decode()
    assert f"Crowd time at {default:.1f} s per judgment (an assumed default" in page


def test_thumb_points_show_the_two_judgments_per_caption_their_cost_counts(
    client, researcher, thumb_study
):
    client.force_login(researcher)
    data = client.get(reverse("api_study_plan", args=[thumb_study.pk]), SMALL).json()
    for point in data["points"]:
        assert point["judgments_per_item"] == 2
        assert point["judgments"] == point["n_images"] * 2 * point["judgments_per_item"]


def test_the_form_refuses_a_thumb_plan_over_the_cpu_budget(client, researcher, thumb_study):
    """THumB's simulations bootstrap 1,000 resamples: 10 times HUMANr's CPU per unit, so the
    largest plans the form takes for HUMANr are refused for THumB, beside the field."""
    client.force_login(researcher)
    query = {"sizes": "1000, 2000", "simulations": "20"}  # 3000 x 5 x 20 x 10 > 2,000,000
    response = client.get(reverse("api_study_plan", args=[thumb_study.pk]), query)
    assert response.status_code == 400 and "simulations" in response.json()
    # HUMANr: 3000 x (1 + 3) x 20 = 240,000 units, accepted by the same form.
    assert PlanForm(query, mode="humanr").is_valid()
