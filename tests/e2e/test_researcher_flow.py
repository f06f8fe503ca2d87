"""A researcher's whole study in Chromium (issue 11): create it through the settings form,
import the demo photographs and captions, open it, watch the dashboard move while a
simulated crowd answers, close it after the confirmation, reopen it, compute and download
the report. Every page: axe-core, and no sideways scroll at 390 and 1280 px."""

import re
import time
import zipfile
from pathlib import Path

import pytest
from django.db import OperationalError

import annotation
from annotation.models import Judgment, Study
from annotation.services.simulation import crowd_simulate
from tests.e2e.axe import assert_no_serious_a11y_violations

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

DEMO_DIR = Path(annotation.__file__).resolve().parent / "demo"
WIDTHS = (390, 1280)
#: The elements that stick out of the window, to name in a failure.
WIDEST = """() => [...document.querySelectorAll('main *')]
  .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 5).map((e) => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className)"""


def check_page(page, context: str) -> None:
    """No serious accessibility violation, and no sideways scroll at either width."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844 if width == 390 else 800})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 0:
            wide = page.evaluate(WIDEST)
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px: {wide}"
    assert_no_serious_a11y_violations(page, context=context)


def demo_images_zip(folder: Path) -> Path:
    archive = folder / "demo-images.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for image in sorted((DEMO_DIR / "images").iterdir()):
            zipped.write(image, image.name)
    return archive


def overall_progress(page) -> int:
    return int(page.locator("#progress-overall").get_attribute("value") or 0)


def simulate_beside_the_server(study, live_server_lock) -> int:
    """Let a simulated crowd answer while the page polls; return the judgments stored.

    The crowd writes holding ``live_server_lock``, so a poll waits for it rather than meet
    a locked table (``tests/e2e/conftest.py``). Should a write still meet a lock, the crowd
    goes on where it stopped (the same seed continues with the same workers; every judgment
    is a transaction of its own).
    """
    for _ in range(50):
        try:
            with live_server_lock:
                crowd_simulate(study=study, workers=3, seed=11, max_items_per_worker=2)
        except OperationalError:
            time.sleep(0.2)
            continue
        break
    return Judgment.objects.filter(study=study).count()


@pytest.fixture
def fast_dashboard(monkeypatch):
    """The dashboard polls every second here (10 s in use), so the test waits little."""
    monkeypatch.setattr("annotation.views.dashboard.POLL_SECONDS", 1)


def test_a_researcher_runs_a_study_from_the_settings_form_to_the_report(
    page, researcher, login, tmp_path, fast_dashboard, live_server_lock
):
    login(page, researcher)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/studies/new/")
    check_page(page, "new study page")

    # The mode swaps its settings in place (htmx), and back.
    page.get_by_label("Mode").select_option("humanr")
    expect(page.locator('input[name="humanr-report_permutations"]')).to_be_visible()
    page.get_by_label("Mode").select_option("thumb")
    resamples = page.locator('input[name="thumb-bootstrap_resamples"]')
    expect(resamples).to_be_visible()
    expect(resamples).to_have_attribute("max", "10000")

    # An out-of-bounds value: the error under that field, everything typed kept.
    page.get_by_label("Name", exact=True).fill("Browser THumB")
    resamples.fill("5")
    page.locator('input[name="thumb-completion_images"]').fill("2")
    page.get_by_role("button", name="Create study").click()
    expect(page.locator("#id_thumb-bootstrap_resamples_error")).to_contain_text(
        "bootstrap_resamples must be a whole number from 100 to 10000"
    )
    expect(page.get_by_label("Name", exact=True)).to_have_value("Browser THumB")
    expect(page.locator('input[name="thumb-completion_images"]')).to_have_value("2")
    check_page(page, "new study page with a settings error")

    page.locator('input[name="thumb-bootstrap_resamples"]').fill("200")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    study = Study.objects.get(name="Browser THumB")
    assert study.settings["bootstrap_resamples"] == 200
    assert study.settings["completion_images"] == 2

    # Import the demo photographs and captions, then open the study.
    page.get_by_role("link", name="Import images and captions").click()
    page.get_by_label("Images as a zip archive").set_input_files(demo_images_zip(tmp_path))
    page.get_by_label("Captions file", exact=True).set_input_files(DEMO_DIR / "captions.csv")
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#import-job .job")).to_contain_text("Done", timeout=60_000)
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("button", name="Open the study").click()
    expect(page.locator(".tag.status-live").first).to_be_visible()
    check_page(page, "live study page")

    # A simulated crowd answers while the page is open: the dashboard follows by itself.
    assert overall_progress(page) == 0
    study.refresh_from_db()
    answered = simulate_beside_the_server(study, live_server_lock)
    assert answered == Judgment.objects.filter(study=study).count() > 0
    expect(page.locator("#progress-overall")).not_to_have_attribute("value", "0", timeout=15_000)
    expect(page.locator("#progress-overall")).to_have_attribute("value", str(answered))

    # Closing asks first and says what it does.
    page.get_by_role("link", name=re.compile("^Close the study")).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Close")
    expect(page.locator("main")).to_contain_text("reopen the study later")
    check_page(page, "close confirmation page")
    page.get_by_role("button", name="Close the study").click()
    page.wait_for_url(f"**/studies/{study.pk}/")
    expect(page.locator(".tag.status-closed").first).to_be_visible()
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED

    page.get_by_role("button", name="Reopen the study").click()
    expect(page.locator(".tag.status-live").first).to_be_visible()
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE

    # The report: computed with htmx, shown at once (no "not computed yet" below "done").
    page.get_by_role("link", name="Report", exact=True).click()
    expect(page.locator("main")).to_contain_text("No report has been computed yet.")
    page.get_by_role("button", name="Compute the report").click()
    expect(page.get_by_role("button", name="Recompute the report")).to_be_visible(timeout=60_000)
    expect(page.locator("main")).not_to_contain_text("No report has been computed yet.")
    check_page(page, "report page")
    figure_link = page.get_by_role("link", name="SVG").first
    with page.expect_download() as download_info:
        figure_link.click()
    saved = tmp_path / "figure.svg"
    download_info.value.save_as(saved)
    assert saved.read_text(encoding="utf-8").lstrip().startswith(("<?xml", "<svg"))


def test_the_people_form_invites_and_the_invitee_accepts_on_the_start_page(
    page, researcher, login, make_study, make_user
):
    """Issue 45, rows 11 and 12: names are typed, never picked from a list; each new one is
    invited with the same answer whether an account has it, and joins on accepting."""
    study = make_study("vicr", name="People study")
    anna = make_user("anna2")
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.evaluate("window.notReloaded = true")  # gone if the page were replaced
    people = page.locator("#people-form")
    expect(people.locator("select, datalist, [list]")).to_have_count(0)

    annotators = page.get_by_label("Registered annotators", exact=False)
    annotators.fill("anna2 gh/ost")
    page.get_by_role("button", name="Save people").click()
    expect(page.locator("#annotators_error")).to_have_text(
        "Not a user name or e-mail address: gh/ost."
    )
    expect(page.get_by_label("Registered annotators", exact=False)).to_have_value("anna2 gh/ost")
    assert page.evaluate("window.notReloaded === true"), "swapped by htmx, not a new page"
    check_page(page, "study page with a People error")

    page.get_by_label("Registered annotators", exact=False).fill("anna2 ghost")
    page.get_by_role("button", name="Save people").click()
    expect(people.get_by_role("status")).to_have_text(
        "People saved. Invited: anna2, ghost. Each joins when they accept the invitation on "
        "their start page."
    )
    invited = page.get_by_role("list", name="Invited, not answered yet")
    expect(invited.get_by_role("listitem")).to_have_count(2)
    expect(invited).to_contain_text("anna2 as annotator, invited by rita")
    check_page(page, "study page with pending invitations")
    assert not study.annotators.exists()

    page.context.clear_cookies()
    login(page, anna)
    page.goto("/")
    expect(page.get_by_role("heading", name="Invitations")).to_be_visible()
    expect(page.locator("main")).to_contain_text("rita invites you to People study")
    check_page(page, "start page with an invitation")
    page.get_by_role("button", name="Accept the invitation to People study").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("You joined People study as an annotator.")
    expect(page.get_by_role("heading", name="Invitations")).to_have_count(0)
    check_page(page, "start page after accepting")
    assert list(study.annotators.values_list("username", flat=True)) == ["anna2"]
