"""The thumb mode: items, stage flow, native-speaker routing, validation, pages, report, export.

Captions are created directly (``thumb_study``), so these tests do not depend on the importer.
"""

import io
import json
import re
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation import selectors
from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study
from annotation.modes import get_mode
from annotation.modes.thumb.protocol import CHECK, FLUENCY, STAGE1, STAGE2
from annotation.services.assignments import assignment_next
from annotation.services.exports import export_file
from annotation.services.judgments import judgment_submit
from annotation.services.participants import crowd_link_token
from annotation.services.studies import study_open
from rubrics import thumb as rubric
from tests.factories.thumb import (
    CAPTIONS,
    add_image,
    all_scores,
    form_for,
    judge,
    member,
    scores,
    thumb_study,
    tiny_study,
)
from tests.factories.thumb import make_annotator as make_annotator_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

MODE = get_mode("thumb")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Accounts are made by the dozen here; their password hashing is not under test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# ---------------------------------------------------------------------- items


def test_items_cover_images_with_a_human_and_another_caption_and_join_identical_texts(
    make_study,
):
    study = make_study("thumb", seed=3)
    cat = add_image(study, "cat", CAPTIONS["cat"])
    add_image(study, "humans-only", [("Human", "One caption."), ("Human", "Another one.")])
    add_image(study, "machines-only", [("Up-Down", "A dog."), ("VinVL", "A dog running.")])

    built = study_open(study=study)

    assert built == 2, "one stage-1 and one stage-2 item for the only eligible image"
    stage1 = Item.objects.get(study=study, kind=STAGE1)
    assert stage1.image_id == cat.pk
    stage2 = Item.objects.get(study=study, kind=STAGE2)
    assert stage2.spec == {**stage1.spec, "check_keys": ["c1", "c2"]}, (
        "the same captions; with fewer than 100 caption texts the check samples them all"
    )
    groups = stage1.spec["groups"]
    assert [g["text"] for g in groups] == [
        "A black cat sleeping on a red suitcase.",
        "A cat laying in a suitcase.",
    ]
    assert [c["system"] for c in groups[1]["captions"]] == ["Up-Down", "VinVL"]


def test_n_images_samples_reproducibly_with_the_study_seed(make_study):
    chosen = []
    for _ in range(2):
        study = thumb_study(
            make_study, settings={"n_images": 3, "stage2": False}, extra_images=8, seed=11
        )
        chosen.append(
            sorted(Item.objects.filter(study=study).values_list("image__name", flat=True))
        )
    assert len(chosen[0]) == 3
    assert chosen[0] == chosen[1]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"n_images": 0}, "n_images"),
        ({"stage2": "yes"}, "stage2"),
        ({"confidence": 1.5}, "confidence"),
        ({"bootstrap_resamples": 10}, "bootstrap_resamples"),
        ({"weight_recall": -1}, "weight_recall"),
        ({"third_check_captions": -1}, "third_check_captions"),
        ({"third_check_captions": 100_001}, "third_check_captions"),
        ({"third_check_captions": True}, "third_check_captions"),
        ({"third_check_captions": 2.5}, "third_check_captions"),
        ({"developmental_images": -1}, "developmental_images"),
        ({"developmental_images": "50"}, "developmental_images"),
        ({"colour": "red"}, "settings"),
    ],
)
def test_invalid_settings_are_refused(make_study, bad, field):
    with pytest.raises(ServiceError) as refused:
        make_study("thumb", settings=bad)
    assert refused.value.field == "settings"
    assert refused.value.details["setting"] == field
    assert next(iter(bad)) in refused.value.message


# ---------------------------------------------------------------------- stage flow


def test_stage2_waits_for_stage1_and_never_goes_to_the_stage1_annotator(make_study, make_annotator):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    first = member(study, make_annotator("ann", native=True))
    second = member(study, make_annotator("bob", native=True))

    lease = assignment_next(participant=first)
    assert lease.item.kind == STAGE1
    assert assignment_next(participant=second) is None, "stage 2 waits for stage 1"
    judgment_submit(participant=first, token=lease.token, data=all_scores(lease.item))

    assert assignment_next(participant=first) is None, "never stage 2 of one's own stage 1"
    review = assignment_next(participant=second)
    assert review.item.kind == STAGE2


def test_validate_refuses_stage2_by_the_stage1_annotator(make_study, make_annotator):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    first = member(study, make_annotator("ann", native=True))
    judge(first, all_scores, STAGE1)
    stage2 = Item.objects.get(study=study, kind=STAGE2)
    # A lease the service would never give: forged to check the mode's own refusal.
    forged = Assignment.objects.create(
        participant=first,
        item=stage2,
        served_at=stage2.study.created_at,
        expires_at=stage2.study.created_at.replace(year=2999),
    )

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=first, token=forged.token, data=all_scores(stage2))

    assert refused.value.status == 403
    assert "stage 1" in refused.value.message
    assert not Judgment.objects.filter(item=stage2).exists()


