"""The HUMANr mode: groups, serving, refusals, attention checks, report, export, pages."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation import selectors
from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode, Outcome
from annotation.modes.humanr.protocol import reference_on_left, score_trial, sides_shown
from annotation.modes.humanr.report import summarize
from annotation.services.assignments import assignment_next
from annotation.services.exports import export_request
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_completion, crowd_link_token
from annotation.services.reports import report_request
from annotation.services.studies import study_create, study_open
from annotation.tasks import enqueue
from tests.factories.humanr import (
    add_images,
    careless,
    crowd,
    do_group,
    honest,
    honest_on_page,
    humanr_study,
)

pytestmark = pytest.mark.django_db

MODE = get_mode("humanr")


# ---------------------------------------------------------------------- helpers


def specs(study):
    return [item.spec for item in Item.objects.filter(study=study).order_by("position")]


# ---------------------------------------------------------------------- building


def test_groups_hold_nine_comparisons_of_distinct_images_and_one_check(researcher):
    study = humanr_study(researcher, images=27, systems=("GIT", "ClipCap"))
    groups = specs(study)

    assert len(groups) == 27 * 3 // 9, "81 comparisons in groups of 9"
    for spec in groups:
        kinds = Counter(trial["kind"] for trial in spec["trials"])
        assert kinds == {"comparison": 9, "attention_check": 1}
        images = [t["image_id"] for t in spec["trials"] if t["kind"] == "comparison"]
        assert len(set(images)) == 9, "9 comparison images, all different"
        # The check's place only: what it shows is drawn per lease (humanr/checks.py).
        check = next(t for t in spec["trials"] if t["kind"] == "attention_check")
        assert check["image_id"] is check["reference_caption_id"] is None
        assert spec["seed"] == 7, "the seed is recorded on every group"
    assert {i.target for i in Item.objects.filter(study=study)} == {1}, "each comparison once"
    assert {i.kind for i in Item.objects.filter(study=study)} == {"group"}


def test_each_image_gets_one_human_pair_and_one_pair_per_model_each_used_once(researcher):
    study = humanr_study(researcher, images=18, humans=3, systems=("GIT", "ClipCap"))
    trials = [t for spec in specs(study) for t in spec["trials"] if t["kind"] == "comparison"]
    captions = {c.pk: c for c in Caption.objects.filter(study=study)}

    keys = Counter(t["comparison"] for t in trials)
    assert set(keys.values()) == {1}, "every comparison sits in exactly one group"
    images = Image.objects.filter(study=study).values_list("pk", flat=True)
    assert set(keys) == {f"{i}:{s}" for i in images for s in ("Human", "GIT", "ClipCap")}
    positions = Counter()
    for trial in trials:
        reference, other = (
            captions[trial["reference_caption_id"]],
            captions[trial["other_caption_id"]],
        )
        assert reference.is_human and reference.image_id == trial["image_id"]
        assert other.image_id == trial["image_id"] and other.system == trial["system"]
        assert reference.pk != other.pk, "the two human captions of a baseline pair differ"
        if trial["system"] == "Human":
            positions[reference.raw_text] += 1
    assert len(positions) > 1, "the reference of the Human pairs is not always the same caption"


def test_the_same_seed_gives_the_same_groups_and_another_seed_others(researcher):
    first = specs(humanr_study(researcher, images=18, seed=11))
    again = specs(humanr_study(researcher, images=18, seed=11))
    other = specs(humanr_study(researcher, images=18, seed=12))

    def shape(groups):  # caption ids differ between studies; compare by caption text
        texts = dict(Caption.objects.values_list("pk", "text"))
        return [
            [
                (t["kind"], texts.get(t["reference_caption_id"]), texts.get(t["other_caption_id"]))
                for t in g["trials"]
            ]
            for g in groups
        ]

    assert shape(first) == shape(again)
    assert shape(first) != shape(other)


def test_images_without_two_human_captions_are_left_out_and_n_images_samples(researcher):
    study = humanr_study(researcher, images=12, missing_human=(0, 1))
    used = {t["image_id"] for s in specs(study) for t in s["trials"] if t["kind"] == "comparison"}
    names = dict(Image.objects.filter(study=study).values_list("pk", "name"))
    assert {names[i] for i in used} == {f"img{n:04d}.jpg" for n in range(2, 12)}

    sampled = humanr_study(researcher, images=12, n_images=5)
    used = {t["image_id"] for s in specs(sampled) for t in s["trials"] if t["kind"] == "comparison"}
    assert len(used) == 5


@pytest.mark.parametrize(
    ("humans", "systems", "message"),
    [(1, ("GIT",), "two human captions"), (3, (), "model system")],
)
def test_a_study_that_cannot_run_is_refused_and_stays_a_draft(researcher, humans, systems, message):
    study = study_create(owner=researcher, name="x", mode="humanr", settings={})
    add_images(study, images=4, humans=humans, systems=systems)

    with pytest.raises(ServiceError, match=message):
        study_open(study=study)

    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and not study.items.exists()


def test_a_two_image_study_is_refused_since_a_check_needs_a_third_image(researcher):
    """Two images: a group's check would show one of them again, or its caption."""
    study = study_create(owner=researcher, name="x", mode="humanr", settings={})
    add_images(study, images=2, humans=3, systems=("GIT",))

    with pytest.raises(ServiceError, match="at least three images"):
        study_open(study=study)

    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT and not study.items.exists()


