"""Issue 26, row 13: the planner about the study itself. Only the study's own mode's
fields, filled with their defaults; the study's own systems simulated instead of "A" and
"B"; money with its currency; THumB's 2 judgments per caption shown and costed."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import reverse

from tests.factories.humanr import humanr_study
from tests.factories.thumb import add_image

pytestmark = pytest.mark.django_db

SMALL = {"sizes": "20, 60", "simulations": "5"}


def field_value(html: str, name: str) -> str | None:
    found = re.search(rf'name="{name}" id="id_{name}" value="([^"]*)"', html)
    return found and found.group(1)


@pytest.mark.parametrize(
    ("mode", "shown", "hidden"),
    [
        ("thumb", {"mean", "difference"}, {"spread", "exact", "adjacent"}),
        ("humanr", {"difference", "spread"}, {"mean", "exact", "adjacent"}),
        ("vicr", {"exact", "adjacent"}, {"mean", "difference", "spread"}),
    ],
)
def test_only_the_modes_own_fields_with_their_defaults_filled(
    client, researcher, make_study, mode, shown, hidden
):
    study = make_study(mode)
    client.force_login(researcher)
    html = client.get(reverse("study_plan", args=[study.pk]), {"simulations": "5"}).content
    html = html.decode()
    for name in shown | {"sizes", "judgments_per_item", "price_per_judgment"}:
        assert f'id="id_{name}"' in html, name
    for name in hidden:
        assert f'id="id_{name}"' not in html, name
    # The form's stated defaults are in the fields, not only in a footnote.
    assert field_value(html, "sizes") == "20, 50, 100, 200"
    assert field_value(html, "price_per_judgment") == "0.1"
    defaults = {"mean": "4.0", "difference": "0.3", "spread": "2.0", "exact": "0.6"}
    for name in shown & set(defaults):
        assert field_value(html, name) == defaults[name], name
    # No other mode's label ("THumB: ...", "VICR: ...") on the page.
    others = {"thumb": ("HUMANr:", "VICR:"), "humanr": ("THumB:", "VICR:"), "vicr": ("THumB:",)}
    for label in others[mode]:
        assert label not in html


def test_thumb_shows_and_costs_two_judgments_per_caption(client, researcher, make_study):
    study = make_study("thumb")
    client.force_login(researcher)
    html = client.get(reverse("study_plan", args=[study.pk]), SMALL).content.decode()
    assert field_value(html, "judgments_per_item") == "2"
    # No captions yet: hypothetical A and B, 20 images x 2 systems x 2 judgments = 80.
    assert '<th scope="row">20</th>' in html and "<td>80</td>" in html


def test_thumb_simulates_the_studys_own_systems(client, researcher, make_study):
    study = make_study("thumb")
    for n in range(3):
        add_image(study, f"im{n}", [("Human", "a cat"), ("GoodBot", "cat"), ("BadBot", "dog")])
    client.force_login(researcher)
    query = {**SMALL, "price_per_judgment": "0.5"}
    html = client.get(reverse("study_plan", args=[study.pk]), query).content.decode()
    for system in ("Human", "GoodBot", "BadBot"):
        assert f"± {system}" in html
    assert "± A<" not in html and "± B<" not in html
    assert "Systems simulated: this study's own, Human, BadBot, GoodBot." in html
    # 3 systems: 20 images x 3 captions x 2 judgments = 120 judgments, 60.00 at 0.5;
    # 60 images: 360 judgments, 180.00.
    assert "<td>120</td><td>60.00</td>" in html and "<td>360</td><td>180.00</td>" in html
    api = client.get(reverse("api_study_plan", args=[study.pk]), query).json()
    assert set(api["points"][0]["half_width"]) == {"Human", "GoodBot", "BadBot"}
    assert api["systems"] == ["Human", "BadBot", "GoodBot"] and api["currency"] == "GBP"


def test_humanr_simulates_the_studys_own_models(client, researcher):
    study = humanr_study(researcher, images=4, systems=("GIT", "ClipCap"))
    client.force_login(researcher)
    api = client.get(reverse("api_study_plan", args=[study.pk]), SMALL).json()
    assert set(api["points"][0]["half_width"]) >= {"GIT", "ClipCap"}
    assert "Model" not in api["points"][0]["half_width"]


def test_money_carries_its_currency(client, researcher, make_study):
    study = make_study("thumb")
    client.force_login(researcher)
    url = reverse("study_plan", args=[study.pk])
    html = client.get(url, SMALL).content.decode()
    assert "Price per judgment (GBP)" in html and "Money (GBP)" in html
    with override_settings(CAPEVAL_CURRENCY="USD"):
        html = client.get(url, SMALL).content.decode()
    assert "Price per judgment (USD)" in html and "Money (USD)" in html
    # Not in the page's words: the CSRF token is random letters and may hold "GBP".
    assert "GBP" not in re.sub(
        r'"X-CSRFToken": "[^"]*"|csrfmiddlewaretoken" value="[^"]*"', "", html
    )
