"""Every participant page of every mode in Chromium, at 1280x800 and 390x844.

Each page is checked for sideways scrolling (``scrollWidth <= innerWidth``) and with axe-core
at both sizes; the ``page`` fixture fails a test on any request outside the live server, a
console error or a CSP violation. One item per mode is completed with the keyboard alone
(Tab, Space, Enter, digits). When a test fails, ``tests/e2e/conftest.py`` saves a full-page
screenshot of every open page to ``var/test-artifacts/``.

Images are answered by a route that returns a small PNG (the files are not on disk in tests)
except THumB's, which writes a real JPEG so that its layout can be measured.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from django.conf import settings
from PIL import Image as PILImage

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Caption, Image, Judgment, Participant, Study
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_close, study_create, study_open
from rubrics.thumb import normalise
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.humanr import humanr_study
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIZES = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
THUMB_CAPTIONS = [
    ("Human", "A woman selling doughnuts behind a counter."),
    ("Up-Down", "A man standing in front of a display of donuts."),
    ("Unified-VLP", "A display case filled with lots of donuts."),
    ("VinVL-base", "A woman standing behind a counter at a donut shop."),
    ("VinVL-large", "A woman standing in front of a display of doughnuts."),
]


def check_page(page, context: str) -> None:
    """No sideways scrolling and no serious axe finding, at both sizes; ends at 1280 px."""
    for size in reversed(SIZES):
        page.set_viewport_size(size)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {size['width']} px"
        assert_no_serious_a11y_violations(page, context=f"{context} at {size['width']} px")
    page.set_viewport_size(SIZES[0])


@pytest.fixture
def open_page(browser, live_server):
    """``open_page()``: a page in a fresh context for pages answered 4xx on purpose.

    Like the ``page`` fixture, the test fails on a JavaScript error, a request outside the
    live server or any console error, except Chromium's "Failed to load resource" for the
    document itself, which every 4xx page logs.
    """
    contexts = []
    problems: list[str] = []
    server_host = live_server.url.split("//", 1)[1]

    def make():
        context = browser.new_context(base_url=live_server.url)
        context.set_default_timeout(10_000)
        context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        contexts.append(context)
        new_page = context.new_page()
        new_page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
        new_page.on(
            "console",
            lambda message: (
                problems.append(f"console error: {message.text}")
                if message.type == "error" and "Failed to load resource" not in message.text
                else None
            ),
        )
        new_page.on(
            "request",
            lambda request: (
                problems.append(f"outside request: {request.url}")
                if request.url.split("//", 1)[-1].split("/", 1)[0] != server_host
                and not request.url.startswith(("data:", "blob:", "about:"))
                else None
            ),
        )
        serve_png(new_page)
        return new_page

    yield make
    for context in contexts:
        context.close()
    assert problems == []


def serve_png(page) -> None:
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )


def press_tab_until(page, selector: str, limit: int = 120) -> None:
    """Press Tab until the focused element matches ``selector`` (keyboard only)."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


# ---------------------------------------------------------------------- THumB


def thumb_study(owner, images: int = 2, **config) -> Study:
    study = study_create(owner=owner, name="Doughnut shop", mode="thumb", settings=config)
    root = Path(settings.MEDIA_ROOT)
    (root / "display").mkdir(parents=True, exist_ok=True)
    for number in range(images):
        relative = f"display/shop{number}.jpg"
        PILImage.new("RGB", (640, 480), (200, 120, 60)).save(root / relative, "JPEG")
        image = Image.objects.create(
            study=study,
            name=f"shop{number}",
            sha256=f"{number:064d}",
            file="",
            display=relative,
            width=640,
            height=480,
            format="JPEG",
            alt_text="A woman behind a doughnut counter.",
        )
        for system, text in THUMB_CAPTIONS:
            Caption.objects.create(
                study=study, image=image, system=system, raw_text=text, text=normalise(text)
            )
    study_open(study=study)
    return study


