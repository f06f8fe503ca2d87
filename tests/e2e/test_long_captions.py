"""4,000-character captions on every page that shows a caption (issue 46, row 1).

Detailed captions (DOCCI, IIW, DCI) run to about 3,200 characters; a 4,000-character caption
stands for them with room. Captions and images go in through the importer (real files under
the test's MEDIA_ROOT, served by the live server), and each page must show the caption
whole, fit 390 and 1280 px without sideways scroll, and pass axe: the arena battle page and
the spans marking page as a crowd worker reaches them, the data browser and a downloaded
export as the researcher.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from PIL import Image as PILImage

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Caption, Judgment, Study
from annotation.services.imports import study_import
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_create, study_open
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import WIDTHS, assert_fits_every_width

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHARS = 4000
SENTENCES = [
    "A weathered red barn stands behind a low wooden fence under pale, drifting clouds.",
    "Two children in yellow raincoats lean on the fence and watch a brown dog run.",
    "To the left, a rusted tractor with a cracked seat sits in knee-high grass.",
    "Far behind, a line of poplars bends in the wind along a gravel road.",
]


def long_caption(tag: str) -> str:
    """A caption of exactly ``CHARS`` characters of plain sentences, ending in its tag."""
    end = f" The end of caption {tag}."
    words, k = [], 0
    while len(" ".join(words)) < CHARS:
        words.append(SENTENCES[k % len(SENTENCES)])
        k += 1
    body = " ".join(words)[: CHARS - len(end)]
    return body.rsplit(" ", 1)[0].ljust(CHARS - len(end), ".") + end


def imported_study(owner, mode: str, tmp_path: Path, **settings) -> Study:
    """A live study of two generated photographs, each with two 4,000-character captions,
    imported by the import service as the import page's job does."""
    study = study_create(owner=owner, name=f"Long {mode}", mode=mode, settings=settings, seed=46)
    folder = tmp_path / f"{mode}-images"
    folder.mkdir()
    rows = [["image", "system", "caption"]]
    for n, color in enumerate([(170, 60, 40), (40, 90, 160)]):
        PILImage.new("RGB", (640, 480), color).save(folder / f"farm{n}.png")
        rows += [[f"farm{n}.png", system, long_caption(f"{system}{n}")] for system in ("m1", "m2")]
    captions = tmp_path / f"{mode}-captions.csv"
    with captions.open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(rows)
    study_import(study=study, image_sources=[folder], captions=captions)
    study_open(study=study)
    study.refresh_from_db()
    return study


def check(page, context: str, shot: str) -> None:
    """axe at both widths, then no sideways scroll at either (with screenshots on request)."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        assert_no_serious_a11y_violations(page, context=f"{context} at {width} px")
    assert_fits_every_width(page, context, shot=shot)


def shown_whole(page, selector: str) -> set[str]:
    """The stored captions (whole) that the elements matched by ``selector`` show."""
    stored = {c.text for c in Caption.objects.all()}
    assert all(len(text) >= CHARS - 10 for text in stored)  # normalised, not cut
    texts = [re.sub(r"\s+", " ", t).strip() for t in page.locator(selector).all_inner_texts()]
    return {s for s in stored if any(s in t for t in texts)}


def test_the_battle_page_the_data_browser_and_the_export_show_4000_characters(
    page, login, researcher, tmp_path
):
    study = imported_study(researcher, "arena", tmp_path, catch_rate=0, min_seconds=0)
    assert Caption.objects.filter(study=study).count() == 4

    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=E2E-LONG-ARENA")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.arena-form")).to_be_visible()
    page.wait_for_load_state("load")
    assert len(shown_whole(page, ".arena-caption")) == 2
    check(page, "battle page with 4,000-character captions", "issue46-row1-arena-battle")

    page.locator("#outcome-a").check()
    with page.expect_navigation():
        page.locator("#arena-submit").click()
    assert Judgment.objects.filter(study=study).count() == 1

    page.context.clear_cookies()
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/items/")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    assert len(shown_whole(page, "main")) == 4
    check(page, "data browser with 4,000-character captions", "issue46-row1-data-browser")

    page.goto(f"/studies/{study.pk}/")
    page.get_by_label("Export format").select_option("csv")
    page.get_by_role("button", name="Export judgments").click()
    link = page.locator("#jobs .job").get_by_role("link", name=re.compile("^Download"))
    expect(link).to_be_visible(timeout=60_000)
    with page.expect_download() as download:
        link.click()
    with open(download.value.path(), newline="", encoding="utf-8") as exported:
        rows = list(csv.DictReader(exported))
    assert len(rows) == 1
    judged = Judgment.objects.get(study=study).item.spec
    texts = dict(Caption.objects.values_list("pk", "text"))
    assert rows[0]["caption_a"] == texts[judged["caption_a"]]
    assert rows[0]["caption_b"] == texts[judged["caption_b"]]
    assert len(rows[0]["caption_a"]) >= CHARS - 10


def test_the_spans_page_shows_4000_characters_to_mark(page, researcher, tmp_path):
    study = imported_study(researcher, "spans", tmp_path, min_seconds=0)

    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=E2E-LONG-SPANS")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("form.spans-form")).to_be_visible()
    page.wait_for_load_state("load")
    assert len(shown_whole(page, "#spans-caption")) == 1
    check(page, "spans page with a 4,000-character caption", "issue46-row1-spans")

    # The last word of the caption can be marked: the page offers every word of it.
    words = page.locator("#spans-caption .w")
    assert words.count() > 600
    expect(words.last).to_have_attribute("data-end", re.compile(r"^\d+$"))
    assert int(words.last.get_attribute("data-end")) >= CHARS - 10
