"""The hot path's rewrite keeps the old services' guarantees: a differential test (issue 48).

Hypothesis draws histories (``histories.py``: arrivals, answers valid and not, repeated
tokens, parts out of order, time passing over lease expiries and the lapse rule, the beat's
release, a researcher's take-back, the study closing, several participants' calls
interleaved) and each is played through the old ORM services (``orm_reference``, commit
230e884, kept unchanged) and through ``annotation.services`` on the same database state. Any
difference in what a caller sees or in the rows left is a failure, shown with the first step
where the two differ (Hypothesis then shrinks the history to a minimal one).

The planted tests prove the check can fail: a lease granted beyond an item's capacity, a
judgment counted twice, or THumB's crowd code stamped one judgment late, planted in either
path, must be found within a few examples.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import annotation.services.assignments as new_leases
import annotation.services.judgments as new_judgments
from annotation.models import Assignment, Item, Participant
from annotation.modes import catch
from annotation.modes.base import SCREEN_OUT_FLAG
from annotation.modes.thumb import integrity as thumb_integrity
from annotation.modes.thumb.models import Rater
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.humanr import humanr_study
from tests.factories.spans import spans_study
from tests.factories.thumb import scores, thumb_study
from tests.hotpath import orm_reference, orm_reference_judgments
from tests.hotpath.histories import Path, Trace, World, run

pytestmark = pytest.mark.django_db

OLD = Path("old ORM (orm_reference)", orm_reference, orm_reference_judgments)
NEW = Path("annotation.services", new_leases, new_judgments)

#: Histories per database (issue 48 asks for at least 500); more with the variable set.
EXAMPLES = int(os.environ.get("CAPEVAL_DIFFTEST_EXAMPLES", "500"))
#: Reproducible: the same histories on every run and database, none kept between runs.
DIFFERENTIAL = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)
#: The planted tests stop at the first difference found (no shrinking: it is not read).
PLANTED = settings(DIFFERENTIAL, max_examples=300, phases=[Phase.generate])

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Divergence(AssertionError):
    """The two paths differed: what the planted tests expect, and nothing else."""


# -- Worlds ------------------------------------------------------------------------------------


def _cast(study, account) -> list[int]:
    """Six participants: two crowd workers on one network, two in one browser (each on a
    network of its own), one with neither, and a registered account."""
    places = [
        ("w-net-a", "", "198.51.100.7"),
        ("w-net-b", "", "198.51.100.7"),
        ("w-browser-a", "browser-1", "203.0.113.1"),
        ("w-browser-b", "browser-1", "203.0.113.2"),
        ("w-alone", "", ""),
    ]
    cast = []
    for worker, browser, network in places:
        participant = crowd_participant(study, worker)
        Participant.objects.filter(pk=participant.pk).update(
            browser_id=browser, network=network, address=network or None
        )
        cast.append(participant.pk)
    member = Participant.objects.create(
        study=study, user=account, source=Participant.Source.ACCOUNT
    )
    return [*cast, member.pk]


def _world(study, account, answers, lease_seconds) -> World:
    return World(study, _cast(study, account), answers, lease_seconds, START)


#: THumB's images: "cat" has one text under two systems (one caption group of two captions),
#: "bus" three groups, so a crowd worker's least time per set differs between items.
THUMB_CAPTIONS = {
    "cat": [
        ("Human", "a black cat sleeping on a red suitcase"),
        ("Up-Down", "A cat laying in a suitcase ."),
        ("VinVL", "a cat laying in a suitcase"),
    ],
    "dog": [("Human", "A brown dog catching a frisbee."), ("Up-Down", "A dog in a park.")],
    "bus": [
        ("Human", "A red bus on a street."),
        ("Up-Down", "A bus."),
        ("VinVL", "A bus parked in a city."),
    ],
}


def _thumb_answer(precision, recall, **extra):
    """A THumB answer: the same scores for every caption group of the item served."""

    def answer(item):
        keys = [group["key"] for group in item.spec["groups"]] if item is not None else []
        return {"captions": {key: scores(precision, recall, **extra) for key in keys}}

    return answer


def _thumb_invalid(item):
    """Refused by every kind of THumB item, the fluency round too (it reads only the fluency
    errors): an unknown error type and a score out of range, then in every other group no
    recall and no review tick, so the refusal lists several fields."""
    keys = [group["key"] for group in item.spec["groups"]] if item is not None else []
    captions = {key: {**scores(), "recall": None, "confirmed": False} for key in keys[1:]}
    if keys:
        captions[keys[0]] = scores(precision=7, fluency_errors={"no_such_error": 1})
    return {"captions": captions}


THUMB_ANSWERS = {
    "valid": _thumb_answer(4, 3),
    # Numbers as the page's form sends them (text), and scores a review sees as changed.
    "other": _thumb_answer(
        "1", "5", fluency_errors={"awkward_construction": "0.3"}, conciseness="0.5"
    ),
    "invalid": _thumb_invalid,
}


def _thumb_worlds(make_study, account) -> dict[str, World]:
    """THumB as published (stage 1, the review, the third annotator's check, the fluency
    round), and with catch trials. The account is a native English speaker: the fluency
    round is made only for images no native speaker judged, and served only to them.

    THumB's crowd code counts stored judgments (``completion_earned``): the rewrite once
    stamped it one judgment late on PostgreSQL, which no other world could show."""
    Rater.objects.create(user=account, native_english=True)
    crowd = {
        "seconds_per_caption": 0.25,
        "completion_images": 2,
        "crowd_lease_seconds": 60,
        "crowd_open_leases_per_address": 1,
    }
    published = thumb_study(
        make_study, captions=THUMB_CAPTIONS, settings={**crowd, "third_check_captions": 4}
    )
    # More images: a catch trial is drawn from images its worker has not met. No check or
    # fluency round (the world above has them): they would take turns from catch trials.
    catching = thumb_study(
        make_study,
        captions=THUMB_CAPTIONS,
        extra_images=2,
        settings={
            **crowd,
            "catch_rate": 0.5,
            # One missed trial breaks the rule, so short histories reach the flag, the
            # exclusion of every judgment of the worker and (with a code) the screen-out.
            "catch_min_seen": 1,
            "screen_out_code": "SCREENED",
            "third_check_captions": 0,
            "require_native_fluency": False,
        },
    )
    return {
        "THumB": _world(published, account, THUMB_ANSWERS, 60),
        "THumB, catch trials": _world(catching, account, THUMB_ANSWERS, 60),
    }


@pytest.fixture
def worlds(researcher, make_study):
    """One study per shape, built once per test; every history starts from one of them."""
    account = get_user_model().objects.create_user(username="annotator", password="pw")
    ratings = {"valid": {"rating": 4}, "other": {"rating": 1}, "invalid": {"rating": 7}}
    one_part = vehicle_study(
        researcher,
        name="one part",
        captions=3,
        target=1,
        min_seconds=1,
        completion_after=2,
        crowd_lease_seconds=60,
        crowd_open_leases_per_address=1,
    )
    two_parts = vehicle_study(
        researcher,
        name="two parts",
        captions=2,
        target=2,
        parts=2,
        min_seconds=1,
        completion_after=1,
        crowd_lease_seconds=60,
        crowd_open_leases_per_address=2,
    )
    groups = humanr_study(researcher, images=12, min_seconds_per_trial=1, crowd_lease_seconds=120)
    sliders = {"valid": {"raw": 2}, "other": {"raw": 8}, "invalid": {"raw": 12}}
    # Spans serves in an order drawn per worker, and pays a worker the study has nothing
    # more for (completion_exhausted): the two parts of the claim the others do not reach.
    marks = spans_study(
        researcher,
        images=1,
        target=1,
        min_seconds=1,
        completion_captions=5,
        crowd_lease_seconds=60,
        crowd_open_leases_per_address=1,
    )
    spans_answers = {
        "valid": {"spans": "[]", "score": 90},
        "other": {"spans": "[]", "score": 40},
        "invalid": {"spans": "[]", "score": 500},
    }
    return {
        "vehicle, one part": _world(one_part, account, ratings, 60),
        "vehicle, two parts": _world(two_parts, account, ratings, 60),
        "HUMANr": _world(groups, account, sliders, 120),
        "spans": _world(marks, account, spans_answers, 60),
        **_thumb_worlds(make_study, account),
    }


# -- Histories ---------------------------------------------------------------------------------

WHO = st.sampled_from(range(6))
#: Who answers: mostly whoever was served last (None), else anyone (often a NotFound).
ANSWERER = st.one_of(st.none(), st.none(), st.none(), WHO)
LEASE = st.one_of(st.none(), st.none(), st.integers(0, 30))
ANSWER = st.tuples(
    st.just("answer"),
    ANSWERER,
    LEASE,
    st.sampled_from(["next", "next", "next", "again", "skip", "beyond"]),
    st.sampled_from(["valid", "valid", "other", "invalid"]),
    st.sampled_from(["short", "short", "none", "long"]),
)
WAIT = st.tuples(
    st.just("wait"),
    st.sampled_from(
        ["tick", "lease-1", "lease", "lease+1", "lapse_wait", "account_lease", "window", "bar"]
    ),
)
NEXT = st.tuples(st.just("next"), WHO)
STEPS = {
    "next": NEXT,
    "answer": ANSWER,
    "finish": st.tuples(st.just("finish"), ANSWERER),
    "resend": st.tuples(st.just("resend")),
    "wait": WAIT,
    "release_expired": st.tuples(st.just("release_expired")),
    "release": st.tuples(st.just("release"), st.integers(0, 30)),
}
#: Kinds of step, weighted by repetition (``sampled_from`` draws an index uniformly; a
#: strategy repeated in ``one_of`` is not drawn more often).
KINDS = ["next"] * 4 + ["answer"] * 4 + ["finish"] * 2 + ["wait"] * 3
KINDS += ["resend", "release_expired", "release"]
STEP = st.sampled_from(KINDS).flatmap(STEPS.__getitem__)


#: Steps of a history (fewest, most), by world; 6 to 30 unless named. THumB's branches lie
#: deeper: an image's review and check each wait for the stage before them, by workers not
#: linked to its annotators, and its crowd code for a worker's second set. Hypothesis draws
#: lists of about twice their fewest elements, so the fewest sets the depth: from 6 (about 12
#: steps) only a few dozen of 500 histories got there, and the planted late code (below)
#: went unfound in 300.
LENGTHS = {"THumB": (10, 60), "THumB, catch trials": (10, 60)}


@st.composite
def histories(draw, names):
    """(world, steps), as many steps as ``LENGTHS`` says; about one history in eight closes
    the study on the way."""
    name = draw(st.sampled_from(names))
    fewest, most = LENGTHS.get(name, (6, 30))
    steps = draw(st.lists(STEP, min_size=fewest, max_size=most))
    if draw(st.sampled_from([False] * 7 + [True])):
        steps.insert(draw(st.integers(0, len(steps))), ("close",))
    return name, steps


# -- The check ---------------------------------------------------------------------------------


def assert_same(world: World, steps: list[tuple], old: Path = OLD, new: Path = NEW) -> Trace:
    """Play the history through both paths; raise Divergence where they differ."""
    before, after = run(old, world, steps), run(new, world, steps)
    for number, (seen_old, seen_new) in enumerate(zip(before.steps, after.steps, strict=False)):
        if seen_old != seen_new:
            raise Divergence(
                f"step {number} {steps[number]!r} differs:\n  {old.name}: {seen_old!r}\n"
                f"  {new.name}: {seen_new!r}"
            )
    if len(before.steps) != len(after.steps):
        raise Divergence(f"{len(before.steps)} steps played against {len(after.steps)}")
    for table, rows in before.rows.items():
        if rows != after.rows[table]:
            different = [
                pair for pair in zip(rows, after.rows[table], strict=False) if pair[0] != pair[1]
            ]
            raise Divergence(
                f"{table} differ at the end ({len(rows)} rows against "
                f"{len(after.rows[table])}); first: {different[:1]!r}"
            )
    return before


def check_histories(worlds, names, *, config=DIFFERENTIAL, old=OLD, new=NEW, seen=None):
    """Run the differential check over the histories Hypothesis draws for ``names``."""

    @config
    @given(histories(names))
    def check(history):
        name, steps = history
        try:
            trace = assert_same(worlds[name], steps, old, new)
        except Divergence as exc:
            # Schemathesis's pytest plugin blanks Hypothesis's "Failing test case" report
            # (``history=,``), so the failure names its world and history itself.
            raise Divergence(f"{exc}\n  world {name!r}, history {steps!r}") from None
        if seen is not None:
            seen.append((name, trace))

    check()


#: The worlds whose histories are drawn together, one test each. THumB's are apart so that
#: each gets EXAMPLES histories of its own: its crowd code once regressed unseen.
GROUPS = {
    "vehicle, HUMANr, spans": ["HUMANr", "spans", "vehicle, one part", "vehicle, two parts"],
    "THumB": ["THumB"],
    "THumB, catch trials": ["THumB, catch trials"],
}

#: What a world's own histories must reach beyond what every world must (below): the
#: branches it is in the differential test for.
REACHES = {
    # Spans serves in an order drawn per worker and pays a worker nothing is left for.
    "spans": {"settled when nothing was left"},
    # THumB's crowd code (counted from stored judgments), the review scored against the
    # stage before it, the items a last stage makes and the linked ids' flag (outcomes that
    # are not plain: the ORM's writes on PostgreSQL too).
    "THumB": {"code earned", "review stored", "fluency round made", "check made", "linked flag"},
    # Catch trials: reserved items served first, the rule's flag, exclusion and screen-out.
    "THumB, catch trials": {"catch trial answered", "flagged by catch trials", "excluded"}
    | {"screened out"},
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_old_and_new_services_agree_on_every_history(worlds, group):
    seen: list = []
    check_histories(worlds, GROUPS[group], seen=seen)
    assert len(seen) >= min(EXAMPLES, 500)
    _assert_histories_reach_what_matters(seen)


def _marks(trace: Trace) -> set[str]:
    """What one history reached, by name."""
    marks: set[str] = set()
    for entry in _flat(trace.steps):
        if entry and entry[0] == "lease":
            marks.add("lease")
        elif entry and entry[0] == "stored":
            marks.add("stored" if entry[1] else "repeat")
        elif entry and entry[0] == "refused":
            marks.add(f"refused {entry[2]}")
    rows = trace.rows
    if any(row[4] == Assignment.Status.RELEASED for row in rows["leases"]):
        marks.add("released")
    if any(row[2] + row[3] == row[4] for row in rows["items"]):
        marks.add("full item")
    kinds = {row[6] for row in rows["items"]}
    if "fluency" in kinds:
        marks.add("fluency round made")
    if "check" in kinds:
        marks.add("check made")
    for _pk, state, _status, flags, completed_at in rows["participants"]:
        if (state or {}).get("exhausted"):
            marks.add("settled when nothing was left")
        if completed_at is not None:
            marks.add("code earned")
        flagged = {flag.get("kind") for flag in flags or [] if isinstance(flag, dict)}
        if thumb_integrity.LINKED_FLAG in flagged:
            marks.add("linked flag")
        if catch.FLAG_KIND in flagged:
            marks.add("flagged by catch trials")
        if SCREEN_OUT_FLAG in flagged:
            marks.add("screened out")
    for row in rows["judgments"]:
        result, excluded = row[6] or {}, row[8]
        if "modified" in result:
            marks.add("review stored")
        if "catch" in result:
            marks.add("catch trial answered")
        if excluded:
            marks.add("excluded")
    return marks


def _assert_histories_reach_what_matters(seen) -> None:
    """The drawn histories exercise the cases the check is for, on every world: leases,
    stored judgments, refusals of several kinds, a lease taken again after it lapsed, an
    item at capacity, and each world's own branches (``REACHES``). A generator that never
    got there would prove nothing."""
    reached: dict[str, set[str]] = {}
    for name, trace in seen:
        reached.setdefault(name, set()).update(_marks(trace))
    everywhere = {"lease", "stored", "released", "full item"}
    for name in reached:
        wanted = everywhere | REACHES.get(name, set())
        assert wanted <= reached[name], (name, wanted - reached[name])
    somewhere = {"repeat", "refused not_found", "refused too_fast", "refused conflict"}
    somewhere |= {"refused invalid", "refused lease_expired", "refused gone"}
    assert somewhere <= set().union(*reached.values()), reached


def _flat(entries):
    for entry in entries:
        if isinstance(entry, list):
            yield from _flat(entry)
        elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], tuple):
            if isinstance(entry[0], tuple):
                yield entry[0]
        elif isinstance(entry, tuple):
            yield entry


# -- Planted changes: the check must find them -------------------------------------------------


def grant_beyond_capacity(module):
    """``assignment_next`` that, when nothing is left, leases an item already at capacity
    (its capacity check skipped once): the same slot granted twice."""
    real = module.assignment_next

    def planted(*, participant, now=None, mode=None):
        lease = real(participant=participant, now=now, mode=mode)
        if lease is not None:
            return lease
        items = Item.objects.filter(study_id=participant.study_id)
        items.update(target=F("target") + 1)
        try:
            return real(participant=participant, now=now, mode=mode)
        finally:
            items.update(target=F("target") - 1)

    return planted


def count_twice(module):
    """``judgment_submit`` that counts the judgment closing a lease twice on its item."""
    real = module.judgment_submit

    def planted(**kwargs):
        submitted = real(**kwargs)
        lease = submitted.judgment.assignment_id
        closed = Assignment.objects.filter(pk=lease, status=Assignment.Status.SUBMITTED)
        if submitted.created and closed.exists():
            Item.objects.filter(pk=submitted.judgment.item_id).update(
                judgment_count=F("judgment_count") + 1
            )
        return submitted

    return planted


def completion_one_late(module):
    """``judgment_submit`` whose mode judges THumB's crowd code as if the judgment just made
    were not stored yet: the code comes one judgment late, the rewrite's regression on
    PostgreSQL's one-statement path (commit 287e19c) replayed on either path and database."""
    real = module.judgment_submit
    earned = thumb_integrity.completion_earned

    def one_fewer(participant, config):
        later = dataclasses.replace(config, completion_images=config.completion_images + 1)
        return earned(participant, later)

    def planted(**kwargs):
        with mock.patch.object(thumb_integrity, "completion_earned", one_fewer):
            return real(**kwargs)

    return planted


