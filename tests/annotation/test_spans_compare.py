"""Span agreement between two studies of the same captions (issue 47): the WMT23 ESA and
MQM campaigns, imported as two closed studies, give the published agreement (Kocmi et al.
2024: character F1 0.229 and 0.176 with severity, spans matched 0.183 and 0.127) through
the report's ``compare_study`` setting, on the page, the API and an export's datasheet. A
researcher cannot compare with a study that not everyone who reads the report may read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Study
from annotation.services.studies import study_close, study_update_settings
from tests.annotation.test_exports import datasheet_of
from tests.annotation.test_exports import run as run_export
from tests.annotation.test_integrity2_platform import settings_post
from tests.annotation.test_mode_spans import mark
from tests.annotation.test_spans_import import imported, report_of
from tests.annotation.test_spans_suggestions import captions, import_file, span, write
from tests.factories.spans import judge, spans_study, worker

pytestmark = pytest.mark.django_db

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
#: Kocmi et al. 2024 (the ESA paper), as docs/protocol-choices.md quotes them.
PUBLISHED = {"char_f1": 0.229, "char_f1_severity": 0.176, "matched": 0.183,
             "matched_severity": 0.127}  # fmt: skip


def marked(words, severity):
    def answer(lease, text):
        return {"spans": json.dumps([mark(text, words, severity)]), "score": 50}

    return answer


def closed_study(researcher, words, severity):
    study = spans_study(researcher, images=1, systems=("beta",), target=1, completion_captions=1)
    judge(worker(study), marked(words, severity))
    study_close(study=study)
    return study


def test_two_studies_of_the_same_caption_agree_as_worked_by_hand(researcher):
    """beta's text: "Three cats sleep on a blue sofa under a window." Here "cats sleep"
    (10 characters, major); there "sleep on" (8, minor): 5 shared characters."""
    here = closed_study(researcher, "cats sleep", "major")
    there = closed_study(researcher, "sleep on", "minor")
    # The factory names each image anew: give both studies' captions one image name.
    there.images.update(name=here.images.get().name)
    study_update_settings(
        study=here, settings={**here.settings, "compare_study": there.pk}, changed_by=researcher
    )
    section = report_of(here, researcher)["compare"]
    assert (section["captions"], section["pairs"]) == (1, 1)
    assert section["char_f1"] == pytest.approx(2 * 5 / (10 + 8))
    assert section["char_f1_severity"] == 0
    assert section["matched"] == 1 and section["matched_severity"] == 0


def test_a_member_cannot_compare_with_a_study_not_shared_with_everyone(
    researcher, other_researcher
):
    """The rival is a member of this study, not of the owner's other one: the report (which
    the rival reads) says why it did not compare, and holds none of that study's numbers."""
    here = closed_study(researcher, "cats sleep", "major")
    private = closed_study(researcher, "sleep on", "minor")
    private.images.update(name=here.images.get().name)
    private.name = "Private campaign"
    private.save(update_fields=["name"])
    here.members.add(other_researcher)
    rival = Client()
    rival.force_login(other_researcher)
    response = rival.post(
        reverse("study_settings", args=[here.pk]), settings_post(here, compare_study=private.pk)
    )
    assert response.status_code == 302
    section = report_of(here, other_researcher)["compare"]
    assert "shared with every researcher of this study" in section["error"]
    assert "char_f1" not in section and section["name"] == ""
    # The same words as for a study that does not exist: no oracle of which ids do.
    study_update_settings(
        study=here, settings={**here.settings, "compare_study": 10**9}, changed_by=researcher
    )
    missing = report_of(here, researcher)["compare"]
    assert missing["error"].replace(str(10**9), "N") == section["error"].replace(
        str(private.pk), "N"
    )
    page = rival.get(reverse("study_report", args=[here.pk])).content.decode()
    assert "Private campaign" not in page and "Not compared" in page


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared/datasets")
def test_the_wmt23_esa_and_mqm_campaigns_give_the_published_agreement(
    researcher, django_capture_on_commit_callbacks
):
    folder = SHARED / "esa-wmt23"
    batches = ["--batches", str(folder / "batches_wmt23_en-de_esa.json")]
    esa, _ = imported(folder / "240315rc5ESA.scores.csv", "esa-csv", researcher, *batches)
    mqm, _ = imported(folder / "240315rc5MQM.scores.csv", "esa-csv", researcher, *batches)
    assert esa.status == mqm.status == Study.Status.CLOSED
    # Each campaign alone has one annotator per text (but one ESA item): no agreement.
    client = Client()
    client.force_login(researcher)
    response = client.post(
        reverse("study_settings", args=[esa.pk]), settings_post(esa, compare_study=mqm.pk)
    )
    assert response.status_code == 302
    esa.refresh_from_db()
    section = report_of(esa, researcher)["compare"]
    assert section["captions"] >= 2691 and section["name"] == mqm.name
    for key, value in PUBLISHED.items():
        assert round(section[key], 3) == value, (key, section[key])
    page = client.get(reverse("study_report", args=[esa.pk])).content.decode()
    assert f"Agreement with study {mqm.pk}" in page
    for value in PUBLISHED.values():
        assert f"{value:.3f}" in page
    api = client.get(f"/api/studies/{esa.pk}/report/").json()
    assert api["result"]["compare"]["char_f1"] == section["char_f1"]
    job = run_export(esa, researcher, django_capture_on_commit_callbacks, "csv")
    assert datasheet_of(job)["agreement"]["compare"]["matched"] == section["matched"]


def test_people_against_a_judges_suggested_spans_as_worked_by_hand(researcher, tmp_path):
    """alpha: "A brown dog 🐕 sits on a red sofa next to two cats." The judge suggests
    "dog" (major) and "red sofa" (minor), unseen by the annotator, who marks "brown dog"
    (major): 3 shared characters of 9 + 11 marked; 2 of the 3 spans overlap the other side,
    with the same severity too."""
    study = spans_study(researcher, images=1, systems=("alpha",), target=1, completion_captions=1)
    alpha = captions(study)["alpha"]
    suggested = [span(alpha.text, "dog"), span(alpha.text, "red sofa", "minor")]
    import_file(study, write(tmp_path, [{"caption_id": alpha.pk, "spans": suggested}]), "judge")
    judge(worker(study), marked("brown dog", "major"))
    study_close(study=study)
    (row,) = report_of(study, researcher)["suggestion_agreement"]
    assert (row["source"], row["shown"], row["captions"], row["pairs"]) == ("judge", False, 1, 1)
    assert row["char_f1"] == pytest.approx(2 * 3 / (9 + 11))
    assert row["char_f1_severity"] == pytest.approx(2 * 3 / (9 + 11))
    assert row["matched"] == pytest.approx(2 / 3) and row["matched_severity"] == pytest.approx(
        2 / 3
    )
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Agreement with the suggested spans" in page and "did not see them" in page