@pytest.mark.parametrize(
    "bad",
    [
        {"workers_per_comparison": 0},
        {"n_images": 2},
        {"report_permutations": 99},
        {"min_seconds_per_trial": -1},
        {"prolific_completion_url": "http://example.com"},
        {"max_failed_checks": 0},
        {"colour": "red"},
    ],
)
def test_bad_settings_are_refused(researcher, bad):
    with pytest.raises(ServiceError) as refused:
        study_create(owner=researcher, name="x", mode="humanr", settings=bad)
    # The refusal names the setting (an unknown one: the settings as a whole).
    assert refused.value.field == "settings"
    assert refused.value.details["setting"] == ("settings" if "colour" in bad else next(iter(bad)))
    assert not Study.objects.exists()


# ---------------------------------------------------------------------- serving and refusals


@pytest.mark.parametrize("bad", [0, 10, "0", "10", None, "", "five", "4.5", True])
def test_a_slider_value_outside_1_to_9_or_missing_is_refused_and_nothing_stored(researcher, bad):
    study = humanr_study(researcher)
    worker = crowd(study)
    lease = assignment_next(participant=worker)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=worker, token=lease.token, part=0, data={"raw": bad})

    assert (refused.value.field, refused.value.status) == ("raw", 400)
    assert not Judgment.objects.exists()


def test_an_answer_to_a_trial_served_to_another_worker_is_refused(researcher, client):
    study = humanr_study(researcher)
    alice, bob = crowd(study, "alice"), crowd(study, "bob")
    alices = assignment_next(participant=alice)
    assignment_next(participant=bob)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=bob, token=alices.token, part=0, data={"raw": 3})
    assert refused.value.status == 404

    client.get(reverse("crowd_entry", args=[crowd_link_token(study)]), {"PROLIFIC_PID": "bob"})
    response = client.post(
        reverse("participate_submit", args=[study.public_id, alices.token]), {"part": 0, "raw": 3}
    )
    assert response.status_code == 404
    assert not Judgment.objects.exists()


def test_a_second_answer_to_the_same_trial_returns_the_stored_one(researcher):
    study = humanr_study(researcher)
    worker = crowd(study)
    lease = assignment_next(participant=worker)
    first = judgment_submit(participant=worker, token=lease.token, part=0, data={"raw": 2})

    again = judgment_submit(participant=worker, token=lease.token, part=0, data={"raw": 9})

    assert not again.created and again.judgment.pk == first.judgment.pk
    assert again.judgment.payload == {"raw": 2}
    assert Judgment.objects.count() == 1


def test_trials_are_answered_in_order(researcher):
    study = humanr_study(researcher)
    worker = crowd(study)
    lease = assignment_next(participant=worker)
    judgment_submit(participant=worker, token=lease.token, part=0, data={"raw": 2})
    judgment_submit(participant=worker, token=lease.token, part=1, data={"raw": 2})

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=worker, token=lease.token, part=3, data={"raw": 2})

    assert refused.value.status == 409 and "part 3 first" in refused.value.message
    assert Judgment.objects.count() == 2