def test_thumb_item_page_fits_keeps_the_image_in_view_and_lists_every_missing_score(
    browser, live_server, login, researcher, make_user
):
    """Own context: the refused submission answers 400, which Chromium logs as an error."""
    study = thumb_study(researcher)
    annotator = make_user("ann", native_english=True)
    study.annotators.add(annotator)
    context = browser.new_context(base_url=live_server.url)
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        login(page, annotator)
        page.goto(f"/s/{study.public_id}/")
        check_page(page, "THumB intro")
        page.goto(f"/s/{study.public_id}/next/")
        expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 1")
        check_page(page, "THumB stage-1 page")

        # Wide screen: the image stays in view while caption 4 is scored.
        page.locator("section[data-group]").nth(3).scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, 300)")
        box = page.locator("figure.stimulus img").bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 800, f"image out of view: {box}"

        # The rubric opens at its top.
        page.keyboard.press("?")
        expect(page.locator("#rubric")).to_be_visible()
        assert page.evaluate("document.getElementById('rubric').scrollTop") == 0
        expect(page.locator("#rubric-title")).to_be_in_viewport()
        page.keyboard.press("Escape")

        # An empty submission names all 10 missing scores at once.
        with page.expect_navigation():
            page.get_by_role("button", name="Save and continue").click()
        alert = page.get_by_role("alert")
        expect(alert).to_contain_text("10 answers are missing")
        expect(page.locator("#form-error-list li")).to_have_count(10)
        expect(page.locator(".field-error")).to_have_count(10)
        check_page(page, "THumB page with every missing score")
        assert not Judgment.objects.exists()
    finally:
        context.close()
    assert errors == []


def test_thumb_keyboard_only_digits_without_focus_and_the_end_page(
    page, login, researcher, make_user
):
    """Digits score the first empty field from anywhere; Enter saves; the end page leads on."""
    study = thumb_study(researcher, images=1)
    annotator = make_user("ann", native_english=True)
    study.annotators.add(annotator)
    login(page, annotator)
    page.goto(f"/s/{study.public_id}/")
    press_tab_until(page, "a.button.primary")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("#thumb-keys")).to_contain_text("outside a field, of the first one")
    page.locator("#main").focus()
    groups = page.eval_on_selector_all("section[data-group]", "s => s.map(e => e.dataset.group)")
    for key in groups:
        page.keyboard.press("4")
        page.keyboard.press("3")
        expect(page.locator(f"#{key}-total")).to_have_text("3.5")
    expect(page.locator("#thumb-form button[type=submit]")).to_be_focused()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you", level=1)).to_be_visible()
    stage1 = Judgment.objects.get(item__kind="stage1")
    assert {(c["precision"], c["recall"]) for c in stage1.payload["captions"].values()} == {(4, 3)}
    expect(page.get_by_role("link", name="Back to your studies")).to_be_visible()
    expect(page.get_by_role("link", name="Look for more work in this study")).to_be_visible()
    check_page(page, "THumB end page of a registered annotator")


def test_thumb_digits_typed_into_a_number_box_stay_there(page, login, researcher, make_user):
    study = thumb_study(researcher, images=1)
    annotator = make_user("ann", native_english=True)
    study.annotators.add(annotator)
    login(page, annotator)
    page.goto(f"/s/{study.public_id}/next/")
    first = page.locator("section[data-group]").first.get_attribute("data-group")
    page.locator(f"#{first}-fluency summary").click()
    page.locator(f'input[name="{first}-fluency"][value="broken_sentence"]').check()
    amount = page.locator(f"#{first}-amount-broken_sentence")
    amount.fill("")
    amount.focus()
    page.keyboard.type("1.5")
    expect(amount).to_have_value("1.5")
    assert page.locator("fieldset.scale input:checked").count() == 0, "no score was set"


def test_thumb_phone_keeps_the_image_on_screen(page, login, researcher, make_user):
    study = thumb_study(researcher, images=1)
    annotator = make_user("ann", native_english=True)
    study.annotators.add(annotator)
    login(page, annotator)
    page.set_viewport_size(SIZES[1])
    page.goto(f"/s/{study.public_id}/next/")
    page.locator("section[data-group]").nth(3).scroll_into_view_if_needed()
    box = page.locator("figure.stimulus img").bounding_box()
    assert box["y"] >= -1 and box["height"] > 50, f"image out of view on a phone: {box}"
    assert box["height"] <= 0.3 * 844, "the pinned image leaves room for the captions"


