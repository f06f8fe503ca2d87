"""Catch trials on the data model, for VICR and THumB (docs/protocol-choices.md, "Catch trials").

The rules are in ``rubrics.catch`` and the transformations in ``rubrics.transformations``;
this module maps them onto items, judgments and participants. Like the modes, it never
writes: it returns unsaved items and the parts of an ``Outcome``.

A catch trial is an ``Item`` of kind ``catch``, reserved for one participant. In VICR it is
a pair; in THumB an image's caption set (a copy of its stage-1 item) whose human caption
group is replaced by the altered text (``key`` names that group), made by
``annotation/modes/thumb/catch.py``::

    spec = {"caption_id": <VICR: caption whose image is shown>,
            "groups": [...], "image_name": ...,  # THumB: the stage-1 spec, one group altered
            "catch": {"kind": "T_WP", "gamma": 0.5, "text": <shown text>,
                      "source_caption_id": <caption the text was made from>,
                      "participant_id": <the participant it is for>,
                      "key": <THumB: the altered group>}}

Half of the catch trials (alternating, see ``control_next``) are *controls* (``catch.kind ==
"control"``): a known-good caption shown untouched, which must score high (VICR: a human
caption on its own image; THumB: the untouched caption set, its human caption judged). So
"always low" fails the controls as "always high" fails the altered trials (issue 29).

Its own kind keeps it out of every query of a study's data items (scores, agreement,
exports' data views), and the mode's pages show it with the ordinary item template.
The judgment of a catch trial carries ``result["catch"] = {"kind", "gamma", "caught"}``.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Count, Max, Q, QuerySet

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, Judgment, Participant, Study
from annotation.modes.base import get_mode
from annotation.modes.settings import CHECKS, CrowdSettings, number, text, whole
from rubrics import catch as rules
from rubrics import transformations as tf

CATCH = "catch"
FLAG_KIND = "catch_failed"
#: The exclusion reason of judgments made after the participant was flagged.
LATER_REASON = "failed catch trials (flagged before this judgment)"


@dataclass(frozen=True)
class CatchSettings(CrowdSettings):
    """The settings of a mode that serves catch trials (THumB and VICR extend this)."""

    # 0: none, the published protocol. At most 0.5: the insertion probability after an
    # item is rate / (1 - rate) (rubrics.catch), which reaches 1 there.
    catch_rate: float = number(
        0,
        low=0,
        high=0.5,
        label="Share of catch trials",
        group=CHECKS,
        doc="Share of served items that are catch trials (0: none, the published "
        "protocol; at most 0.5).",
    )
    catch_gammas: str = text(
        "0.5,1",
        label="How much a catch trial alters its caption",
        group=CHECKS,
        doc="Shares of words permuted or replaced in a catch trial, e.g. 0.5,1.",
    )
    catch_min_seen: int = whole(
        3,
        low=1,
        high=1000,
        label="Catch trials answered before the rule applies",
        group=CHECKS,
        doc="Catch trials a participant answers before the exclusion rule applies.",
    )
    catch_max_missed_share: float = number(
        0.5,
        low=0,
        high=1,
        label="Largest share of catch trials a worker may miss",
        group=CHECKS,
        doc="Missing more than this share of catch trials flags the participant and "
        "excludes their judgments.",
    )

    def check(self) -> None:
        """The gammas must parse; a mode's own ``check`` calls this first."""
        try:
            rules.parse_gammas(self.catch_gammas)
        except ValueError as exc:
            raise ServiceError(f"catch_{exc}", field="catch_gammas") from exc


def exclusion_reason(seen: int, missed: int) -> str:
    return f"failed catch trials: missed {missed} of {seen}"


def pending(participant: Participant) -> QuerySet[Item]:
    """The participant's catch trials not answered yet (served before anything else)."""
    return Item.objects.filter(
        study_id=participant.study_id,
        kind=CATCH,
        spec__catch__participant_id=participant.pk,
        judgment_count=0,
    )