def test_an_answer_faster_than_the_minimum_time_is_refused(researcher):
    study = humanr_study(researcher, min_seconds_per_trial=2)
    worker = crowd(study)
    lease = assignment_next(participant=worker)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=worker,
            token=lease.token,
            part=0,
            data={"raw": 2},
            now=lease.served_at + timedelta(seconds=1),
        )
    assert refused.value.status == 429
    stored = judgment_submit(
        participant=worker,
        token=lease.token,
        part=0,
        data={"raw": 2},
        now=lease.served_at + timedelta(seconds=3),
    )
    assert stored.created and stored.judgment.dwell_ms == 3000
    # The second trial counts from the first answer, not from the lease.
    with pytest.raises(ServiceError):
        judgment_submit(
            participant=worker,
            token=lease.token,
            part=1,
            data={"raw": 2},
            now=stored.judgment.created_at + timedelta(seconds=1),
        )


def test_the_same_prolific_id_joining_twice_in_its_browser_resumes(researcher, client):
    study = humanr_study(researcher)
    link = reverse("crowd_entry", args=[crowd_link_token(study)])
    params = {"PROLIFIC_PID": "p-42", "STUDY_ID": "s", "SESSION_ID": "one"}
    client.get(link, params)
    first = client.get(reverse("participate_next", args=[study.public_id]))
    client.get(link, {**params, "SESSION_ID": "two"})
    second = client.get(reverse("participate_next", args=[study.public_id]))
    other_browser = Client()
    refused = other_browser.get(link, {**params, "SESSION_ID": "three"})

    assert Participant.objects.filter(study=study).count() == 1
    assert Assignment.objects.count() == 1, "the returning worker gets the same group back"
    assert first.context["assignment"].pk == second.context["assignment"].pk
    assert refused.status_code == 403, "another browser cannot take the worker's place"


def test_a_worker_never_gets_the_same_comparison_or_image_twice(researcher):
    study = humanr_study(researcher, images=81, workers_per_comparison=2)
    worker = crowd(study)
    while (lease := assignment_next(participant=worker)) is not None:
        do_group(worker)

    results = list(Judgment.objects.filter(participant=worker).values_list("result", flat=True))
    seen = [r["comparison"] for r in results if r["kind"] == "comparison"]
    images = [r["image_id"] for r in results]
    groups = Assignment.objects.filter(participant=worker).count()
    assert groups >= 2, "the worker did several groups"
    assert groups < study.items.count(), "exposure leaves some groups to other workers"
    assert len(seen) == len(set(seen)) == 9 * groups
    assert len(images) == len(set(images)) == 10 * groups
    assert lease is None


def fill_with_new_workers(study, answer=honest, limit=60):
    """New crowd workers each do every group they may, until one is given nothing: a worker
    who has seen nothing is barred from no group, so then every group is complete."""
    workers = []
    while True:
        worker = crowd(study, f"w{len(workers)}")
        workers.append(worker)
        groups = 0
        while assignment_next(participant=worker) is not None:
            do_group(worker, answer)
            groups += 1
        if not groups:
            return workers[:-1]
        assert len(workers) < limit, f"{limit} workers did not fill the study"


def test_by_default_each_comparison_is_judged_once_and_each_image_by_different_workers(
    researcher,
):
    """The paper: "Images were shown up to 4 times total to different workers: Once with a
    randomly selected pair of its human annotated captions, three additional times with a
    random human annotation and a caption from each of our three models." With its three
    models and the default settings: every comparison judged once, so each image compared
    four times, by four different workers."""
    study = humanr_study(researcher, images=30, systems=("GIT", "ClipCap", "ExpNet"))
    assert MODE.settings(study).workers_per_comparison == 1
    fill_with_new_workers(study)

    comparisons = Counter()
    workers_of_image: dict[int, set[int]] = {}
    for participant_id, result in Judgment.objects.filter(study=study).values_list(
        "participant_id", "result"
    ):
        if result["kind"] == "comparison":
            comparisons[result["comparison"]] += 1
            workers_of_image.setdefault(result["image_id"], set()).add(participant_id)
    systems = ("Human", "GIT", "ClipCap", "ExpNet")
    images = Image.objects.filter(study=study).values_list("pk", flat=True)
    assert comparisons == Counter({f"{i}:{s}": 1 for i in images for s in systems})
    assert {len(workers) for workers in workers_of_image.values()} == {4}