def test_thumb_stage2_needs_every_caption_confirmed(open_page, login, researcher, make_user):
    study = thumb_study(researcher, images=1)
    first, second = make_user("ann", native_english=True), make_user("bob", native_english=True)
    study.annotators.add(first, second)
    page = open_page()
    login(page, first)
    page.goto(f"/s/{study.public_id}/next/")
    page.locator("#main").focus()
    for _ in range(5):
        page.keyboard.press("4")
        page.keyboard.press("3")
    with page.expect_navigation():
        page.keyboard.press("Enter")

    page = open_page()
    login(page, second)
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 2")
    check_page(page, "THumB stage-2 page")
    with page.expect_navigation():
        page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("alert")).to_contain_text("5 answers are missing")
    expect(page.locator(".confirm .field-error")).to_have_count(5)
    assert not Judgment.objects.filter(item__kind="stage2").exists()
    check_page(page, "THumB stage-2 page refused")
    for box in page.get_by_label("I checked this caption against the image").all():
        box.focus()
        page.keyboard.press("Space")
    with page.expect_navigation():
        page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    assert Judgment.objects.filter(item__kind="stage2").count() == 1


def test_thumb_prolific_worker_is_sent_back_to_prolific(page, researcher):
    study = thumb_study(researcher, images=2, completion_images=1, seconds_per_caption=0)
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=THUMB-1&STUDY_ID=S&SESSION_ID=X")
    check_page(page, "THumB intro of a Prolific worker")
    with page.expect_navigation():
        page.get_by_role("link", name="I agree, start").click()
    # The intro page has a #main too: type only once the item page and its script are there.
    expect(page.locator("#thumb-keys")).to_be_attached()
    page.locator("#main").focus()
    for _ in range(5):
        page.keyboard.press("5")
        page.keyboard.press("5")
    expect(page.locator("fieldset.scale input:checked")).to_have_count(10)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    code = page.locator("#completion-code").inner_text()
    expect(page.locator("#completion-prolific")).to_have_attribute(
        "href", f"https://app.prolific.com/submissions/complete?cc={code}"
    )
    # The worker may go on: the next image's page carries the way back as well.
    expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 1")
    check_page(page, "THumB item page with the completion code")


# ---------------------------------------------------------------------- VICR