def test_stage2_page_prefills_stage1_and_the_server_flags_modified_fields(
    client, make_study, make_annotator
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    first = member(study, make_annotator("ann", native=True))
    reviewer = make_annotator("bob")
    judge(first, lambda item: all_scores(item, precision=4, recall=3))
    member(study, reviewer)
    client.force_login(reviewer)

    page = client.get(reverse("participate_next", args=[study.public_id]))

    html = page.content.decode()
    assert "Stage 2" in html
    assert html.count("(stage 1: 4)") == 2, "each caption's precision shows its stage-1 value"
    assert len(re.findall(r'name="c1-precision" value="4" checked', html)) == 1
    lease = Assignment.objects.get(participant__user=reviewer)
    body = form_for(lease.item, precision=4, recall=3)
    body["c2-recall"] = "5"  # the reviewer changes one field of one caption

    response = client.post(reverse("participate_submit", args=[study.public_id, lease.token]), body)

    assert response.status_code == 302
    stage2 = Judgment.objects.get(item__kind=STAGE2)
    assert stage2.result["modified"]["c2"] == {
        "precision": False,
        "recall": True,
        "fluency": False,
        "conciseness": False,
        "inclusive": False,
    }
    assert not any(stage2.result["modified"]["c1"].values())
    assert stage2.payload["captions"]["c2"]["total"] == rubric.total(4, 5)


# ---------------------------------------------------------------------- native speakers


def test_no_native_speaker_in_either_stage_sends_the_image_to_a_fluency_round(
    client, make_study, make_annotator
):
    # Without the third annotator's check, whose item any third annotator may take.
    study = thumb_study(
        make_study, captions={"cat": CAPTIONS["cat"]}, settings={"third_check_captions": 0}
    )
    first = member(study, make_annotator("ann"))
    second = member(study, make_annotator("bob"))
    native = member(study, make_annotator("nia", native=True))
    judge(first, all_scores, STAGE1)
    assert not Item.objects.filter(study=study, kind=FLUENCY).exists()

    judge(second, all_scores, STAGE2)

    fluency_item = Item.objects.get(study=study, kind=FLUENCY)
    assert assignment_next(participant=member(study, make_annotator("ned"))) is None, (
        "a non-native speaker is never given the fluency round"
    )
    nia = native.user
    client.force_login(nia)
    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
    assert "Fluency check" in html
    assert "-precision" not in html and 'name="c1-fluency"' in html
    ticked = {
        "captions": {
            g["key"]: {"fluency_errors": {"awkward_construction": "0.3"}}
            for g in fluency_item.spec["groups"]
        }
    }
    judgment = judge(native, lambda item: ticked, FLUENCY)
    assert judgment.payload["captions"]["c1"] == {
        "caption_ids": [c["id"] for c in fluency_item.spec["groups"][0]["captions"]],
        "fluency_errors": {"awkward_construction": 0.3},
        "fluency": 0.3,
    }

    result = MODE.report.run(Study.objects.get(pk=study.pk), lambda *a: None)
    assert result["per_system"]["Human"]["fluency"]["mean"] == pytest.approx(0.3)
    assert result["per_system"]["Human"]["total"]["mean"] == pytest.approx(3.5 - 0.3)


@pytest.mark.parametrize("native_stage", ["stage1", "stage2"])
def test_a_native_speaker_in_either_stage_needs_no_fluency_round(
    make_study, make_annotator, native_stage
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    first = member(study, make_annotator("ann", native=native_stage == "stage1"))
    second = member(study, make_annotator("bob", native=native_stage == "stage2"))
    judge(first, all_scores, STAGE1)
    judge(second, all_scores, STAGE2)
    assert not Item.objects.filter(study=study, kind=FLUENCY).exists()


def test_without_stage2_the_fluency_rule_applies_after_stage1(make_study, make_annotator):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]}, settings={"stage2": False})
    judge(member(study, make_annotator("ann")), all_scores, STAGE1)
    assert Item.objects.filter(study=study, kind=FLUENCY).count() == 1