def test_the_side_is_random_per_presentation_and_stored_as_shown(researcher):
    study = humanr_study(
        researcher,
        images=9,
        systems=("GIT",),
        workers_per_comparison=8,
        # Eight workers from one address, each in a browser of their own (two ids of one
        # browser are one worker, who never meets an image twice).
        crowd_arrivals_per_address_per_hour=8,
        crowd_open_leases_per_address=8,
    )
    sides = Counter()
    for number in range(8):
        client = Client()
        client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]), {"PROLIFIC_PID": f"w{number}"}
        )
        page = client.get(reverse("participate_next", args=[study.public_id]))
        lease = page.context["assignment"]
        shown_left = page.context["left_caption"].pk
        assert f'name="left" value="{shown_left}"' in page.content.decode()
        worker = Participant.objects.get(external_id=f"w{number}")
        client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {"part": 0, "raw": 1},
        )
        judgment = Judgment.objects.get(assignment=lease, part=0)
        assert judgment.participant == worker
        assert judgment.result["left_caption_id"] == shown_left, "scored as it was shown"
        reference_left = judgment.result["reference_on_left"]
        assert (shown_left == judgment.result["reference_caption_id"]) == reference_left
        assert judgment.result["oriented"] == (1 if reference_left else 9)
        sides[reference_left] += 1
    assert set(sides) == {True, False}, "the same trial is shown both ways to different workers"


def test_an_answer_from_a_page_showing_other_sides_is_refused(researcher):
    study = humanr_study(researcher)
    worker = crowd(study)
    lease = assignment_next(participant=worker)
    trial = lease.item.spec["trials"][0]
    left, right = sides_shown(trial, lease.item.spec["seed"], lease.pk, 0)

    with pytest.raises(ServiceError) as refused:
        judgment_submit(
            participant=worker, token=lease.token, part=0, data={"raw": 3, "left": str(right)}
        )

    assert refused.value.status == 409
    assert not Judgment.objects.exists()


# ---------------------------------------------------------------------- attention checks


def test_a_failed_check_flags_every_response_of_its_group_only(researcher):
    # Enough images for two groups that share none (a worker never meets an image twice).
    study = humanr_study(researcher, images=81)
    worker = crowd(study)
    good = do_group(worker, honest)
    bad = do_group(worker, careless)

    assert not Judgment.objects.filter(assignment=good, excluded=True).exists()
    dropped = Judgment.objects.filter(assignment=bad)
    group = bad.item.spec["group"]
    assert dropped.count() == 10
    assert set(dropped.values_list("excluded", "exclusion_reason")) == {
        (True, f"attention check failed in group {group}")
    }
    check = dropped.get(result__kind="attention_check")
    assert check.result["check_failed"] is True and check.result["oriented"] == 5
    worker.refresh_from_db()
    assert worker.state == {"groups_done": 2, "groups_failed": 1}


