"""Histories for the differential test of the hot path (issue 48): worlds, steps, a runner.

A *world* is a live study (of the tests' vehicle mode, HUMANr, spans or THumB) with a fixed
cast of participants: crowd workers, two of them on one network, two of them in one browser,
and a registered account. A *history* is a list of steps (a participant asks for the next
item, answers a lease, time passes, the beat releases expired leases, a researcher takes a
lease back, the study closes), drawn by Hypothesis. ``run`` plays a history through one *path*
(the old ORM services in ``orm_reference``, or ``annotation.services``) inside a savepoint
that is rolled back afterwards, with the id sequences put back, so the other path replays
it on an identical database with the same ids. HUMANr draws each trial's sides from the
lease's id, so equal ids are what makes the two replays comparable at all.

What a run returns is everything a caller can observe: each call's outcome (lease or None,
the stored judgment and its flags, the refusal's class, code, message and details), the
participant object as the call left it, and at the end every row the services write. Ids of
rows made during the run are replaced by their rank, and tokens never appear (steps name
leases by the order they were served in), so only behaviour is compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from annotation.errors import ServiceError
from annotation.models import Assignment, Item, Judgment, Participant, Study
from annotation.services.studies import study_close

#: The rows the two services write (and whose id sequences a replay must put back).
WRITTEN = (Assignment, Judgment, Item, Participant)


@dataclass(frozen=True)
class Path:
    """One implementation of the services. The functions are looked up on each call, so a
    test can plant a change by replacing a module attribute (``monkeypatch.setattr``)."""

    name: str
    leases: ModuleType  # assignment_next, assignment_release, assignment_release_expired
    judgments: ModuleType  # judgment_submit

    def next(self, **kwargs):
        return self.leases.assignment_next(**kwargs)

    def submit(self, **kwargs):
        return self.judgments.judgment_submit(**kwargs)

    def release(self, **kwargs):
        return self.leases.assignment_release(**kwargs)

    def release_expired(self, **kwargs):
        return self.leases.assignment_release_expired(**kwargs)


@dataclass
class World:
    """A live study and its cast (participant ids by index), built once per test."""

    study: Study
    cast: list[int]
    #: Answers by kind: "valid" and "other" (both valid), "invalid" (refused by the mode).
    #: A function of the lease's item (None: no lease) where the form is the item's own:
    #: THumB's has fields per caption group, and the groups differ between items.
    answers: dict[str, dict[str, Any] | Callable[[Item | None], dict[str, Any]]]
    #: The crowd lease's length, so that waits can land on either side of an expiry.
    lease_seconds: int
    start: datetime


@dataclass
class Trace:
    """What one run of a history showed: one entry per step, and the rows at the end."""

    steps: list[Any] = field(default_factory=list)
    rows: dict[str, Any] = field(default_factory=dict)


def _waits(world: World) -> dict[str, float]:
    lapse = settings.CAPEVAL_LAPSE_WAIT_SECONDS
    return {
        "tick": 1,
        "lease-1": world.lease_seconds - 1,
        "lease": world.lease_seconds,
        "lease+1": world.lease_seconds + 1,
        "lapse_wait": lapse + 1,
        "account_lease": settings.CAPEVAL_LEASE_SECONDS,
        "window": settings.CAPEVAL_LAPSE_WINDOW_SECONDS + 1,
        "bar": settings.CAPEVAL_LAPSE_BAR_SECONDS + 1,
    }


# -- Sequences: a replay after a rollback gets the same ids ---------------------------------


def _sequence_names() -> list[str]:
    if connection.vendor != "postgresql":
        return []
    names = []
    with connection.cursor() as cursor:
        for model in WRITTEN:
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [model._meta.db_table])
            names.append(cursor.fetchone()[0])
    return names


def _sequences_save() -> list[tuple[str, int, bool]]:
    """PostgreSQL's sequences ignore rollbacks; SQLite's (``sqlite_sequence``) roll back."""
    saved = []
    with connection.cursor() as cursor:
        for name in _sequence_names():
            cursor.execute(f"SELECT last_value, is_called FROM {name}")  # noqa: S608 (a name we read)
            saved.append((name, *cursor.fetchone()))
    return saved


def _sequences_restore(saved: list[tuple[str, int, bool]]) -> None:
    with connection.cursor() as cursor:
        for name, last_value, is_called in saved:
            cursor.execute("SELECT setval(%s, %s, %s)", [name, last_value, is_called])


# -- Playing a history ------------------------------------------------------------------------


class _Run:
    """One replay: the path, the clock, and the leases served so far (in serving order)."""

    def __init__(self, path: Path, world: World):
        self.path, self.world = path, world
        self.now = world.start
        self.served: list[int] = []  # assignment ids, in the order calls returned them
        self.answered: dict[int, int] = {}  # assignment id: parts stored by this history
        self.last_served = 0  # who was served last: an answer's "who" when it names none
        self.last_sent: dict[str, Any] | None = None  # the last submission, to send again
        self.waits = _waits(world)

    def participant(self, who: int | None) -> Participant:
        # Read afresh per call, as a request's view does.
        who = self.last_served if who is None else who
        return Participant.objects.get(pk=self.world.cast[who % len(self.world.cast)])

    def step(self, step: tuple) -> Any:
        kind = step[0]
        if kind == "wait":
            self.now += timedelta(seconds=self.waits[step[1]])
            return None
        if kind == "next":
            return self.call_next(step[1])
        if kind == "answer":
            return self.call_submit(*step[1:])
        if kind == "finish":
            return self.finish(step[1])
        if kind == "resend":
            return self.resend()
        if kind == "release_expired":
            return _outcome(lambda: self.path.release_expired(now=self.now))
        if kind == "release":
            return self.release(step[1])
        if kind == "close":
            study_close(study=Study.objects.get(pk=self.world.study.pk))
            return None
        raise AssertionError(f"unknown step {step!r}")

    def call_next(self, who: int) -> Any:
        participant = self.participant(who)
        outcome = _outcome(lambda: self.path.next(participant=participant, now=self.now))
        if isinstance(outcome, Assignment):
            self.last_served = who
            if outcome.pk not in self.served:
                self.served.append(outcome.pk)
            outcome = _lease_seen(outcome)
        return outcome, _participant_seen(participant)

    def lease(self, index: int | None, participant: Participant) -> Assignment | None:
        """The lease a step names: ``None`` is the participant's latest, a number is the
        n-th lease served in this run (whoever holds it); None if there is none."""
        if index is None:
            own = Assignment.objects.filter(pk__in=self.served, participant=participant)
            return own.order_by("-served_at", "-pk").first()
        if not self.served:
            return None
        return Assignment.objects.get(pk=self.served[index % len(self.served)])

    def call_submit(self, who: int | None, index: int | None, part: str, answer: str, dwell: str):
        participant = self.participant(who)
        lease = self.lease(index, participant)
        self.now += timedelta(seconds={"none": 0, "short": 1, "long": 5}[dwell])
        token = lease.token if lease is not None else "no-such-token"
        done = self.answered.get(lease.pk, 0) if lease is not None else 0
        number = {"next": done, "again": done - 1, "skip": done + 1, "beyond": 99}[part]
        data = self.world.answers[answer]
        if callable(data):
            data = data(lease.item if lease is not None else None)
        self.last_sent = {"who": who, "token": token, "data": data, "part": number}
        return self.send(participant, lease, token, data, number)

    def send(self, participant, lease, token, data, number) -> Any:
        outcome = _outcome(
            lambda: self.path.submit(
                participant=participant, token=token, data=data, part=number, now=self.now
            )
        )
        if not isinstance(outcome, tuple):
            if outcome.created:
                self.answered[lease.pk] = self.answered.get(lease.pk, 0) + 1
            outcome = _submitted_seen(outcome)
        return outcome, _participant_seen(participant)

    def resend(self) -> Any:
        """The last submission sent again, as is (a double click, a retried request)."""
        if self.last_sent is None:
            return None
        sent = self.last_sent
        participant = self.participant(sent["who"])
        lease = Assignment.objects.filter(token=sent["token"]).first()
        return self.send(participant, lease, sent["token"], sent["data"], sent["part"])

    def finish(self, who: int | None) -> list[Any]:
        """Answer the rest of the participant's latest lease, part after part (a HUMANr group
        has ten), stopping at the first refusal."""
        seen: list[Any] = []
        for _ in range(20):
            outcome = self.call_submit(who, None, "next", "valid", "long")
            seen.append(outcome)
            if not (isinstance(outcome[0], tuple) and outcome[0][0] == "stored"):
                break
        return seen

    def release(self, index: int) -> Any:
        if not self.served:
            return None
        lease_id = self.served[index % len(self.served)]
        study = Study.objects.get(pk=self.world.study.pk)
        return _outcome(
            lambda: self.path.release(study=study, assignment_id=lease_id, released_by="rita")
        )


def _outcome(call) -> Any:
    """The call's return value, or its refusal as (class, code, message, field, details)."""
    try:
        return call()
    except ServiceError as exc:
        return ("refused", type(exc).__name__, exc.code, str(exc), exc.field, exc.details)