@pytest.mark.parametrize("native", [False, True])
def test_after_submit_returns_the_fluency_round_unsaved_and_counts_its_own_annotator(
    make_study, make_annotator, native
):
    """Called before the judgment is stored: the submitting annotator is asked directly."""
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]}, settings={"stage2": False})
    participant = member(study, make_annotator("ann", native=native))
    lease = assignment_next(participant=participant)
    judgment = Judgment(
        study_id=study.pk,
        item=lease.item,
        participant=participant,
        assignment=lease,
        payload=MODE.validate(lease, 0, all_scores(lease.item)),
        dwell_ms=0,
    )

    outcome = MODE.after_submit(participant, judgment)

    # The state keeps the count of their judgments, this one included (issue 48).
    assert (outcome.state, outcome.status, outcome.result, outcome.exclusion) == (
        {"judged": 1},
        None,
        {},
        "",
    )
    assert not Item.objects.filter(study=study, kind=FLUENCY).exists(), "writes nothing"
    if native:
        assert outcome.new_items == ()
    else:
        (fluency_round,) = outcome.new_items
        assert fluency_round.pk is None
        assert (fluency_round.kind, fluency_round.image_id, fluency_round.target) == (
            FLUENCY,
            lease.item.image_id,
            1,
        )
        assert (fluency_round.position, fluency_round.spec) == (
            lease.item.position,
            lease.item.spec,
        )


# ---------------------------------------------------------------------- third annotator


def crowd_browser(address):
    """A fresh browser (empty cookie jar) at a client address."""
    return Client(REMOTE_ADDR=address)


def crowd_arrive(client, study, worker):
    return client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": worker, "STUDY_ID": "st-1", "SESSION_ID": f"se-{worker}"},
    )


def next_lease(client, study):
    """The lease the next page serves this browser's participant (None: nothing left)."""
    page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.status_code == 200
    return page.context.get("assignment"), page


def post_form(client, study, lease, body):
    return client.post(reverse("participate_submit", args=[study.public_id, lease.token]), body)


def sampled_keys(study):
    return {
        item.image.name: item.spec.get("check_keys", [])
        for item in Item.objects.filter(study=study, kind=STAGE2).select_related("image")
    }


def test_the_check_sample_has_the_setting_size_and_follows_the_seed(make_study):
    def sample(seed, **settings):
        study = thumb_study(make_study, settings=settings, extra_images=20, seed=seed)
        return sampled_keys(study)

    first = sample(11, third_check_captions=7)
    # Every image has 2 caption texts ("cat": 2 groups), 22 images: 44 texts to draw from.
    assert sum(len(keys) for keys in first.values()) == 7
    assert first == sample(11, third_check_captions=7), "the same seed, the same sample"
    assert first != sample(12, third_check_captions=7), "another seed, another sample"
    everything = sample(11, third_check_captions=100)
    assert sum(len(keys) for keys in everything.values()) == 44, "100 > 44: all of them"
    for keys in first.values():
        assert set(keys) <= {"c1", "c2"}
    assert not any(sample(11, third_check_captions=0).values())
    study = thumb_study(make_study, settings={"stage2": False}, extra_images=2)
    assert not Item.objects.filter(study=study, kind=STAGE2).exists()


