"""Issue 26, row 1: the data browser in Chromium.

A researcher goes from the study page to ``/studies/<id>/items/``, sees each image with its
captions by system, the captions' scores and judgments (opened from a <details>), filters by
system and searches. Each state passes axe, fits 390 px and 1280 px without sideways
scrolling, and requests nothing outside the live server (the ``page`` fixture fails on
that, and on the console error a missing image would log).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from PIL import Image as PILImage

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.modes.thumb.protocol import STAGE1, STAGE2
from annotation.services.studies import study_open
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.thumb import add_image, judge, make_annotator, member, scores  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)
CAPTIONS = {
    "bus": [("Human", "A red bus on a street in the rain."), ("M1", "A bus.")],
    "dog": [("Human", "A brown dog catching a frisbee."), ("M1", "A dog in a park.")],
}


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"
        assert_no_serious_a11y_violations(page, context=f"{context} at {width} px")


def write_display(name: str) -> None:
    """The display rendition the factory's image row names, so the page's <img> loads."""
    path = settings.MEDIA_ROOT / "display" / f"{name}.jpg"
    path.parent.mkdir(parents=True, exist_ok=True)
    PILImage.new("RGB", (64, 48), (180, 40, 40)).save(path, "JPEG")


def scored_study(make_study, make_annotator):  # noqa: F811 (the fixture)
    """A THumB study of two images; "ann" scores both in stage 1 (P 4, R 2), "bob" reviews
    one in stage 2 (P 5, R 3)."""
    study = make_study("thumb", settings={"seconds_per_caption": 0})
    for name, rows in CAPTIONS.items():
        add_image(study, name, rows, metrics={"M1": {"bleu": 0.25}})
        write_display(name)
    study_open(study=study)
    first = member(study, make_annotator("ann", native=True))
    second = member(study, make_annotator("bob", native=True))

    def answers(p, r):
        return lambda item: {"captions": {g["key"]: scores(p, r) for g in item.spec["groups"]}}

    judge(first, answers(4, 2), STAGE1)
    judge(first, answers(4, 2), STAGE1)
    reviewed = judge(second, answers(5, 3), STAGE2)
    return study, first, reviewed.item.image.name


def test_row1_the_researcher_browses_images_captions_and_judgments(
    page,
    login,
    researcher,
    make_study,
    make_annotator,  # noqa: F811 (the fixture)
):
    study, first, reviewed = scored_study(make_study, make_annotator)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Browse the data").click()
    expect(page.get_by_role("heading", name="Images, captions and judgments")).to_be_visible()
    expect(page.locator("#browse-count")).to_have_text("2 images.")
    section = page.get_by_role("region", name=reviewed)
    expect(section.get_by_role("img")).to_be_visible()
    m1 = section.get_by_role("article").filter(has_text="M1")
    # Stage 2 is final: P 5, R 3, Total (5 + 3) / 2 = 4.
    expect(m1).to_contain_text("P 5.00 (n = 1); R 3.00 (n = 1); Total 4.00 (n = 1)")
    expect(m1).to_contain_text("bleu 0.250")
    m1.get_by_text("2 judgments").click()
    expect(m1.locator(".judgment-list li")).to_have_count(2)
    expect(m1.locator(".judgment-list")).to_contain_text(first.pseudonym)
    expect(m1.locator(".judgment-list")).to_contain_text("P 4, R 2")
    assert_fits_every_width(page, "the data browser with a caption's judgments open")

    page.get_by_label("System").select_option("M1")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(".browse-caption")).to_have_count(2)
    expect(page.locator("main")).not_to_contain_text("A red bus on a street")
    page.get_by_label("Search image names and captions").fill("FRISBEE")
    page.get_by_label("System").select_option("")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#browse-count")).to_have_text("1 image.")
    expect(page.get_by_role("region", name="dog")).to_be_visible()
    assert_fits_every_width(page, "the data browser after a search")
