"""The error-span mode (issue 24): items, refusals through the views, the report, export.

The attacks post through the real views with a crowd worker's session; every refusal must
name the field and store nothing. The report's numbers are recomputed here independently
(plain loops over the stored payloads, not the report's code).
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict

import pytest
from django.test import Client
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, Judgment
from annotation.services.exports import export_file
from annotation.services.participants import crowd_link_token
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.factories.spans import MODE, TEXTS, judge, spans_study, worker

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------ settings and items


def test_defaults_and_bounds_of_the_settings():
    settings = MODE.clean_settings({})
    assert settings["max_spans"] == 5
    assert settings["allow_overlap"] is False
    assert (settings["major_weight"], settings["minor_weight"]) == (5, 1)
    assert "hallucinated existence" in settings["categories"]
    for bad, field in (
        ({"max_spans": 0}, "max_spans"),
        ({"categories": " , "}, "categories"),
        ({"categories": "object, Object"}, "categories"),
        ({"weight_overrides": "count=3"}, "weight_overrides"),
        ({"minor_weight": -1}, "minor_weight"),
    ):
        with pytest.raises(ServiceError) as refused:
            MODE.clean_settings(bad)
        assert refused.value.field == field


def test_one_item_per_caption_with_its_image_and_system(researcher):
    study = spans_study(researcher, images=3)
    items = list(Item.objects.filter(study=study).order_by("position"))
    captions = list(Caption.objects.filter(study=study).order_by("id"))
    assert [i.spec["caption"] for i in items] == [c.pk for c in captions]
    assert [i.image_id for i in items] == [c.image_id for c in captions]
    assert [i.spec["system"] for i in items] == [c.system for c in captions]
    assert {i.target for i in items} == {3}


# ------------------------------------------------------------------ attacks, through the views


def arrive(client, study, pid):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X"},
    )


def leased(client, study, pid):
    """A crowd worker's client with a caption leased: (client, submit url, caption text)."""
    arrive(client, study, pid)
    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
    token = re.search(r'action="[^"]*/submit/([^/"]+)/', html).group(1)
    lease = Assignment.objects.get(participant__external_id=pid)
    text = Caption.objects.get(pk=lease.item.spec["caption"]).text
    return reverse("participate_submit", args=[study.public_id, token]), text, html


def mark(text, words, severity="major", category="object", **extra):
    start = text.index(words)
    return {
        "start": start,
        "end": start + len(words),
        "text": words,
        "severity": severity,
        "category": category,
        **extra,
    }


def post_marks(client, url, marks, score="60", **fields):
    return client.post(url, {"part": "0", "spans": json.dumps(marks), "score": score, **fields})


def bad_submissions(text):
    """Each attack of the issue's list: (name, marks, score, field, words of the message)."""
    length = len(text)
    emoji = text.index("🐕")
    return [
        (
            "outside",
            [{**mark(text, "dog"), "end": length + 3, "text": None}],
            "50",
            "spans",
            "outside the text",
        ),
        (
            "negative",
            [{**mark(text, "dog"), "start": -1, "text": None}],
            "50",
            "spans",
            "outside the text",
        ),
        (
            "reversed",
            [{**mark(text, "dog"), "start": 9, "end": 5, "text": None}],
            "50",
            "spans",
            "greater than start",
        ),
        ("overlap", [mark(text, "brown dog"), mark(text, "dog 🐕")], "50", "spans", "overlap"),
        # A browser counting UTF-16 units: the emoji is two units, so "sits" is one off.
        (
            "utf16",
            [
                {
                    **mark(text, "sits"),
                    "start": text.index("sits") + 1,
                    "end": text.index("sits") + 5,
                }
            ],
            "50",
            "spans",
            "code points",
        ),
        # Half of the emoji (a lone surrogate) as the span's text, then in a note.
        (
            "surrogate text",
            [
                {
                    "start": emoji,
                    "end": emoji + 1,
                    "text": "\ud83d",
                    "severity": "minor",
                    "category": "object",
                }
            ],
            "50",
            "spans",
            # Refused before the mode reads it (annotation/text.py:clean_answer).
            "half of a surrogate pair",
        ),
        ("surrogate note", [mark(text, "dog", note="x\udc15")], "50", "spans", "surrogate"),
        ("category", [mark(text, "dog", category="colour")], "50", "spans", "categories"),
        ("severity", [mark(text, "dog", severity="critical")], "50", "spans", "severity"),
        ("score high", [], "101", "score", "0 to 100"),
        ("score negative", [], "-5", "score", "0 to 100"),
        ("score text", [], "NaN", "score", "0 to 100"),
        ("score missing", [], "", "score", "0 to 100"),
        (
            "too many",
            [mark(text, w) for w in ("A", "brown", "dog", "sits", "red", "sofa")],
            "50",
            "spans",
            "at most 5",
        ),
        ("not a list", "{}", "50", "spans", "list"),
    ]