def test_the_check_goes_to_a_third_annotator_after_stage2_with_stage2_prefilled(
    client, make_study, make_annotator
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    first = member(study, make_annotator("ann", native=True))
    second = member(study, make_annotator("bob", native=True))
    judge(first, lambda item: all_scores(item, precision=4, recall=3), STAGE1)
    assert not Item.objects.filter(study=study, kind=CHECK).exists(), "waits for stage 2"
    judge(second, lambda item: all_scores(item, precision=5, recall=3), STAGE2)

    check = Item.objects.get(study=study, kind=CHECK)
    assert [g["key"] for g in check.spec["groups"]] == ["c1", "c2"]
    assert "check_keys" not in check.spec
    for participant in (first, second):
        assert assignment_next(participant=participant) is None, "neither stage's annotator"
    third = make_annotator("cyd")
    member(study, third)
    client.force_login(third)
    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()
    assert "Quality check (third annotator)" in html
    assert html.count("(stage 2: 5)") == 2, "each precision starts from stage 2's value"
    assert 'class="was">(stage 1:' not in html
    lease = Assignment.objects.get(participant__user=third)
    body = form_for(lease.item, precision=5, recall=3)
    body["c1-recall"] = "4"

    response = post_form(client, study, lease, body)

    assert response.status_code == 302
    stored = Judgment.objects.get(item__kind=CHECK)
    assert stored.result["modified"]["c1"]["recall"] is True
    assert not any(stored.result["modified"]["c2"].values())
    result = MODE.report.run(Study.objects.get(pk=study.pk), lambda *a: None)
    assert result["per_system"]["Human"]["recall"]["mean"] == 3.0, "the scores stay stage 2's"
    assert result["third_check"]["sampled"] == 2
    assert result["third_check"]["agreement"]["changed"]["any"] == 1


def test_a_second_crowd_id_in_the_stage1_browser_never_gets_the_check(make_study):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    shared, other, outsider = (
        crowd_browser(a) for a in ("198.51.100.1", "198.51.100.2", "198.51.100.3")
    )
    for client, worker in ((shared, "first-id"), (other, "second-id")):
        assert crowd_arrive(client, study, worker).status_code in (200, 302)
        lease, _ = next_lease(client, study)
        assert post_form(client, study, lease, form_for(lease.item)).status_code == 302
    assert Item.objects.filter(study=study, kind=CHECK).count() == 1

    assert crowd_arrive(shared, study, "third-id").status_code in (200, 302)
    lease, _ = next_lease(shared, study)
    assert lease is None, "the browser of the stage-1 annotator does not check its own image"
    assert crowd_arrive(outsider, study, "fourth-id").status_code in (200, 302)
    lease, _ = next_lease(outsider, study)
    assert lease.item.kind == CHECK


@pytest.mark.parametrize("stage", [STAGE1, STAGE2])
def test_a_forged_check_lease_of_either_stage_annotator_is_refused(
    client, make_study, make_annotator, stage
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    annotators = {STAGE1: make_annotator("ann", native=True), STAGE2: make_annotator("bob")}
    judge(member(study, annotators[STAGE1]), all_scores, STAGE1)
    judge(member(study, annotators[STAGE2]), all_scores, STAGE2)
    check = Item.objects.get(study=study, kind=CHECK)
    # A lease the service would never give: forged to check the mode's own refusal.
    forged = Assignment.objects.create(
        participant=Participant.objects.get(study=study, user=annotators[stage]),
        item=check,
        served_at=timezone.now(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    client.force_login(annotators[stage])

    response = post_form(client, study, forged, form_for(check))

    assert response.status_code == 403
    assert "third annotator" in response.content.decode()
    assert not Judgment.objects.filter(item=check).exists()


# ---------------------------------------------------------------------- validation


def refused_form(client, study, user, mutate):
    member(study, user)
    client.force_login(user)
    client.get(reverse("participate_next", args=[study.public_id]))
    lease = Assignment.objects.get(participant__user=user)
    body = form_for(lease.item)
    mutate(body)
    response = client.post(reverse("participate_submit", args=[study.public_id, lease.token]), body)
    return response, lease


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda b: b.update({"c2-precision": "0"}), "c2-precision", "1-5"),
        (lambda b: b.update({"c2-precision": "6"}), "c2-precision", "1-5"),
        (lambda b: b.update({"c1-precision": "four"}), "c1-precision", "number"),
        (lambda b: b.pop("c1-recall"), "c1-recall", "choose a recall score"),
        (
            lambda b: b.update(
                {"c2-fluency": "awkward_construction", "c2-amount-awkward_construction": "0.7"}
            ),
            "c2-amount-awkward_construction",
            "0.1 to 0.5",
        ),
        (
            lambda b: b.update(
                {"c2-fluency": "broken_sentence", "c2-amount-broken_sentence": "2.5"}
            ),
            "c2-amount-broken_sentence",
            "0.5 to 2.0",
        ),
        (
            lambda b: b.update({"c1-fluency": "broken_sentence", "c1-amount-broken_sentence": ""}),
            "c1-amount-broken_sentence",
            "pick an amount",
        ),
        (lambda b: b.update({"c1-fluency": "typo"}), "c1-fluency", "unknown error type"),
        (lambda b: b.update({"c1-conciseness": "1"}), "c1-conciseness", "0 or 0.5"),
        (lambda b: b.update({"c1-inclusive": "1"}), "c1-inclusive", "0, 0.5 or 2"),
    ],
)
def test_every_refusal_names_caption_and_field_and_stores_nothing(
    client, make_study, annotator, mutate, field, words
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})

    response, lease = refused_form(client, study, annotator, mutate)

    assert response.status_code == 400
    html = response.content.decode()
    error = response.context["error"]
    assert error.field == field
    assert words in error.message
    text = next(g["text"] for g in lease.item.spec["groups"] if g["key"] == field.split("-")[0])
    assert text[:20] in error.message, "the message names the caption"
    field_at = html.index(f'id="{field}"')
    shown_at = html.index(f">{escape(error.message)}</p>", field_at)
    assert html.rindex('class="field-error"', 0, shown_at) > field_at, "shown by the field"
    assert not Judgment.objects.exists()
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.OPEN


def test_a_missing_caption_group_is_refused(make_study, make_annotator):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    participant = member(study, make_annotator("ann", native=True))
    lease = assignment_next(participant=participant)
    data = all_scores(lease.item)
    del data["captions"]["c2"]

    with pytest.raises(ServiceError) as refused:
        judgment_submit(participant=participant, token=lease.token, data=data)

    assert refused.value.field == "c2-precision"
    assert not Judgment.objects.exists()


