"""Task guidelines (issue 46, row 5): set by a researcher in the study form, the guidelines
page and the API; shown rendered and safe on the participation pages; the judge's default
prompt built from the same text; the judges' report naming the versions people and judge
were given.

Versions are computed here from the text (SHA-256, first 12 hex digits), not asked of the
code under test.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotation.models import Job, Judge, JudgeAnswer, Judgment, Study
from annotation.modes import get_mode
from annotation.services.judge_runs import judge_prompt_for_run
from annotation.services.participants import crowd_link_token
from tests.factories.arena import arena_study, judge, worker

pytestmark = pytest.mark.django_db

ATTACK = """## Rules

Read **both** captions.

<script>alert("guidelines")</script>
<img src=x onerror="alert(1)">

[Full rules](javascript:alert(document.cookie)) and
[more rules](JaVaScRiPt:alert(2)) and [data](data:text/html;base64,PHNjcmlwdD4=).

![tracker](https://tracker.example/pixel.png)

[The protocol](https://example.org/protocol) · [write to us](mailto:team@example.org)
"""


def version(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:12]


def dialog_of(html: str) -> str:
    start = html.index('<dialog id="guidelines-dialog"')
    return html[start : html.index("</dialog>", start)]


def test_a_rival_members_guidelines_reach_workers_without_script_or_javascript_links(
    client, researcher, other_researcher
):
    """Stored XSS: a researcher the study is shared with writes the guidelines every worker
    of the owner's study reads. Markup is shown as text, dangerous links are not links,
    images are not fetched; the harmless Markdown still renders."""
    study = arena_study(researcher, images=3, catch_rate=0)
    study.members.add(other_researcher)
    client.force_login(other_researcher)
    saved = client.post(reverse("study_guidelines", args=[study.pk]), {"guidelines": ATTACK})
    assert saved.status_code == 302
    client.logout()

    entry = client.get(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=XSS-1")
    intro = client.get(entry["Location"]).content.decode()
    item = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
    dialog = dialog_of(item)
    for html in (intro, dialog):
        assert "<script>alert" not in html and "<img" not in html.split("<main", 1)[-1]
        lowered = html.lower()
        assert 'href="javascript:' not in lowered and "href='javascript:" not in lowered
        assert 'href="data:' not in lowered
        assert 'src="https://tracker.example' not in html
        assert "&lt;script&gt;" in html  # shown as text
        assert '<a href="https://example.org/protocol" rel="noopener noreferrer nofollow">' in html
        assert '<a href="mailto:team@example.org"' in html
        assert "<strong>both</strong>" in html
    assert 'src="https://tracker.example' not in item
    assert get_mode("arena").guidelines(Study.objects.get(pk=study.pk)).version == version(ATTACK)


def test_the_study_form_takes_guidelines_and_the_api_shows_their_version(client, researcher):
    client.force_login(researcher)
    created = client.post(
        reverse("study_new"),
        {"name": "Guided", "mode": "arena", "seed": "0", "settings": "{}", "guidelines": ATTACK},
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    study = Study.objects.get(name="Guided")
    assert study.guidelines == ATTACK.strip()
    shown = client.get(f"/api/studies/{study.pk}/").json()
    assert shown["guidelines"] == ATTACK.strip()
    assert shown["guidelines_version"] == version(ATTACK)


def test_the_api_sets_guidelines_and_refuses_control_characters(client, researcher):
    study = arena_study(researcher, images=2, live=False)
    client.force_login(researcher)
    url = f"/api/studies/{study.pk}/guidelines/"
    default = client.get(url).json()
    assert default["default"] is True and "hallucinat" in default["guidelines"]

    text = "## Ours\n\nPrefer *accurate* captions.\r\n"
    put = client.put(url, {"guidelines": text}, content_type="application/json")
    assert put.status_code == 200, put.content
    assert put.json()["version"] == version(text.replace("\r\n", "\n"))
    assert "<em>accurate</em>" in put.json()["html"]

    refused = client.put(url, {"guidelines": "bad \x00 byte"}, content_type="application/json")
    assert refused.status_code == 400 and "guidelines" in refused.json()

    # Empty: back to the mode's default.
    client.put(url, {"guidelines": ""}, content_type="application/json")
    assert client.get(url).json()["version"] == default["version"]


def test_the_judges_default_prompt_holds_the_guidelines_people_read(researcher):
    study = arena_study(researcher, images=2, catch_rate=0)
    study.guidelines = "## Ours\n\nA caption that invents a dog loses."
    study.save(update_fields=["guidelines"])

    prompt = judge_prompt_for_run(study, researcher)

    assert "A caption that invents a dog loses." in prompt.text
    assert "{caption_a}" in prompt.text and "{caption_b}" in prompt.text
    assert prompt.guidelines_version == version(study.guidelines)


def test_the_judges_report_names_both_versions_and_warns_when_they_differ(client, researcher):
    study = arena_study(researcher, images=3, catch_rate=0)
    people_saw = "## First\n\nPrefer accurate captions."
    study.guidelines = people_saw
    study.save(update_fields=["guidelines"])
    lease, _ = judge(worker(study), "a")
    assert Judgment.objects.get(assignment=lease).guidelines_version == version(people_saw)

    # The researcher rewrites the guidelines after the people answered; the judge's
    # default prompt is built from the new text.
    judge_saw = "## Second\n\nPrefer long captions."
    study.guidelines = judge_saw
    study.save(update_fields=["guidelines"])
    prompt = judge_prompt_for_run(study, researcher)
    model = Judge.objects.create(
        study=study, name="vlm", model="m", prompt_version=prompt.label, kind=Judge.Kind.VLM
    )
    spec = lease.item.spec
    JudgeAnswer.objects.create(
        judge=model,
        item=lease.item,
        caption_id=spec["caption_a"],
        caption_b_id=spec["caption_b"],
        answer={"outcome": "a", "winner": "model_a"},
        scores={"choice": 0.0},
    )

    client.force_login(researcher)
    page = client.get(reverse("study_judges", args=[study.pk])).content.decode()
    report = client.get(f"/api/studies/{study.pk}/judges/?resamples=0").json()

    assert version(people_saw) in page and version(judge_saw) in page
    # The participants' dialog is for participation pages, not a researcher's page.
    assert 'id="guidelines-dialog"' not in page
    assert "did not answer the same question" in page
    assert report["judges"][0]["guidelines_version"] == version(judge_saw)
    assert report["guidelines"]["people"] == [{"version": version(people_saw), "judgments": 1}]
    assert report["guidelines"]["warnings"]


def test_an_exports_datasheet_and_card_carry_the_guidelines(
    client, researcher, django_capture_on_commit_callbacks
):
    study = arena_study(researcher, images=2, catch_rate=0)
    study.guidelines = "## Ours\n\nPrefer accurate captions; a ```fence``` stays text."
    study.save(update_fields=["guidelines"])
    judge(worker(study), "a")
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        asked = client.post(
            f"/api/studies/{study.pk}/exports/",
            {"format": "dataset"},
            content_type="application/json",
        )
    assert asked.status_code == 202, asked.content
    job = Job.objects.get(pk=asked.json()["id"])
    assert job.status == "done", job.error
    with zipfile.ZipFile(Path(settings.CAPEVAL_EXPORT_DIR) / job.result_file) as archive:
        sheet = json.loads(archive.read("datasheet.json"))
        card = archive.read("README.md").decode()
    assert sheet["study"]["guidelines"]["version"] == version(study.guidelines)
    assert sheet["study"]["guidelines"]["text"] == study.guidelines
    assert f"version {version(study.guidelines)}" in card
    # Fenced longer than any run of backticks in the text, so the card shows it as written.
    assert (
        "````markdown\n## Ours\n\nPrefer accurate captions; a ```fence``` stays text.\n````" in card
    )
