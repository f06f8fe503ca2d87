"""The metric lab through the platform: references, the metrics job, the report page and API.

Expected values come from the independent libraries (sacrebleu, rouge-score, scipy) run
here on the same texts, or from hand-worked pairs; the published numbers (THumB Tables 2
and 4) go through the whole platform path (``import_thumb``, ``import_references``,
``compute_metrics``) and skip cleanly without ``../shared``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from django.core.management import CommandError, call_command
from django.urls import reverse
from rouge_score import rouge_scorer
from scipy import stats

from annotation.errors import ServiceError
from annotation.models import Caption, Job, PairJudgment, Reference, Study
from annotation.services import metrics as lab
from annotation.services.imports.releases import release_import
from annotation.services.metrics_ensemble import metrics_ensemble
from rubrics import metrics as metric_rules
from tests.factories.core import skip_or_fail
from tests.factories.humanr import crowd, do_group, humanr_study
from tests.factories.metrics import (
    CAPTIONS,
    IMAGES,
    write_references_csv,
    write_release,
)

pytestmark = pytest.mark.django_db

BLEU, ROUGE, CIDER = "BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)", "CIDEr (pycocoevalcap)"
NO_JAVA = [BLEU, ROUGE]  # computable without a Java runtime


@pytest.fixture
def thumb_lab(researcher, tmp_path) -> Study:
    """A closed THumB study of the release above, with two imported references per image."""
    study = release_import(
        fmt="thumb-1.0",
        owner=researcher,
        path=write_release(tmp_path / "release.jsonl"),
        name="Lab",
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    return study


@pytest.fixture
def compute(django_capture_on_commit_callbacks):
    """Run ``compute_metrics`` for a study; the job runs when the command's transaction
    commits (the test's own transaction never does, so the callbacks are run here)."""

    def run(study: Study, *names: str, resamples: int = 50) -> Job:
        with django_capture_on_commit_callbacks(execute=True):
            call_command(
                "compute_metrics",
                study.pk,
                "--metrics",
                *(names or NO_JAVA),
                "--resamples",
                str(resamples),
                "--no-wait",
            )
        job = lab.metrics_latest(study)
        assert job is not None and job.status == Job.Status.DONE, job and job.error
        return job

    return run


# ---------------------------------------------------------------------- compute


def test_compute_stores_each_caption_score_as_the_libraries_give_it(thumb_lab, compute):
    job = compute(thumb_lab)
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    refs_of = {name: refs for name, refs in IMAGES.values()}
    captions = list(Caption.objects.filter(study=thumb_lab).select_related("image"))
    assert len(captions) == 12
    for caption in captions:
        refs = refs_of[caption.image.name]
        expected_bleu = sacrebleu.sentence_bleu(caption.raw_text, refs).score
        expected_rouge = max(scorer.score(r, caption.raw_text)["rougeL"].fmeasure for r in refs)
        assert caption.metrics[BLEU] == pytest.approx(expected_bleu, abs=1e-9)
        assert caption.metrics[ROUGE] == pytest.approx(expected_rouge, abs=1e-9)
    result = job.result
    assert result["computed"] == NO_JAVA
    assert result["references"] == lab.IMPORTED
    assert result["captions_scored"] == 12 and result["captions_without_references"] == 0


def test_report_system_means_and_correlations_match_scipy(thumb_lab, compute):
    report = compute(thumb_lab).result
    captions = {c.pk: c for c in Caption.objects.filter(study=thumb_lab)}
    by_system = {row["system"]: row for row in report["systems"]}
    assert list(by_system) == ["Human", "SysA", "SysB"]  # Human first, as in the papers
    for system, row in by_system.items():
        mine = [c.metrics[ROUGE] for c in captions.values() if c.system == system]
        assert row["captions"] == 4
        assert row["means"][ROUGE] == pytest.approx(np.mean(mine))
    # THumB scores from the release: Total = (P + R) / 2 with no penalties.
    truth = {
        (seg, system): ((p, r, (p + r) / 2))
        for seg, rows in CAPTIONS.items()
        for system, _, p, r in rows
    }
    assert report["coefficient"] == "pearson"
    for score, index in (("P", 0), ("R", 1), ("Total", 2)):
        for with_human, label in ((True, lab.WITH_HUMAN), (False, lab.WITHOUT_HUMAN)):
            kept = [c for c in captions.values() if with_human or c.system != Caption.HUMAN]
            x = [c.metrics[BLEU] for c in kept]
            y = [truth[(c.image.source, c.system)][index] for c in kept]
            cell = report["correlations"][score][BLEU][label]
            assert cell["value"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
            assert cell["n"] == len(kept)
            assert cell["low"] <= cell["value"] <= cell["high"]


def test_other_human_captions_are_the_references_when_none_is_imported(researcher, tmp_path):
    two_humans = {
        "1": [
            ("Human", "a dog runs across the green grass", 5, 5),
            ("SysA", "a dog runs on the grass", 5, 4),
        ],
        "2": [("Human", "a cat on a chair", 5, 5), ("SysA", "a cat", 3, 2)],
    }
    study = release_import(
        fmt="thumb-1.0", owner=researcher, path=write_release(tmp_path / "rel.jsonl", two_humans)
    ).study
    kept, refs, source = lab.caption_references(study)
    assert source == lab.OTHER_HUMANS
    # Each image has one Human caption: it references the machine caption, and has none
    # left for itself (a caption is never its own reference).
    assert [c["system"] for c in kept] == ["SysA", "SysA"]
    assert refs == [["a dog runs across the green grass"], ["a cat on a chair"]]


def test_a_study_without_references_gets_a_clear_error(researcher, client, tmp_path):
    machines_only = {"1": [("SysA", "a dog", 3, 3), ("SysB", "a cat", 2, 2)]}
    study = release_import(
        fmt="thumb-1.0", owner=researcher, path=write_release(tmp_path / "m.jsonl", machines_only)
    ).study
    with pytest.raises(CommandError, match="No caption of this study has references"):
        call_command("compute_metrics", study.pk, "--metrics", BLEU)
    client.force_login(researcher)
    # 409: the study's state refuses it (import references, then ask again), not the request.
    page = client.post(reverse("study_metrics", args=[study.pk]), {"metrics": [BLEU]})
    assert page.status_code == 409
    assert "No caption of this study has references" in page.content.decode()
    api = client.post(
        f"/api/studies/{study.pk}/metrics/", {"metrics": [BLEU]}, content_type="application/json"
    )
    assert api.status_code == 409
    assert "import_references" in json.dumps(api.json())
    assert not Job.objects.filter(study=study, kind=Job.Kind.METRICS).exists()


def test_unknown_metric_and_java_metric_without_java_are_refused(thumb_lab, monkeypatch):
    with pytest.raises(Exception, match="Unknown metric"):
        lab.metrics_request(study=thumb_lab, user=None, names=["BLEU-9 (nowhere)"])
    with pytest.raises(Exception, match="Choose at least one metric"):
        lab.metrics_request(study=thumb_lab, user=None, names=[])
    monkeypatch.setattr(metric_rules, "java_available", lambda: False)
    with pytest.raises(Exception, match="need Java.*default-jre-headless"):
        lab.metrics_request(study=thumb_lab, user=None, names=[CIDER])
    # Without Java the default is the metrics that need none.
    assert lab.metric_names_available() == NO_JAVA


@pytest.mark.django_db(transaction=True)
def test_compute_command_runs_the_job_and_says_what_it_did(researcher, tmp_path, capsys):
    study = release_import(
        fmt="thumb-1.0", owner=researcher, path=write_release(tmp_path / "release.jsonl")
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    call_command("compute_metrics", study.pk, "--metrics", BLEU, "--resamples", "10")
    job = lab.metrics_latest(study)
    assert f"Job {job.pk}: scored 12 captions of study {study.pk} with 1 metrics" in (
        capsys.readouterr().out
    )


# ---------------------------------------------------------------------- references


def test_import_references_bad_rows_are_listed_and_nothing_is_written(thumb_lab, tmp_path):
    before = Reference.objects.filter(study=thumb_lab).count()
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "image,reference\n"
        "img1.jpg,a fine reference\n"
        "nope.jpg,an image the study lacks\n"
        'img2.jpg,""\n'
        "img3.jpg,nul \x00 inside\n"
        "img4.jpg,right\u202eto left\n",
        encoding="utf-8",
    )
    with pytest.raises(CommandError) as caught:
        call_command("import_references", thumb_lab.pk, str(bad))
    message = str(caught.value)
    assert "4 bad row(s) in bad.csv; nothing imported." in message
    assert "line 3: image 'nope.jpg' is not an image of this study" in message
    assert "line 4: the reference is empty" in message
    assert "line 5: the reference contains the control character U+0000" in message
    assert "line 6: the reference contains the bidirectional control U+202E" in message
    assert Reference.objects.filter(study=thumb_lab).count() == before


def test_import_references_coco_and_thumb_formats(researcher, tmp_path):
    study = release_import(
        fmt="thumb-1.0", owner=researcher, path=write_release(tmp_path / "release.jsonl")
    ).study
    coco = tmp_path / "captions.json"
    coco.write_text(
        json.dumps(
            {
                "images": [{"id": 7, "file_name": "val/img1.jpg"}],
                "annotations": [
                    {"image_id": 7, "caption": "a dog on grass"},
                    {"image_id": 7, "caption": "a happy dog"},
                ],
            }
        ),
        encoding="utf-8",
    )
    thumb = tmp_path / "mscoco_references.json"
    thumb.write_text(
        json.dumps({"seg_id": "2", "set_id": 1, "refs": ["a bike", "a man cycling"]})
        + "\n"
        + json.dumps({"seg_id": "99", "set_id": 2, "refs": ["nothing"]})
        + "\n",
        encoding="utf-8",
    )
    call_command("import_references", study.pk, str(coco))
    assert sorted(
        Reference.objects.filter(study=study, image__name="img1.jpg").values_list("text", flat=True)
    ) == ["a dog on grass", "a happy dog"]
    with pytest.raises(CommandError, match="line 2: seg_id '99' is not an image of this study"):
        call_command("import_references", study.pk, str(thumb))
    assert Reference.objects.filter(study=study).count() == 2
    thumb.write_text(thumb.read_text().splitlines()[0] + "\n", encoding="utf-8")
    call_command("import_references", study.pk, str(thumb))
    assert Reference.objects.filter(study=study, image__source="2").count() == 2
    # Importing the same file again stores nothing twice.
    call_command("import_references", study.pk, str(thumb))
    assert Reference.objects.filter(study=study).count() == 4


# ---------------------------------------------------------------------- Pascal-50S

GOOD_REFS = ["a dog runs on the grass", "a dog running on green grass", "the dog runs"]


def pascal_file(path: Path, extra: dict | None = None) -> Path:
    """Hand-worked pairs: caption 0 is the reference text, caption 1 unrelated, so every
    metric prefers caption 0; the humans agree in the HC pair (label 0) and disagree in the
    MM pair (label 1). Accuracy: HC 100, MM 0, with no tie to break."""
    pair = {"image": "VOC/a.jpg", "references": GOOD_REFS}
    data = {
        "HC": [{**pair, "captions": ["a dog runs on the grass", "a plate of food"], "label": 0}],
        "MM": [
            {
                **pair,
                "image": "VOC/b.jpg",
                "captions": ["a dog running on the grass", "two cars"],
                "label": 1,
            }
        ],
        **(extra or {}),
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_pascal50s_import_counts_and_pairwise_accuracy(researcher, tmp_path, capsys, compute):
    call_command(
        "import_ratings",
        "--format",
        "pascal-50s",
        str(pascal_file(tmp_path / "p.json")),
        "--owner",
        researcher.username,
    )
    study = Study.objects.get(owner=researcher)
    assert "2 pairs, 4 captions, 6 references, closed" in capsys.readouterr().out
    assert (study.mode, study.status) == ("humanr", Study.Status.CLOSED)
    assert PairJudgment.objects.filter(study=study).count() == 2
    assert Reference.objects.filter(study=study, pair__isnull=False).count() == 6
    report = compute(study).result
    for name in NO_JAVA:
        for group, right in (("HC", 1.0), ("MM", 0.0)):
            assert report["pairwise"][group]["metrics"][name] == {
                "mean": right,
                "std": 0.0,
                "n": 1,
                "metric_ties": 0,
                "ties_as_misses": right,
                "ties_as_half": right,
            }


def test_pascal50s_bad_pair_imports_nothing(researcher, tmp_path):
    bad = pascal_file(
        tmp_path / "p.json",
        {"HM": [{"image": "x.jpg", "captions": ["only one"], "label": 0, "references": ["r"]}]},
    )
    with pytest.raises(CommandError, match=r"HM\[0\]: captions must be a list of two captions"):
        call_command(
            "import_ratings", "--format", "pascal-50s", str(bad), "--owner", researcher.username
        )
    assert not Study.objects.filter(owner=researcher).exists()
    assert not PairJudgment.objects.filter(study__owner=researcher).exists()


# ---------------------------------------------------------------------- page and API


def test_page_computes_and_shows_the_tables(
    thumb_lab, client, researcher, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    url = reverse("study_metrics", args=[thumb_lab.pk])
    assert "No metrics have been computed yet." in client.get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(url, {"metrics": NO_JAVA}, HTTP_HX_REQUEST="true")
    assert started.status_code == 200
    job = lab.metrics_pending(thumb_lab) or lab.metrics_latest(thumb_lab)
    polled = client.get(reverse("study_metrics_job", args=[thumb_lab.pk, job.pk]))
    assert (
        'value="100"' in polled.content.decode()
        and "Show the new tables" in polled.content.decode()
    )
    page = client.get(url).content.decode()
    for heading in ("System level", "Caption-level correlation", "Robustness (Cui et al.)"):
        assert heading in page
    job = lab.metrics_latest(thumb_lab)
    sys_a = next(r for r in job.result["systems"] if r["system"] == "SysA")
    assert f"{sys_a['means'][ROUGE] * 100:.1f}" in page  # ROUGE-L shown x100
    # The strict CSP holds: no inline script or style on the page (tests/annotation/test_csp.py).
    assert "Content-Security-Policy" in client.get(url).headers
    assert not re.search(r"<script(?![^>]*\bsrc=)|<style|\sstyle=", page)
    detail = client.get(reverse("study_detail", args=[thumb_lab.pk])).content.decode()
    assert f'href="{url}"' in detail


def test_while_a_metrics_job_runs_the_button_is_off_and_a_second_is_refused(
    thumb_lab, client, researcher
):
    """Issue 26, row 3: the button stayed active while the job ran, so a second click
    queued a second job of the same metrics. (The test's transaction never commits, so the
    job queued here stays queued: it is the "running" state the page sees.)"""
    client.force_login(researcher)
    url = reverse("study_metrics", args=[thumb_lab.pk])
    first = client.post(url, {"metrics": NO_JAVA}, HTTP_HX_REQUEST="true").content.decode()
    job = lab.metrics_pending(thumb_lab)
    assert job is not None
    button = re.search(r'<button[^>]*id="metrics-submit"[^>]*>', first)
    assert button and "hx-swap-oob" in button.group(0) and " disabled" in button.group(0)
    second = client.post(url, {"metrics": NO_JAVA}, HTTP_HX_REQUEST="true").content.decode()
    assert Job.objects.filter(study=thumb_lab, kind=Job.Kind.METRICS).count() == 1
    assert f"Metrics job {job.pk}" in second and "already" in second
    page = client.get(url).content.decode()
    assert " disabled" in re.search(r'<button[^>]*id="metrics-submit"[^>]*>', page).group(0)
    with pytest.raises(ServiceError, match="already"):
        lab.metrics_request(study=thumb_lab, user=researcher, names=NO_JAVA)
    # The poll that sees the job end turns the button back on (a failed job: a done one
    # reloads the whole page, tests/annotation/test_metrics_progress.py).
    Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED, progress=100)
    polled = client.get(
        reverse("study_metrics_job", args=[thumb_lab.pk, job.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    button = re.search(r'<button[^>]*id="metrics-submit"[^>]*>', polled).group(0)
    assert "hx-swap-oob" in button and " disabled" not in button


def test_ensemble_fit_on_one_study_evaluated_on_another(
    thumb_lab, client, researcher, tmp_path, compute
):
    other = release_import(
        fmt="thumb-1.0", owner=researcher, path=write_release(tmp_path / "o.jsonl"), name="Other"
    ).study
    call_command("import_references", other.pk, str(write_references_csv(tmp_path / "o.csv")))
    compute(thumb_lab)
    compute(other)
    result = metrics_ensemble(train=thumb_lab, test=other, resamples=0)
    assert result["metrics"] == sorted(NO_JAVA)
    assert set(result["coefficients"]) == {*NO_JAVA, "intercept"}
    # Same captions and scores on both sides: the ensemble is the least-squares fit, so on
    # the training data itself its Pearson r is the multiple correlation, at least each
    # single metric's.
    singles = [cell["value"] for cell in result["single"].values()]
    assert result["ensemble"]["value"] >= max(singles) - 1e-12
    client.force_login(researcher)
    page = client.get(
        reverse("study_metrics", args=[thumb_lab.pk]), {"evaluate_on": other.pk}
    ).content.decode()
    assert "Fitted on Lab" in page and "intercept" in page


def test_api_returns_the_report(thumb_lab, client, researcher, django_capture_on_commit_callbacks):
    client.force_login(researcher)
    url = f"/api/studies/{thumb_lab.pk}/metrics/"
    assert client.get(url).json()["report"] is None
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            url, {"metrics": NO_JAVA, "resamples": 20}, content_type="application/json"
        )
    assert started.status_code == 202
    assert started.json()["kind"] == "metrics"
    body = client.get(url).json()
    assert body["job"]["id"] == started.json()["id"]
    assert body["report"]["computed"] == NO_JAVA
    assert set(body["report"]["correlations"]) == {"P", "R", "Total"}
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/studies/{study_id}/metrics/" in schema


def test_a_stranger_gets_404_everywhere(thumb_lab, client, other_researcher, compute):
    compute(thumb_lab)
    job = lab.metrics_latest(thumb_lab)
    client.force_login(other_researcher)
    page = reverse("study_metrics", args=[thumb_lab.pk])
    assert client.get(page).status_code == 404
    assert client.post(page, {"metrics": NO_JAVA}).status_code == 404
    assert client.get(reverse("study_metrics_job", args=[thumb_lab.pk, job.pk])).status_code == 404
    api = f"/api/studies/{thumb_lab.pk}/metrics/"
    assert client.get(api).status_code == 404
    assert (
        client.post(api, {"metrics": NO_JAVA}, content_type="application/json").status_code == 404
    )
    # Nor may a stranger's study be the ensemble's test set through the owner's page.
    mine = Study.objects.create(name="Mine", mode="thumb", owner=other_researcher)
    client.force_login(thumb_lab.owner)
    assert client.get(api, {"evaluate_on": mine.pk}).status_code == 404
    assert Job.objects.filter(study=thumb_lab, kind=Job.Kind.METRICS).count() == 1


# ---------------------------------------------------------------------- published numbers

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "thumb-1.0"
TABLE_2 = {  # Kasai et al. 2022, Table 2 right: BLEU, ROUGE (x100)
    "Human": (26.2, 50.4),
    "VinVL-large": (33.3, 56.5),
    "VinVL-base": (32.3, 55.9),
    "Unified-VLP": (31.6, 55.8),
    "Up-Down": (28.4, 52.2),
}
TABLE_2_CIDER = {
    "Human": 111.5,
    "VinVL-large": 141.8,
    "VinVL-base": 138.4,
    "Unified-VLP": 128.5,
    "Up-Down": 110.7,
}
TABLE_4 = {  # metric: (w/o Human P, R, Total, w/ Human P, R, Total)
    BLEU: (0.21, 0.13, 0.25, 0.15, 0.04, 0.13),
    ROUGE: (0.26, 0.17, 0.31, 0.18, 0.07, 0.18),
    CIDER: (0.27, 0.18, 0.33, 0.21, 0.11, 0.23),
}


def test_thumb_tables_2_and_4_through_the_platform(make_user, compute):
    """THumB 1.0 and its four references (not the Human caption) through the commands: the
    system means reproduce Table 2 (right) within 1.0 and the caption-level Pearson
    correlations Table 4 within 0.03. Every number off is listed with the value found."""
    if not (SHARED / "mscoco_THumB-1.0.jsonl").is_file():
        pytest.skip("../shared/datasets/thumb-1.0 is absent (a fresh clone has no ../shared)")
    if not metric_rules.java_available():
        skip_or_fail("CIDEr (pycocoevalcap) needs Java: apt-get install default-jre-headless")
    owner = make_user("thumb-owner", researcher=True)
    call_command("import_thumb", str(SHARED / "mscoco_THumB-1.0.jsonl"), "--owner", owner.username)
    study = Study.objects.get(owner=owner)
    call_command("import_references", study.pk, str(SHARED / "mscoco_references.json"))
    result = compute(study, BLEU, ROUGE, CIDER, resamples=0).result
    assert result["references"] == lab.IMPORTED
    assert result["captions_scored"] == 2500

    off = []
    means = {row["system"]: row["means"] for row in result["systems"]}
    for system, (bleu, rouge) in TABLE_2.items():
        # sacrebleu is on 0-100 already; rouge-score and CIDEr are printed x100.
        for name, found, paper in (
            (BLEU, means[system][BLEU], bleu),
            (ROUGE, means[system][ROUGE] * 100, rouge),
            (CIDER, means[system][CIDER] * 100, TABLE_2_CIDER[system]),
        ):
            if abs(found - paper) > 1.0:
                off.append(f"Table 2 {system} {name}: found {found:.2f}, paper {paper}")
    for name, published in TABLE_4.items():
        cells = [
            (label, score, result["correlations"][score][name][label]["value"])
            for label in (lab.WITHOUT_HUMAN, lab.WITH_HUMAN)
            for score in ("P", "R", "Total")
        ]
        for (label, score, found), paper in zip(cells, published, strict=True):
            if abs(found - paper) > 0.03:
                off.append(f"Table 4 {name} {score} {label}: found {found:.3f}, paper {paper}")
    assert not off, "THumB numbers not reproduced:\n" + "\n".join(off)


def test_humanr_comparisons_give_pairwise_accuracy(researcher, compute):
    """HUMANr answers are pairwise judgments: an honest worker prefers the human caption in
    every comparison (choice 0), so the accuracy is the share of comparisons in which the
    metric scores the human caption strictly higher (no ties by construction)."""
    study = humanr_study(researcher, images=12, humans=3, systems=("GIT",))
    humans = ["a dog runs on the green grass", "a dog runs on the grass", "a brown dog on grass"]
    for caption in Caption.objects.filter(study=study):
        if caption.system == Caption.HUMAN:
            caption.raw_text = humans[int(caption.raw_text[1:])]
        else:
            caption.raw_text = "a dog on a sofa"
        caption.save(update_fields=["raw_text"])
    for worker in ("W1", "W2"):
        do_group(crowd(study, worker))
    report = compute(study, BLEU).result
    metrics = dict(Caption.objects.filter(study=study).values_list("id", "metrics"))
    trials = [
        (r["reference_caption_id"], r["other_caption_id"])
        for r in study.judgments.values_list("result", flat=True)
        if r["kind"] != "attention_check"
    ]
    higher = [metrics[a][BLEU] > metrics[b][BLEU] for a, b in trials]
    assert not any(metrics[a][BLEU] == metrics[b][BLEU] for a, b in trials)
    cell = report["pairwise"]["HUMANr comparisons"]["metrics"][BLEU]
    assert len(trials) == 18  # 2 groups of 9 comparisons
    share = pytest.approx(np.mean(higher))
    assert cell == {
        "mean": share,
        "std": 0.0,
        "n": 18,
        "metric_ties": 0,  # no tie, so every tie rule gives the same share
        "ties_as_misses": share,
        "ties_as_half": share,
    }
    assert report["references"] == lab.OTHER_HUMANS


# Survey Table 5 (Pascal-50S) through the platform, with the pairs' own labels, is checked
# beside FLEUR's row with its files' labels: tests/annotation/test_fleur_platform.py.
