"""The judges page's run section in Chromium: save the endpoint (the key shown only
masked), edit the prompt template (a new version), run the judge against a loopback
OpenAI-compatible server and watch the run finish; axe, 390 and 1280 px, and nothing
requested off the server by the browser (the judge server is called by the platform)."""

import pytest
from playwright.sync_api import expect

from annotation.models import JudgeAnswer, JudgePrompt
from tests.annotation.test_judge_runs import write_images
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.judge_server import KEY, fake_judge, judge_on_loopback  # noqa: F401
from tests.factories.vicr import vicr_study

# The fake judge listens on the loopback, which the deployment must list to be reached.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("judge_on_loopback")]

NO_HORIZONTAL_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def fits(page, context: str) -> None:
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(NO_HORIZONTAL_SCROLL), f"{context}: horizontal scroll at {width} px"


def test_researcher_sets_up_and_runs_a_judge(page, login, researcher):
    study = vicr_study(researcher, game=3)
    write_images(study)
    with fake_judge(lambda prompt, n: "4") as server:
        login(page, researcher)
        page.goto(f"/studies/{study.pk}/judges/")
        expect(page.get_by_role("heading", name="Run a judge")).to_be_visible()
        expect(page.get_by_text("Save the endpoint to run the judge.")).to_be_visible()
        assert_no_serious_a11y_violations(page, context="judges page, no endpoint")
        fits(page, "judges page, no endpoint")

        page.get_by_label("Name in the report").fill("toy-vlm")
        page.get_by_label("Endpoint base URL").fill(server.url)
        page.get_by_label("Model", exact=True).fill("judge-7b")
        page.get_by_label("API key").fill(KEY)
        with page.expect_navigation():
            page.get_by_role("button", name="Save the endpoint").click()
        expect(page.get_by_text("Saved key: sk-...cdef")).to_be_visible()
        # Only the researcher who saved a key may spend it (test_judge_key_spending.py).
        expect(page.get_by_text(f"saved by {researcher.username}. Only they")).to_be_visible()
        expect(page.get_by_label("API key")).to_have_value("")
        assert KEY not in page.content()

        prompt = page.get_by_role("textbox", name="Prompt template")
        expect(prompt).to_contain_text("Rating guide")  # the mode's default wording
        prompt.fill('Rate the caption {caption} from 1 to 5. Reply {"rating": n}.')
        with page.expect_navigation():
            page.get_by_role("button", name="Save as a new version").click()
        expect(page.get_by_role("heading", name="Prompt template v1")).to_be_visible()

        page.get_by_role("button", name="Run the judge").click()
        run = page.locator("#judge-runs .job").first
        expect(run).to_contain_text("Done", timeout=30_000)
        expect(run).to_contain_text("3 answered, 0 failed")
        assert server.total == 3
        assert (
            "Rate the caption game caption"
            in server.bodies[0]["messages"][-1]["content"][0]["text"]
        )
        assert_no_serious_a11y_violations(page, context="judges page after a run")
        fits(page, "judges page after a run")

        run.get_by_role("link", name="Show the report").click()
        table = page.get_by_role("region", name="Judges table")
        expect(table.get_by_role("rowheader", name="toy-vlm")).to_be_visible()
        assert KEY not in page.content()
    assert JudgeAnswer.objects.filter(judge__name="toy-vlm").count() == 3
    assert JudgePrompt.objects.get(study=study).version == 1


