"""Issue 26, rows 11, 16, 17, 18 and 21 (parts), in Chromium.

Each page a researcher meets here passes axe, fits 390 px and 1280 px without sideways
scrolling, and requests nothing outside the live server (the ``page`` fixture fails on that).
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, Job
from annotation.services.assignments import assignment_next
from annotation.services.jobs import job_create, job_fail, job_progress, job_start
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_close
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.test_vicr import PNG
from tests.factories.arena import arena_study
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.thumb import thumb_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


def assert_fits_every_width(page, context: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"


def answer(participant, rating=4):
    lease = assignment_next(participant=participant)
    judgment_submit(participant=participant, token=lease.token, data={"rating": rating})


def test_row11_a_closed_study_says_so_and_gives_no_estimate(page, login, researcher):
    study = vehicle_study(researcher, captions=4, target=2)
    answer(crowd_participant(study, "w1"))
    answer(crowd_participant(study, "w2"))
    study_close(study=study)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    expect(page.locator("#dashboard .eta")).to_have_text("closed")
    expect(page.locator("#dashboard")).to_contain_text("The study is closed, so it has no")
    expect(page.locator("#dashboard")).not_to_contain_text("remaining 6 answers take")
    assert_no_serious_a11y_violations(page, context="a closed study's page")
    assert_fits_every_width(page, "a closed study's page")


def test_row21_the_api_root_is_a_browsable_index(page, login, researcher):
    login(page, researcher)
    page.goto("/api/")
    studies = page.get_by_role("link", name="/api/studies/", exact=True)
    expect(studies.first).to_be_visible()
    expect(page.locator("body")).to_contain_text("/api/studies/{study_id}/report/")
    assert_no_serious_a11y_violations(page, context="the API index")
    assert_fits_every_width(page, "the API index")


def test_row21_get_on_the_people_url_shows_the_people_section(page, login, researcher):
    study = vehicle_study(researcher, captions=1, live=False)
    login(page, researcher)
    response = page.goto(f"/studies/{study.pk}/people/")
    assert response.status == 200
    assert page.url.endswith(f"/studies/{study.pk}/#people-heading")
    expect(page.get_by_role("heading", name="People", exact=True)).to_be_visible()


def test_row21_the_favicon_is_an_svg_served_here(page, login, researcher):
    login(page, researcher)
    page.goto("/")
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert href.startswith("/static/")
    response = page.request.get(href)
    assert response.status == 200
    assert "svg" in response.headers["content-type"]


def test_row21_the_admin_home_fits_390_px(page, login, make_user):
    admin = make_user("ada", staff=True)
    login(page, admin)
    page.goto("/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    assert_no_serious_a11y_violations(page, context="the admin's home")
    assert_fits_every_width(page, "the admin's home")


def test_row16_a_draft_shows_no_empty_dashboard(page, login, researcher):
    study = vehicle_study(researcher, captions=2, live=False)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    expect(page.get_by_text("Progress, rate and crowd integrity appear here")).to_be_visible()
    expect(page.get_by_role("heading", name="Rate")).to_have_count(0)
    expect(page.get_by_role("heading", name="Crowd integrity")).to_have_count(0)
    assert_no_serious_a11y_violations(page, context="a draft study's page")
    assert_fits_every_width(page, "a draft study's page")


def test_row16_the_stage_table_shows_done_at_390_px(page, login, researcher):
    study = vehicle_study(researcher, captions=2, target=2)
    login(page, researcher)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/studies/{study.pk}/")
    box = page.locator(".progress-table").locator("..").bounding_box()
    for header in ("Done", "Needed"):
        cell = page.locator(".progress-table thead th", has_text=header).bounding_box()
        assert cell["x"] + cell["width"] <= box["x"] + box["width"] + 0.5, f"{header} is cut off"
    assert_no_serious_a11y_violations(page, context="a live study's page at 390 px")


def test_row17_a_failed_import_says_failed_once_and_folds_its_errors(page, login, researcher):
    study = vehicle_study(researcher, captions=1, live=False)
    job = job_create(kind=Job.Kind.IMPORT, study=study, created_by=researcher, params={})
    job_start(job=job)
    job_progress(job=job, percent=89)
    errors = [f"line {n}: unknown image 'missing{n}.png'" for n in range(2, 42)]
    job_fail(job=job, error="The import was refused.", result={"errors": errors})
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    card = page.locator(f"#job-{job.pk}")
    expect(card).to_contain_text(f"job {job.pk}: Failed")
    expect(card).not_to_contain_text("Failed · Failed")
    expect(card.locator("progress")).to_have_count(0)
    expect(card.locator("ul.row-errors").first.locator("li")).to_have_count(5)
    folded = card.locator("details")
    expect(folded.locator("summary")).to_have_text("35 more")
    expect(folded.locator("li").first).not_to_be_visible()
    folded.locator("summary").click()
    expect(folded.locator("li")).to_have_count(35)
    expect(folded.locator("li").last).to_be_visible()
    assert_no_serious_a11y_violations(page, context="a failed import in the jobs list")
    assert_fits_every_width(page, "a failed import in the jobs list")


def test_row18_the_study_page_says_which_captions_thumb_will_not_judge(
    page, login, researcher, make_study
):
    study = thumb_study(
        make_study,
        captions={
            "one": [("Human", "A first caption."), ("Human", "A second one."), ("Bot", "A b.")],
            "two": [("Human", "Only one here."), ("Bot", "Another b.")],
        },
    )
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    expect(page.locator("#caption-notes")).to_contain_text(
        "1 Human caption(s) on 1 image(s) are not judged"
    )
    assert_no_serious_a11y_violations(page, context="a THumB study with unjudged captions")
    assert_fits_every_width(page, "a THumB study with unjudged captions")


HIDDEN_HEADS = """box => Array.from(box.querySelectorAll('thead th')).filter(th => {
  const b = box.getBoundingClientRect(), r = th.getBoundingClientRect();
  return r.right > b.right + 1 || r.left < b.left - 1;
}).length"""


def test_row8_a_wide_table_names_the_columns_out_of_view(page, login, researcher):
    study = vehicle_study(researcher, captions=4, target=2)
    for name in ("w1", "w2"):
        answer(crowd_participant(study, name))
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    box = page.locator(".table-scroll:has(table.workers)")
    hint = page.locator(".table-scroll:has(table.workers) + .scroll-hint")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("Integrity flags")
    assert box.evaluate(HIDDEN_HEADS) == hint.inner_text().count(",") + 1
    # Scrolled to the end, the hint names the columns now out of view on the left.
    box.evaluate("box => { box.scrollLeft = box.scrollWidth; }")
    expect(hint).not_to_contain_text("Integrity flags")
    expect(hint).to_contain_text("Participant")
    assert_no_serious_a11y_violations(page, context="the per-worker table at 390 px")
    page.set_viewport_size({"width": 1900, "height": 900})
    box.evaluate("box => { box.scrollLeft = 0; }")
    if box.evaluate("box => box.scrollWidth <= box.clientWidth"):
        expect(hint).to_be_hidden()
    assert_fits_every_width(page, "the per-worker table")


PREVIEWED = {
    "thumb": lambda researcher, make_study: thumb_study(make_study),
    "arena": lambda researcher, make_study: arena_study(
        researcher, systems=("alpha", "beta"), images=2
    ),
}


@pytest.mark.parametrize("mode", sorted(PREVIEWED))
def test_row21_a_researcher_previews_the_workers_view(page, login, researcher, make_study, mode):
    study = PREVIEWED[mode](researcher, make_study)
    page.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/")
    page.locator("#preview-link").click()
    expect(page.locator("#preview-banner")).to_contain_text("nothing you do here is recorded")
    expect(page.locator("form[method=post]").first).to_be_visible()
    assert_no_serious_a11y_violations(page, context=f"the {mode} preview")
    assert_fits_every_width(page, f"the {mode} preview")
    page.locator("#preview-next").click()
    expect(page.locator("#preview-banner")).to_contain_text("Preview of item 2")
    assert not Assignment.objects.filter(item__study=study).exists()