def test_vicr_every_page_keyboard_only_with_feedback_that_says_what_it_rests_on(page, researcher):
    study = vicr_study(
        researcher,
        game=2,
        primes=(4, 4),
        seconds_before_submit=0.5,
        tutorial_pairs=2,
        tutorial_pass=4,
        probation_pairs=1,
        probation_pass=-2,
        completion_game_ratings=1,
    )
    serve_png(page)
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=VICR-1&STUDY_ID=S&SESSION_ID=X")
    check_page(page, "VICR intro")
    press_tab_until(page, "a.button.primary")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    participant = Participant.objects.get(external_id="VICR-1")
    # Two tutorial pairs, the second rated far off (the tutorial is failed), then one
    # probation pair: every kind of pair page and feedback.
    steps = [
        ("Tutorial pair 1 of 2", "0"),
        ("Tutorial pair 2 of 2", "1"),
        ("Probation pair 1 of 1, attempt 1", "0"),
    ]
    for number, (progress, done) in enumerate(steps, start=1):
        expect(page.locator("#vicr-progress")).to_contain_text(progress)
        expect(page.locator("progress.vicr-bar")).to_have_attribute("value", done)
        if number != 2:
            check_page(page, f"VICR page: {progress}")
        lease = participant.assignments.get(status="open")
        truth = Caption.objects.get(pk=lease.item.spec["caption_id"]).spec["truth"]
        caption = Caption.objects.get(pk=lease.item.spec["caption_id"]).text
        answer = truth if number != 2 else (1 if truth >= 4 else 5)
        page.wait_for_load_state("domcontentloaded")
        page.keyboard.press(str(answer))
        expect(page.locator("#vicr-submit")).to_be_enabled()
        with page.expect_navigation():
            page.keyboard.press("Enter")
        # The feedback repeats the pair it speaks of.
        expect(page.locator("#vicr-recap-caption")).to_contain_text(caption)
        expect(page.locator(".vicr-recap img")).to_be_visible()
        if number != 2:
            check_page(page, f"VICR feedback after {progress}")
        else:
            expect(page.locator("#vicr-transition")).to_contain_text("probation")
        with page.expect_navigation():
            page.keyboard.press("Enter")  # "Next pair" has the focus
    expect(page.locator("#vicr-progress")).to_contain_text("Game: 0 ratings")
    expect(page.locator("#vicr-progress")).to_contain_text("the completion code after 1")
    check_page(page, "VICR game pair")
    page.wait_for_load_state("domcontentloaded")
    page.keyboard.press("2")  # consensus 4 from two primes: 2 is -1 point
    expect(page.locator("#vicr-submit")).to_be_enabled()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    # Shown with a true minus sign (U+2212), read out as "minus 1 point".
    heading = page.get_by_role("heading", name="minus 1 point", level=1)
    expect(heading.locator("[aria-hidden=true]")).to_have_text("\u22121")
    assert "-1" not in heading.inner_text()
    basis = page.locator("#vicr-basis")
    expect(basis).to_contain_text("No other player has rated this pair yet")
    expect(basis).to_contain_text("2 starting ratings")
    expect(page.locator("#main")).not_to_contain_text("0 player ratings")
    expect(page.locator("#main")).not_to_contain_text("raters so far")
    check_page(page, "VICR game feedback")
    code = page.locator("#completion-code").inner_text()
    expect(page.locator("#completion-prolific")).to_have_attribute(
        "href", f"https://app.prolific.com/submissions/complete?cc={code}"
    )
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_load_state("domcontentloaded")
    page.keyboard.press("4")
    expect(page.locator("#vicr-submit")).to_be_enabled()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    expect(page.locator("#completion-prolific")).to_be_visible()
    check_page(page, "VICR end page")


# ---------------------------------------------------------------------- HUMANr


def test_humanr_pages_keyboard_only_own_message_and_a_b_wording(page, researcher):
    study = humanr_study(researcher, images=18, systems=("GIT",), min_seconds_per_trial=0)
    serve_png(page)
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=HR-1&STUDY_ID=S&SESSION_ID=X")
    check_page(page, "HUMANr intro")
    expect(page.locator("#main")).to_contain_text("caption A")
    page.get_by_role("link", name="I agree, start").click()
    # Checked only once the trial page is there: right after the click, axe could run on
    # the document between the two pages (CI once saw "no main landmark" here).
    expect(page.locator("#hr-progress")).to_have_text("Trial 1 of 10")
    check_page(page, "HUMANr trial page")

    # The page's own message, not the browser's bubble: nothing is sent.
    url = page.url
    page.get_by_role("button", name="Next trial").click()
    expect(page.locator("#hr-missing")).to_have_text("Choose a value from 1 to 9 first.")
    expect(
        page.get_by_role("group", name="Which caption goes best with the image?")
    ).to_have_attribute("aria-describedby", "hr-missing")
    assert page.url == url and not Judgment.objects.exists()

    # The words follow the layout: "A" and "B" side by side, and stacked on a phone.
    for size in SIZES:
        page.set_viewport_size(size)
        expect(page.get_by_role("heading", name="Caption A")).to_be_visible()
        expect(page.get_by_role("heading", name="Caption B")).to_be_visible()
        expect(page.locator(".hr-anchors")).to_contain_text("only A matches")
        expect(page.locator(".hr-anchors")).to_contain_text("only B matches")
        assert "left" not in page.locator("#main").inner_text().lower()
    page.set_viewport_size(SIZES[1])
    a_box = page.locator(".hr-caption").nth(0).bounding_box()
    b_box = page.locator(".hr-caption").nth(1).bounding_box()
    assert a_box["y"] < b_box["y"], "on a phone A is above B"
    page.set_viewport_size(SIZES[0])
    expect(page.get_by_role("radio", name="1: only caption A matches")).to_be_attached()

    for trial in range(10):
        expect(page.locator("#hr-progress")).to_have_text(f"Trial {trial + 1} of 10")
        page.wait_for_load_state("domcontentloaded")
        page.keyboard.press("5")
        expect(page.locator("#raw-5")).to_be_checked()
        expect(page.locator("#hr-missing")).to_have_text("")
        with page.expect_navigation():
            page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Group complete")).to_be_visible()
    assert Judgment.objects.count() == 10
    expect(page.locator("#hr-no-more")).to_be_visible()
    # 5 to every trial fails the check: no code (issue 45, row 5), and the page says why.
    expect(page.locator("#checks-failed")).to_be_visible()
    expect(page.locator("#completion-prolific")).to_have_count(0)
    check_page(page, "HUMANr end of group")
    page.goto(f"/s/{study.public_id}/next/")
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    check_page(page, "HUMANr end page")


