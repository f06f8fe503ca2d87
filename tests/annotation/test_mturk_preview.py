"""The MTurk preview (issue 46, row 14), through the real views: a worker browsing a HIT
(``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``, no worker id) saw the researcher's preview
banner with empty links and no task. Now: the intro for workers with a link to one example
task, read-only, and nothing recorded (no participant, lease or judgment)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Assignment, Caption, Item, Judgment, Participant
from annotation.services.participants import MTURK_PREVIEW, crowd_link_token
from tests.factories.arena import arena_study
from tests.factories.spans import spans_study

pytestmark = pytest.mark.django_db

PREVIEW = {
    "assignmentId": MTURK_PREVIEW,
    "hitId": "HIT-ROW14",
    "turkSubmitTo": "https://workersandbox.mturk.com",
}


def recorded(study) -> tuple[int, int, int]:
    return (
        Participant.objects.filter(study=study).count(),
        Assignment.objects.filter(item__study=study).count(),
        Judgment.objects.filter(item__study=study).count(),
    )


@pytest.fixture(params=["arena", "spans"])
def study(request, researcher):
    if request.param == "arena":
        return arena_study(researcher, images=3)
    return spans_study(researcher, images=2)


def test_the_preview_is_the_workers_intro_with_an_example_task(client, study):
    page = client.get(reverse("crowd_entry", args=[crowd_link_token(study)]), PREVIEW)

    html = page.content.decode()
    assert page.status_code == 200
    # Not the researcher's banner (whose links were empty for a worker).
    assert 'id="preview-banner"' not in html
    assert 'id="worker-preview"' in html and "Accept the task to begin" in html
    # No start button: a preview cannot start the study.
    assert reverse("participate_next", args=[study.public_id]) not in html
    example = reverse("crowd_example", args=[crowd_link_token(study)])
    assert f'href="{example}?' in html
    assert "hitId=HIT-ROW14" in html
    # MTurk may frame it, nobody else.
    assert "X-Frame-Options" not in page.headers
    assert recorded(study) == (0, 0, 0)


def test_the_example_task_shows_the_first_item_read_only_and_records_nothing(client, study):
    url = reverse("crowd_example", args=[crowd_link_token(study)])

    page = client.get(url, PREVIEW)

    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="preview-banner"' not in html and 'id="worker-preview"' in html
    # The item a new worker is served first, with its captions.
    first = Item.objects.filter(study=study).order_by("position", "id").first()
    ids = [value for key, value in first.spec.items() if key.startswith("caption")]
    texts = Caption.objects.filter(pk__in=ids).values_list("text", flat=True)
    assert texts and all(text in html for text in texts)
    # Its form posts back to the example, never to a submission.
    assert f'action="{url}?' in html and "/submit/" not in html
    assert "X-Frame-Options" not in page.headers
    assert recorded(study) == (0, 0, 0)

    posted = client.post(f"{url}?{'&'.join(f'{k}={v}' for k, v in PREVIEW.items())}", {})

    assert posted.status_code == 200
    assert "Not recorded" in posted.content.decode()
    assert recorded(study) == (0, 0, 0)


def test_the_example_is_only_for_previews(client, study):
    url = reverse("crowd_example", args=[crowd_link_token(study)])

    page = client.get(url, {"workerId": "W1", "assignmentId": "A1", "hitId": "H"})

    assert page.status_code == 400
    assert recorded(study) == (0, 0, 0)
