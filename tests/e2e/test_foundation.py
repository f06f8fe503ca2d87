"""A researcher's first visit in a real browser: log in, create a study, import, export."""

import csv
import re
import zipfile
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

import annotation
from annotation.models import Study
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = pytest.mark.e2e

DEMO_DIR = Path(annotation.__file__).resolve().parent / "demo"


def test_login_home_and_new_study_pages_work_and_are_accessible(page, researcher, login):
    page.goto("/studies/new/")
    assert "/accounts/login/" in page.url, "anonymous visitors must be sent to the login page"
    assert_no_serious_a11y_violations(page, context="login page")

    page.get_by_label("Username").fill(researcher.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("didn't match")

    login(page, researcher)
    page.goto("/")
    expect(page.get_by_role("heading", name="Studies", level=1)).to_be_visible()
    # Our own static files reached the browser: the stylesheet and htmx, never from a CDN.
    assert page.evaluate("() => typeof htmx") == "object"
    header_colour = page.evaluate(
        "() => getComputedStyle(document.querySelector('.site-header')).backgroundColor"
    )
    assert header_colour == "rgb(27, 31, 36)", "capeval.css did not load"
    assert_no_serious_a11y_violations(page, context="home page")

    page.get_by_role("link", name="New study").first.click()
    page.wait_for_url("**/studies/new/")
    assert_no_serious_a11y_violations(page, context="new study page")

    page.get_by_role("button", name="Create study").click()
    expect(page.get_by_role("alert").first).to_contain_text("required")
    assert_no_serious_a11y_violations(page, context="new study page with errors")

    page.get_by_label("Name").fill("Browser study")
    page.get_by_label("Mode").select_option("vicr")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    expect(page.get_by_role("heading", name="Browser study", level=1)).to_be_visible()
    study = Study.objects.get(name="Browser study")
    assert (study.owner, study.mode, study.status) == (researcher, "vicr", Study.Status.DRAFT)
    assert page.url.endswith(f"/studies/{study.pk}/")
    assert_no_serious_a11y_violations(page, context="new study's detail page")


def test_axe_helper_fails_on_serious_violations_and_names_them(page):
    # Guards the guard: if axe-core stopped running, every page would pass silently. The
    # broken page is set on the blank start page: the site's CSP would refuse its data: image.
    page.set_content(
        "<!doctype html><html lang='en'><head><title>Bad</title></head><body><main>"
        "<h1>Bad</h1><img src='data:,'><input type='text' id='nameless'></main></body></html>"
    )
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_no_serious_a11y_violations(page, context="deliberately broken page")
    message = str(failure.value)
    assert "[critical] image-alt" in message and "[critical] label" in message
    assert "#nameless" in message and "deliberately broken page" in message


def demo_images_zip(folder: Path) -> Path:
    """The demo images in a zip inside a folder, as a researcher would pack them."""
    archive = folder / "demo-images.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for image in sorted((DEMO_DIR / "images").iterdir()):
            zipped.write(image, f"demo-images/{image.name}")
    return archive


def demo_caption_rows() -> list[dict[str, str]]:
    with (DEMO_DIR / "captions.csv").open(newline="", encoding="utf-8-sig") as captions:
        return list(csv.DictReader(captions))


def study_counts(page) -> dict[str, int]:
    """The figures of the study page's Contents list, by their label."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('dl.counts > div')].map(
             (d) => [d.querySelector('dt').textContent.trim(),
                     Number(d.querySelector('dd').textContent.trim())]))"""
    )


def test_researcher_imports_the_demo_data_and_downloads_an_export(
    page, researcher, login, make_study, tmp_path
):
    study = make_study("vicr", name="Demo study")
    captions = demo_caption_rows()
    image_count = len(list((DEMO_DIR / "images").iterdir()))
    login(page, researcher)

    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Import images and captions").click()
    page.wait_for_url(f"**/studies/{study.pk}/import/")
    assert_no_serious_a11y_violations(page, context="import page before upload")

    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("Choose images, a captions file, or both")
    assert_no_serious_a11y_violations(page, context="import page with nothing chosen")

    page.get_by_label("Images as a zip archive").set_input_files(demo_images_zip(tmp_path))
    page.get_by_label("Captions file", exact=True).set_input_files(DEMO_DIR / "captions.csv")
    page.get_by_role("button", name="Import", exact=True).click()
    import_job = page.locator("#import-job .job")
    expect(import_job.locator("progress")).to_have_attribute("value", "100", timeout=60_000)
    expect(import_job).to_contain_text("Done")
    assert_no_serious_a11y_violations(page, context="import page after the import")

    page.get_by_role("link", name="Back to the study").click()
    page.wait_for_url(f"**/studies/{study.pk}/")
    counts = study_counts(page)
    assert counts["Images"] == image_count
    assert counts["Captions"] == len(captions)
    assert counts["Systems"] == len({row["system"] for row in captions})
    page.screenshot(path=tmp_path / "study-after-import.png", full_page=True)
    assert_no_serious_a11y_violations(page, context="study page after the import")

    page.get_by_label("Export format").select_option("csv")
    page.get_by_role("button", name="Export judgments").click()
    download_link = page.locator("#jobs .job").get_by_role("link", name=re.compile("^Download"))
    expect(download_link).to_be_visible(timeout=60_000)
    with page.expect_download() as download_info:
        download_link.click()
    download = download_info.value
    assert download.suggested_filename.endswith(".csv")
    with open(download.path(), newline="", encoding="utf-8") as exported:
        rows = list(csv.reader(exported))
    assert rows[0][:4] == ["judgment_id", "participant", "phase", "attempt"], "VICR's table"
    assert rows[1:] == [], "the study has no judgments yet"

    job_id = re.search(r"/jobs/(\d+)/download/", download_link.get_attribute("href")).group(1)
    page.goto(f"/jobs/{job_id}/")
    expect(page.locator(".job")).to_contain_text("Done")
    assert_no_serious_a11y_violations(page, context="export job page")