# ---------------------------------------------------------------------- closed and refused


def test_a_closed_study_gives_its_prolific_worker_a_friendly_410(open_page, researcher):
    study = humanr_study(researcher, images=18, systems=("GIT",))
    page = open_page()
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=HR-2&STUDY_ID=S&SESSION_ID=X")
    page.get_by_role("link", name="I agree, start").click()
    expect(page.locator("#hr-progress")).to_be_visible()
    study_close(study=study)

    response = page.reload()

    assert response.status == 410
    expect(page.get_by_role("heading", name="This study is closed", level=1)).to_be_visible()
    expect(page.locator("#main")).to_contain_text("return your submission")
    expect(page.locator("#main")).not_to_contain_text("Traceback")
    check_page(page, "closed study, Prolific worker")
    # The study's link itself now answers 410 with the same advice.
    response = page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=HR-3&STUDY_ID=S")
    assert response.status == 410
    expect(page.locator("#main")).to_contain_text("return your submission")
    check_page(page, "closed study's link")


def test_a_closed_study_sends_its_annotator_home(open_page, login, researcher, make_user):
    study = thumb_study(researcher, images=1)
    annotator = make_user("ann", native_english=True)
    study.annotators.add(annotator)
    study_close(study=study)
    page = open_page()
    login(page, annotator)
    response = page.goto(f"/s/{study.public_id}/next/")
    assert response.status == 410
    expect(page.get_by_role("heading", name="This study is closed")).to_be_visible()
    expect(page.get_by_role("link", name="Back to your studies")).to_be_visible()
    check_page(page, "closed study, registered annotator")


def test_refused_crowd_entries_get_the_site_page_with_their_status(open_page, researcher):
    study = vicr_study(researcher, prolific_study_id="RIGHT", crowd_arrivals_per_address_per_hour=1)
    link = f"/p/{crowd_link_token(study)}/"

    page = open_page()
    response = page.goto(f"{link}?PROLIFIC_PID=W1&STUDY_ID=WRONG&SESSION_ID=X")
    assert response.status == 403
    expect(page.get_by_role("heading", name="You cannot join this study now")).to_be_visible()
    expect(page.locator("#main")).to_contain_text("another Prolific study")
    expect(page.locator("#main")).to_contain_text("return your submission")
    check_page(page, "wrong Prolific study id")

    page.goto(f"{link}?PROLIFIC_PID=W2&STUDY_ID=RIGHT&SESSION_ID=X")
    expect(page.get_by_role("link", name="I agree, start")).to_be_visible()
    page = open_page()
    response = page.goto(f"{link}?PROLIFIC_PID=W3&STUDY_ID=RIGHT&SESSION_ID=X")
    assert response.status == 429
    expect(page.locator("#main")).to_contain_text("try again later")
    check_page(page, "arrival rate limit")

    page = open_page()
    response = page.goto("/p/not-a-real-token/?workerId=M1&assignmentId=A1&hitId=H1")
    assert response.status == 400
    expect(page.get_by_role("heading", name="Link problem")).to_be_visible()
    expect(page.locator("#main")).to_contain_text("return the HIT")
    check_page(page, "broken MTurk link")

    page = open_page()
    response = page.goto("/s/00000000-0000-0000-0000-000000000000/next/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    check_page(page, "no such study")
