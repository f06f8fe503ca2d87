"""Replies no judge run may choke on (issue 45, the judge's side of rows 7 and 8), through
the judges page's run button, against a loopback chat-completions server.

A NUL in a reply (the character itself, or ``\\u0000`` in a JSON string of the answer)
reached the tables: PostgreSQL refuses it in ``text`` and ``jsonb`` (a ``DataError`` that
failed the whole run, every answer lost), SQLite stored it silently. A reply nested ten
thousand levels deep made Python's JSON parser raise ``RecursionError``, which failed the
whole run too. Each must be a failure of its own question, with a reason that says what
was wrong, while every other question of the run is answered and stored; nothing shows a
traceback. Every mode that takes a judge is attacked (the modes registry), so a mode added
later is covered or this module fails for want of a study of it.
"""

from __future__ import annotations

import json
import logging
import threading

import pytest
from django.db import connection

from annotation.models import Caption, Job, JudgeAnswer, JudgeCacheEntry, JudgeFailure
from annotation.modes import get_mode
from annotation.registry import MODES
from tests.annotation.test_judge_endpoint_attacks import _form, _save_and_run, _shown
from tests.annotation.test_judge_runs import expected_units, make, write_images
from tests.factories.judge_server import KEY, fake_judge, judge_on_loopback  # noqa: F401
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("judge_on_loopback")]

#: Every mode that takes a judge.
JUDGED = sorted(name for name, mode in MODES.items() if mode.judging.unit)

#: A usable answer per mode, as the JSON object its default prompt asks for.
ANSWERS = {
    "thumb": {"precision": 4, "recall": 3},
    "vicr": {"rating": 4},
    "humanr": {"raw": 3},
    "arena": {"outcome": "a"},
    "spans": {"spans": [], "score": 80},
    "context": {"overall": 4, "imaginability": 3, "relevance": 5, "irrelevance": 2, "accuracy": 4},
}

DEPTH = 10_000
#: What a traceback or an exception's own words would show.
PYTHON_ERRORS = ("Traceback", "RecursionError", "DataError", "maximum recursion depth")


def _with_nul_note(mode: str, study) -> dict:
    """The mode's answer with a note holding NUL, where the mode keeps notes (an omission
    mark of spans: stored in the answer's ``jsonb``), else beside the answer."""
    if mode == "spans":
        category = (get_mode("spans").settings(study).category_list() or ("other",))[0]
        mark = {"omission": True, "severity": "major", "category": category,
                "note": "the second dog\u0000 is missing"}  # fmt: skip
        return {"spans": [mark], "score": 40}
    return {**ANSWERS[mode], "note": "looks right\u0000"}


def _hostile(mode: str, study, kind: str) -> str:
    if kind == "NUL escaped in a field":
        return json.dumps(_with_nul_note(mode, study))  # "\\u0000" in the reply's text
    if kind == "NUL character":
        return json.dumps(ANSWERS[mode]) + "\u0000"  # the object parses; the text holds NUL
    assert kind == "deep"
    return '{"answer": ' + "[" * DEPTH + "]" * DEPTH + "}"


