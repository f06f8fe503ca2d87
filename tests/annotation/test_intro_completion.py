"""Every mode's intro tells a crowd arrival what earns the completion code (issue 46,
row 20): the number of the study's own setting and what it counts, before any work.

The arena's and the spans' intros said nothing of it; a Prolific worker could not tell
how much work the code needed. Each study here sets the count to a number no default
has, so the page can only show it by reading the study.
"""

from __future__ import annotations

import html as html_lib
import re

import pytest

from annotation.models import Study
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_create
from tests.factories.arena import arena_study

pytestmark = pytest.mark.django_db

# (mode, the setting of the count, its value, what the count is of)
CASES = [
    ("arena", {"completion_battles": 13, "catch_rate": 0}, "13 battles"),
    ("spans", {"completion_captions": 13}, "13 captions"),
    ("thumb", {"completion_images": 13}, "13 images"),
    ("vicr", {"completion_game_ratings": 13}, "13 game ratings"),
    ("humanr", {"completion_groups": 3}, "3 groups"),
]


def _live(owner, mode: str, chosen: dict) -> Study:
    """A live study of ``mode``; the arena's with enough battles for its count (the count a
    worker is shown is never more than one worker can be served)."""
    if mode == "arena":
        return arena_study(owner, images=16, **chosen)
    study = study_create(owner=owner, name="Intro", mode=mode, settings=chosen)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    return study


def _words(html: str) -> str:
    return html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


@pytest.mark.parametrize(("mode", "chosen", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_crowd_arrivals_intro_names_what_earns_the_code(client, researcher, mode, chosen,
                                                          expected):  # fmt: skip
    study = _live(researcher, mode, chosen)
    entry = client.get(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=INTRO-{mode}")
    assert entry.status_code == 302, entry.content[:300]
    page = client.get(entry["Location"])
    assert page.status_code == 200
    words = _words(page.content.decode())
    assert re.search(rf"completion code[^.]*\b{expected}\b", words), words[:1500]


@pytest.mark.parametrize(("mode", "chosen", "expected"), CASES, ids=[c[0] for c in CASES])
def test_an_mturk_preview_names_what_earns_the_code(client, researcher, mode, chosen, expected):
    study = _live(researcher, mode, chosen)
    page = client.get(f"/p/{crowd_link_token(study)}/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE")
    assert page.status_code == 200
    assert re.search(rf"completion code[^.]*\b{expected}\b", _words(page.content.decode()))