def test_identical_texts_are_shown_once_and_scores_apply_to_each_system(
    client, make_study, annotator, tmp_path
):
    study = thumb_study(make_study, captions={"cat": CAPTIONS["cat"]})
    member(study, annotator)
    client.force_login(annotator)

    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()

    assert html.count("A cat laying in a suitcase.") == 1
    for system in ("Up-Down", "VinVL"):
        assert system not in html, "systems are hidden from annotators"
    lease = Assignment.objects.get(participant__user=annotator)
    body = form_for(lease.item, precision=3, recall=2)
    body.update(
        {
            "c2-fluency": ["casing", "awkward_construction"],
            "c2-amount-awkward_construction": "0.2",
            "c2-conciseness": "0.5",
        }
    )
    response = client.post(reverse("participate_submit", args=[study.public_id, lease.token]), body)
    assert response.status_code == 302

    rows = exported_rows(study, tmp_path)
    by_system = {row["system"]: row for row in rows}
    assert set(by_system) == {"Human", "Up-Down", "VinVL"}
    expected = rubric.total(3, 2, 0.3, 0.5)
    for system in ("Up-Down", "VinVL"):
        row = by_system[system]
        assert (
            row["precision"],
            row["recall"],
            row["fluency"],
            row["conciseness"],
            row["total"],
        ) == (3, 2, 0.3, 0.5, expected)
        errors = json.loads(row["fluency_errors"])
        assert set(errors) == {"casing", "awkward_construction"}
        assert errors["awkward_construction"] == 0.2
        assert row["stage"] == STAGE1
    assert by_system["Up-Down"]["raw_caption"] == "A cat laying in a suitcase ."
    assert by_system["VinVL"]["raw_caption"] == "a cat laying in a suitcase"
    assert by_system["Human"]["total"] == rubric.total(3, 2)


def test_caption_order_is_shuffled_per_annotator_and_stable_on_reload(
    client, make_study, make_annotator
):
    five = {
        "many": [("Human", "Caption zero."), *[(f"S{n}", f"Caption {n}.") for n in range(1, 8)]]
    }
    orders = []
    for name in ("ann", "bob", "cyd", "dan"):
        study = thumb_study(make_study, captions=five)
        user = make_annotator(name)
        member(study, user)
        client.force_login(user)
        url = reverse("participate_next", args=[study.public_id])
        first = re.findall(r'class="cap-text" id="(c\d+)-text"', client.get(url).content.decode())
        again = re.findall(r'class="cap-text" id="(c\d+)-text"', client.get(url).content.decode())
        assert first == again
        orders.append(tuple(first))
    assert len(set(orders)) > 1


# ---------------------------------------------------------------------- page budget


def five_caption_study(make_study, extra_images):
    captions = {
        "five": [
            ("Human", "A woman selling doughnuts at a counter."),
            *[(f"S{n}", f"A person standing near food number {n}.") for n in range(1, 5)],
        ]
    }
    return thumb_study(make_study, captions=captions, extra_images=extra_images)


def test_the_item_page_makes_the_same_number_of_queries_for_any_study_size(
    client, make_study, make_annotator, django_assert_num_queries
):
    counts = []
    for n, extra in enumerate((0, 60)):
        study = five_caption_study(make_study, extra)
        user = make_annotator(f"a{n}")
        member(study, user)
        client.force_login(user)
        url = reverse("participate_next", args=[study.public_id])
        client.get(url)  # lease the item (writes), then measure the reading page
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    print(f"thumb item page: {counts[0]} queries with 1 image, {counts[1]} with 61 images")
    assert counts[0] == counts[1]
    with django_assert_num_queries(counts[0]):
        client.get(url)


def test_the_item_page_with_five_captions_weighs_under_100_kb(client, make_study, annotator):
    study = five_caption_study(make_study, 0)
    member(study, annotator)
    client.force_login(annotator)

    html = client.get(reverse("participate_next", args=[study.public_id])).content.decode()

    assert html.count('class="cap-text"') == 5
    assets = re.findall(r'(?:src|href)="/static/([^"]+\.(?:js|css))"', html)
    assert "modes/thumb/thumb.js" in assets and "capeval/capeval.css" in assets
    weight = len(html.encode()) + sum(Path(finders.find(a)).stat().st_size for a in assets)
    print(f"thumb item page: {len(html.encode())} B HTML, {weight} B with CSS and JS")
    assert weight < 100_000


# ---------------------------------------------------------------------- report