def test_the_outcome_of_a_last_trial_counts_its_own_unstored_check_and_writes_nothing(
    researcher,
):
    """after_submit runs before the last trial is stored: a check failed in that very trial
    must flag the group, and the mode leaves every write to the submission service."""
    study = humanr_study(researcher)
    worker = crowd(study)
    lease = do_group(worker, honest, parts=9)
    last = Judgment(
        study=study,
        item=lease.item,
        participant=worker,
        assignment=lease,
        part=9,
        payload={"raw": 5},
        result={"kind": "attention_check", "check_failed": True},
        dwell_ms=1000,
    )
    worker.refresh_from_db()
    state_before = worker.state
    judgments_before = list(Judgment.objects.values_list("pk", "excluded", "exclusion_reason"))

    failed = MODE.after_submit(worker, last)
    passed = MODE.after_submit(worker, Judgment(item=lease.item, assignment=lease, part=9))
    middle = MODE.after_submit(worker, Judgment(item=lease.item, assignment=lease, part=8))

    group = lease.item.spec["group"]
    assert failed.exclusion == f"attention check failed in group {group}"
    assert failed.state == {"groups_done": 1, "groups_failed": 1}
    assert (passed.exclusion, passed.state) == ("", {"groups_done": 1, "groups_failed": 0})
    assert middle == Outcome(), "nothing changes before the group's last trial"
    assert last.pk is None and not last.excluded, "the service, not the mode, flags it"
    worker.refresh_from_db()
    assert worker.state == state_before
    assert list(Judgment.objects.values_list("pk", "excluded", "exclusion_reason")) == (
        judgments_before
    )


def test_a_crowd_lease_lasts_long_enough_for_a_whole_group(researcher):
    study = humanr_study(researcher)
    lease = assignment_next(participant=crowd(study))
    held = (lease.expires_at - lease.served_at).total_seconds()
    # Ten trials read with care take minutes; one-part items keep the shorter base default.
    assert held == MODE.crowd_lease_seconds > Mode.crowd_lease_seconds
    assert held >= 10 * 60


def test_max_failed_checks_stops_serving_a_careless_worker(researcher):
    study = humanr_study(researcher, images=27, max_failed_checks=1)
    worker = crowd(study)
    do_group(worker, careless)
    assert assignment_next(participant=worker) is None
    assert assignment_next(participant=crowd(study, "other")) is not None


# ---------------------------------------------------------------------- report and export


def run_report(study, user, capture):
    with capture(execute=True):
        job = enqueue(report_request(study=study, user=user))
    job.refresh_from_db()
    assert job.status == "done", job.error
    return job.result


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def test_a_dropped_group_is_left_out_of_humanr_but_kept_in_the_export(researcher, capture):
    # 162 comparisons: 18 full groups, enough that each worker gets two sharing no image.
    study = humanr_study(researcher, images=81, systems=("GIT",), workers_per_comparison=2)
    workers = [crowd(study, f"w{n}") for n in range(3)]
    for worker in workers[:2]:
        do_group(worker, honest)
        do_group(worker, honest)
    bad = do_group(workers[2], careless)
    unfinished = do_group(crowd(study, "leaver"), honest, parts=4)

    report = run_report(study, researcher, capture)
    humanr = report["humanr"]

    assert report["n_responses"] == 4 * 10 + 10 + 4
    assert humanr["attention_checks"]["n_dropped_groups"] == 1
    assert humanr["n_kept"] == 4 * 9, "only the four honest, finished groups count"
    assert humanr["systems"]["GIT"]["humanr"] == pytest.approx(-0.75), "honest: s = 2 always"
    assert humanr["baseline"]["humanr"] == pytest.approx(-0.75)
    assert report["n_incomplete_responses"] == 4
    careless_row = next(w for w in report["workers"] if w["pseudonym"] == workers[2].pseudonym)
    assert (careless_row["failed_checks"], careless_row["dropped_responses"]) == (1, 10)

    with capture(execute=True):
        job = enqueue(export_request(study=study, user=researcher, export_format="csv"))
    job.refresh_from_db()
    path = Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result_file
    with path.open(encoding="utf-8", newline="") as data:
        rows = list(csv.DictReader(data))
    assert len(rows) == Judgment.objects.count() == 54
    dropped = [r for r in rows if r["excluded"] == "true"]
    assert {int(r["judgment_id"]) for r in dropped} == set(
        Judgment.objects.filter(assignment=bad).values_list("pk", flat=True)
    )
    reason = f"attention check failed in group {bad.item.spec['group']}"
    assert {r["exclusion_reason"] for r in dropped} == {reason}
    check = next(r for r in dropped if r["trial_kind"] == "attention_check")
    assert (check["is_attention_check"], check["attention_check_failed"], check["raw"]) == (
        "true",
        "true",
        "5",
    )
    some = next(r for r in rows if r["trial_kind"] == "comparison" and r["excluded"] == "false")
    stored = Judgment.objects.get(pk=some["judgment_id"])
    assert int(some["left_caption_id"]) == stored.result["left_caption_id"]
    assert some["left_system"] in {"Human", "GIT"} and some["right_system"] in {"Human", "GIT"}
    assert float(some["score"]) == -0.75
    assert int(some["trial"]) == stored.part + 1
    assert {r["judgment_id"] for r in rows} >= {
        str(pk)
        for pk in Judgment.objects.filter(assignment=unfinished).values_list("pk", flat=True)
    }