def used_sources(participant: Participant) -> set[int]:
    """Captions this participant's catch trials were made from or show the image of.

    Their ordinary items are not served to the participant afterwards: the real caption
    after its mangled copy would be a second look, not a first judgment.
    """
    ids: set[int] = set()
    for spec in Item.objects.filter(
        study_id=participant.study_id, kind=CATCH, spec__catch__participant_id=participant.pk
    ).values_list("spec", flat=True):
        ids.update({int(spec["caption_id"]), int(spec["catch"]["source_caption_id"])})
    return ids


def _same_person(participant: Participant) -> Q:
    """Leases of this participant or of anyone from their browser in the study."""
    same_person = Q(participant_id=participant.pk)
    if participant.browser_id:
        same_person |= Q(
            participant__study_id=participant.study_id,
            participant__browser_id=participant.browser_id,
        )
    return same_person


def used_images(participant: Participant) -> set[int]:
    """THumB: images this participant met in a catch trial (shown, or its text's source).

    None of their items is served to the participant afterwards.
    """
    ids: set[int] = set()
    for image_id, spec in Item.objects.filter(
        study_id=participant.study_id, kind=CATCH, spec__catch__participant_id=participant.pk
    ).values_list("image_id", "spec"):
        ids.add(image_id)
        if spec["catch"].get("source_image_id"):
            ids.add(int(spec["catch"]["source_image_id"]))
    return ids


def seen_images(participant: Participant) -> set[int]:
    """THumB: images of every item the participant (or their browser) was ever shown, and the
    images their catch trials' texts came from."""
    seen: set[int] = set()
    for image_id, spec in Assignment.objects.filter(_same_person(participant)).values_list(
        "item__image_id", "item__spec"
    ):
        seen.add(image_id)
        source = ((spec or {}).get("catch") or {}).get("source_image_id")
        if source:
            seen.add(int(source))
    return seen


def seen_captions(participant: Participant, caption_ids_of: Any) -> set[int]:
    """Ids of captions the participant (or their browser) was ever shown.

    ``caption_ids_of(spec)`` lists the captions an item spec shows (the mode knows its spec).
    Every lease counts, released ones too: a lapsed lease still showed its item.
    """
    seen: set[int] = set()
    for spec in Assignment.objects.filter(_same_person(participant)).values_list(
        "item__spec", flat=True
    ):
        seen.update(caption_ids_of(spec or {}))
        catch = (spec or {}).get("catch")
        if catch:
            seen.add(int(catch["source_caption_id"]))
    return seen


@dataclass(frozen=True)
class StudyCaptions:
    """A study's own captions as this process keeps them while they stay the same.

    Drawing a catch trial or gold battle lists every study caption (id, image, system) and
    may build the T_RW vocabulary of their texts, inside the submission's transaction: on
    ``bench/arena_load.py``'s 18,000 detailed captions, a read and a list of 18,000 rows
    per draw, and 0.2 s of CPU per vocabulary. No service edits a caption's text or image,
    captions are only added, so their count and largest id name one set of rows; the
    study's creation time is in the key because a rolled-back transaction can hand its ids
    out again. (A text edited in Django's admin is missed until a caption is added or the
    process restarts: it only changes which words T_RW may draw.)
    """

    key: tuple[int, datetime, int, int | None]

    @property
    def rows(self) -> tuple[tuple[int, int, str], ...]:
        """(id, image id, system) of every study caption, in id order."""
        return _rows(*self.key)[0]

    @property
    def with_text(self) -> tuple[tuple[int, int, str], ...]:
        """The same, for captions with a text (an empty one cannot be altered)."""
        return _rows(*self.key)[1]

    @property
    def images(self) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
        """Each caption's image, and each image's captions (ids in id order)."""
        return _images(*self.key)

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """The T_RW vocabulary (``tf.vocabulary``) of their texts."""
        return _vocabulary(*self.key)


def study_captions(study: Study) -> StudyCaptions:
    """The study's own captions (one aggregate query; the rows are read once per process
    while they stay the same, see ``StudyCaptions``).

    The study row in hand carries the answer for the rest of the request: a gold draw asks
    twice (its sources, then the worker's seen images), and the aggregate over every caption
    of a large study is its costliest statement after the claim."""
    known = study.__dict__.get("_study_captions")
    if known is None:
        shape = Caption.objects.filter(study_id=study.pk, purpose=Caption.Purpose.STUDY).aggregate(
            count=Count("id"), last=Max("id")
        )
        known = StudyCaptions((study.pk, study.created_at, shape["count"], shape["last"]))
        study.__dict__["_study_captions"] = known
    return known