def _stored_nul() -> list[str]:
    """Each stored value holding NUL: the character in text, ``\\u0000`` in JSON text."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            if not table.startswith("annotation_"):
                continue
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                found.extend(f"{table}: {value!r:.80}" for value in row
                             if isinstance(value, str) and "\x00" in value)  # fmt: skip
    for answer in JudgeAnswer.objects.all():
        if "\\u0000" in json.dumps(answer.answer):
            found.append(f"answer {answer.pk}: {answer.answer!r:.80}")
    for job in Job.objects.all():
        if "\\u0000" in json.dumps(job.result):
            found.append(f"job {job.pk}'s result")
    return found


def _run_with_one_hostile_reply(mode, kind, researcher, client, make_study):
    """Run the judge through the page; the first question asked gets the hostile reply,
    every other one a usable answer. Returns the study, its job, the hostile reply and
    the prompt it answered."""
    study = make(mode, researcher, make_study)
    write_images(study)
    client.force_login(researcher)
    reply = _hostile(mode, study, kind)
    lock = threading.Lock()
    hit: list[str] = []

    def script(prompt, n):
        with lock:
            if not hit:
                hit.append(prompt)
                return reply
        return json.dumps(ANSWERS[mode])

    with fake_judge(script) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, KEY))
        assert server.total == len(expected_units(study))
    job.refresh_from_db()
    return study, job, reply, hit[0]


def _assert_one_failure_and_the_rest_answered(study, job, prompt, reason, client, caplog):
    assert job.status == Job.Status.DONE, job.error
    assert job.error == ""
    units = expected_units(study)
    assert job.result["failed"] == 1 and job.result["answered"] == len(units) - 1
    failure = JudgeFailure.objects.get(job=job)
    texts = dict(Caption.objects.filter(study=study).values_list("pk", "text"))
    assert all(texts[c] in prompt for c in (failure.caption_id, failure.caption_b_id) if c)
    assert failure.error.startswith("unusable reply: ") and reason in failure.error
    answered = set(JudgeAnswer.objects.values_list("caption_id", "caption_b_id"))
    assert answered == units - {(failure.caption_id, failure.caption_b_id)}
    # Not cached: a rerun asks the failed question again.
    assert JudgeCacheEntry.objects.count() == len(units) - 1
    assert _stored_nul() == []
    shown = _shown(client, study, job)
    assert reason in shown["judges page"] and reason in shown["runs API"]
    for name, text in {**shown, "log": caplog.text}.items():
        assert not [word for word in PYTHON_ERRORS if word in text], name
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    return failure


@pytest.mark.parametrize("kind", ["NUL escaped in a field", "NUL character"])
@pytest.mark.parametrize("mode", JUDGED)
def test_a_nul_in_a_reply_fails_its_question_only(
    mode, kind, researcher, client, make_study, caplog
):
    caplog.set_level(logging.DEBUG)
    study, job, reply, prompt = _run_with_one_hostile_reply(
        mode, kind, researcher, client, make_study
    )
    failure = _assert_one_failure_and_the_rest_answered(
        study, job, prompt, "U+0000", client, caplog
    )
    # The raw reply is kept for the researcher to read, the NUL written as an escape.
    assert "\x00" not in failure.raw_reply
    assert failure.raw_reply.replace("\\x00", "\x00") == reply


@pytest.mark.parametrize("mode", JUDGED)
def test_a_reply_nested_ten_thousand_deep_fails_its_question_only(
    mode, researcher, client, make_study, caplog
):
    caplog.set_level(logging.DEBUG)
    study, job, reply, prompt = _run_with_one_hostile_reply(
        mode, "deep", researcher, client, make_study
    )
    failure = _assert_one_failure_and_the_rest_answered(
        study, job, prompt, "nested too deeply", client, caplog
    )
    assert failure.raw_reply == reply[:20_000]  # kept as far as a raw reply is


def test_a_response_nested_ten_thousand_deep_fails_its_question_only(researcher, client, caplog):
    """The chat-completions response around the reply, nested deep: that question's
    response is malformed (its body is not shown), and the others are answered."""
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=3)
    write_images(study)
    client.force_login(researcher)
    deep = ('{"choices": ' + "[" * DEPTH + "]" * DEPTH + "}").encode()
    lock = threading.Lock()
    hit: list[str] = []

    def script(prompt, n):
        with lock:
            if not hit:
                hit.append(prompt)
                return (200, deep)
        return "4"

    with fake_judge(script) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, KEY))
        assert server.total == 3
    assert job.status == Job.Status.DONE, job.error
    assert job.result["answered"] == 2 and job.result["failed"] == 1
    failure = JudgeFailure.objects.get(job=job)
    assert "malformed response" in failure.error and failure.raw_reply == ""
    for name, text in {**_shown(client, study, job), "log": caplog.text}.items():
        assert not [word for word in PYTHON_ERRORS if word in text], name


def test_a_server_error_or_reply_with_other_unstorable_text_fails_its_question_only(
    researcher, client, caplog
):
    """Half a surrogate pair in a reply (no UTF-8 database stores it), and a NUL in a
    chat-completions server's error message (which the failure quotes)."""
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=3)
    write_images(study)
    client.force_login(researcher)
    texts = [c.text for c in Caption.objects.filter(study=study, purpose="study").order_by("id")]

    def script(prompt, n):
        if texts[0] in prompt:
            return (400, {"error": {"message": "bad\u0000request"}})
        if texts[1] in prompt:
            return '{"rating": 4, "note": "a dog \ud83d"}'  # the first half of a pair
        return "4"

    with fake_judge(script) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, KEY))
        assert server.total == 3
    assert job.status == Job.Status.DONE, job.error
    assert job.result["answered"] == 1 and job.result["failed"] == 2
    failures = {f.caption.text: f for f in JudgeFailure.objects.filter(job=job)}
    quoted, half = failures[texts[0]], failures[texts[1]]
    assert quoted.error.startswith("HTTP 400") and "bad\\x00request" in quoted.error
    assert half.error.startswith("unusable reply: ") and "U+D83D" in half.error
    assert half.raw_reply == '{"rating": 4, "note": "a dog \\ud83d"}'  # kept, escaped
    assert _stored_nul() == []
    for name, text in {**_shown(client, study, job), "log": caplog.text}.items():
        assert not [word for word in PYTHON_ERRORS if word in text], name