def test_a_bad_endpoint_is_refused_under_its_field(browser, live_server, login, researcher):
    """Own context: the shared ``page`` fixture counts the expected 400 as a console error."""
    study = vicr_study(researcher, game=2)
    context = browser.new_context(base_url=live_server.url)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    page = context.new_page()
    try:
        login(page, researcher)
        page.goto(f"/studies/{study.pk}/judges/")
        page.get_by_label("Name in the report").fill("toy-vlm")
        page.get_by_label("Endpoint base URL").fill("ftp://example.org/v1")
        page.get_by_label("Model", exact=True).fill("judge-7b")
        page.get_by_label("API key").fill(KEY)
        with page.expect_navigation():
            page.get_by_role("button", name="Save the endpoint").click()
        expect(page.get_by_text("http:// or https://")).to_be_visible()
        expect(page.get_by_label("API key")).to_have_value("")
        assert KEY not in page.content()
        assert_no_serious_a11y_violations(page, context="judges page, refused endpoint")
        fits(page, "judges page, refused endpoint")
    finally:
        context.close()


def test_the_researcher_stops_a_run_by_keyboard_and_it_asks_nothing(
    page, login, researcher, live_server_lock
):
    """A queued run (no worker has taken it yet) shows "Stop the run"; pressing it swaps the
    progress fragment for the stopping notice, and the run, when it starts, asks nothing."""
    from annotation.models import Job
    from annotation.services.judge_endpoints import judge_endpoint_save
    from annotation.services.judge_runs import judge_run_request
    from annotation.services.runner import job_run

    study = vicr_study(researcher, game=3)
    write_images(study)
    with fake_judge(lambda prompt, n: "4") as server:
        judge_endpoint_save(study=study, name="toy-vlm", base_url=server.url,
                            model="judge-7b", api_key=KEY, by=researcher)  # fmt: skip
        job = judge_run_request(study=study, by=researcher)
        login(page, researcher)
        page.goto(f"/studies/{study.pk}/judges/")
        stop = page.get_by_role("button", name="Stop the run")
        expect(stop).to_be_visible()
        assert_no_serious_a11y_violations(page, context="judges page, run queued")
        fits(page, "judges page, run queued")

        stop.focus()
        # The fragment is polled every second and swapped whole: the button keeps the
        # focus across a swap only because it has an id (htmx restores it), so a keyboard
        # user's Enter still lands on it. Without the id the focus fell to the page.
        job_url = f"/studies/{study.pk}/judges/runs/{job.pk}/"
        with page.expect_response(lambda r: r.url.endswith(job_url)):
            pass
        expect(stop).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_text("Stopping: no new question is sent")).to_be_visible()
        expect(stop).to_have_count(0)
        assert_no_serious_a11y_violations(page, context="judges page, run stopping")
        fits(page, "judges page, run stopping")

        with live_server_lock:  # the run's progress polls meanwhile (tests/e2e/conftest.py)
            job_run(job=job)
        job.refresh_from_db()
        assert job.status == Job.Status.DONE and server.total == 0
        expect(page.get_by_text(f"Stopped by {researcher.username}: 3 not asked")).to_be_visible()


def test_a_members_change_of_the_repeats_removes_the_owners_key_and_says_so(
    page, login, researcher, other_researcher
):
    """test_judge_key_spending.py's attack in the browser: what the member sees."""
    from annotation.services.judge_endpoints import judge_endpoint_save

    study = vicr_study(researcher, game=2)
    study.members.add(other_researcher)
    judge_endpoint_save(study=study, name="toy-vlm", base_url="http://127.0.0.1:9/v1",
                        model="judge-7b", api_key=KEY, by=researcher)  # fmt: skip
    login(page, other_researcher)
    page.goto(f"/studies/{study.pk}/judges/")
    expect(page.get_by_text("a change by anyone else to the model")).to_be_visible()

    repeats = page.get_by_label("Runs of each question")
    repeats.fill("10")
    with page.expect_navigation():
        repeats.press("Enter")  # keyboard only: Enter in a field submits its form

    expect(page.get_by_role("status").filter(has_text="was removed")).to_contain_text(
        f"The API key saved by {researcher.username} was removed"
    )
    expect(page.get_by_text("Saved key: sk-")).to_have_count(0)
    expect(page.get_by_label("Runs of each question")).to_have_value("10")
    assert_no_serious_a11y_violations(page, context="judges page, key removed")
    fits(page, "judges page, key removed")