def study_captions_counted(study: Study, count: int, last_id: int | None) -> StudyCaptions:
    """``study_captions`` from the captions' count and largest id the caller read itself
    (the arena reads them in its gold battle's one statement); kept on the study row alike."""
    known = StudyCaptions((study.pk, study.created_at, count, last_id))
    study.__dict__["_study_captions"] = known
    return known


def study_vocabulary(study: Study) -> tuple[str, ...]:
    """The T_RW vocabulary of the study's own captions (``StudyCaptions.vocabulary``)."""
    return study_captions(study).vocabulary


# The key's created_at, count and last_id only key the caches (see StudyCaptions).
@functools.lru_cache(maxsize=8)
def _rows(study_id: int, created_at: datetime, count: int, last_id: int | None):
    rows = Caption.objects.filter(study_id=study_id, purpose=Caption.Purpose.STUDY).order_by("id")
    every = tuple(rows.values_list("id", "image_id", "system", "text"))
    return (
        tuple((pk, image, system) for pk, image, system, _text in every),
        tuple((pk, image, system) for pk, image, system, text in every if text),
    )


@functools.lru_cache(maxsize=8)
def _images(study_id: int, created_at: datetime, count: int, last_id: int | None):
    image_of: dict[int, int] = {}
    by_image: dict[int, list[int]] = {}
    for pk, image, _system in _rows(study_id, created_at, count, last_id)[0]:
        image_of[pk] = image
        by_image.setdefault(image, []).append(pk)
    return image_of, {image: tuple(ids) for image, ids in by_image.items()}


@functools.lru_cache(maxsize=8)
def _vocabulary(
    study_id: int, created_at: datetime, count: int, last_id: int | None
) -> tuple[str, ...]:
    texts = Caption.objects.filter(study_id=study_id, purpose=Caption.Purpose.STUDY)
    return tf.vocabulary(list(texts.values_list("text", flat=True)))


def caption_texts(*rows: tuple | None) -> dict[int, str]:
    """The texts of the captions whose ids lead ``rows`` (None rows skipped), by id.

    Catch trials choose their captions from id-only rows and read just these texts."""
    ids = [row[0] for row in rows if row is not None]
    return dict(Caption.objects.filter(pk__in=ids).values_list("id", "text"))


def worker_seed(participant: Participant) -> int:
    """A number naming the worker in every draw a mode makes for them: from their crowd id
    (or account), not the row's primary key, so one study seed and one crowd give the same
    catch trials and battles on SQLite and PostgreSQL, alone or beside other studies
    (issue 46, row 12; a pk-seeded catch draw made a CI run fail on PostgreSQL only)."""
    who = participant.external_id or f"account:{participant.user_id}"
    digest = hashlib.sha256(f"{participant.source}:{who}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def new_catch_item(
    participant: Participant,
    *,
    rate: float,
    gammas: tuple[float, ...],
    caption_ids_of: Any,
    draw: int,
) -> Item | None:
    """Maybe a new catch trial for the participant (unsaved), drawn at ``rate``.

    ``draw`` numbers the participant's submissions, so one study seed, participant and
    count give one decision and one catch (reproducible, and a reload changes nothing).
    The source is a study caption the participant has never been shown; T_RC shows that
    caption's image with a human caption of another image, also never shown to them
    (any caption of another image when the study has no human captions).
    """
    study = participant.study
    rng = np.random.default_rng([study.seed, worker_seed(participant), draw, 0xCA7C])
    if rng.random() >= rules.insert_probability(rate):
        return None
    if pending(participant).exists():
        return None
    known = study_captions(study)
    captions = known.rows
    seen = seen_captions(participant, caption_ids_of)
    unseen = [row for row in captions if row[0] not in seen]
    if not unseen:
        return None
    if control_next(participant, rng) and any(row[2] == Caption.HUMAN for row in captions):
        # A control is due. Every human caption seen: no catch trial this time, rather
        # than an altered one out of turn, so the kinds stay balanced. A study with no
        # human caption at all has no known-good caption: its catch trials stay altered.
        humans = [row for row in unseen if row[2] == Caption.HUMAN]
        if not humans:
            return None
        good = humans[int(rng.integers(len(humans)))]
        text = caption_texts(good)[good[0]]
        return control_item(participant, good[1], {"caption_id": good[0]}, control_of=(*good, text))
    source = unseen[int(rng.integers(len(unseen)))]
    others = [row for row in unseen if row[1] != source[1] and row[2] == Caption.HUMAN]
    if not others:
        others = [row for row in unseen if row[1] != source[1]]
    # T_RC's text is one of ``others``; its index is drawn here so the id is known.
    other = others[int(rng.integers(len(others)))] if others else None
    texts = caption_texts(source, other)
    try:
        made = rules.make_catch(
            source=texts[source[0]],
            others=[texts[other[0]]] if other else [],
            vocabulary=known.vocabulary,
            gammas=gammas,
            rng=rng,
        )
    except ValueError:
        return None
    origin = other if made.kind == "T_RC" and other else source
    return Item(
        study_id=study.pk,
        kind=CATCH,
        image_id=source[1],
        position=0,
        target=1,
        spec={
            "caption_id": source[0],
            "catch": {
                "kind": made.kind,
                "gamma": made.gamma,
                "text": made.text,
                "source_caption_id": origin[0],
                "participant_id": participant.pk,
            },
        },
    )