def test_the_report_page_and_its_figures_render(researcher, client, capture):
    # Enough images for three groups per worker that share no image (about images / 25).
    study = humanr_study(researcher, images=150, workers_per_comparison=2)
    for n in range(4):
        worker = crowd(study, f"w{n}")
        for _ in range(3):
            do_group(worker, honest if n else careless)
    run_report(study, researcher, capture)
    client.force_login(researcher)

    page = client.get(reverse("study_report", args=[study.pk]))

    html = page.content.decode()
    assert page.status_code == 200
    assert "Human–GIT" in html and "Human–Human (baseline)" in html
    assert "dropped groups: 3" in html
    pairs = selectors.report_latest(study).result["humanr"]["robustness"]
    assert len(pairs) == 1 and f'data-upper="{pairs[0]["upper"]}"' in html
    removed = pairs[0]["removed"]
    assert ("none can" if removed is None else f"{removed} of {pairs[0]['total']}") in html
    for name in MODE.report.figure_names:
        svg = client.get(reverse("report_figure", args=[study.pk, name, "svg"]))
        assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
        assert b"<svg" in svg.content


def judges_models_worse(trial, on_left):
    """Passes every check, sees no difference in a Human-vs-Human pair or against ClipCap
    (5: value 0), and always prefers the human caption to GIT's (s = 1: value -1)."""
    if trial["kind"] == "attention_check" or trial["system"] == "GIT":
        return 1 if on_left else 9
    return 5


def test_the_report_and_the_export_test_each_system_against_the_baseline(
    researcher, client, capture
):
    """Worked by hand: on every image GIT's value is -1 and the baseline's 0, so d = -1 on
    all 60 paired images; of the 2^60 sign flips only the two all-alike ones reach the
    observed sum, so 10,000 random flips give p = 1 / 10,001, and the bootstrap interval of
    the mean difference is [-1, -1]. ClipCap's d is 0 everywhere: p = 1, interval [0, 0]."""
    study = humanr_study(researcher, images=60, systems=("GIT", "ClipCap"))
    fill_with_new_workers(study, judges_models_worse)
    report = run_report(study, researcher, capture)["humanr"]

    git, clipcap = (report["systems"][name]["vs_baseline"] for name in ("GIT", "ClipCap"))
    assert (git["n_images"], git["difference"], git["p_value"]) == (60, -1.0, 1 / 10_001)
    assert git["difference_interval"] == [-1.0, -1.0] and git["interval_excludes_baseline"]
    assert (clipcap["difference"], clipcap["p_value"]) == (0.0, 1.0)
    assert clipcap["interval_excludes_baseline"] is False
    assert report["baseline"]["humanr"] == 0.0

    client.force_login(researcher)
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    start = html.index('id="hr-baseline-tests"')
    table = html[start : html.index("</table>", start)]
    rows = dict(re.findall(r'<tr data-system="(\w+)">(.*?)</tr>', table, re.DOTALL))
    assert "-1.000" in rows["GIT"] and "&lt; 0.0001" in rows["GIT"]
    assert '<td class="hr-differs">yes</td>' in rows["GIT"]
    assert "1.0000" in rows["ClipCap"] and "<td>no</td>" in rows["ClipCap"]
    assert "modes/humanr/humanr.css" in html, "the report page loads the class it uses"

    with capture(execute=True):
        job = enqueue(export_request(study=study, user=researcher, export_format="csv"))
    job.refresh_from_db()
    sheet = Path(django_settings.CAPEVAL_EXPORT_DIR) / job.result["datasheet"]
    exported = json.loads(sheet.read_text())["agreement"]["humanr"]["systems"]
    assert exported["GIT"]["vs_baseline"] == git
    assert exported["ClipCap"]["vs_baseline"]["test"].startswith("paired sign-flip permutation")


