"""The Judges page in Chromium: import a judge's answers file, read the alignment report
with its inline confusion-matrix figure; axe, 390 and 1280 px, nothing off the server."""

import io
import json
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.models import Caption, Study
from tests.e2e.axe import assert_no_serious_a11y_violations

pytestmark = pytest.mark.e2e

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"
RATINGS = [[5, 4, 5], [4, 4, 3], [2, 1, 2], [3, 3, 4], [1, 2, 1], [5, 5, 4]]
JUDGE = [5, 3, 2, 4, 1, 5]


def fits(page, context: str) -> None:
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{context}: horizontal scroll at {width} px"


def judged_study(researcher, tmp_path):
    ratings = tmp_path / "vicr.csv"
    rows = [f"img{i}.jpg,caption {i},{a},{b},{c}" for i, (a, b, c) in enumerate(RATINGS)]
    ratings.write_text("image,caption,ratings,rating_2,rating_3\n" + "\n".join(rows) + "\n")
    call_command(
        "import_ratings", str(ratings), "--format", "vicr-csv", "--owner", researcher.username,
        "--name", "Judged study", stdout=io.StringIO(),
    )  # fmt: skip
    return Study.objects.get(owner=researcher)


def test_researcher_imports_a_judge_and_reads_its_alignment(page, login, researcher, tmp_path):
    study = judged_study(researcher, tmp_path)
    captions = Caption.objects.filter(study=study).order_by("id")
    answers = tmp_path / "judge.jsonl"
    answers.write_text(
        "\n".join(
            json.dumps({"caption_id": c.pk, "answer": {"rating": j}})
            for c, j in zip(captions, JUDGE, strict=True)
        )
    )
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Judges", exact=True).click()
    expect(page.get_by_role("heading", name="Automatic judges: Judged study")).to_be_visible()
    expect(page.get_by_text("No judge has answered yet.")).to_be_visible()
    assert_no_serious_a11y_violations(page, context="judges page, no judge")
    fits(page, "judges page, no judge")

    page.get_by_label("Judge name").fill("toy-vlm")
    page.get_by_label("Answers (JSON Lines)").set_input_files(str(answers))
    # The report is computed as the page loads (bootstrap intervals, Dawid-Skene): on a
    # loaded test machine that can pass the default 10 s.
    with page.expect_navigation(timeout=90_000):
        page.get_by_role("button", name="Import the answers").click(no_wait_after=True)
    table = page.get_by_role("region", name="Judges table")
    expect(table.get_by_role("rowheader", name="toy-vlm")).to_be_visible()
    expect(page.get_by_role("heading", name="toy-vlm · rating")).to_be_visible()
    figure = page.get_by_role("img", name="Confusion matrix")
    expect(figure).to_be_visible()
    assert page.locator("figure.confusion svg rect").count() == 25
    assert_no_serious_a11y_violations(page, context="judges page with a report")
    fits(page, "judges page with a report")


def test_a_refused_file_lists_its_lines(browser, live_server, login, researcher, tmp_path):
    """Own context: the shared ``page`` fixture counts the expected 400 as a console error;
    requests off the server are still refused here."""
    study = judged_study(researcher, tmp_path)
    first = Caption.objects.filter(study=study).order_by("id").first()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"caption_id": first.pk, "answer": {"rating": 7}}))
    context = browser.new_context(base_url=live_server.url)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    problems: list[str] = []
    host = urlsplit(live_server.url).netloc
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on(
        "request",
        lambda r: (
            problems.append(r.url)
            if urlsplit(r.url).scheme in ("http", "https") and urlsplit(r.url).netloc != host
            else None
        ),
    )
    try:
        login(page, researcher)
        page.goto(f"/studies/{study.pk}/judges/")
        page.get_by_label("Judge name").fill("toy-vlm")
        page.get_by_label("Answers (JSON Lines)").set_input_files(str(bad))
        with page.expect_navigation():
            page.get_by_role("button", name="Import the answers").click()
        refused = page.get_by_role("list", name="Refused lines")
        expect(refused).to_contain_text("line 1: Choose a rating from 1 to 5.")
        expect(page.get_by_text("No judge has answered yet.")).to_be_visible()
        assert_no_serious_a11y_violations(page, context="judges page, refused file")
        fits(page, "judges page, refused file")
    finally:
        context.close()
    assert not problems, problems