def control_next(participant: Participant, rng: np.random.Generator) -> bool:
    """Whether the participant's next catch trial is a control.

    The kinds alternate, the one behind coming next and a tie drawn with ``rng`` at
    ``rules.CONTROL_SHARE``: drawing each independently let a rater meet four altered
    trials and no control (1 in 16), and a constant low answer then passed.
    """
    kinds = list(
        Item.objects.filter(
            study_id=participant.study_id, kind=CATCH, spec__catch__participant_id=participant.pk
        ).values_list("spec__catch__kind", flat=True)
    )
    controls = sum(kind == rules.CONTROL for kind in kinds)
    altered = len(kinds) - controls
    tie_break = rng.random() < rules.CONTROL_SHARE  # drawn always: one seed, one sequence
    if controls != altered:
        return controls < altered
    return tie_break


def control_item(
    participant: Participant,
    image_id: int,
    spec: dict[str, Any],
    *,
    control_of: tuple,
    key: str = "",
) -> Item:
    """An unsaved control trial showing caption ``control_of`` (``(id, image_id, system,
    text)``) untouched; ``key`` names THumB's judged group."""
    made: dict[str, Any] = {
        "kind": rules.CONTROL,
        "gamma": None,
        "text": control_of[3],
        "source_caption_id": control_of[0],
        "source_image_id": control_of[1],
        "participant_id": participant.pk,
    }
    if key:
        made["key"] = key
    return Item(
        study_id=participant.study_id,
        kind=CATCH,
        image_id=image_id,
        position=0,
        target=1,
        spec={**spec, "catch": made},
    )


def is_flagged(participant: Participant) -> bool:
    return any(
        isinstance(flag, dict) and flag.get("kind") == FLAG_KIND for flag in participant.flags or []
    )


def counts(participant: Participant, extra: tuple[str, bool] | None = None) -> dict[str, int]:
    """The participant's answered catch trials: ``altered_seen``, ``altered_missed``,
    ``control_seen``, ``control_missed``; ``extra`` is one more ``(kind, caught)`` not
    stored yet."""
    rows = list(
        Judgment.objects.filter(participant_id=participant.pk, item__kind=CATCH).values_list(
            "result__catch__kind", "result__catch__caught"
        )
    )
    if extra is not None:
        rows.append(extra)
    out = dict.fromkeys(("altered_seen", "altered_missed", "control_seen", "control_missed"), 0)
    for kind, caught in rows:
        side = "control" if kind == rules.CONTROL else "altered"
        out[f"{side}_seen"] += 1
        out[f"{side}_missed"] += not caught
    return out