def simulated_rows(
    group_specs, *, rng, run, workers, groups_per_worker, oriented_probs, fail_rate=0.1
):
    """Judgment rows as the mode stores them, from a crowd whose oriented answers follow
    ``oriented_probs[system]`` (probabilities of s = 1..9); some groups fail their check."""
    levels = np.arange(1, 10)
    draws = {
        system: iter(rng.choice(levels, size=workers * groups_per_worker * 10, p=p).tolist())
        for system, p in oriented_probs.items()
    }
    rows = []
    order = rng.permutation(len(group_specs))
    for slot in range(workers * groups_per_worker):
        worker = slot // groups_per_worker
        spec = group_specs[order[slot % len(order)]]
        assignment_id = run * 100_000 + slot  # a new presentation, so new sides, every run
        careless_group = bool(rng.random() < fail_rate)
        for part, trial in enumerate(spec["trials"]):
            on_left = reference_on_left(spec["seed"], assignment_id, part)
            if trial["kind"] == "attention_check":
                s = 5 if careless_group else 1
            else:
                s = next(draws[trial["system"]])
            raw = s if on_left else 10 - s
            if trial["kind"] == "attention_check":
                # A check is drawn per lease when served (humanr/checks.py); the report reads
                # only whether it failed, so any two captions stand for the drawn ones.
                trial = {**trial, "image_id": 0, "reference_caption_id": 1, "other_caption_id": 2}
                result = score_trial(
                    spec, assignment_id=assignment_id, part=part, raw=raw, trial=trial
                )
            else:
                result = MODE.score(
                    item=SimpleNamespace(spec=spec),
                    assignment=SimpleNamespace(pk=assignment_id),
                    part=part,
                    payload={"raw": raw},
                )
            rows.append(
                (
                    worker,
                    assignment_id,
                    Assignment.Status.SUBMITTED,
                    {"raw": raw},
                    result,
                    careless_group,
                    1000,
                )
            )
    return rows


def test_a_simulated_crowd_gives_humanr_inside_the_reported_interval(researcher):
    """200 seeded crowds with known preferences: the 95% intervals hold the truth >= 90%."""
    study = humanr_study(researcher, images=45, systems=("GIT", "ClipCap"))
    group_specs = specs(study)
    levels = np.arange(1, 10)
    probs = {
        "Human": np.full(9, 1 / 9),  # symmetric: truth 0
        "GIT": np.array([8, 8, 6, 4, 2, 1, 1, 0.5, 0.5]),
        "ClipCap": np.array([3, 3, 3, 2, 2, 2, 1, 1, 1]),
    }
    probs = {k: v / v.sum() for k, v in probs.items()}
    truth = {k: float(((levels - 5) / 4) @ p) for k, p in probs.items()}
    inside = Counter()
    runs = 200
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        rows = simulated_rows(
            group_specs, rng=rng, run=seed, workers=12, groups_per_worker=3, oriented_probs=probs
        )
        report = summarize(
            rows, people={}, seed=seed, n_bootstrap=200, n_splits=10, include_distributions=False
        )["humanr"]
        entries = {**report["systems"], "Human": report["baseline"]}
        for system, value in truth.items():
            lo, hi = entries[system]["t_interval"]
            inside[system, "t"] += lo <= value <= hi
            lo, hi = entries[system]["bootstrap_interval"]
            inside[system, "bootstrap"] += lo <= value <= hi
    for key, count in inside.items():
        assert count / runs >= 0.90, (key, count)


# ---------------------------------------------------------------------- pages


def enter(client, study, pid="PID-1", **extra):
    client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X", **extra},
    )


