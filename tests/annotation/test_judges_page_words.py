"""The judges page as a new user reads it (issue 46, row 17).

Seen: forms drawn unstyled (Django's ``as_p``, unlike the study form), "not measured:
first_order is empty" (a statistic's argument name), no example of a local endpoint or a
word on keys for local servers, and the answer format only as a path to a doc. Read here
through the real view, as HTML and as text.
"""

from __future__ import annotations

import html
import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from annotation.models import Caption, Study
from annotation.services.judges import judge_import

pytestmark = pytest.mark.django_db

SYSTEMS = {"alpha": "a short one", "beta": "a somewhat longer caption here"}


def page_text(body: str) -> str:
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


@pytest.fixture
def arena_with_judge(researcher, tmp_path) -> Study:
    """An imported arena log and a judge that answered each pair once (no swap)."""
    battles = [
        {"model_a": "alpha", "model_b": "beta", "winner": winner, "judge": person,
         "caption_a": f"{SYSTEMS['alpha']} {image}", "caption_b": f"{SYSTEMS['beta']} {image}",
         "image": image}
        for image in ("i1", "i2", "i3")
        for person, winner in (("p1", "model_a"), ("p2", "model_b"))
    ]  # fmt: skip
    log = tmp_path / "arena.jsonl"
    log.write_text("\n".join(json.dumps(b) for b in battles) + "\n")
    call_command(
        "import_ratings", str(log), "--format", "battles", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    study = Study.objects.get(owner=researcher)
    ids = {(c.image.name, c.system): c.pk for c in Caption.objects.filter(study=study)}
    lines = [
        {"caption_a": ids[(i, "alpha")], "caption_b": ids[(i, "beta")], "answer": {"outcome": "a"}}
        for i in ("i1", "i2", "i3")
    ]
    judge_import(study=study, text="\n".join(json.dumps(x) for x in lines), name="one-way")
    return study


def judges_page(client, researcher, study) -> str:
    client.force_login(researcher)
    response = client.get(reverse("study_judges", args=[study.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_statistic_not_measured_says_why_in_plain_words(client, researcher, arena_with_judge):
    text = page_text(judges_page(client, researcher, arena_with_judge))

    assert "Position bias" in text
    # No argument name of the statistics (snake_case) after "not measured:".
    reasons = re.findall(r"not measured: ([^.;]*)", text)
    assert reasons, text[-2000:]
    assert not [r for r in reasons if re.search(r"\b[a-z]+_[a-z_]+\b", r)], reasons
    assert "asked both ways" in text


@override_settings(CAPEVAL_JUDGE_ALLOWED_HOSTS=["127.0.0.1", "localhost"])
def test_the_endpoint_form_gives_a_local_example_and_says_keys_are_optional_there(
    client, researcher, arena_with_judge
):
    body = judges_page(client, researcher, arena_with_judge)
    text = page_text(body)

    assert "http://localhost:11434/v1" in text
    assert re.search(r"local server[^.]*no (API )?key", text, re.I), text


def test_the_answer_format_is_on_the_page_for_the_study_s_unit(
    client, researcher, arena_with_judge
):
    text = page_text(judges_page(client, researcher, arena_with_judge))

    # A pair mode: an example line keyed by the two captions, with the mode's answer.
    assert '"caption_a":' in text and '"caption_b":' in text and '"answer":' in text
    assert '"outcome":' in text


def test_the_forms_are_laid_out_like_the_study_form(client, researcher, arena_with_judge):
    body = judges_page(client, researcher, arena_with_judge)

    # Django's as_p output (a bare <p><label>) is gone: each field is a .field block.
    assert not re.search(r"<p>\s*<label", body)
    for field in ("endpoint_base_url", "endpoint_model", "prompt_text", "id_judge", "id_file"):
        block = re.search(rf'<div class="field[^"]*">\s*<label for="{field}"', body)
        assert block, field
