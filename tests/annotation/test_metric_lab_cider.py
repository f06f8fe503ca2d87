"""CIDEr's document-frequency convention is a visible choice of the metric lab (page, API,
command), and the platform path reproduces the survey's Table 4 CIDEr values with the
survey's convention (one document per scored caption): Flickr8k-Expert Kendall tau-c 43.9
and THumB Pearson 22.4 (x100, to one decimal), where the default convention (one document
per image's reference set) gives other values. The published-number tests read
../shared and skip cleanly without it.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils.html import escape

from annotation.models import Job, Study
from annotation.services import metrics as lab
from rubrics import metrics as metric_rules
from tests.factories.core import skip_or_fail

pytestmark = pytest.mark.django_db

CIDER = "CIDEr (pycocoevalcap)"
DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
FLICKR = DATASETS / "flickr8k-expert" / "flickr8k_expert.json"
THUMB = DATASETS / "thumb-1.0"


def _needs(*paths: Path) -> None:
    for path in paths:
        if not path.exists():
            pytest.skip(f"{path} is absent (a fresh clone has no ../shared)")
    if not metric_rules.java_available():
        skip_or_fail("CIDEr (pycocoevalcap) needs Java: apt-get install default-jre-headless")


def _compute_via_api(client, study: Study, capture, convention: str | None) -> dict:
    url = f"/api/studies/{study.pk}/metrics/"
    body = {"metrics": [CIDER], "resamples": 0}
    if convention:
        body["cider_documents"] = convention
    with capture(execute=True):
        started = client.post(url, body, content_type="application/json")
    assert started.status_code == 202, started.content
    got = client.get(url).json()
    assert got["job"]["id"] == started.json()["id"] and got["job"]["status"] == "done"
    return got["report"]


def test_flickr8k_expert_cider_tau_c_with_the_survey_convention(
    make_user, client, django_capture_on_commit_callbacks, tmp_path
):
    _needs(FLICKR)
    owner = make_user("cider-flickr", researcher=True)
    call_command(
        "import_ratings", "--format", "flickr8k-expert", str(FLICKR), "--owner", owner.username
    )
    study = Study.objects.get(owner=owner)
    # Its five ground-truth captions per image, through the references import.
    refs = tmp_path / "refs.csv"
    with refs.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["image", "reference"])
        for image, entry in json.loads(FLICKR.read_text(encoding="utf-8")).items():
            writer.writerows([image, text] for text in entry["ground_truth"])
    call_command("import_references", study.pk, str(refs))
    client.force_login(owner)
    survey = _compute_via_api(client, study, django_capture_on_commit_callbacks, "candidates")
    assert survey["cider_documents"] == "candidates"
    assert survey["captions_scored"] == 5664 and survey["coefficient"] == "kendall_tau_c"
    cell = survey["correlations"]["rating"][CIDER]["with Human"]
    assert cell["n"] == 16992
    assert round(100 * cell["value"], 1) == 43.9
    default = _compute_via_api(client, study, django_capture_on_commit_callbacks, None)
    assert default["cider_documents"] == lab.CIDER_DEFAULT == "reference_sets"
    other = default["correlations"]["rating"][CIDER]["with Human"]["value"]
    assert round(100 * other, 1) != 43.9  # the convention is a real choice here


def test_thumb_cider_pearson_with_the_survey_convention(
    make_user, client, django_capture_on_commit_callbacks
):
    _needs(THUMB / "mscoco_THumB-1.0.jsonl", THUMB / "mscoco_references.json")
    owner = make_user("cider-thumb", researcher=True)
    call_command("import_thumb", str(THUMB / "mscoco_THumB-1.0.jsonl"), "--owner", owner.username)
    study = Study.objects.get(owner=owner)
    call_command("import_references", study.pk, str(THUMB / "mscoco_references.json"))
    client.force_login(owner)
    report = _compute_via_api(client, study, django_capture_on_commit_callbacks, "candidates")
    assert report["captions_scored"] == 2500 and report["coefficient"] == "pearson"
    # The survey correlates with the Total over all 2,500 captions (Human included).
    value = report["correlations"]["Total"][CIDER]["with Human"]["value"]
    assert round(100 * value, 1) == 22.4


# ---------------------------------------------------------------------- the choice


@pytest.fixture
def lab_study(researcher, tmp_path) -> Study:
    from annotation.services.imports.releases import release_import
    from tests.factories.metrics import write_references_csv, write_release

    study = release_import(
        fmt="thumb-1.0",
        owner=researcher,
        path=write_release(tmp_path / "release.jsonl"),
        name="Lab",
    ).study
    call_command("import_references", study.pk, str(write_references_csv(tmp_path / "r.csv")))
    return study


def test_page_shows_the_choice_with_its_default_and_the_job_keeps_it(
    lab_study, client, researcher, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    url = reverse("study_metrics", args=[lab_study.pk])
    page = client.get(url).content.decode()
    assert "<legend>CIDEr's document frequencies</legend>" in page
    for key, label in lab.CIDER_CONVENTIONS.items():
        assert f'value="{key}"' in page and escape(label) in page
    assert f'value="{lab.CIDER_DEFAULT}" checked' in page
    assert "(default)" in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {"metrics": ["BLEU-4 (sacrebleu)"], "cider_documents": "candidates"})
    job = Job.objects.get(study=lab_study, kind=Job.Kind.METRICS)
    assert job.params["cider_documents"] == "candidates"


def test_an_unknown_convention_is_refused_everywhere(lab_study, client, researcher):
    client.force_login(researcher)
    api = client.post(
        f"/api/studies/{lab_study.pk}/metrics/",
        {"metrics": ["BLEU-4 (sacrebleu)"], "cider_documents": "images"},
        content_type="application/json",
    )
    assert api.status_code == 400 and "cider_documents" in api.json()
    page = client.post(
        reverse("study_metrics", args=[lab_study.pk]),
        {"metrics": ["BLEU-4 (sacrebleu)"], "cider_documents": "images"},
        HTTP_HX_REQUEST="true",
    )
    assert "Unknown CIDEr convention" in page.content.decode()
    assert not Job.objects.filter(study=lab_study).exists()
