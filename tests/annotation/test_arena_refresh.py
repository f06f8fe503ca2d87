"""A live adaptive arena study refreshes its own report (issue 47): the design reads the
latest report, so without the beat's ``refresh_reports`` a study nobody looked at would
serve uniformly to the end. Each minute the task queues a report for a study with
``adaptive_refresh`` battles answered since its latest one, never two at once, and never
for a uniform, closed or fresh study."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from annotation.models import Job, Judgment
from annotation.modes import get_mode
from annotation.services.reports import reports_refresh
from annotation.services.runner import job_run
from annotation.services.studies import study_close
from annotation.tasks import refresh_reports
from tests.factories.arena import answer_battles, bradley_terry_study

pytestmark = pytest.mark.django_db


def battles(study) -> int:
    return Judgment.objects.filter(study=study, item__kind="battle").count()


def test_a_report_is_queued_once_the_set_number_of_battles_came(researcher):
    study = bradley_terry_study(researcher, adaptive=True, adaptive_refresh=30)
    answer_battles(study, 29, "early")
    assert reports_refresh() == []

    answer_battles(study, 1, "thirtieth")
    [job] = reports_refresh()
    assert (job.study_id, job.kind, job.status) == (study.pk, Job.Kind.REPORT, Job.Status.QUEUED)
    assert job.created_by is None and job.params == {"refresh": True}
    # Queued (or running): never a second one, however many battles come meanwhile.
    answer_battles(study, 40, "while-queued")
    assert reports_refresh() == []

    job_run(job=job)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE and job.result["battles_stored"] == battles(study)
    # Counted from what that report read: 29 more are not enough, the 30th is.
    answer_battles(study, 29, "after")
    assert reports_refresh() == []
    answer_battles(study, 1, "after-30th")
    assert [j.study_id for j in reports_refresh()] == [study.pk]


def test_uniform_closed_and_by_hand_only_studies_are_left_alone(researcher):
    uniform = bradley_terry_study(researcher)
    by_hand = bradley_terry_study(researcher, adaptive=True, adaptive_refresh=0)
    closed = bradley_terry_study(researcher, adaptive=True, adaptive_refresh=10)
    for number, study in enumerate((uniform, by_hand, closed)):
        answer_battles(study, 20, f"left-{number}")
    study_close(study=closed)
    assert reports_refresh() == []
    assert not Job.objects.filter(kind=Job.Kind.REPORT).exists()


def test_the_beats_task_makes_a_study_nobody_looks_at_adapt(
    researcher, django_capture_on_commit_callbacks
):
    study = bradley_terry_study(researcher, adaptive=True, adaptive_refresh=60)
    mode = get_mode("arena")
    pairs = mode.study_pairs(study)
    uniform = {pair: 1 / len(pairs) for pair in pairs}
    answer_battles(study, 60, "unseen")
    assert mode.pair_probabilities(study) == pytest.approx(uniform)

    # The beat's task, each minute, as the worker runs it (eager here): queued, enqueued, run.
    schedule = {
        entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }
    assert schedule["annotation.tasks.refresh_reports"] == 60
    with django_capture_on_commit_callbacks(execute=True):
        assert refresh_reports() == 1
    job = Job.objects.get(study=study, kind=Job.Kind.REPORT)
    assert job.status == Job.Status.DONE, job.error
    served = mode.pair_probabilities(study)
    assert set(served) == set(uniform) and sum(served.values()) == pytest.approx(1)
    # The design now follows the fit: the pairs no longer all have the same probability.
    assert max(served.values()) - min(served.values()) > 0.01
    # Nothing due right after: the report has read every battle.
    with django_capture_on_commit_callbacks(execute=True):
        assert refresh_reports() == 0


def test_the_dashboard_says_which_report_the_design_reads_and_when_the_next_comes(researcher):
    study = bradley_terry_study(
        researcher, adaptive=True, adaptive_refresh=60, adaptive_goal="top", adaptive_top=2
    )
    client = Client()
    client.force_login(researcher)

    def panel() -> str:
        page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
        return " ".join(page.split())  # the template's line breaks apart

    before = panel()
    assert "getting which 2 systems are the best wrong" in before
    assert "No report yet: every pair is served evenly." in before
    assert "made automatically after 60 more battles (every 60)" in before
    assert "Served most now" not in before

    answer_battles(study, 60, "panel")
    assert "A report is due: it is made within a minute." in panel()
    [job] = reports_refresh()
    job_run(job=job)
    answer_battles(study, 5, "panel-after")
    after = panel()
    assert "The design reads the report of 60 battles" in after
    assert "5 battles came since" in after and "after 55 more battles (every 60)" in after
    design = get_mode("arena").pair_probabilities(study)
    (a, b), share = max(design.items(), key=lambda pair: pair[1])
    assert f"Served most now: {a} against {b} ({round(100 * share, 1)}%)" in after
    assert share > 1 / len(design)

    uniform = bradley_terry_study(researcher)
    page = client.get(reverse("study_detail", args=[uniform.pk])).content.decode()
    assert "Adaptive pairing" not in page