def test_report_on_a_tiny_study_gives_the_hand_computed_numbers(make_study, make_annotator):
    study = tiny_study(make_study, make_annotator)
    messages = []

    result = MODE.report.run(study, lambda pct, msg="": messages.append(pct))

    human, machine = result["per_system"]["Human"], result["per_system"]["M1"]
    assert human["precision"]["mean"] == 5.0
    assert human["recall"]["mean"] == 4.5
    assert human["conciseness"]["mean"] == 0.25
    assert human["total"]["mean"] == pytest.approx((5.0 + 4.0) / 2)  # 4.5 - 0.5 on image two
    assert machine["recall"]["mean"] == 3.0, "stage 2 (3) replaced stage 1 (2) on image one"
    assert machine["total"]["mean"] == pytest.approx((4.0 + 3.0) / 2)
    assert (human["n_best"], machine["n_best"]) == (2, 0), "M1 ties on P only, never on R"
    assert (human["n_worst"], machine["n_worst"]) == (0, 2)
    assert result["histograms"]["machine"]["recall"] == [0, 0, 2, 0, 0]
    agreement = result["stage_agreement"]
    assert agreement["n_captions"] == 4
    assert agreement["modified_share"]["recall"] == 0.25
    assert agreement["modified_share"]["conciseness"] == 0.25
    assert agreement["modified_share"]["any"] == 0.5
    assert agreement["kappa"]["precision"] == 1.0
    bleu = result["correlations"]["bleu"]
    assert bleu["with_human"]["n"] == 4 and bleu["without_human"]["n"] == 2
    assert result["workflow"]["images_with_stage2"] == 2
    assert messages[-1] == 100 and messages == sorted(messages)

    context = MODE.report.context(result, {"wp": "1", "wr": "0"})
    weighted = {row["system"]: row["weighted"] for row in context["rows"]}
    assert weighted["Human"] == pytest.approx(5.0 - 0.25)
    assert weighted["M1"] == pytest.approx(4.0)
    assert MODE.report.context(result, {"wp": "-1"})["weights_error"]


def test_report_page_shows_the_tables_and_draws_the_figures(
    client, make_study, make_annotator, researcher, django_capture_on_commit_callbacks
):
    study = tiny_study(make_study, make_annotator)
    client.force_login(researcher)
    url = reverse("study_report", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url)

    html = client.get(url, {"wp": "1", "wr": "0"}).content.decode()

    assert "paper Table 2" in html and "paper Table 3" in html and "paper Table 4" in html
    assert re.search(r'data-field="recall">3\.00', html), "M1's final recall mean"
    assert "4.75" in html, "Human's Total with weights (1, 0)"
    # Ranking robustness beside Table 2: the stored pair, rendered (rubrics tests check the
    # number against brute force).
    (pair,) = selectors.report_latest(study).result["robustness"]
    assert (pair["upper"], pair["lower"]) == ("Human", "M1")
    cell = "none can" if pair["removed"] is None else f"{pair['removed']} of {pair['total']}"
    assert re.search(rf'data-upper="Human" data-lower="M1">.*?data-field="removed">{cell}<', html)
    for name in MODE.report.figure_names:
        figure = client.get(reverse("report_figure", args=[study.pk, name, "svg"]))
        assert figure.status_code == 200 and b"<svg" in figure.content


def test_another_researcher_cannot_open_the_report(
    client, make_study, make_annotator, other_researcher
):
    study = tiny_study(make_study, make_annotator)
    client.force_login(other_researcher)
    assert client.get(reverse("study_report", args=[study.pk])).status_code == 404
    assert client.post(reverse("study_report", args=[study.pk])).status_code == 404


def test_a_report_without_judgments_fails_with_a_message(make_study):
    study = thumb_study(make_study)
    with pytest.raises(ServiceError, match="No stage-1 judgments"):
        MODE.report.run(study, lambda *a: None)


def three_image_study(make_study, make_annotator, **settings):
    """Three images (Human and M1 each): stage 1 on all, stage 2 on "one" and "two" only,
    the check (every caption sampled) on both. Hand-worked numbers in the tests below."""
    captions = {
        name: [("Human", f"A human caption of {name}."), ("M1", f"A machine caption {name}.")]
        for name in ("one", "two", "three")
    }
    study = thumb_study(make_study, captions=captions, settings=settings)
    scores_of = {  # kind -> image -> (Human P, R, M1 P, R)
        STAGE1: {"one": (5, 5, 5, 2), "two": (5, 4, 3, 3), "three": (4, 4, 2, 2)},
        STAGE2: {"one": (5, 5, 5, 3), "two": (5, 4, 4, 3)},
        CHECK: {"one": (5, 5, 5, 3), "two": (5, 4, 4, 2)},
    }

    def payload(item):
        hp, hr, mp, mr = scores_of[item.kind][item.image.name]
        return {
            "captions": {
                g["key"]: scores(hp, hr)
                if g["captions"][0]["system"] == "Human"
                else scores(mp, mr)
                for g in item.spec["groups"]
            }
        }

    for kind, who in ((STAGE1, "ann"), (STAGE2, "bob"), (CHECK, "cyd")):
        participant = member(study, make_annotator(who, native=True))
        for _ in scores_of[kind]:
            judge(participant, payload, kind)
    return study