def rule_passed(participant: Participant, *, min_seen: int, max_missed_share: float) -> bool:
    """Whether the participant answered ``min_seen`` catch trials, at least one of each
    kind, and is not excluded by the two-sided rule: what THumB's crowd completion code
    needs when catch trials are on. One of each kind, since three controls in a row say
    nothing of a rater who scores everything 5 (every THumB image has a human caption, so
    both kinds can always be drawn)."""
    tally = counts(participant)
    seen = tally["altered_seen"] + tally["control_seen"]
    return (
        seen >= min_seen
        and tally["altered_seen"] > 0
        and tally["control_seen"] > 0
        and not is_flagged(participant)
        and not rules.breaks_two_sided(
            (tally["altered_seen"], tally["altered_missed"]),
            (tally["control_seen"], tally["control_missed"]),
            min_seen=min_seen,
            max_missed_share=max_missed_share,
        )
    )


def rule_outcome(
    participant: Participant,
    *,
    caught: bool,
    min_seen: int,
    max_missed_share: float,
    kind: str = "",
) -> dict[str, Any]:
    """``Outcome`` fields for the exclusion rule after one more answered catch trial of
    ``kind`` (``rules.CONTROL`` or a transformation).

    Counts the participant's earlier catch judgments plus this one (not stored yet), the
    altered trials and the controls apart (``rules.breaks_two_sided``); the first time the
    rule breaks, a ``catch_failed`` flag, the exclusion of every judgment of theirs and, in a
    study that pays screen-outs, a screen-out. A participant flagged before gets each new
    judgment excluded too.
    """
    tally = counts(participant, (kind, caught))
    seen = tally["altered_seen"] + tally["control_seen"]
    missed = tally["altered_missed"] + tally["control_missed"]
    if is_flagged(participant):
        return {"exclusion": exclusion_reason(seen, missed)}
    if rules.breaks_two_sided(
        (tally["altered_seen"], tally["altered_missed"]),
        (tally["control_seen"], tally["control_missed"]),
        min_seen=min_seen,
        max_missed_share=max_missed_share,
    ):
        reason = exclusion_reason(seen, missed)
        # In a study that pays screen-outs, also a screen-out: a crowd worker caught before
        # earning the code is sent to the screen-out code and served nothing more (the
        # service ignores it once the code is earned). Without one, the flag alone stops
        # serving them (services/assignments.py) and they are asked to return it.
        study = participant.study
        pays = get_mode(study.mode).settings(study).screens_out
        return {
            "flags": ({"kind": FLAG_KIND, "detail": reason},),
            "exclude_participant": reason,
            **({"screen_out": reason} if pays else {}),
        }
    return {}


def report_section(study_id: int, *, people: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The report's catch-trial section; empty when the study has no catch trial answered.

    ``table``: share caught per transformation and gamma with counts; ``players``: per
    player with catch trials, how many were answered and missed and whether the rule flagged
    them; ``flagged``: how many participants carry a ``catch_failed`` flag. ``people`` maps
    participant ids to rows with a ``pseudonym`` (the report's own read).
    """
    answered = [
        (participant_id, catch)
        for participant_id, catch in Judgment.objects.filter(
            study_id=study_id, item__kind=CATCH
        ).values_list("participant_id", "result__catch")
        if isinstance(catch, dict)
    ]
    flagged = {
        pk
        for pk, flags in Participant.objects.filter(study_id=study_id)
        .exclude(flags=[])
        .values_list("pk", "flags")
        if is_flagged(Participant(flags=flags))
    }
    if not answered and not flagged:
        return {}
    per_player: dict[int, list[int]] = {}
    for participant_id, catch in answered:
        cell = per_player.setdefault(participant_id, [0, 0])
        cell[0] += 1
        cell[1] += not catch.get("caught")
    table = rules.caught_table(
        (catch.get("kind", ""), catch.get("gamma"), bool(catch.get("caught")))
        for _, catch in answered
    )
    return {
        "table": table,
        "answered": len(answered),
        "caught": sum(bool(catch.get("caught")) for _, catch in answered),
        "flagged": len(flagged),
        "players": [
            {
                "pseudonym": people.get(pk, {}).get("pseudonym", str(pk)),
                "seen": seen,
                "missed": missed,
                "flagged": pk in flagged,
            }
            for pk, (seen, missed) in sorted(per_player.items(), key=lambda kv: (-kv[1][1], kv[0]))
        ],
    }
