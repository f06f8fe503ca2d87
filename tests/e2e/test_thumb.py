"""THumB in a real browser: keyboard-only scoring, a stage-2 review, the report.

An annotator scores an image with 5 captions using only the keyboard, a second annotator
changes one field in stage 2, and the researcher computes the report with the page's button
and sees the changed value. axe-core checks the annotation and report pages.
"""

import re
from pathlib import Path

import pytest
from django.conf import settings
from PIL import Image as PILImage

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Caption, Image, Judgment
from annotation.services.studies import study_create, study_open
from rubrics.thumb import normalise
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = pytest.mark.e2e

CAPTIONS = [
    ("Human", "A woman selling doughnuts behind a counter."),
    ("Up-Down", "A man standing in front of a display of donuts."),
    ("Unified-VLP", "A display case filled with lots of donuts."),
    ("VinVL-base", "A woman standing behind a counter at a donut shop."),
    ("VinVL-large", "A woman standing in front of a display of doughnuts."),
]


def write_display_image(name: str) -> str:
    """A small JPEG in this test's media folder; returns its path relative to it."""
    relative = f"display/{name}.jpg"
    root = Path(settings.MEDIA_ROOT)
    (root / "display").mkdir(parents=True, exist_ok=True)
    PILImage.new("RGB", (320, 240), (200, 120, 60)).save(root / relative, "JPEG")
    return relative


@pytest.fixture
def study(researcher, make_user):
    study = study_create(owner=researcher, name="Doughnut shop", mode="thumb")
    image = Image.objects.create(
        study=study,
        name="shop",
        sha256="f" * 64,
        file="",
        display=write_display_image("shop"),
        width=320,
        height=240,
        format="JPEG",
        alt_text="A woman behind a doughnut counter.",
    )
    for system, text in CAPTIONS:
        Caption.objects.create(
            study=study, image=image, system=system, raw_text=text, text=normalise(text)
        )
    study_open(study=study)
    return study