def test_a_group_through_the_pages_ends_with_the_completion_code(researcher, client):
    url = "https://app.prolific.com/submissions/complete?cc=C1AB2"
    study = humanr_study(researcher, prolific_completion_url=url)
    enter(client, study)
    intro = client.get(reverse("participate_intro", args=[study.public_id]))
    assert "Which caption goes best with the image?" in intro.content.decode()
    for number in range(1, 11):
        page = client.get(reverse("participate_next", args=[study.public_id]))
        html = page.content.decode()
        assert f"Trial {number} of 10" in html
        assert "<legend>Which caption goes best with the image?</legend>" in html
        assert not re.search(r'name="raw"[^>]*checked', html), "no value is preselected"
        assert html.count('type="radio" name="raw"') == 9
        lease = page.context["assignment"]
        response = client.post(
            reverse("participate_submit", args=[study.public_id, lease.token]),
            {
                "part": number - 1,
                "raw": honest_on_page(page.context),  # the check passed: the code is earned
                "left": page.context["left_caption"].pk,
            },
            follow=True,  # the feedback is a page after a redirect (issue 42)
        )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Group complete" in html and "C1AB2" in html and f'href="{url}"' in html
    # 12 images hold one group per worker: the page says so instead of a link to nothing.
    assert "There is no further group for you" in html
    assert Judgment.objects.filter(assignment=lease).count() == 10


def test_a_refused_value_shows_the_trial_again_with_the_error(researcher, client):
    study = humanr_study(researcher)
    enter(client, study)
    page = client.get(reverse("participate_next", args=[study.public_id]))

    response = client.post(
        reverse("participate_submit", args=[study.public_id, page.context["assignment"].token]),
        {"part": 0, "raw": "10"},
    )

    assert response.status_code == 400
    assert (
        'role="alert"' in response.content.decode() and "Trial 1 of 10" in response.content.decode()
    )


def test_an_mturk_worker_gets_the_external_submit_form_for_mturk_hosts_only(researcher):
    study = humanr_study(researcher)
    meta = {
        "workerId": "W1",
        "assignmentId": "A1",
        "hitId": "H",
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }
    worker = crowd(study, "W1", source=Participant.Source.MTURK, meta=meta)
    assert crowd_completion(worker) == {}, "nothing before the work"
    do_group(worker)
    worker.refresh_from_db()
    assert worker.completed_at is not None
    assert crowd_completion(worker)["mturk_submit_url"] == (
        "https://workersandbox.mturk.com/mturk/externalSubmit"
    )
    assert crowd_completion(worker)["mturk_assignment_id"] == "A1"
    assert crowd_completion(worker)["completion_code"] == study.completion_code
    evil = crowd(
        study,
        "W2",
        source=Participant.Source.MTURK,
        meta={**meta, "turkSubmitTo": "https://evil.example"},
    )
    evil.completed_at = worker.completed_at
    assert "mturk_submit_url" not in crowd_completion(evil)
    account = SimpleNamespace(
        study=study, source="account", external_meta={}, completed_at=worker.completed_at
    )
    assert crowd_completion(account) == {}, "registered annotators are not paid by code"


def page_queries(client, study, pid):
    enter(client, study, pid)
    url = reverse("participate_next", args=[study.public_id])
    client.get(url)  # lease the group; the measured request is the trial page itself
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_the_trial_page_needs_the_same_number_of_queries_for_any_study_size(
    researcher, client, django_assert_num_queries
):
    small = humanr_study(researcher, images=9, systems=("GIT",))
    large = humanr_study(
        researcher, images=300, systems=("GIT", "ClipCap", "BLIP"), workers_per_comparison=5
    )
    for number in range(20):
        do_group(crowd(large, f"busy{number}"))
    expected = page_queries(client, small, "s1")
    enter(client, large, "l1")
    url = reverse("participate_next", args=[large.public_id])
    client.get(url)
    with django_assert_num_queries(expected):
        client.get(url)
    assert expected <= 12


def test_the_trial_page_weighs_under_100_kb_with_its_css_and_js(researcher, client):
    study = humanr_study(researcher)
    enter(client, study)
    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
    total = len(html.encode())
    assets = re.findall(r'(?:href|src)="/static/([^"]+\.(?:css|js))"', html)
    assert any(a.endswith("humanr.js") for a in assets)
    for asset in assets:
        total += Path(finders.find(asset)).stat().st_size
    assert total < 100_000, total
