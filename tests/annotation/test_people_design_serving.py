"""What a sampling design does to the rest of the platform (issue 40): crowd workers are
never served an item the design left out (through the real participate views, and the
assignment service until the study is full), the dashboard's progress and the capacity
bound do not count left-out items as missing work, and the export carries each
judgment's probability and design.
"""

from __future__ import annotations

import json
import re

import pytest
from django.db.models import IntegerField, Value
from django.test import Client
from django.urls import reverse

from annotation.dashboard import study_progress
from annotation.models import Assignment, Item, Judgment, Participant
from annotation.modes import get_mode
from annotation.modes.capacity import unit_shortfall
from annotation.services.exports import table_columns
from annotation.services.judges import judge_import
from annotation.services.participants import crowd_link_token
from annotation.services.people_design import people_design_apply
from tests.annotation.test_exports import read_table
from tests.factories.spans import judge, spans_study, worker

pytestmark = pytest.mark.django_db


def designed(researcher, *, images=6, share=0.5, target=2, **settings):
    """A live spans study with a uniform design applied (a judge on every caption)."""
    study = spans_study(
        researcher,
        images=images,
        people_design="uniform",
        people_share=share,
        target=target,
        completion_captions=1,
        **settings,
    )
    rows = [
        {"item_id": item.pk, "answer": {"spans": [], "score": 50}}
        for item in Item.objects.filter(study=study)
    ]
    judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name="judge")
    people_design_apply(study=study, user=researcher)
    left_out = set(Item.objects.filter(study=study, target=0).values_list("pk", flat=True))
    kept = set(Item.objects.filter(study=study, target__gt=0).values_list("pk", flat=True))
    assert left_out and kept, "the seed draws some of each"
    return study, kept, left_out


def answer(lease, text):
    return {"spans": "[]", "score": 70}


def test_workers_asking_again_and_again_are_never_served_a_left_out_item(researcher):
    """Through the assignment service until nothing is left: every kept item reaches its
    target, no left-out item is ever leased."""
    study, kept, left_out = designed(researcher)
    served = []
    for number in range(20):
        participant = worker(study, f"w{number}")
        for _ in range(len(kept) + len(left_out) + 2):  # more asks than there are items
            lease, _ = judge(participant, answer)
            if lease is None:
                break
            served.append(lease.item_id)
    assert served and not set(served) & left_out
    assert not Assignment.objects.filter(item_id__in=left_out).exists()
    for item in Item.objects.filter(study=study):
        assert item.judgment_count == (2 if item.pk in kept else 0)


def test_the_participate_views_never_serve_a_left_out_item(researcher):
    study, kept, left_out = designed(researcher, images=4, target=1)
    seen = []
    for number in range(len(kept) + 2):
        client = Client()
        pid = f"PID{number:04d}"
        client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]),
            {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X"},
        )
        for _ in range(len(kept) + len(left_out)):
            page = client.get(reverse("participate_next", args=[study.public_id]))
            html = page.content.decode()
            token = re.search(r'action="[^"]*/submit/([^/"]+)/', html)
            if token is None:
                break  # nothing to serve (or the finished page)
            lease = Assignment.objects.get(token=token.group(1))
            seen.append(lease.item_id)
            url = reverse("participate_submit", args=[study.public_id, token.group(1)])
            client.post(url, {"part": "0", "spans": "[]", "score": "70"})
    assert set(seen) == kept  # every kept item once (target 1), nothing else
    assert len(seen) == len(kept)


def test_progress_and_capacity_count_only_the_kept_items(researcher):
    """Left-out items are no missing work: the progress needs the kept items' targets, and
    once those are done the capacity bound finds nothing left, even asked for a constant
    number of answers per item (VICR's floor of ratings passes ``wanted`` so)."""
    study, kept, left_out = designed(researcher, target=1)
    mode = get_mode(study.mode)
    progress = study_progress(study, mode)
    assert progress["needed"] == len(kept) and progress["done"] == 0
    for number in range(len(kept) + 1):
        judge(worker(study, f"p{number}"), answer)
    progress = study_progress(study, mode)
    assert progress["done"] == progress["needed"] == len(kept)
    assert progress["remaining"] == 0 and progress["percent"] == 100
    players = Participant.objects.filter(study=study)
    assert unit_shortfall(study, kinds=["caption"], unit="pk", players=players) is None
    one = Value(1, IntegerField())
    assert unit_shortfall(study, kinds=["caption"], unit="pk", players=players, wanted=one) is None
    assert unit_shortfall(study, kinds=["caption"], unit="image_id", players=players) is None


def test_the_export_carries_probability_and_design(researcher, django_capture_on_commit_callbacks):
    from annotation.services.exports import export_request
    from annotation.tasks import enqueue
    from tests.annotation.test_spans_export import job_path

    study, kept, _ = designed(researcher, images=3, share=0.4, target=1)
    # One worker per kept item (target 1): how many the seed keeps depends on the caption
    # ids the draw is seeded with, which differ between databases.
    for number in range(len(kept)):
        judge(worker(study, f"e{number}"), answer)
    with django_capture_on_commit_callbacks(execute=True):
        job = enqueue(export_request(study=study, user=researcher, export_format="jsonl"))
    job.refresh_from_db()
    assert job.status == "done", job.error
    rows = read_table(job_path(job), "jsonl", table_columns(study, "judgments"))
    judgments = {j.pk: j.item_id for j in Judgment.objects.filter(study=study)}
    assert len(rows) == len(judgments) == len(kept)
    for row in rows:
        assert judgments[row["judgment_id"]] in kept
        assert row["sampling_probability"] == 0.4 and row["sampling_design"] == "uniform"
