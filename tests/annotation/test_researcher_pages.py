"""Researcher pages of issue 11: the home page's counts, the study's systems, the report page
after a computation, the HUMANr report on little data, and the simulated crowd."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Caption, Judgment, Study
from annotation.selectors import study_counts
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.reports import report_request
from annotation.services.simulation import crowd_simulate
from annotation.services.studies import study_open
from annotation.tasks import enqueue
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.humanr import crowd, do_group, honest, humanr_study
from tests.factories.thumb import add_image
from tests.factories.vicr import vicr_study


def home_rows(html: str) -> dict:
    """Each study row of the home page: name -> its cells' text after the name (the id,
    the first cell since issue 46, is under ``rows["ids"]``)."""
    rows: dict = {"ids": {}}
    pattern = r'<tr><td class="num">(\d+)</td><td><a [^>]*>(.*?)</a></td>(.*?)</tr>'
    for pk, name, rest in re.findall(pattern, html, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", rest, re.S)
        rows[name] = [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]
        rows["ids"][name] = int(pk)
    return rows


def test_the_home_page_counts_judgments_and_participants_per_study(client, researcher):
    busy = vehicle_study(researcher, captions=3, name="Busy")
    vehicle_study(researcher, captions=2, name="Quiet")
    for worker in ("w1", "w2"):
        participant = crowd_participant(busy, worker)
        for _ in range(2):
            lease = assignment_next(participant=participant)
            judgment_submit(participant=participant, token=lease.token, data={"rating": 3})
    crowd_participant(busy, "w3")  # arrived, answered nothing
    client.force_login(researcher)

    rows = home_rows(client.get(reverse("home")).content.decode())
    # Mode, status, judgments, participants, owner.
    assert rows["Busy"][2:4] == ["4", "3"]
    assert rows["Quiet"][2:4] == ["0", "0"]
    assert rows["Busy"][1] == "Live"
    assert rows["ids"]["Busy"] == busy.pk


def test_the_home_page_costs_the_same_queries_for_two_studies_or_ten(client, researcher):
    client.force_login(researcher)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("home")).status_code == 200
        return len(captured)

    for n in range(2):
        vehicle_study(researcher, captions=1, name=f"S{n}")
    few = queries()
    for n in range(2, 10):
        vehicle_study(researcher, captions=1, name=f"S{n}")
    assert queries() == few


def test_tutorial_and_probation_captions_are_not_a_system(researcher):
    study = vicr_study(researcher, game=2)
    # vicr_study's captions are all of system "S"; its tutorial/probation ones too.
    Caption.objects.filter(study=study, purpose="tutorial").update(system="Tutor")
    assert study_counts(study)["systems"] == 1


@pytest.mark.django_db(transaction=True)
def test_an_htmx_report_computation_reloads_the_page_with_the_report(client, researcher):
    # A committing test: the job runs (eagerly) when it is queued, as in the embedded default.
    study = vehicle_study(researcher)
    client.force_login(researcher)
    url = reverse("study_report", args=[study.pk])
    assert "No report has been computed yet." in client.get(url).content.decode()

    answer = client.post(url, HTTP_HX_REQUEST="true")
    # Not the bare job fragment saying "done" above "no report yet": a reload.
    assert answer.status_code == 200 and answer.headers.get("HX-Refresh") == "true"
    html = client.get(url).content.decode()
    assert "No report has been computed yet." not in html
    assert "Recompute the report" in html


def test_a_polled_report_job_reloads_its_report_page_only(
    client, researcher, django_capture_on_commit_callbacks
):
    study = vehicle_study(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(report_request(study=study, user=researcher))
    client.force_login(researcher)
    status = reverse("job_status", args=[job.pk])
    on_report = client.get(
        status,
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{reverse('study_report', args=[study.pk])}",
    )
    assert on_report.headers.get("HX-Refresh") == "true"
    elsewhere = client.get(
        status,
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{reverse('study_detail', args=[study.pk])}",
    )
    assert "HX-Refresh" not in elsewhere.headers
    assert "Show the new report" in elsewhere.content.decode()


def test_the_humanr_report_on_little_data_says_so_instead_of_empty_charts(
    client, researcher, django_capture_on_commit_callbacks
):
    study = humanr_study(researcher, images=12)
    do_group(crowd(study, "only-one"), honest)  # one worker: no half-splits
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    client.force_login(researcher)
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()

    assert "half-splits: not enough data yet (needs two workers or more)" in html
    assert "std-vs-images: not enough data yet (needs more than 10 images)" in html
    assert 'report/figures/half-splits.svg"' not in html
    assert 'report/figures/std-vs-images.svg"' not in html
    # The comparisons of the one group are there: that figure is drawn.
    assert 'report/figures/humanr-by-system.svg"' in html


def test_the_simulated_crowd_answers_through_the_services_plausibly_and_repeatably(
    researcher, make_study
):
    def thumb_with_systems():
        study = make_study("thumb", settings={"third_check_captions": 0}, seed=3)
        for n in range(6):
            add_image(
                study,
                f"img{n}",
                [("Human", f"A person {n}."), ("GoodBot", f"Good {n}."), ("BadBot", f"Bad {n}.")],
            )
        study_open(study=study)
        return study

    first, second = thumb_with_systems(), thumb_with_systems()
    summaries = [crowd_simulate(study=s, workers=4, seed=5) for s in (first, second)]
    # Stage 1 and stage 2 of every image, spread over the workers.
    assert summaries[0].judgments == 12 and summaries[0].refusals == {}
    assert sum(1 for n in summaries[0].per_worker.values() if n) >= 3

    def precision_by_system(study) -> dict[str, list[int]]:
        systems = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
        found: dict[str, list[int]] = {}
        for payload in Judgment.objects.filter(study=study).values_list("payload", flat=True):
            for scores in payload["captions"].values():
                system = systems[scores["caption_ids"][0]]
                found.setdefault(system, []).append(scores["precision"])
        return found

    scores = [precision_by_system(s) for s in (first, second)]
    assert scores[0] == scores[1], "the same seed gives the same answers"
    mean = {system: sum(v) / len(v) for system, v in scores[0].items()}
    assert mean["Human"] > mean["BadBot"] + 1.5 and mean["GoodBot"] > mean["BadBot"] + 1


def test_the_simulated_crowd_needs_a_live_study(researcher, make_study):
    draft = make_study("thumb")
    with pytest.raises(ServiceError, match="live"):
        crowd_simulate(study=draft, workers=1, seed=0)
    assert draft.status == Study.Status.DRAFT