def tab_to(page, selector: str, limit: int = 80) -> None:
    """Press Tab until the focused element matches ``selector`` (keyboard only)."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def shown_groups(page) -> list[str]:
    return page.eval_on_selector_all("section[data-group]", "els => els.map(e => e.dataset.group)")


def test_keyboard_scoring_stage2_review_and_report(page, login, study, researcher, make_user):
    first = make_user("ann", native_english=True)
    second = make_user("bob", native_english=True)
    study.annotators.add(first, second)

    login(page, first)
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 1")
    groups = shown_groups(page)
    assert len(groups) == 5
    assert_no_serious_a11y_violations(page, context="THumB stage-1 page")

    page.locator("body").focus()
    page.keyboard.press("?")
    expect(page.locator("#rubric")).to_be_visible()
    expect(page.locator("#rubric")).to_contain_text("Rules of THumB")
    assert_no_serious_a11y_violations(page, context="THumB rubric dialog")
    page.keyboard.press("Escape")
    expect(page.locator("#rubric")).to_be_hidden()

    for key in groups:
        tab_to(page, f'input[name="{key}-precision"]')
        page.keyboard.press("4")
        if key == groups[-1]:
            break
        tab_to(page, f'input[name="{key}-recall"]')
        page.keyboard.press("3")
        expect(page.locator(f"#{key}-total")).to_have_text("3.5")

    # A reload (the same lease, served again) keeps the unsaved answers: the draft.
    last = groups[-1]
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.locator(f"#{groups[0]}-total")).to_have_text("3.5")
    expect(page.locator(f'input[name="{last}-precision"][value="4"]')).to_be_checked()
    page.locator("body").focus()
    tab_to(page, f'input[name="{last}-recall"]')
    page.keyboard.press("3")
    expect(page.locator(f"#{last}-total")).to_have_text("3.5")
    tab_to(page, "button[type=submit]")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Thank you")
    drafts = page.evaluate(
        "() => Object.keys(localStorage).filter(k => k.startsWith('capeval-draft:'))"
    )
    assert drafts == [], "the saved lease's draft is gone"
    stage1 = Judgment.objects.get(item__kind="stage1")
    assert {(s["precision"], s["recall"]) for s in stage1.payload["captions"].values()} == {(4, 3)}

    page.context.clear_cookies()
    login(page, second)
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 2")
    changed = shown_groups(page)[0]
    expect(page.locator(f'input[name="{changed}-recall"][value="3"]')).to_be_checked()
    page.locator("body").focus()
    tab_to(page, f'input[name="{changed}-recall"]')
    page.keyboard.press("5")
    expect(page.locator(f"#{changed}-total")).to_have_text("4.5")
    expect(page.locator(f"#{changed}-recall .was")).to_contain_text("changed")
    assert_no_serious_a11y_violations(page, context="THumB stage-2 page")
    # A review is saved only with every caption confirmed as checked (Space ticks the box).
    for key in shown_groups(page):
        tab_to(page, f'input[name="{key}-confirm"]')
        page.keyboard.press("Space")
        expect(page.locator(f'input[name="{key}-confirm"]')).to_be_checked()
    tab_to(page, "button[type=submit]")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    stage2 = Judgment.objects.get(item__kind="stage2")
    assert stage2.result["modified"][changed]["recall"] is True
    systems = [
        c["system"]
        for g in stage2.item.spec["groups"]
        if g["key"] == changed
        for c in g["captions"]
    ]

    page.context.clear_cookies()
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    page.get_by_role("button", name="Compute the report").click()
    # The page reloads itself when the job ends (reloading here too could race with it).
    expect(page.locator("#table-2")).to_be_visible(timeout=60_000)
    for system in systems:
        row = page.locator("#table-2 tr", has=page.locator(f'th:text-is("{system}")'))
        expect(row.locator('td[data-field="recall"]')).to_contain_text(re.compile(r"^5\.00"))
        expect(row.locator('td[data-field="total"]')).to_contain_text("4.50")
    expect(page.locator("#agreement")).to_contain_text("20%")  # 1 recall of 5 changed
    assert_no_serious_a11y_violations(page, context="THumB report page")


def test_a_refused_answer_names_the_field_and_keeps_the_draft(
    browser, live_server, login, study, make_user
):
    """Own context: the shared ``page`` fixture counts the expected 400 as a console error."""
    annotator = make_user("ann", native_english=True)
    study.annotators.add(annotator)
    context = browser.new_context(base_url=live_server.url)
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        login(page, annotator)
        page.goto(f"/s/{study.public_id}/next/")
        groups = shown_groups(page)
        for key in groups:
            page.locator(f'input[name="{key}-precision"][value="5"]').check()
            if key != groups[-1]:
                page.locator(f'input[name="{key}-recall"][value="2"]').check()

        first = groups[0]
        amount = page.locator(f"#{first}-amount-awkward_construction")
        expect(amount).to_be_hidden()
        page.locator(f"#{first}-fluency summary").click()
        page.locator(f'input[name="{first}-fluency"][value="awkward_construction"]').check()
        expect(amount).to_be_visible()
        amount.fill("0.3")
        expect(page.locator(f"#{first}-total")).to_have_text("3.2")
        expect(page.locator(f"#{first}-fluency summary")).to_contain_text("1 ticked, −0.3")

        with page.expect_navigation():
            page.get_by_role("button", name="Save and continue").click()

        expect(page.get_by_role("alert")).to_contain_text("choose a recall score")
        expect(page.locator(f"#{groups[-1]}-recall .field-error")).to_be_visible()
        expect(page.locator(f"#{first}-total")).to_have_text("3.2")
        expect(amount).to_have_value("0.3")
        expect(page.locator(f'input[name="{groups[-1]}-precision"][value="5"]')).to_be_checked()
        assert not Judgment.objects.exists()
        assert_no_serious_a11y_violations(page, context="THumB page with an error")
    finally:
        context.close()
    assert errors == []
