"""The whole researcher task through the browser and the API only (issue 26), no command.

Create a THumB study, import images and captions (API), references (the metrics page's
upload, first refused with its line errors), set people (API), open it; two registered
annotators and one crowd worker (the signed crowd link) answer in the browser; the report
(its page's button), the metrics (API), the dataset export (the study page's form), loaded
with ``datasets.load_dataset`` with the metric columns in ``caption_metrics``. axe and 390 /
1280 px on the pages the researcher visits; the ``page`` fixture fails on any off-server
request.
"""

import io
import zipfile

import pytest
from PIL import Image as PILImage

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Judgment, Study
from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = pytest.mark.e2e

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
METRICS = ["BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)"]
BLEU_COLUMN, ROUGE_COLUMN = "metric_bleu_4_sacrebleu", "metric_rouge_l_rouge_score"
IMAGES = {"red.png": (200, 30, 30), "green.png": (30, 200, 30), "blue.png": (30, 30, 200)}
CAPTIONS = (
    "image,system,caption\n"
    "red.png,Human,A red square.\nred.png,ours,A small red picture.\n"
    "green.png,Human,A green square.\ngreen.png,ours,A small green picture.\n"
    "blue.png,Human,A blue square.\nblue.png,ours,A small blue picture.\n"
)
REFERENCES = (
    "image,reference\nred.png,A red square picture.\ngreen.png,A green square picture.\n"
    "blue.png,A blue square picture.\n"
)


def png(color) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (64, 48), color).save(buffer, "PNG")
    return buffer.getvalue()


def fits(page, context: str) -> None:
    assert_no_serious_a11y_violations(page, context=context)
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{context}: horizontal scroll at {width} px"


