"""The metrics page after its job and the job's progress (issue 46, row 16).

A new user saw "Show the new tables" beside "No metrics have been computed yet" when the
job ended, and the bar stood at 35% for 36 s of a 66 s job (METEOR scored every caption in
one call with no progress). Now the page reloads itself when its job is done, and METEOR
reports progress caption by caption, while scoring and again for robustness.
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Caption, Job, Study
from annotation.services import metrics as lab
from annotation.services.imports.releases import release_import
from rubrics import metrics as metric_rules
from tests.factories.core import skip_or_fail
from tests.factories.metrics import write_references_csv, write_release

pytestmark = pytest.mark.django_db

NO_JAVA = ["BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)"]
METEOR = "METEOR 1.5 (pycocoevalcap)"


@pytest.fixture
def lab_study(researcher, tmp_path) -> Study:
    study = release_import(
        fmt="thumb-1.0",
        owner=researcher,
        path=write_release(tmp_path / "release.jsonl"),
        name="Lab",
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    return study


def test_the_page_polling_a_finished_job_reloads_to_show_the_tables(
    client, researcher, lab_study, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    url = reverse("study_metrics", args=[lab_study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(url, {"metrics": NO_JAVA}, HTTP_HX_REQUEST="true")
    job = lab.metrics_latest(lab_study)
    assert job is not None and job.status == Job.Status.DONE

    polled = client.get(
        reverse("study_metrics_job", args=[lab_study.pk, job.pk]),
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{url}",
    )

    # The job ran after the POST answered (at commit), as with a real queue: the POST
    # showed it running, and the poll that sees it done tells htmx to reload the page
    # instead of offering a button to do it (the e2e test sees the eager POST do the same).
    assert "HX-Refresh" not in started.headers
    assert polled.headers.get("HX-Refresh") == "true", polled.content.decode()[:300]
    page = client.get(url).content.decode()
    assert "System level" in page and "No metrics have been computed yet" not in page


def test_a_failed_job_stays_on_the_page_with_its_error(client, researcher, lab_study):
    client.force_login(researcher)
    job = lab.metrics_request(study=lab_study, user=researcher, names=NO_JAVA)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED, error="It broke.")

    polled = client.get(
        reverse("study_metrics_job", args=[lab_study.pk, job.pk]), HTTP_HX_REQUEST="true"
    )

    assert "HX-Refresh" not in polled.headers
    assert "It broke." in polled.content.decode()


def test_meteor_reports_progress_caption_by_caption(researcher, lab_study):
    if not metric_rules.java_available():
        skip_or_fail("METEOR needs Java: apt-get install default-jre-headless")
    job = lab.metrics_request(study=lab_study, user=researcher, names=[METEOR], resamples=0)
    calls: list[tuple[int, str]] = []

    lab.metrics_compute(
        job=job, progress=lambda percent, message="": calls.append((percent, message))
    )

    captions = Caption.objects.filter(study=lab_study, purpose=Caption.Purpose.STUDY).count()
    scoring = [m for p, m in calls if p < 56]
    counted = [
        int(found.group(1))
        for m in scoring
        if (found := re.search(r"METEOR, (\d+) of (\d+) captions", m))
    ]
    # One report per caption scored, in order, ending at all of them.
    assert counted == list(range(1, captions + 1)), scoring
    percents = [p for p, _ in calls]
    assert percents == sorted(percents), "progress never goes back"
    # Robustness scores METEOR again per transformation: per caption there too.
    robustness = [m for p, m in calls if 60 <= p < 80 and "METEOR, " in m]
    assert len(robustness) >= 3 * 2, robustness


def test_meteor_in_batches_gives_the_one_call_scores():
    """A segment's METEOR depends on its own statistics only: batches (for progress) give
    the scores of pycocoevalcap's single call."""
    if not metric_rules.java_available():
        skip_or_fail("METEOR needs Java: apt-get install default-jre-headless")
    from pycocoevalcap.meteor.meteor import Meteor

    cands = ["a dog runs on the grass", "a man rides a bike", "two kids on a beach", "a cat"]
    refs = [
        ["a dog running through grass"],
        ["a cyclist on a road"],
        ["kids at the sea"],
        ["a cat asleep on a chair", "a sleeping cat"],
    ]
    reports: list[float] = []
    batched = metric_rules.compute(cands, refs, [METEOR], progress=lambda f, m: reports.append(f))[
        METEOR
    ]
    # compute scores PTB-tokenised text: so does the single call here.
    tokens = iter(metric_rules.ptb_tokenize([*cands, *(r for rs in refs for r in rs)]))
    cand_tok = [next(tokens) for _ in cands]
    ref_tok = [[next(tokens) for _ in rs] for rs in refs]
    scorer = Meteor()
    try:
        _, single = scorer.compute_score(
            dict(enumerate(ref_tok)), {i: [c] for i, c in enumerate(cand_tok)}
        )
    finally:
        del scorer
    assert batched.tolist() == pytest.approx(single, abs=1e-12)
    # Tokenising, then one report per candidate, then the metric's end.
    assert len(reports) >= len(cands) + 1
