"""The judges page of a pair study in Chromium (issue 46, row 17): the forms laid out as
the study form, a local endpoint as the example, the answer format on the page, and a
statistic not measured said in plain words; axe, 390 and 1280 px."""

import io
import json

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.models import Caption, Study
from annotation.services.judges import judge_import
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width

pytestmark = pytest.mark.e2e


def arena_with_judge(researcher, tmp_path) -> Study:
    battles = [
        {"model_a": "alpha", "model_b": "beta", "winner": winner, "judge": person,
         "caption_a": f"a short one {image}", "caption_b": f"a somewhat longer caption {image}",
         "image": image}
        for image in ("i1", "i2", "i3")
        for person, winner in (("p1", "model_a"), ("p2", "model_b"))
    ]  # fmt: skip
    log = tmp_path / "arena.jsonl"
    log.write_text("\n".join(json.dumps(b) for b in battles) + "\n")
    call_command(
        "import_ratings", str(log), "--format", "battles", "--owner", researcher.username,
        "--name", "Judged battles", stdout=io.StringIO(),
    )  # fmt: skip
    study = Study.objects.get(owner=researcher)
    ids = {(c.image.name, c.system): c.pk for c in Caption.objects.filter(study=study)}
    lines = [
        {"caption_a": ids[(i, "alpha")], "caption_b": ids[(i, "beta")], "answer": {"outcome": "a"}}
        for i in ("i1", "i2", "i3")
    ]
    judge_import(study=study, text="\n".join(json.dumps(x) for x in lines), name="one-way")
    return study


def test_the_judges_page_reads_plainly_at_both_widths(page, login, researcher, tmp_path):
    study = arena_with_judge(researcher, tmp_path)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/judges/")
    expect(page.get_by_role("heading", name="Automatic judges: Judged battles")).to_be_visible()

    base_url = page.get_by_label("Endpoint base URL")
    expect(base_url).to_have_attribute("placeholder", "http://localhost:11434/v1")
    expect(page.locator("#endpoint_api_key_helptext")).to_contain_text("needs no API key")
    expect(page.locator(".answer-format")).to_contain_text('"caption_a": 12')
    expect(page.locator(".answer-format")).to_contain_text('"outcome"')
    expect(page.locator("#main")).to_contain_text("no pair was asked both ways")
    expect(page.locator("#main")).not_to_contain_text("first_order")
    # The endpoint and import inputs are as wide as the study form's (one .field each).
    assert page.locator("form.study-form .field").count() >= 12
    assert_no_serious_a11y_violations(page, context="judges page")
    assert_fits_every_width(page, "judges page", shot="issue46-17-judges")