def _lease_seen(lease: Assignment) -> tuple:
    item = lease.item
    return (
        "lease",
        lease.pk,
        lease.participant_id,
        lease.item_id,
        lease.round,
        lease.status,
        lease.served_at,
        lease.expires_at,
        (item.pk, item.judgment_count, item.open_lease_count, item.target),
    )


def _submitted_seen(submitted) -> tuple:
    judgment = submitted.judgment
    return (
        "stored",
        submitted.created,
        submitted.late,
        judgment.pk,
        judgment.assignment_id,
        judgment.item_id,
        judgment.participant_id,
        judgment.part,
        judgment.payload,
        judgment.result,
        judgment.excluded,
        judgment.exclusion_reason,
        judgment.created_at,
    )


def _participant_seen(participant: Participant) -> tuple:
    """What the caller's participant object carries after the call (the services promise
    the state they left on it)."""
    return (participant.state, participant.status, participant.flags, participant.completed_at)


def _rows(world: World) -> dict[str, Any]:
    """Every row the services write, as they are at the end of the history."""
    study_id = world.study.pk
    return {
        "items": list(
            Item.objects.filter(study_id=study_id)
            .order_by("pk")
            .values_list(
                "pk", "position", "judgment_count", "open_lease_count", "target", "spec", "kind"
            )
        ),
        "leases": list(
            Assignment.objects.filter(item__study_id=study_id)
            .order_by("pk")
            .values_list(
                "pk",
                "participant_id",
                "item_id",
                "round",
                "status",
                "served_at",
                "expires_at",
                "submitted_at",
                "released_by",
            )
        ),
        "judgments": list(
            Judgment.objects.filter(study_id=study_id)
            .order_by("pk")
            .values_list(
                "pk",
                "assignment_id",
                "item_id",
                "participant_id",
                "part",
                "payload",
                "result",
                "dwell_ms",
                "excluded",
                "exclusion_reason",
                "guidelines_version",
                "created_at",
            )
        ),
        "participants": list(
            Participant.objects.filter(study_id=study_id)
            .order_by("pk")
            .values_list("pk", "state", "status", "flags", "completed_at")
        ),
    }


