"""Attacks on a study's judge endpoint (issue 45, rows 2, 3 and 9), through the real views.

Row 2: an endpoint that echoes the API key (in an error body, in a reply, URL-encoded or
base64-encoded, at every offset across the 200-character excerpt's cut) must not get any
8 characters of it onto the judges page, the runs API, the job API, a log line or any
table. Row 3: an endpoint is where the server connects on a researcher's word, so
loopback, private, link-local and reserved addresses (literal, spelt oddly, or behind a
DNS name) are refused unless the deployment lists them in
``CAPEVAL_JUDGE_ALLOWED_HOSTS``; an allowed endpoint that is not a chat-completions server
shows no body excerpt, and a closed port reads the same as a filtered one. Row 9: a reply
has a total deadline per attempt and a size cap.

The servers are real HTTP servers on 127.0.0.1 (``tests/factories/judge_server.py`` and
the small raw ones below), allowed by the test through the setting, as a deployment with a
local vLLM would; the attacks on addresses run with the setting empty, as deployed.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import threading
from urllib.parse import quote, quote_plus

import pytest
from django.db import connection
from django.test import TestCase
from django.urls import reverse

from annotation.models import Job, JudgeFailure
from tests.annotation.test_judge_runs import write_images
from tests.factories.judge_server import KEY, fake_judge
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

#: A key whose URL-encoded form differs from it (``+``, ``/``, ``=``, ``&``, ``%``).
ODD_KEY = "sk-live_Ab+cD/eF=gH&iJ%kL0123456789wxyz"


def _form(url: str, key: str = "", **numbers: str) -> dict[str, str]:
    values = {"concurrency": "8", "timeout": "5", "max_retries": "0", "repeats": "1"}
    values.update(numbers)
    return {
        "name": "toy-vlm",
        "base_url": url,
        "model": "judge-7b",
        "api_key": key,
        "temperature": "0",
        "price_prompt_per_1k": "0",
        "price_completion_per_1k": "0",
        **values,
    }


def _save_and_run(client, study, form):
    """Save the settings through the page and press "Run the judge"; the settings answer
    and the run's job (None when the settings were refused)."""
    saved = client.post(reverse("study_judge_settings", args=[study.pk]), form)
    if saved.status_code != 302:
        return saved, None
    with TestCase.captureOnCommitCallbacks(execute=True):
        client.post(reverse("study_judge_run", args=[study.pk]))
    job = Job.objects.filter(study=study, kind=Job.Kind.JUDGE).order_by("-pk").first()
    return saved, job


def _shown(client, study, job) -> dict[str, str]:
    """Everything a study member is shown about the run: the judges page, the run's
    progress fragment, the runs API and the job API."""
    urls = {
        "judges page": reverse("study_judges", args=[study.pk]),
        "run fragment": reverse("study_judge_job", args=[study.pk, job.pk]),
        "runs API": reverse("api_study_judge_runs", args=[study.pk]),
        "job API": reverse("job_status", args=[job.pk]),
    }
    out = {}
    for name, url in urls.items():
        response = client.get(url)
        assert response.status_code == 200, name
        out[name] = response.content.decode()
    return out


def _tables() -> str:
    """Every row of every table, as text."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(rows)


def _encoded_forms(secret: str) -> list[str]:
    """The key as a server may echo it: as is, URL-encoded, JSON-escaped, and base64 (on
    its own and inside ``user:key``, the Basic scheme's shape: another alignment), the
    base64 forms without their last group (which depends on what follows the key)."""
    raw = secret.encode()
    b64 = [
        base64.b64encode(raw).decode()[:-4],
        base64.urlsafe_b64encode(raw).decode()[:-4],
        base64.b64encode(b"user:" + raw).decode()[8:-4],
    ]
    return [secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1], *b64]


def _leaks(secret: str, text: str) -> list[str]:
    """Each 8-character piece of any form of ``secret`` that ``text`` holds."""
    pieces = {form[i : i + 8] for form in _encoded_forms(secret) for i in range(len(form) - 7)}
    return sorted(piece for piece in pieces if piece in text)


# ------------------------------------------------------------------ row 2: an echoed key


@pytest.fixture
def loopback(settings):
    """The deployment's allow-list naming the loopback, where the test servers listen."""
    settings.CAPEVAL_JUDGE_ALLOWED_HOSTS = ["127.0.0.1"]


#: Padding before the echoed key: with the body's JSON around it, the key starts at every
#: offset from well before the 200-character excerpt's cut to past it, whether the
#: excerpt is cut from the body or from the error message inside it.
PADS = range(120, 201)


def test_a_key_echoed_at_every_offset_across_the_cut_never_shows(
    loopback, researcher, client, caplog
):
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=9)  # 9 pairs x 9 repeats: one question per pad
    write_images(study)
    client.force_login(researcher)
    pads = iter(PADS)
    lock = threading.Lock()

    def echo(prompt, n):
        with lock:
            pad = next(pads)
        return (400, {"error": {"message": "x" * pad + KEY + " is not allowed here"}})

    with fake_judge(echo) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, KEY, repeats="9"))
        assert server.total == len(PADS)
    assert job.status == Job.Status.DONE, job.error
    assert JudgeFailure.objects.filter(job=job).count() == len(PADS)
    shown = _shown(client, study, job)
    assert "HTTP 400" in shown["judges page"]  # the failures are listed there
    for name, text in {**shown, "log": caplog.text, "tables": _tables()}.items():
        assert _leaks(KEY, text) == [], f"the {name} shows part of the key"


def test_a_key_echoed_in_replies_and_encoded_never_shows(loopback, researcher, client, caplog):
    caplog.set_level(logging.DEBUG)
    study = vicr_study(researcher, game=8)
    write_images(study)
    client.force_login(researcher)
    b64 = base64.b64encode(ODD_KEY.encode()).decode()
    basic = base64.b64encode(b"user:" + ODD_KEY.encode()).decode()
    replies = itertools.cycle(
        [
            '{"rating": 4, "note": "' + ODD_KEY + '"}',  # may parse: raw reply stored
            "4",  # a clean answer beside them
            "Your key is " + ODD_KEY,  # unusable: raw reply kept on the failure
            "key=" + quote(ODD_KEY, safe="") + " and " + quote_plus(ODD_KEY),
            "Authorization: Bearer " + b64 + " / Basic " + basic,
            "y" * 19_990 + ODD_KEY,  # straddles the 20,000 characters kept of a raw reply
            (400, {"error": {"message": "bad key " + b64}}),
            (422, {"detail": [{"msg": "x" * 150 + quote(ODD_KEY, safe="")}]}),
        ]
    )
    lock = threading.Lock()

    def echo(prompt, n):
        with lock:
            return next(replies)

    with fake_judge(echo, key=ODD_KEY) as server:
        _saved, job = _save_and_run(client, study, _form(server.url, ODD_KEY))
        assert server.total == 8
    assert job.status == Job.Status.DONE, job.error
    assert job.result["answered"] >= 1 and job.result["failed"] >= 5
    shown = _shown(client, study, job)
    for name, text in {**shown, "log": caplog.text, "tables": _tables()}.items():
        assert _leaks(ODD_KEY, text) == [], f"the {name} shows part of the key"
