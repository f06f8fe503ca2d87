"""The arena protocol: battles between captioning systems (PROTOCOLS.md section 5).

An item is one battle: an image and the captions of two different systems for it, in a
canonical order (``caption_a`` is the caption of the system whose name sorts first)::

    spec = {"caption_a": <id>, "caption_b": <id>, "system_a": "...", "system_b": "...",
            "image_id": <id>}

A gold battle is an ``Item`` of kind ``catch`` reserved for one worker
(``annotation.modes.arena.gold``): a system caption against a Cui et al.
alteration of it (``rubrics/transformations.py``); the real caption must win.

The server decides everything a worker could game: which pair they get (drawn here, never
chosen by them), which side each caption is shown on (drawn per presentation from the
study's seed, the worker and the battle, stored in the payload as ``left``), and how long
they looked (the service measures ``min_seconds`` from ``served_at``). The payload is in
the terms of the page (``a``: the left caption is better); the result restates it in the
canonical order (``winner`` in LMArena's names) so the report never has to know which side
was shown.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from typing import Any

import numpy as np
from django.db.models import QuerySet

from annotation.errors import InvalidInput
from annotation.models import Assignment, Caption, Item, Job, Judgment, Participant, Study
from annotation.modes import catch
from annotation.modes.arena import integrity, serving, shown
from annotation.modes.arena.gold import new_gold_item, worker_seed
from annotation.modes.arena.settings import ArenaSettings
from annotation.modes.base import CompletionProgress, Mode, Outcome
from rubrics import arena_design
from rubrics import catch as catch_rules
from rubrics.battles import CRITERIA as IIW_CRITERIA

BATTLE = "battle"
CATCH = catch.CATCH

#: The four outcomes as the page posts them (sides as shown) and their LMArena names
#: when the left caption is the canonical ``a`` side.
OUTCOMES: dict[str, str] = {
    "a": "model_a",
    "b": "model_b",
    "tie": "tie",
    "bothbad": "tie (bothbad)",
}
OUTCOME_LABELS: dict[str, str] = {
    "a": "A is better",
    "b": "B is better",
    "tie": "Tie: both are good",
    "bothbad": "Tie: both are bad",
}
#: ImageInWords' five SxS labels as the page posts them, coded from the left side's view.
CRITERION_LABELS: dict[str, tuple[int, str]] = {
    "a2": (2, "A substantially better"),
    "a1": (1, "A marginally better"),
    "0": (0, "Neutral"),
    "b1": (-1, "B marginally better"),
    "b2": (-2, "B substantially better"),
}
CRITERION_NAMES: dict[str, str] = {
    "comprehensiveness": "Comprehensiveness",
    "specificity": "Specificity",
    "hallucination": "Hallucination (fewer is better)",
    "tldr": "First lines as a summary",
    "human_like": "Human-like",
}
#: The form's criterion keys to ImageInWords' names (``rubrics.battles.CRITERIA``).
IIW_NAMES: dict[str, str] = dict(zip(CRITERION_NAMES, IIW_CRITERIA, strict=True))
_SWAP = {"model_a": "model_b", "model_b": "model_a"}
#: ``study_pairs``' per-process memo: public id -> the system pairs of its battles.
_STUDY_PAIRS: dict[str, list[tuple[str, str]]] = {}
#: The adaptive design of each (study, report job) this process served from.
_DESIGNS: dict[tuple[str, int], dict[tuple[str, str], float]] = {}
MAX_DESIGNS = 256
#: How far back ``_coming`` looks for a report with fewer battles than the latest.
MAX_EARLIER_REPORTS = 20


def _held(result: dict[str, Any], pairs: list[tuple[int, int]]) -> list[float] | None:
    """The kept battles of each pair (indices into the fit's systems) as the report counted
    them (its ``matrices``, over the fit's systems); None when the report has no such table
    (one from before it was stored): the design then ignores what is held."""
    matrices = result.get("matrices") or {}
    if matrices.get("systems") != (result.get("adaptive") or {}).get("systems"):
        return None
    counts = matrices["battles"]
    return [float(counts[i][j]) for i, j in pairs]


def _coming(latest: Job) -> float:
    """How many battles the design is expected to serve before the next report: as many as
    came between the last two reports that differ (a researcher's refresh rhythm so far),
    or, at the first, as many as the report holds. Reports come by hand and every
    ``adaptive_refresh`` battles unasked (``ArenaReport.refresh_due``), so the rhythm so
    far is the forecast; were it short, the design would spend the next battles on the
    few pairs that matter most now, which a later report corrects."""
    held = int(latest.result.get("battles") or 0)
    earlier = (
        Job.objects.filter(
            study_id=latest.study_id,
            kind=Job.Kind.REPORT,
            status=Job.Status.DONE,
            pk__lt=latest.pk,
        )
        .order_by("-id")
        .values_list("result__battles", flat=True)[:MAX_EARLIER_REPORTS]
    )
    before = next((int(n) for n in earlier if n is not None and int(n) < held), 0)
    return float(max(held - before, 1))


def left_is_a(study: Study, assignment: Assignment) -> bool:
    """Whether the lease shows the canonical ``a`` caption on the left.

    Drawn per presentation from the study's seed, the worker (``worker_seed``: their crowd
    id), the battle (its position; a gold battle, made for one worker, by its altered text)
    and the round: reproducible, the same on the page and in ``validate`` (so the stored
    side is the side shown), and never from a primary key, so one seed and one crowd give
    the same sides on SQLite and PostgreSQL, alone or beside other studies (issue 47: the
    lease id had made the bench's results depend on the database). ``assignment`` carries
    its participant and item.
    """
    item = assignment.item
    where = f"gold:{item.spec['catch']['text']}" if item.kind == CATCH else f"{item.position}"
    battle = int.from_bytes(hashlib.sha256(where.encode()).digest()[:8], "big")
    return _left_is_a(study.seed, worker_seed(assignment.participant), battle, assignment.round)


@functools.lru_cache(maxsize=4096)
def _left_is_a(seed: int, worker: int, battle: int, round_number: int) -> bool:
    """``left_is_a``'s draw, kept per process: the page and the answer ask it of one lease,
    and seeding a generator was most of a battle page's own CPU in the arena's code."""
    rng = np.random.default_rng([seed, worker, battle, round_number, 0xA7E4A])
    return bool(rng.integers(2) == 0)


def battle_captions(item: Item) -> tuple[int, int]:
    """The canonical ``(a, b)`` caption ids a battle or gold battle shows (gold: both the
    real caption; the altered text is in ``spec["catch"]``, shown as ``b``)."""
    spec = item.spec
    if "caption_a" in spec:
        return int(spec["caption_a"]), int(spec["caption_b"])
    return int(spec["caption_id"]), int(spec["caption_id"])


def _draw(
    rng: np.random.Generator,
    pairs: list[tuple[str, str]],
    probabilities: dict[tuple[str, str], float],
) -> tuple[str, str]:
    """One of ``pairs`` with the design's probabilities, renormalised over them."""
    weights = np.array([probabilities[pair] for pair in pairs])
    return pairs[int(rng.choice(len(pairs), p=weights / weights.sum()))]


def system_pairs(systems: list[str]) -> list[tuple[str, str]]:
    return list(itertools.combinations(sorted(systems), 2))


class ArenaProtocol(Mode):
    name = "arena"
    label = "Arena (caption battles)"
    settings_class = ArenaSettings
    # Battles are numbered image by image: by position, every worker began on one image.
    order_per_worker = True

    # ------------------------------------------------------------------ items

    def build_items(self, study: Study) -> list[Item]:
        """One battle per image and pair of systems that both captioned it."""
        config = self.settings(study)
        by_image: dict[int, dict[str, int]] = {}
        for caption_id, image_id, system in (
            study.captions.filter(purpose=Caption.Purpose.STUDY)
            .order_by("id")
            .values_list("id", "image_id", "system")
        ):
            # A system's first caption of an image is its caption there.
            by_image.setdefault(image_id, {}).setdefault(system, caption_id)
        items = []
        for image_id in sorted(by_image):
            captions = by_image[image_id]
            for system_a, system_b in system_pairs(list(captions)):
                items.append(
                    Item(
                        study=study,
                        kind=BATTLE,
                        image_id=image_id,
                        position=len(items),
                        target=config.battle_target,
                        spec={
                            "caption_a": captions[system_a],
                            "caption_b": captions[system_b],
                            "system_a": system_a,
                            "system_b": system_b,
                            "image_id": image_id,
                        },
                    )
                )
        systems = {item.spec["system_a"] for item in items} | {
            item.spec["system_b"] for item in items
        }
        if not items:
            raise InvalidInput(
                "An arena study needs images captioned by at least two systems; none is.",
                field="captions",
            )
        if config.anchor_system and config.anchor_system not in systems:
            raise InvalidInput(
                f"The anchor system {config.anchor_system!r} has no battle in this study.",
                field="anchor_system",
            )
        if config.adaptive_goal == "system" and config.adaptive_system not in systems:
            raise InvalidInput(
                f"The adaptive goal's system {config.adaptive_system!r} has no battle in "
                "this study.",
                field="adaptive_system",
            )
        if config.adaptive_goal == "top" and not config.adaptive_top < len(systems):
            raise InvalidInput(
                f"The adaptive goal asks for the {config.adaptive_top} best of "
                f"{len(systems)} systems: ask for fewer than there are.",
                field="adaptive_top",
            )
        return items

    # ------------------------------------------------------------------ serving

    def study_pairs(self, study: Study) -> list[tuple[str, str]]:
        """The system pairs of the study's battles, read once per process and study.

        Battles are made only by ``build_items`` when the study opens and never change
        afterwards, so the distinct pairs (a scan of every battle) need not be read per
        serve. Keyed by ``public_id`` (random, never reused, unlike a test database's pk).
        """
        key = str(study.public_id)
        pairs = _STUDY_PAIRS.get(key)
        if pairs is None:
            met = (
                Item.objects.filter(study_id=study.pk, kind=BATTLE)
                .order_by()  # no default ordering column in the DISTINCT
                .values_list("spec__system_a", "spec__system_b")
                .distinct()
            )
            pairs = system_pairs(sorted({name for pair in met for name in pair}))
            if study.status != Study.Status.DRAFT:
                _STUDY_PAIRS[key] = pairs
        return pairs

    def pair_probabilities(self, study: Study) -> dict[tuple[str, str], float]:
        """The design's probability of each system pair: uniform, or adaptive from the
        latest report's scores, covariance and battles per pair
        (``rubrics.arena_design.adaptive_pair_probabilities``: the pairs that most lower the
        chance of getting the goal wrong, given the battles already held and those expected
        before the next report, ``_coming``)."""
        config = self.settings(study)
        pairs = self.study_pairs(study)
        systems = sorted({name for pair in pairs for name in pair})
        uniform = {pair: 1.0 / len(pairs) for pair in pairs} if pairs else {}
        if not config.adaptive or not pairs:
            return uniform
        # The latest report's id alone: its result (the whole report, matrices and
        # bootstrap included) is read only when this process has no design for it yet,
        # not on each of the two calls per battle (serve and answer).
        latest_id = serving.latest_report_id(study.pk)
        if latest_id is None:
            return uniform
        # One design per report (its fit decides it): the plain fit's design takes a few
        # hundred small solves, which must not run on every serve.
        key = (str(study.public_id), latest_id)
        design = _DESIGNS.get(key)
        if design is None:
            design = self._design(Job.objects.get(pk=latest_id), pairs, systems, config)
            if len(_DESIGNS) >= MAX_DESIGNS:
                _DESIGNS.clear()  # a bound, not a policy: rebuilt from the report when asked
            _DESIGNS[key] = design
        return design or uniform

    def _design(
        self,
        latest: Job,
        pairs: list[tuple[str, str]],
        systems: list[str],
        config: ArenaSettings,
    ) -> dict[tuple[str, str], float]:
        """The adaptive design that report ``latest`` decides; empty (serve uniformly)
        when it has no fit over ``systems``."""
        fitted = (latest.result or {}).get("adaptive")
        if not fitted or "scores" not in fitted or sorted(fitted.get("systems", [])) != systems:
            # No fit over these systems yet (or a report from before the scores were
            # stored): the uniform design until a report has one.
            return {}
        names = fitted["systems"]
        index = {name: i for i, name in enumerate(names)}
        chosen = [(index[a], index[b]) for a, b in pairs]
        held = _held(latest.result, chosen)
        chosen, probs = arena_design.adaptive_pair_probabilities(
            np.array(fitted["scores"]),
            np.array(fitted["covariance"]),
            explore=config.adaptive_explore,
            pairs=chosen,
            goal=config.adaptive_goal,
            top=min(config.adaptive_top, len(names) - 1),
            system=index.get(config.adaptive_system),
            fit="plain",
            served=held,
            coming=_coming(latest) if held is not None else 0.0,
        )
        return {
            tuple(sorted((names[i], names[j]))): float(p)
            for (i, j), p in zip(chosen, probs, strict=True)
        }

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        """A reserved gold battle first; else the battles of one system pair drawn by the
        design among the pairs the worker may still judge, on images they never saw.

        The draw is seeded by the study, the worker and how many leases they had, so a
        reload gives the same pair and a worker cannot steer it.
        """
        items = Item.objects.filter(study_id=participant.study_id)
        if integrity.is_flagged(participant):
            # Flagged at the code's count: every further answer would be excluded.
            return items.none()
        # The reserved gold battle, the worker's history and which pairs have a battle for
        # them, in one statement (``serving``: three ORM queries before).
        # And the study's page rows, when the process's are older than the admin log's stamp
        # (the battle is not chosen yet: a page's own read was a fifth statement, issue 48).
        view = serving.worker_view(participant, self.study_pairs(participant.study), pages=True)
        # The battle page's rows, kept by the process, are shown if read after this stamp.
        shown.keep_stamp(participant, view.stamp, view.pages)
        if view.reserved:
            return catch.pending(participant)
        config = self.settings(participant.study)
        seen, counts = view.seen, view.counts
        capped = [pair for pair, n in counts.items() if n >= config.cap_per_pair]
        probabilities = self.pair_probabilities(participant.study)
        allowed = sorted(pair for pair, p in probabilities.items() if p > 0 and pair not in capped)
        if not allowed:
            return items.none()
        rng = np.random.default_rng(
            [participant.study.seed, worker_seed(participant), sum(counts.values()), 0xA7E4A]
        )
        # Draw a pair; if it has no battle for this worker, draw again among the pairs that
        # have one: the pair served is the design's pair conditioned on having room.
        pick = _draw(rng, allowed, probabilities)
        if pick not in view.room:
            allowed = sorted(set(allowed) & view.room)
            if not allowed:
                return items.none()
            pick = _draw(rng, allowed, probabilities)
        # Its battles on images they never saw (a capped pair is never drawn).
        return serving.pair_battles(participant.study_id, pick, seen)

    def min_seconds(self, assignment: Assignment) -> float:
        return float(self.settings(assignment.participant.study).min_seconds)

    # ------------------------------------------------------------------ answers

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        """The outcome (one of the four), the side shown left, and the criteria if asked."""
        outcome = data.get("outcome")
        if not isinstance(outcome, str) or outcome not in OUTCOMES:
            raise InvalidInput(
                "Choose one of: " + ", ".join(OUTCOME_LABELS.values()) + ".", field="outcome"
            )
        study = assignment.participant.study
        payload: dict[str, Any] = {
            "outcome": outcome,
            "left": "a" if left_is_a(study, assignment) else "b",
        }
        if self.settings(study).criteria:
            labels = {}
            for criterion in CRITERION_NAMES:
                value = data.get(criterion)
                if not isinstance(value, str) or value not in CRITERION_LABELS:
                    raise InvalidInput(
                        f"Choose a label for {CRITERION_NAMES[criterion].lower()}.",
                        field=criterion,
                    )
                labels[criterion] = CRITERION_LABELS[value][0]
            payload["criteria"] = labels
        return payload

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """The outcome in canonical order, the pair's sampling probability, gold checks."""
        left_a = payload["left"] == "a"
        winner = OUTCOMES[payload["outcome"]]
        if not left_a:
            winner = _SWAP.get(winner, winner)
        result: dict[str, Any] = {"winner": winner}
        if "criteria" in payload:
            sign = 1 if left_a else -1
            result["criteria"] = {k: sign * v for k, v in payload["criteria"].items()}
        if item.kind == CATCH:
            # Gold: the real caption is ``a``; the altered text is ``b``.
            made = item.spec["catch"]
            result["catch"] = {
                "kind": made["kind"],
                "gamma": made["gamma"],
                "caught": winner == "model_a",
            }
        else:
            pair = (item.spec["system_a"], item.spec["system_b"])
            study = assignment.participant.study
            # The design's probability at answer time (the latest report's fit); the
            # report weights each battle by its inverse (LMArena's IPW).
            result["pair_probability"] = self.pair_probabilities(study).get(pair, 1.0)
        return result

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        config = self.settings(participant.study)
        state = dict(participant.state or {})
        fields: dict[str, Any] = {}
        if judgment.item.kind == CATCH:
            state["gold"] = state.get("gold", 0) + 1
            fields = catch.rule_outcome(
                participant,
                caught=judgment.result["catch"]["caught"],
                # Fewer where the code's count is capped by what a worker can be served.
                min_seen=integrity.golds_needed(participant, config),
                max_missed_share=config.catch_max_missed_share,
                kind=judgment.result["catch"]["kind"],
            )
        else:
            state["battles"] = state.get("battles", 0) + 1
            if catch.is_flagged(participant):
                fields = {"exclusion": catch.LATER_REASON}
            elif integrity.is_flagged(participant):
                fields = {"exclusion": integrity.flag_reason(participant)}
            if config.catch_rate:
                made = new_gold_item(
                    participant,
                    rate=config.catch_rate,
                    gammas=catch_rules.parse_gammas(config.catch_gammas),
                    caption_ids_of=self._caption_ids_of(participant.study),
                    draw=state["battles"],
                    due=integrity.gold_due(participant, config, state),
                )
                # ``new_gold_item`` never makes one on an image the worker was shown.
                if made is not None:
                    fields["new_items"] = (made,)
                    state["gold_made"] = state.get("gold_made", 0) + 1
        if not fields.get("exclude_participant"):
            fields.update(
                integrity.pattern_fields(
                    participant, config, state, judgment.payload["outcome"], OUTCOME_LABELS
                )
            )
        return Outcome(state=state, **fields)

    def _caption_ids_of(self, study: Study):
        """``spec -> caption ids`` for ``catch.seen_captions``: every caption of the image
        a spec shows, so a gold battle never shows a worker an image a second time.

        The study's captions (the arena's are all of the study's own purpose) are looked up
        on the first call only: most submissions draw no gold battle and never call it (a
        read of every caption per answer was the battle page's largest cost), and the
        process keeps them while they stay the same (``catch.StudyCaptions``)."""
        known: list[catch.StudyCaptions] = []

        def caption_ids_of(spec: dict[str, Any]) -> tuple[int, ...]:
            if not known:
                known.append(catch.study_captions(study))
            image_of, by_image = known[0].images
            shown = spec.get("caption_a", spec.get("caption_id"))
            if shown is None:
                return ()
            return by_image.get(image_of.get(int(shown), -1), ())

        return caption_ids_of

    def completion_earned(self, participant: Participant) -> bool:
        return integrity.completion_earned(participant, self.settings(participant.study))

    def completion_withheld(self, participant: Participant) -> str:
        return integrity.withheld(participant)

    def completion_progress(self, participant: Participant) -> CompletionProgress:
        return integrity.completion_progress(participant, self.settings(participant.study))