def run(path: Path, world: World, history: list[tuple]) -> Trace:
    """Play ``history`` through ``path``; roll everything back (ids included) afterwards."""
    saved = _sequences_save()
    before = {model.__name__: _max_pk(model) for model in WRITTEN}
    trace = Trace()
    with transaction.atomic():
        replay = _Run(path, world)
        for step in history:
            try:
                # A step of its own savepoint: a crash (a database error escaping a service)
                # undoes that step only, and the rows left are still read.
                with transaction.atomic():
                    trace.steps.append(replay.step(step))
            except Exception as exc:  # a crash is an outcome too; the rest cannot be played
                trace.steps.append(("crashed", type(exc).__name__, str(exc)[:300]))
                break
        trace.rows = _rows(world)
        transaction.set_rollback(True)
    _sequences_restore(saved)
    return _normalised(trace, before)


def _max_pk(model) -> int:
    return model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def _normalised(trace: Trace, before: dict[str, int]) -> Trace:
    """Ids of rows made during the run become ranks ("new#0", ...), in id order; ids of
    rows that existed before stay (they are the same rows in both replays)."""
    ranks: dict[tuple[str, int], str] = {}
    for table, model in (("leases", "Assignment"), ("judgments", "Judgment")):
        for rank, row in enumerate(row for row in trace.rows[table] if row[0] > before[model]):
            ranks[(model, row[0])] = f"{model}#{rank}"

    def fix(value, kind=None):
        if kind and (kind, value) in ranks:
            return ranks[(kind, value)]
        return value

    def fix_lease(entry):
        return (entry[0], fix(entry[1], "Assignment"), *entry[2:])

    def fix_stored(entry):
        return (*entry[:3], fix(entry[3], "Judgment"), fix(entry[4], "Assignment"), *entry[5:])

    def fix_step(entry):
        if isinstance(entry, list):
            return [fix_step(each) for each in entry]
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], tuple):
            return (fix_step(entry[0]), entry[1])
        if isinstance(entry, tuple) and entry and entry[0] == "lease":
            return fix_lease(entry)
        if isinstance(entry, tuple) and entry and entry[0] == "stored":
            return fix_stored(entry)
        return entry

    rows = trace.rows
    fixed = Trace(steps=[fix_step(entry) for entry in trace.steps])
    fixed.rows = {
        **rows,
        "leases": [(fix(row[0], "Assignment"), *row[1:]) for row in rows["leases"]],
        "judgments": [
            (fix(row[0], "Judgment"), fix(row[1], "Assignment"), *row[2:])
            for row in rows["judgments"]
        ],
    }
    return fixed