def api(page, method: str, path: str, **kwargs):
    """The API with the browser's session: DRF's session authentication wants the CSRF token."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": token, "Referer": page.url}
    response = page.request.fetch(path, method=method, headers=headers, **kwargs)
    assert response.ok, f"{method} {path}: {response.status} {response.text()}"
    return response.json()


def wait_job(page, job: dict) -> dict:
    for _ in range(120):
        if job["status"] in ("done", "failed"):
            return job
        page.wait_for_timeout(500)
        job = api(page, "GET", f"/api/jobs/{job['id']}/")
    raise AssertionError(f"job {job['id']} never finished")


def answer(page, study, *, least_seconds: float = 0) -> None:
    """Answer whatever THumB page the participant is given (stage 1 or a stage-2 review)."""
    # A crowd worker's captions arrive after the study's minimum time on the set.
    page.locator("section[data-group]").first.wait_for(timeout=30_000)
    groups = page.eval_on_selector_all("section[data-group]", "e => e.map(x => x.dataset.group)")
    assert groups, f"no THumB item at {page.url}: {page.locator('main').inner_text()[:400]}"
    for key in groups:
        if page.locator(f'input[name="{key}-confirm"]').count():
            page.locator(f'input[name="{key}-confirm"]').check()
            continue
        page.locator(f'input[name="{key}-precision"][value="4"]').check()
        page.locator(f'input[name="{key}-recall"][value="3"]').check()
    # A crowd worker's set must take the study's minimum time, else the server says 429.
    page.wait_for_timeout(least_seconds * 1000)
    with page.expect_navigation():
        page.get_by_role("button", name="Save and continue").click()


def test_the_whole_researcher_task(page, login, researcher, make_user, tmp_path, monkeypatch):
    first = make_user("ann", native_english=True)
    second = make_user("bob", native_english=True)
    login(page, researcher)
    page.goto("/")

    study = api(page, "POST", "/api/studies/", data={"name": "Colours", "mode": "thumb"})
    multipart = {
        "captions": {"name": "captions.csv", "mimeType": "text/csv", "buffer": CAPTIONS.encode()},
        "images_zip": {"name": "images.zip", "mimeType": "application/zip", "buffer": b""},
    }
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        for name, color in IMAGES.items():
            z.writestr(name, png(color))
    multipart["images_zip"]["buffer"] = archive.getvalue()
    imported = api(page, "POST", f"/api/studies/{study['id']}/imports/", multipart=multipart)
    assert wait_job(page, imported)["status"] == "done"

    # References from the metrics page: a bad line first (refused whole, with its line).
    page.goto(f"/studies/{study['id']}/metrics/")
    bad = REFERENCES + "purple.png,No such image.\n"
    page.get_by_label("References file").set_input_files(
        files=[{"name": "refs.csv", "mimeType": "text/csv", "buffer": bad.encode()}]
    )
    page.get_by_role("button", name="Import references").click()
    expect(page.locator("#references-job")).to_contain_text(
        "line 5: image 'purple.png' is not an image of this study", timeout=30_000
    )
    fits(page, "metrics page, references refused")
    page.get_by_label("References file").set_input_files(
        files=[{"name": "refs.csv", "mimeType": "text/csv", "buffer": REFERENCES.encode()}]
    )
    page.get_by_label("Format").select_option("csv")
    page.get_by_role("button", name="Import references").click()
    expect(page.locator("#references-job")).to_contain_text(
        "3 reference(s) imported", timeout=30_000
    )
    fits(page, "metrics page, references imported")

    people = {"annotators": [first.username, second.username]}
    invited = api(page, "PUT", f"/api/studies/{study['id']}/people/", data=people)
    assert (invited["annotators"], invited["members"]) == ([], [])
    assert [row["name"] for row in invited["invited"]] == people["annotators"]
    assert api(page, "POST", f"/api/studies/{study['id']}/open/")["status"] == "live"
    public_id = Study.objects.get(pk=study["id"]).public_id
    researcher_cookies = page.context.cookies()

    for person in (first, second):
        page.context.clear_cookies()
        login(page, person)
        # Each accepts the invitation on their start page (issue 45, row 12).
        page.goto("/")
        page.get_by_role("button", name="Accept the invitation to Colours").click()
        expect(page.get_by_role("link", name="Colours")).to_be_visible()
        page.goto(f"/s/{public_id}/next/")
        answer(page, study)
    page.context.clear_cookies()
    page.goto(f"/p/{crowd_link_token(Study.objects.get(pk=study['id']))}/?PROLIFIC_PID=E2E-T26")
    page.get_by_role("link", name="I agree, start").click()
    answer(page, study, least_seconds=6.5)
    assert Judgment.objects.filter(item__study_id=study["id"]).count() == 3

    page.context.clear_cookies()
    page.context.add_cookies(researcher_cookies)
    page.goto(f"/studies/{study['id']}/report/")
    page.get_by_role("button", name="Compute the report").click()
    # The page reloads itself when the job ends: at once without a broker, after its
    # progress bar's poll with a worker. Navigating here too raced with that reload.
    expect(page.get_by_role("button", name="Recompute the report")).to_be_visible(timeout=60_000)
    expect(page.locator("main")).not_to_contain_text("No report has been computed yet.")
    reports = api(page, "GET", f"/api/studies/{study['id']}/jobs/?kind=report")
    assert len(reports) == 1 and reports[0]["status"] == "done", reports
    fits(page, "report page")
    report = api(page, "GET", f"/api/studies/{study['id']}/report/")
    assert report, "the report API answers with the computed report"
    metrics = api(page, "POST", f"/api/studies/{study['id']}/metrics/", data={"metrics": METRICS})
    assert wait_job(page, metrics)["status"] == "done"

    page.wait_for_load_state("load")
    page.goto(f"/studies/{study['id']}/")
    fits(page, "study page")
    page.get_by_label("Export format").select_option("dataset")
    page.get_by_role("button", name="Export").first.click()
    link = page.get_by_role("link", name="Download").first
    expect(link).to_be_visible(timeout=60_000)
    with page.expect_download() as download:
        link.click()
    path = tmp_path / "dataset.zip"
    download.value.save_as(path)

    datasets = pytest.importorskip("datasets")
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    folder = tmp_path / "folder"
    with zipfile.ZipFile(path) as archive:
        archive.extractall(folder)
    rows = datasets.load_dataset(str(folder), "caption_metrics", cache_dir=str(tmp_path / "c"))
    columns = rows["train"].column_names
    assert len(rows["train"]) == 6  # 3 images x 2 systems
    assert {BLEU_COLUMN, ROUGE_COLUMN} <= set(columns), columns
    # One value checked against sacrebleu itself on the same texts (references as uploaded).
    sacrebleu = pytest.importorskip("sacrebleu")
    table = rows["train"].to_pandas().set_index(["image", "system"])
    expected = sacrebleu.sentence_bleu("A red square.", ["A red square picture."]).score
    assert table.loc[("red.png", "Human"), BLEU_COLUMN] == pytest.approx(expected, abs=1e-9)