def test_report_leaves_out_stage1_only_images_and_the_developmental_phase_by_hand(
    make_study, make_annotator
):
    study = three_image_study(make_study, make_annotator, developmental_images=1)

    result = MODE.report.run(study, lambda *a: None)

    # Scores: stage 2 of "one" and "two"; "three" (stage 1 only) is not mixed in.
    human, machine = result["per_system"]["Human"], result["per_system"]["M1"]
    assert (human["n_images"], machine["n_images"]) == (2, 2)
    assert human["precision"]["mean"] == 5.0  # (5 + 5) / 2; with "three" it was 14 / 3
    assert human["recall"]["mean"] == 4.5
    assert machine["precision"]["mean"] == 4.5  # stage 2: 5 and 4
    assert machine["recall"]["mean"] == 3.0
    workflow = result["workflow"]
    assert workflow["scores_from"] == STAGE2
    assert (workflow["stage1_only_images"], workflow["stage1_only_captions"]) == (1, 2)
    # Agreement: "one" is the developmental phase (position 0), so image "two" alone:
    # P stage 1 (5, 3) vs stage 2 (5, 4): po = 1/2, pe = 1/2 * 1/2 (only 5 is shared) = 1/4,
    # kappa = (1/2 - 1/4) / (1 - 1/4) = 1/3. M1's P was changed: 1 of 2.
    assert result["developmental"] == {"images": 1, "excluded_images": 1, "excluded_captions": 2}
    agreement = result["stage_agreement"]
    assert agreement["n_captions"] == 2
    assert agreement["kappa"]["precision"] == pytest.approx(1 / 3)
    assert agreement["modified_share"]["precision"] == 0.5
    assert agreement["modified_share"]["recall"] == 0.0
    # Check against stage 2 on "one" and "two": 4 caption texts, M1's recall on "two"
    # changed 3 -> 2. R final (5, 3, 4, 3) vs check (5, 3, 4, 2): po = 3/4,
    # pe = (1*1 + 1*1 + 2*1 + 0*1) / 16 = 1/4, kappa = (3/4 - 1/4) / (3/4) = 2/3.
    check = result["third_check"]
    assert (check["captions"], check["sampled"], check["checked"]) == (100, 6, 4)
    assert check["agreement"]["unchanged"] == 3
    assert check["agreement"]["changed"] == {
        "precision": 0,
        "recall": 1,
        "fluency": 0,
        "conciseness": 0,
        "inclusive": 0,
        "any": 1,
    }
    assert check["agreement"]["kappa"]["recall"] == pytest.approx(2 / 3)
    assert check["agreement"]["kappa"]["precision"] == pytest.approx(1.0)


def test_without_a_developmental_phase_every_reviewed_image_counts_for_agreement(
    make_study, make_annotator
):
    study = three_image_study(make_study, make_annotator)

    result = MODE.report.run(study, lambda *a: None)

    assert result["developmental"]["excluded_images"] == 0
    # P stage 1 (5, 5, 5, 3) vs stage 2 (5, 5, 5, 4) over both images: 1 of 4 changed.
    assert result["stage_agreement"]["n_captions"] == 4
    assert result["stage_agreement"]["modified_share"]["precision"] == 0.25


def test_report_page_says_where_the_scores_come_from_and_what_was_left_out(
    client, make_study, make_annotator, researcher, django_capture_on_commit_callbacks
):
    study = three_image_study(make_study, make_annotator, developmental_images=1)
    client.force_login(researcher)
    url = reverse("study_report", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url)

    html = re.sub(r"\s+", " ", client.get(url).content.decode())

    assert "Every score is stage 2's" in html
    assert "2 captions on 1 image have stage 1 only</strong>: left out" in html
    assert "first 1 image of the study" in html
    assert "2 caption texts on 1 image reviewed in stage 2 are left out" in html
    assert "confirmed every score of 3 of 4 captions</strong> and changed 1" in html
    check_table = re.search(r'<table id="check">(.*?)</table>', html).group(1)
    assert re.search(r"Recall</th><td class=\"num\">1</td><td class=\"num\">25%", check_table)


def test_a_report_before_any_stage2_names_the_images_waiting_for_it(make_study, make_annotator):
    study = thumb_study(make_study)
    judge(member(study, make_annotator("ann", native=True)), all_scores, STAGE1)

    with pytest.raises(ServiceError, match=r"No image has finished stage 2 yet \(1 image has"):
        MODE.report.run(study, lambda *a: None)


def test_a_study_without_stage2_reports_stage1_and_has_no_check(make_study, make_annotator):
    study = thumb_study(make_study, settings={"stage2": False})
    judge(member(study, make_annotator("ann", native=True)), all_scores, STAGE1)

    result = MODE.report.run(study, lambda *a: None)

    assert result["workflow"]["scores_from"] == STAGE1
    assert result["workflow"]["stage1_only_images"] == 0
    assert result["third_check"] == {"captions": 0, "sampled": 0, "checked": 0, "agreement": None}