def test_bad_spans_are_refused_through_the_view_naming_the_field_and_nothing_stored(researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    client = Client()
    url, text, _ = leased(client, study, "attacker")
    assert text == TEXTS["alpha"]
    for name, marks, score, field, words in bad_submissions(text):
        if isinstance(marks, str):
            page = client.post(url, {"part": "0", "spans": marks, "score": score})
        else:
            page = post_marks(client, url, marks, score)
        body = page.content.decode()
        assert page.status_code == 400, name
        assert words in body, (name, body[body.find('role="alert"') :][:300])
        assert 'role="alert"' in body and "Traceback" not in body, name
        if field == "score":
            assert 'aria-describedby="spans-error"' in body, name
    assert Judgment.objects.filter(study=study).count() == 0
    # The lease is still open: a good answer after the refusals is stored once.
    good = post_marks(client, url, [mark(text, "brown dog", "minor", "attribute")], "70")
    assert good.status_code == 302
    stored = Judgment.objects.get(study=study)
    assert stored.payload["spans"][0]["text"] == "brown dog"
    assert stored.payload["score"] == 70


def test_an_unusable_caption_stands_alone(researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    client = Client()
    url, text, _ = leased(client, study, "unusable")
    page = post_marks(client, url, [mark(text, "dog")], "5", unusable="on")
    assert page.status_code == 400
    assert "unusable" in page.content.decode()
    assert Judgment.objects.count() == 0
    assert post_marks(client, url, [], "5", unusable="on").status_code == 302
    judgment = Judgment.objects.get()
    assert judgment.payload["unusable"] is True
    assert judgment.result["weighted"] == 25


def test_the_page_without_script_posts_numbered_fields_and_an_omission(researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    client = Client()
    url, text, html = leased(client, study, "noscript")
    # The fallback rows and the caption's words with their code-point offsets are on the page.
    assert 'name="span-0-start"' in html and 'name="span-4-end"' in html
    sofa = text.index("sofa")
    assert f'data-start="{sofa}" data-end="{sofa + 4}">sofa</span>' in html
    page = client.post(
        url,
        {
            "part": "0",
            "span-0-start": str(sofa),
            "span-0-end": str(sofa + 4),
            "span-0-severity": "major",
            "span-0-category": "object",
            "span-1-start": "",
            "span-1-end": "",
            "omission-note": "the lamp",
            "omission-severity": "minor",
            "omission-category": "object",
            "score": "42.5",
        },
    )
    assert page.status_code == 302, page.content.decode()[:500]
    payload = Judgment.objects.get().payload
    assert payload["spans"][0] == {
        "start": sofa,
        "end": sofa + 4,
        "severity": "major",
        "category": "object",
        "text": "sofa",
        "note": "",
        "omission": False,
    }
    assert payload["spans"][1]["omission"] is True and payload["spans"][1]["note"] == "the lamp"
    assert payload["score"] == 42.5


def test_a_refused_page_keeps_the_marks_for_the_script(researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    client = Client()
    url, text, _ = leased(client, study, "keeps")
    marks = [mark(text, "dog")]
    page = post_marks(client, url, marks, "500")
    assert page.status_code == 400
    assert "data-marks=" in page.content.decode()
    assert "&quot;dog&quot;" in page.content.decode()


# ------------------------------------------------------------------ the report


def run_report(study, user):
    job = report_request(study=study, user=user)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return job.result


# Each annotator's answer on each system's caption: (marks as (words, severity, category), score)
ANSWERS = {
    ("w1", "alpha"): ([("dog", "major", "object"), ("two cats", "minor", "count")], 40),
    ("w2", "alpha"): ([("brown dog", "major", "object")], 55),
    ("w3", "alpha"): ([("two", "major", "count"), ("red", "minor", "attribute")], 35),
    ("w1", "beta"): ([("blue", "minor", "attribute")], 80),
    ("w2", "beta"): ([], 90),
    ("w3", "beta"): ([("Three cats", "major", "count")], 60),
}


def answer_for(name):
    def answer(lease, text):
        marks, score = ANSWERS[(name, lease.item.spec["system"])]
        return {
            "spans": json.dumps([mark(text, w, s, c) for w, s, c in marks]),
            "score": score,
        }

    return answer


def independent_alpha(values_by_unit):
    """Krippendorff's interval alpha from its definition (coincidences, squared distances)."""
    pairable = [v for v in values_by_unit if len(v) >= 2]
    n = sum(len(v) for v in pairable)
    d_o = (
        sum(
            sum((a - b) ** 2 for i, a in enumerate(v) for j, b in enumerate(v) if i != j)
            / (len(v) - 1)
            for v in pairable
        )
        / n
    )
    every = [x for v in pairable for x in v]
    d_e = sum((a - b) ** 2 for a in every for b in every) / (n * (n - 1))
    return 1 - d_o / d_e


def test_the_report_equals_an_independent_computation(client, researcher):
    study = spans_study(researcher, images=1)
    for name in ("w1", "w2", "w3"):
        participant = worker(study, name)
        for _ in range(2):
            lease, _ = judge(participant, answer_for(name))
            assert lease is not None
    result = run_report(study, researcher)

    weights = {"major": 5, "minor": 1}
    rows = {row["system"]: row for row in result["systems"]}
    for system in ("alpha", "beta"):
        answers = [ANSWERS[(w, system)] for w in ("w1", "w2", "w3")]
        scores = [score for _, score in answers]
        weighted = [sum(weights[s] for _, s, _ in marks) for marks, _ in answers]
        words = 3 * len(TEXTS[system].split())
        assert rows[system]["esa"] == pytest.approx(sum(scores) / 3)
        # One caption per system: resampling captions cannot move the mean.
        assert rows[system]["esa_low"] == pytest.approx(sum(scores) / 3)
        assert rows[system]["mqm_per_caption"] == pytest.approx(sum(weighted) / 3)
        assert rows[system]["mqm_per_100_words"] == pytest.approx(100 * sum(weighted) / words)
    # alpha: 5+1, 5, 5+1 -> 17/3; beta: 1, 0, 5 -> 2: beta first (fewer errors).
    assert [row["system"] for row in result["systems"]] == ["beta", "alpha"]

    counts = {row["category"]: (row["minor"], row["major"]) for row in result["counts"]}
    assert counts == {"object": (0, 2), "count": (1, 2), "attribute": (2, 0)}

    # Character F1 by hand, pooled over the three pairs of each caption.
    def chars(system, name):
        text = TEXTS[system]
        marked = {}
        for w, s, _ in ANSWERS[(name, system)][0]:
            start = text.index(w)
            for i in range(start, start + len(w)):
                marked[i] = s
        return marked

    inter = inter_sev = total = 0
    for system in ("alpha", "beta"):
        for a, b in (("w1", "w2"), ("w1", "w3"), ("w2", "w3")):
            ca, cb = chars(system, a), chars(system, b)
            shared = set(ca) & set(cb)
            inter += len(shared)
            inter_sev += sum(1 for i in shared if ca[i] == cb[i])
            total += len(ca) + len(cb)
    agreement = result["span_agreement"]
    assert agreement["char_f1"] == pytest.approx(2 * inter / total)
    assert agreement["char_f1_severity"] == pytest.approx(2 * inter_sev / total)
    assert agreement["pairs"] == 6
    expected_alpha = independent_alpha(
        [[ANSWERS[(w, s)][1] for w in ("w1", "w2", "w3")] for s in ("alpha", "beta")]
    )
    assert result["score_alpha"] == pytest.approx(expected_alpha)

    # The adjudication view shows every annotator's spans of a caption, highlighted.
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk]))
    figure = client.get(reverse("report_figure", args=[study.pk, "errors", "svg"]))
    html = page.content.decode()
    assert page.status_code == 200
    assert figure.status_code == 200 and b"<svg" in figure.content
    assert '<mark class="spans-major">brown dog</mark>' in html
    assert '<mark class="spans-major">Three cats</mark>' in html
    assert "Character-level F1" in html


def test_the_export_has_one_row_per_judged_caption_with_its_spans(researcher, tmp_path):
    study = spans_study(researcher, images=1)
    for name in ("w1", "w3"):
        participant = worker(study, name)
        for _ in range(2):
            judge(participant, answer_for(name))
    summary = export_file(study=study, path=tmp_path / "out", export_format="csv")
    with open(summary.path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    by_key = defaultdict(list)
    for row in rows:
        by_key[row["system"]].append(row)
    for row in rows:
        marks = json.loads(row["spans"])
        caption = row["caption"]
        for m in marks:
            assert caption[m["start"] : m["end"]] == m["text"]
        expected = sum(5 if m["severity"] == "major" else 1 for m in marks)
        assert float(row["weighted"]) == expected
        assert int(row["major"]) == sum(m["severity"] == "major" for m in marks)


@pytest.mark.parametrize(
    "page", ["study_detail", "study_dashboard", "study_settings", "study_metrics", "study_plan"]
)
def test_the_researcher_pages_of_a_spans_study_render(client, researcher, page):
    study = spans_study(researcher, images=1)
    for name in ("w1", "w2"):
        judge(worker(study, name), answer_for(name))
    client.force_login(researcher)
    answer = client.get(reverse(page, args=[study.pk]))
    assert answer.status_code == 200
    if page == "study_dashboard":
        html = answer.content.decode()
        assert "Captions to mark" in html
        assert "An answer is one participant finishing one caption to mark" in html
        assert "This mode has no check of the participants." in html


def test_the_new_study_page_offers_the_spans_mode(client, researcher):
    client.force_login(researcher)
    html = client.get(reverse("study_new")).content.decode()
    assert 'value="spans"' in html and "Error spans (ESA / MQM)" in html


def test_an_imported_item_without_an_image_shows_its_source_text(researcher):
    study = spans_study(researcher, systems=("alpha",), images=1)
    item = Item.objects.get(study=study)
    item.spec = {**item.spec, "source": "Ein brauner Hund."}
    item.image.display = ""
    item.image.save()
    item.save()
    client = Client()
    _, _, html = leased(client, study, "reader")
    assert "Source text (this item has no image)" in html
    assert "Ein brauner Hund." in html


def test_category_weights_apply_to_the_stored_weighted_errors(researcher):
    study = spans_study(
        researcher, systems=("alpha",), images=1, weight_overrides="count/major=10; object/*=0.5"
    )

    def answer(lease, text):
        marks = [mark(text, "dog", "major", "object"), mark(text, "two", "major", "count")]
        marks.append(mark(text, "red", "minor", "attribute"))
        return {"spans": json.dumps(marks), "score": 20}

    _, outcome = judge(worker(study), answer)
    # object: 0.5 whatever the severity; count major: 10; attribute minor: the default 1.
    assert outcome.judgment.result["weighted"] == pytest.approx(11.5)
    config = MODE.settings(study)
    assert config.weights().weight("Fluency/Punctuation", "minor") == 1.0
    mqm = MODE.clean_settings({"weight_overrides": "Fluency/Punctuation/minor=0.1"})
    assert mqm["weight_overrides"] == "Fluency/Punctuation/minor=0.1"
