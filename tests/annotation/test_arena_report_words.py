"""The arena's report page and settings form in the arena's own words (issue 46, row 6).

A new user read "counted as caught, when ; the exclusion rule" on an arena report: the
catch-trial paragraph shared with THumB and VICR describes controls the arena does not
have, and it called gold battles "catch trials" while the rest of the page and the settings
form said "gold battles". Both pages are read here through the real views, as text.
"""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from annotation.models import Judgment
from annotation.modes.arena.protocol import CATCH
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.factories.arena import arena_study, judge, worker

pytestmark = pytest.mark.django_db

# A clause whose variable part rendered empty: "when ;", "when .", "when ,".
EMPTY_CLAUSE = re.compile(r"\b(when|if|as|than)\s*[;.,:)]")


def page_text(response) -> str:
    """The visible words of a page: tags, scripts and styles dropped, spaces collapsed."""
    body = response.content.decode()
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    body = re.sub(r"<[^>]+>", " ", body)
    return re.sub(r"\s+", " ", html.unescape(body))


@pytest.fixture
def answered_gold(researcher):
    """An arena study in which two workers answered gold battles, its report computed."""
    study = arena_study(
        researcher,
        images=24,
        catch_rate=0.5,
        catch_min_seen=50,
        completion_battles=100,
        bootstrap_rounds=20,
    )
    for person in (worker(study), worker(study)):
        for _ in range(12):
            if judge(person, "a")[0] is None:
                break
    assert Judgment.objects.filter(study=study, item__kind=CATCH).exists()
    job = report_request(study=study, user=researcher)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.message
    return study


def test_the_report_says_gold_battles_and_leaves_no_clause_empty(client, researcher, answered_gold):
    client.force_login(researcher)
    text = page_text(client.get(reverse("study_report", args=[answered_gold.pk])))

    assert not EMPTY_CLAUSE.search(text), EMPTY_CLAUSE.search(text).group(0)
    assert "catch trial" not in text.lower()
    assert "Gold battles" in text
    # Arena gold battles have no controls (a caption against itself has no right answer).
    # ("Length-controlled" and "style control" are the length fit's, and stay.)
    assert not re.search(r"\bcontrols\b", text, re.I)
    # The flag is named in words, not by its internal kind.
    assert "catch_failed" not in text


def test_the_settings_form_says_gold_battles(client, researcher):
    study = arena_study(researcher, images=2, live=False)
    client.force_login(researcher)
    text = page_text(client.get(reverse("study_settings", args=[study.pk])))

    assert "gold battle" in text.lower()
    assert "catch trial" not in text.lower()
