"""Issue 26, rows 11, 16 and 21 (parts): the study page and the small researcher pages.

Through the real views (Django test client). Each test was first seen failing on the code
before its fix: a closed study's estimated end, a draft's empty dashboard sections, the
``/api/`` 404, the empty 405 of GET on the people URL, and the missing favicon.
"""

import re
from html import unescape

import pytest
from django.urls import reverse

from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_close
from tests.factories.core import crowd_participant, rating_study

pytestmark = pytest.mark.django_db


def text_of(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def answer(participant, rating=3):
    lease = assignment_next(participant=participant)
    assert lease is not None
    judgment_submit(participant=participant, token=lease.token, data={"rating": rating})


# --- Row 11: a closed study says it is closed and gives no estimate -------------------------


def test_a_closed_study_shows_no_estimated_end(client, researcher):
    # 4 captions, target 2: 8 answers needed; 2 given this hour, so a live study has an ETA.
    study = rating_study(researcher, captions=4, target=2)
    answer(crowd_participant(study, "w1"))
    answer(crowd_participant(study, "w2"))
    client.force_login(researcher)
    live = text_of(client.get(reverse("study_detail", args=[study.pk])).content.decode())
    assert "the remaining 6 answers take" in live  # the estimate the live study has

    study_close(study=study)
    closed = text_of(client.get(reverse("study_detail", args=[study.pk])).content.decode())
    assert "remaining 6 answers take" not in closed
    assert "Estimated end closed" in closed
    assert "The study is closed, so it has no estimated end" in closed