#: Each plant, where it goes, and the worlds whose histories reach it quickly: one slot per
#: item fills at once; two per item leave room for a judgment counted twice (at capacity the
#: database's CHECK ``item_not_over_target`` refuses it, and the call fails: also a
#: difference, THumB's case, whose items take one judgment each). A worker of the THumB
#: world with catch trials is seldom left with nothing (five images, and a flagged worker
#: is refused before any claim): 300 histories did not reach a second grant there.
PLANTS = {
    "lease granted twice": (
        "leases",
        "assignment_next",
        grant_beyond_capacity,
        ("vehicle, one part", "THumB"),
    ),
    "counter off by one": (
        "judgments",
        "judgment_submit",
        count_twice,
        ("vehicle, two parts", "THumB", "THumB, catch trials"),
    ),
    "code one judgment late": ("judgments", "judgment_submit", completion_one_late, ("THumB",)),
}
PLANTED_IN = [(plant, world) for plant, (*_, names) in sorted(PLANTS.items()) for world in names]


@pytest.mark.parametrize("side", ["old", "new"])
@pytest.mark.parametrize(
    ("plant", "world"), PLANTED_IN, ids=[f"{plant} in {world}" for plant, world in PLANTED_IN]
)
def test_a_planted_change_in_either_path_is_found(worlds, monkeypatch, side, plant, world):
    where, function, make, _ = PLANTS[plant]
    path = OLD if side == "old" else NEW
    module = getattr(path, where)
    monkeypatch.setattr(module, function, make(module))
    with pytest.raises(Divergence):
        check_histories(worlds, [world], config=PLANTED)