# ---------------------------------------------------------------------- export


def exported_rows(study, folder):
    """The study's export table, through the export service (Parquet, typed)."""
    export_file(study=study, path=folder / "export.parquet", export_format="parquet")
    return pq.read_table(folder / "export.parquet").to_pylist()


def test_export_gives_one_row_per_caption_per_stage(make_study, make_annotator, tmp_path):
    study = tiny_study(make_study, make_annotator)

    rows = exported_rows(study, tmp_path)

    assert len(rows) == 2 * 2 * 2, "2 images x 2 captions x 2 stages"
    names = [c.name for c in MODE.export.columns()]
    assert all(list(row) == names for row in rows)
    changed = [r for r in rows if r["changed"]]
    assert {(r["system"], r["stage"], r["changed"]) for r in changed} == {
        ("M1", STAGE2, "recall"),
        ("Human", STAGE2, "conciseness"),
    }
    bus = next(r for r in changed if r["system"] == "M1")
    assert (bus["stage1_recall"], bus["recall"]) == (2, 3), "stage 2 changed recall from 2"


# ---------------------------------------------------------------------- import_thumb


def release_line(seg, system, text, p, r, fl=-0.0, con=-0.0, inc=-0.0):
    return json.dumps(
        {
            "SYS": system,
            "seg_id": seg,
            "set_id": 1,
            "hyp": text,
            "image": f"COCO_val2014_{int(seg):012d}.jpg",
            "P": p,
            "R": r,
            "Fl": fl,
            "Inc": inc,
            "Con": con,
            "human_score": (p + r) / 2 + fl + con + inc,
        }
    )


def test_import_thumb_loads_a_closed_study_that_reports(tmp_path, researcher):
    path = tmp_path / "release.jsonl"
    path.write_text(
        "\n".join(
            [
                release_line("1", "Human", "a cat on a mat", 5.0, 4.0, fl=-0.1),
                release_line("1", "M", "A cat.", 5.0, 2.0),
                release_line("1", "N", "a cat", 5.0, 2.0),
                release_line("2", "Human", "two dogs", 4.0, 4.0, con=-0.5),
                release_line("2", "M", "A dog.", 3.0, 2.0),
                release_line("2", "N", "a dog", 3.0, 3.0),
            ]
        )
        + "\n"
    )
    out = io.StringIO()

    call_command(
        "import_thumb", str(path), "--owner", researcher.username, "--name", "R", stdout=out
    )

    study = Study.objects.get(name="R")
    assert study.status == Study.Status.CLOSED and study.mode == "thumb"
    assert list(Image.objects.filter(study=study).values_list("source", "file")) == [
        ("1", ""),
        ("2", ""),
    ]
    assert Caption.objects.filter(study=study).count() == 6
    groups = Item.objects.get(study=study, image__source="1").spec["groups"]
    assert len(groups) == 2, "identical text and scores: one group"
    groups = Item.objects.get(study=study, image__source="2").spec["groups"]
    assert len(groups) == 3, "identical text but different scores stay apart"
    assert Judgment.objects.filter(study=study).count() == 2
    result = MODE.report.run(study, lambda *a: None)
    assert result["per_system"]["Human"]["fluency"]["mean"] == pytest.approx(0.05)
    assert result["per_system"]["Human"]["conciseness"]["mean"] == pytest.approx(0.25)
    assert result["per_system"]["N"]["recall"]["mean"] == 2.5
    assert "2 images" in out.getvalue()


def test_import_thumb_refuses_a_bad_file_and_writes_nothing(tmp_path, researcher):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            [
                release_line("1", "Human", "a cat", 5.0, 4.0),
                release_line("1", "M", "A cat.", 6.0, 2.0),
                "not json",
            ]
        )
        + "\n"
    )

    with pytest.raises(CommandError) as failed:
        call_command("import_thumb", str(path), "--owner", researcher.username)

    assert "line 2" in str(failed.value) and "line 3" in str(failed.value)
    assert not Study.objects.exists()
    assert not Participant.objects.exists()


def test_export_has_the_check_rows_with_what_the_check_changed_from_stage2(
    make_study, make_annotator, tmp_path
):
    study = three_image_study(make_study, make_annotator)

    rows = exported_rows(study, tmp_path)

    checks = [r for r in rows if r["stage"] == CHECK]
    assert len(checks) == 4, "2 checked images x 2 captions"
    assert {(r["image"], r["system"], r["changed"]) for r in checks if r["changed"]} == {
        ("two", "M1", "recall")
    }
    changed = next(r for r in checks if r["changed"])
    assert changed["recall"] == 2
    assert changed["stage1_recall"] is None, "check rows review stage 2, not stage 1"
