"""Issue 45, row 10: THumB read its scores with ``float()``, so ``precision = "1e0"`` was
stored as 1 (and ``"0_4"`` as 4, ``"+4"`` and ``"4."`` as 4, ``"5e-1"`` as 0.5).

A score is written in digits, as every other number a form or an answer carries (VICR's
rating, a spans offset, the part number): the attacks post such spellings through the real
item page and through the judges' import API, and each must be refused naming the field,
with nothing stored.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Assignment, Caption, JudgeAnswer, Judgment
from tests.factories.thumb import CAPTIONS, form_for, member, thumb_study

pytestmark = pytest.mark.django_db

# Spellings float() reads as a valid score, each with the value it would have been stored as.
SPELLINGS = ["1e0", "4e0", "40e-1", "0_4", "+4", "4.", " 4E0 "]


def thumb_page(make_study, annotator):
    study = thumb_study(make_study, captions={"dog": CAPTIONS["dog"]})
    member(study, annotator)
    client = Client()
    client.force_login(annotator)
    page = client.get(reverse("participate_next", args=[study.public_id]))
    lease = page.context["assignment"]
    url = reverse("participate_submit", args=[study.public_id, lease.token])
    return study, client, url, lease


def test_scores_spelled_with_exponents_or_signs_are_refused_on_the_page(make_study, annotator):
    study, client, url, lease = thumb_page(make_study, annotator)
    key = lease.item.spec["groups"][0]["key"]
    attacks = [(f"{key}-precision", spelling) for spelling in SPELLINGS]
    attacks += [(f"{key}-recall", "3e0"), (f"{key}-conciseness", "5e-1")]
    attacks += [(f"{key}-inclusive", "2e0"), (f"{key}-inclusive", "0_5")]
    # A fluency error with an amount: 1.5 spelled 15e-1.
    fluency = {f"{key}-fluency": "broken_sentence", f"{key}-amount-broken_sentence": "1.5"}
    attacks += [
        (f"{key}-amount-broken_sentence", "15e-1"),
        (f"{key}-amount-broken_sentence", "1_5"),
    ]

    for field, value in attacks:
        body = {**form_for(lease.item), **fluency, field: value}
        page = client.post(url, body)
        assert page.status_code == 400, (field, value)
        named = {p["field"]: p["message"] for p in page.context["field_errors"]}
        assert field in named, (field, value, named)
    assert not Judgment.objects.filter(study=study).exists()

    # Digits are read as before: the same page with 4, 3, 0.5 and an amount of 1.5.
    body = {
        **form_for(lease.item),
        **fluency,
        f"{key}-conciseness": "0.5",
    }
    assert client.post(url, body).status_code in (200, 302)
    stored = Judgment.objects.get(study=study).payload["captions"][key]
    assert (stored["precision"], stored["recall"], stored["conciseness"]) == (4, 3, 0.5)
    assert stored["fluency_errors"] == {"broken_sentence": 1.5}
    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.SUBMITTED


def test_scores_spelled_with_exponents_are_refused_by_the_judges_api(make_study, researcher):
    study = thumb_study(make_study, captions={"dog": CAPTIONS["dog"]})
    captions = list(Caption.objects.filter(study=study).order_by("id"))
    lines = [
        json.dumps({"caption_id": caption.pk, "answer": {"precision": spelling, "recall": "3"}})
        for caption, spelling in zip(captions, ["1e0", "0_4"], strict=True)
    ]
    api = APIClient()
    api.force_login(researcher)
    url = reverse("api_study_judges", args=[study.pk])

    response = api.post(url, {"judge": "sci", "lines": "\n".join(lines)}, format="json")

    assert response.status_code == 400, response.content
    text = json.dumps(response.json())
    assert "line 1: " in text and "line 2: " in text and "precision" in text, text
    assert not JudgeAnswer.objects.exists()
    # Digits pass the same API.
    good = [
        json.dumps({"caption_id": caption.pk, "answer": {"precision": "4", "recall": "3"}})
        for caption in captions
    ]
    response = api.post(url, {"judge": "sci", "lines": "\n".join(good)}, format="json")
    assert response.status_code in (200, 201), response.content
    assert sorted(a.answer["precision"] for a in JudgeAnswer.objects.all()) == [4, 4]
