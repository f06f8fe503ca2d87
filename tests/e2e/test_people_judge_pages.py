"""The "people + judge" page (issue 40) in Chromium for a study of each mode.

Each study is the mode's finished demo study (a simulated crowd through the services,
closed, as ``load_demo`` makes it, with a third of its crowd), a judge's answers imported
for every unit the mode asks a judge (``Judging.units``) with ``judge_import``, then the
report computed. The
owner reads the page: the estimates table and the intervals figure are there, axe finds
no serious or critical violation, and nothing scrolls sideways at 390 or 1280 px; then
the judge and score choice is saved and a new report computed. The ``page`` fixture
fails the test on any request outside the server, console error or JavaScript error.
"""

from __future__ import annotations

import io
import json
import zlib

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.management.commands.load_demo import CROWD_SEED, DEMO_FINISHED, Command
from annotation.models import Caption, Job, Judge, Study
from annotation.modes import get_mode
from annotation.services.judges import judge_import
from annotation.services.reports import report_request
from annotation.services.simulation import crowd_simulate
from annotation.services.studies import study_close, study_open
from annotation.tasks import enqueue
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import assert_fits_every_width

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _k(text: str) -> int:
    """A stable number per caption (its text, never a database id)."""
    return zlib.crc32(text.encode())


#: A valid answer of each mode's judge for a unit, varied by the first caption's text.
ANSWERS = {
    "thumb": lambda k: {
        "precision": 1 + k % 5,
        "recall": 1 + (k // 5) % 5,
        "fluency_errors": {},
        "conciseness": 0,
        "inclusive": 0,
    },
    "vicr": lambda k: {"rating": 1 + k % 4},
    "humanr": lambda k: {"raw": 1 + k % 9},
    "arena": lambda k: {"outcome": "ab"[k % 2]},
    "spans": lambda k: {"spans": [], "score": k % 101, "unusable": False},
    "context": lambda k: {
        name: 1 + (k >> shift) % 5
        for shift, name in enumerate(
            ("overall", "imaginability", "relevance", "irrelevance", "accuracy")
        )
    },
}


def judged_demo(mode_name: str, owner) -> Study:
    """The mode's finished demo study, answered by a third of its simulated crowd (the
    crowd is most of the test's time; a third still gives every system human units),
    with a judge's answer on every unit and the report computed once."""
    _, name, workers, settings = next(row for row in DEMO_FINISHED if row[0] == mode_name)
    study = Command(stdout=io.StringIO())._study(mode_name, name, owner, [], settings)
    study_open(study=study)
    crowd_simulate(study=study, workers=max(3, workers // 3), seed=CROWD_SEED)
    study_close(study=study)
    judging = get_mode(study.mode).judging
    units = judging.units(study)
    texts = dict(Caption.objects.filter(study=study).values_list("pk", "text"))
    lines = []
    for item, first, second in units:
        if judging.context_units:
            key = {"item_id": item}
        elif second is not None:
            key = {"caption_a": first, "caption_b": second}
        else:
            key = {"caption_id": first}
        lines.append({**key, "answer": ANSWERS[mode_name](_k(texts[first]))})
    judge_import(study=study, text="\n".join(json.dumps(x) for x in lines), name="toy-judge")
    job = enqueue(report_request(study=study, user=owner))
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    return study


@pytest.mark.parametrize("mode_name", list(ANSWERS))
def test_the_page_of_each_mode(page, login, researcher, mode_name):
    study = judged_demo(mode_name, researcher)
    login(page, researcher)
    page.goto(f"/studies/{study.pk}/report/")
    page.get_by_role("link", name="People + judge estimates").click()
    expect(page.get_by_role("heading", name=f"People + judge: {study.name}")).to_be_visible()
    expect(page.locator("#valid-when")).to_contain_text("random")
    table = page.get_by_role("region", name="Estimates per system")
    expect(table.locator("tbody tr").first).to_be_visible()
    figure = page.get_by_role("img", name="intervals per system")
    expect(figure).to_be_visible()
    assert page.locator("figure.ppi-figure circle").count() >= 2
    assert_no_serious_a11y_violations(page, context=f"people + judge page, {mode_name}")
    assert_fits_every_width(page, f"people + judge page, {mode_name}", shot=f"ppi-{mode_name}")

    # The choice: the judge by name (not "the first judge"), saved, then a new report.
    reports = Job.objects.filter(study=study, kind=Job.Kind.REPORT).count()
    judge = Judge.objects.get(study=study, name="toy-judge")
    page.get_by_label("Judge", exact=True).select_option(label=str(judge))
    with page.expect_navigation(timeout=120_000):
        page.get_by_role("button", name="Save and compute the report").click()
    expect(page.get_by_text("Judge and score saved.")).to_be_visible()
    study.refresh_from_db()
    assert study.settings["people_judge"] == judge.pk
    assert Job.objects.filter(study=study, kind=Job.Kind.REPORT).count() == reports + 1
    expect(page.get_by_label("Judge", exact=True)).to_have_value(str(judge.pk))
    expect(page.get_by_role("img", name="intervals per system")).to_be_visible()
