"""HUMANr's protocol on the data model: comparisons, groups, serving, scoring, flags.

The protocol rules (orientation, comparison value, attention checks, groups) live in
``rubrics.humanr``; this module maps them onto studies, items and judgments.

Comparisons. Per image with at least two human captions (of purpose ``study``): one
Human-vs-Human pair (two different human captions drawn at random, the reference chosen by
``rubrics.humanr.choose_reference``) and one Human-vs-model pair per model system that
captioned the image (the human caption drawn at random from the image's human captions; a
system with several captions of the image contributes one, drawn at random). ``n_images``
limits the study to a random subset of those images. Every draw comes from one generator
seeded with the study seed, so the same study gives the same comparisons and groups.

Items. ``rubrics.humanr.build_groups`` splits the comparisons into groups of 9 comparisons
of 9 different images plus 1 attention check at a random position (leftover comparisons
go to shorter groups). With ``adaptive_target_half_width`` set, every group holds one
system's comparisons instead (``rubrics.humanr.build_system_groups``, numbered in turn over
the systems) so that a settled system's groups can stop being served (issue 27). One
``Item`` per group, ``kind="group"``, ``target`` = ``workers_per_comparison``; ``spec``::

    {"group": index, "short": bool, "seed": study seed, "trials": [
        {"kind": "comparison" | "attention_check", "comparison": "<image id>:<system>" | None,
         "image_id", "image_name", "system" ("Human" for the baseline, "" for a check),
         "reference_caption_id", "other_caption_id", "distractor_image_id" (checks only)},
        ...]}

The reference caption is the human caption of a comparison and the correct caption of an
attention check; the other one is the model caption, the second human caption, or the
distractor (a human caption of another image). A check's trial in the spec holds only its
place (its ids are None): what it shows is drawn for each lease when served, from every
image of the study the worker has not met (``checks``, issue 29), so that what a scout id
learns of a check says nothing about the next id's. ``checks.shown_trial`` is the trial
as a lease shows it; the page, ``validate`` and ``score`` all read it (the answer to a
check takes it from the page's ``shown`` field once verified, ``checks.posted_check``).

Exposure. Each group's ``ItemImage`` rows name every image its comparisons show
(``group_image_ids``; within a group they all differ; groups built before issue 29 also
name their fixed check's two images). A worker is only served groups sharing no image with
any group they, or another participant of their browser, were ever served, nor with the
checks drawn for them, so nobody meets an image twice and a check's foreign caption cannot
be recognised from memory (``eligible_items``; any kind of participant;
docs/protocol-choices.md says what this means for capacity). The rule is ``exposure``'s:
inside the claim's statement when every check the worker was shown is answered
(``fresh_items``), else computed from a read of their leases (issue 48). With the default
``workers_per_comparison`` of 1 each comparison is judged once, and the groups of one image
go to different workers, as in the paper.

Serving. Part ``k`` of an assignment is trial ``k`` of the group. Which caption is shown
left is random per presentation: a coin seeded by (study seed, assignment id, trial) decides
it, so the page and the scoring agree without a write when the page is shown, and the side
is stored in ``Judgment.result`` (``reference_on_left``, left/right caption ids), which is
what the report uses. (The side ``build_groups`` drew for a check at build time would be
the same for every worker of the group, so checks use the per-presentation coin too.)
A part counts as shown when the previous part was stored (the lease start for the first).

Scoring. ``result`` holds the oriented answer ``s``, the comparison value ``(s - 5) / 4``
and, for the check, whether it failed (``s >= 5``). When the last trial of a group is
submitted and its check failed, the outcome flags every judgment of that group
``excluded=True, exclusion_reason="attention check failed in group <n>"`` (never deleted).

Completion codes: crowd workers earn one once ``completion_groups`` groups whose check
passed are done; a group whose check failed is excluded and counts for nothing (issue 45:
the rule of every mode), and the pages say why (``completion_withheld``) with the study's
failed-check code. A study with a screen-out code screens out a worker whose first group's
check failed (``Outcome.screen_out``): they get the screen-out code and no further group.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from django.db.models import BooleanField, F, Q, QuerySet
from django.db.models.expressions import RawSQL

from annotation.errors import Conflict, ServiceError
from annotation.models import Assignment, Caption, Item, ItemImage, Judgment, Participant, Study
from annotation.modes.base import CompletionProgress, Mode, Outcome, get_mode, parse_choice
from annotation.modes.humanr.allocation import (
    ADAPTIVE_MIN_WORKERS,
    counted_values,
    judged_systems_groups,
)
from annotation.modes.humanr.checks import posted_check, posted_right, served_check, shown_trial
from annotation.modes.humanr.exposure import exact_items, guarded_sql, worker_items
from annotation.modes.humanr.settings import HumanrSettings
from rubrics import adaptive
from rubrics import humanr as rules

GROUP = "group"
COMPARISON = "comparison"
CHECK = "attention_check"
HUMAN = Caption.HUMAN
#: Where ``validate`` leaves the trial it checked for ``score`` (on the lease instance).
_VALIDATED = "_humanr_validated_trial"


def numpy_seed(study_seed: int) -> int:
    """A non-negative seed for numpy from the study's (possibly negative) seed."""
    return int(study_seed) % 2**63


def reference_on_left(study_seed: int, assignment_id: int, part: int) -> bool:
    """The per-presentation coin: is the reference caption shown on the left?

    A hash of (study seed, assignment id, trial): the same presentation always gets the same
    side (a reload shows the same page, scoring agrees with it) and different workers of a
    group get independent sides.
    """
    key = f"humanr-side:{int(study_seed)}:{int(assignment_id)}:{int(part)}".encode()
    return hashlib.blake2b(key, digest_size=8).digest()[0] < 128


def sides_shown(trial: dict[str, Any], seed: int, assignment_id: int, part: int) -> tuple[int, int]:
    """(left caption id, right caption id) of one presentation."""
    return _ordered(trial, reference_on_left(seed, assignment_id, part))


def _ordered(trial: dict[str, Any], on_left: bool) -> tuple[int, int]:
    reference, other = trial["reference_caption_id"], trial["other_caption_id"]
    return (reference, other) if on_left else (other, reference)


class HumanrProtocol(Mode):
    name = "humanr"
    label = "HUMANr head-to-head"
    settings_class = HumanrSettings
    # A crowd lease holds one whole group of 10 trials (a minute or two when read with care),
    # so it lasts longer than a one-part item's; a lapsed one is reopened for the same worker.
    crowd_lease_seconds = 20 * 60

    def build_items(self, study: Study) -> list[Item]:
        config = self.settings(study)
        groups = build_group_specs(
            captions=Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
            .order_by("image_id", "line", "id")
            .values_list("id", "image_id", "system"),
            image_names=dict(study.images.values_list("id", "name")),
            seed=study.seed,
            n_images=config.n_images,
            # Adaptive allocation needs groups of one system each, so that a settled
            # system's groups can stop being served (rubrics.humanr.build_system_groups).
            per_system=bool(config.adaptive_target_half_width),
        )
        return [
            Item(
                study=study,
                kind=GROUP,
                position=spec["group"],
                spec=spec,
                target=config.workers_per_comparison,
            )
            for spec in groups
        ]

    def item_links(self, items: list[Item]) -> list[ItemImage]:
        # What eligible_items needs to keep a worker from meeting an image twice, as rows the
        # database can join on instead of a JSON spec read back per request.
        return [
            ItemImage(item_id=item.pk, image_id=image_id)
            for item in items
            for image_id in group_image_ids(item.spec)
        ]

    def eligible_items(self, participant: Participant) -> QuerySet[Item]:
        return self._groups(participant, fresh=False)

    def fresh_items(self, participant: Participant) -> QuerySet[Item]:
        # The exposure rule inside the claim's statement, with no read of the worker's leases
        # before it (a group's first page: 5 statements otherwise), when it can be written
        # so: every check the worker was shown answered; else nothing, and the service's
        # full path asks ``eligible_items`` (issue 48, ``exposure.GUARDED``).
        return self._groups(participant, fresh=True)

    def _groups(self, participant: Participant, *, fresh: bool) -> QuerySet[Item]:
        """The groups ``participant`` may be served; ``fresh``: with the exposure rule as
        ``exposure.GUARDED`` (``fresh_items``), else as read (``exposure.exact_items``)."""
        items = Item.objects.filter(study_id=participant.study_id, kind=GROUP)
        config = self.settings(participant.study)
        limit = config.max_failed_checks
        if limit is not None and (participant.state or {}).get("groups_failed", 0) >= limit:
            return items.none()
        # Exposure (PROTOCOLS.md section 3): a worker never meets an image twice, neither
        # shown nor through a caption of it. Otherwise a check's distractor caption could be
        # one they saw earlier with its own image, and a bot with a memory passes every check
        # while answering junk. So every group that shares an image with any group they were
        # ever served (any lease, whatever its status: even an unanswered one showed its
        # first trial) is barred, except those groups themselves: a lapsed lease is reopened
        # by the assignment service, and groups already answered are excluded there.
        # A worker is a browser (docs/protocol-choices.md, crowd workers): a second crowd id
        # from the same browser is admitted but flagged, so what the browser's other
        # participants were served counts too, their groups included.
        # Checks: the images of the checks drawn for them bar the groups showing them too,
        # and near the end of a small study a group must leave two unmet images for its
        # check (modes/humanr/checks.py).
        if fresh:
            sql, params = guarded_sql(participant, f'"{Item._meta.db_table}"')
            items = items.filter(RawSQL(sql, params, output_field=BooleanField()))
        else:
            items = exact_items(participant, items)
        if config.adaptive_target_half_width:
            served = Assignment.objects.filter(participant_id=participant.pk).values("item_id")
            settled = adaptive_settled_groups(
                participant.study_id, config.adaptive_target_half_width
            )
            # A group already leased to this participant stays theirs (a lapsed lease is
            # reopened by the assignment service).
            items = items.exclude(Q(pk__in=settled) & ~Q(pk__in=served))
            # One vote per worker and system: past the code, no second group of a system.
            if config.adaptive_spread_workers and self.completion_earned(participant):
                judged = judged_systems_groups(participant.study_id, worker_items(participant))
                if judged is not None:
                    items = items.exclude(Q(pk__in=judged) & ~Q(pk__in=served))
        return items

    def parts(self, item: Item) -> int:
        return len(item.spec["trials"])

    def min_seconds(self, assignment: Assignment) -> float:
        # The submission service hands the lease over with its participant and study loaded.
        return float(self.settings(assignment.participant.study).min_seconds_per_trial)

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        raw = _parse_raw(data.get("raw"))
        shown_left = data.get("left")
        if shown_left not in (None, ""):
            # A check's page says what it showed (``checks.shown_field``, verified there and
            # against the study's captions); else, or when that does not verify, the check
            # is drawn again (issue 48: a read of the worker's leases).
            trial = self._posted(assignment, part, shown_left, data.get("shown"))
            if trial is None:
                trial = shown_trial(assignment, part)
            left, _right = sides_shown(trial, assignment.item.spec["seed"], assignment.pk, part)
            if str(shown_left) != str(left):
                raise Conflict(
                    "This page was out of date, so your answer was not saved; please answer "
                    "the trial shown now.",
                    field="left",
                )
            # The submission service scores this answer next, on this lease: ``score``
            # takes the trial back instead of drawing the check again (issue 48).
            setattr(assignment, _VALIDATED, (part, trial))
        return {"raw": raw}

    def _posted(
        self, assignment: Assignment, part: int, left: Any, shown: Any
    ) -> dict[str, Any] | None:
        """The check trial ``part`` of ``assignment`` as its page showed it, from the form's
        ``left`` and ``shown`` fields; None for a comparison, or a field that does not verify
        (``checks.posted_right``, ``checks.posted_check``)."""
        trial = assignment.item.spec["trials"][part]
        if trial["kind"] != CHECK:
            return None
        right = posted_right(assignment, part, left, shown)
        if right is None:
            return None
        on_left = reference_on_left(assignment.item.spec["seed"], assignment.pk, part)
        reference, other = (int(left), right) if on_left else (right, int(left))
        return posted_check(assignment, trial, reference, other)

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        trial = item.spec["trials"][part]
        validated = vars(assignment).pop(_VALIDATED, None)
        if trial["kind"] == CHECK:
            # Drawn by ``validate`` just before, under the same locks, when it checked the
            # sides: the same trial, without reading the worker's leases again.
            if validated is not None and validated[0] == part:
                trial = validated[1]
            else:
                trial = served_check(assignment, trial)
        return score_trial(
            item.spec, assignment_id=assignment.pk, part=part, raw=payload["raw"], trial=trial
        )

    def after_submit(self, participant: Participant, judgment: Judgment) -> Outcome:
        if judgment.part != len(judgment.item.spec["trials"]) - 1:
            return Outcome()
        # The group is complete: parts are stored in order, so the earlier ones are in the
        # database and this one, not stored yet, is the last. Flag it if its check failed.
        # The lease's judgments: the submission service read them under its locks and left
        # them on the lease (issue 48), else a query.
        earlier = [answer.result for answer in judgment.assignment.judgments.all()]
        failed = any((result or {}).get("check_failed") for result in [*earlier, judgment.result])
        state = dict(participant.state or {})
        state["groups_done"] = state.get("groups_done", 0) + 1
        state["groups_failed"] = state.get("groups_failed", 0) + int(failed)
        group = judgment.item.spec["group"]
        # The first group's check is the entry check: when the study pays screen-outs, a
        # worker who fails it is screened out instead of earning the completion code (a
        # study without a screen-out code keeps the paper's rule: a code after every group).
        first = state["groups_done"] == 1 and failed
        screen = first and self.settings(participant.study).screens_out
        return Outcome(
            state=state,
            exclusion=f"attention check failed in group {group}" if failed else "",
            screen_out="failed the attention check of the first group" if screen else "",
        )

    def completion_progress(self, participant: Participant) -> CompletionProgress:
        needed = self.settings(participant.study).completion_groups
        done, failed = _groups(participant)
        note = "counting groups whose attention check passed" if failed else ""
        return CompletionProgress(done - failed, needed, "groups", note)

    def completion_earned(self, participant: Participant) -> bool:
        # Only kept groups count (issue 45, the rule of every mode): a group whose check
        # failed is excluded, so it earns nothing. Before, a worker answering 5 to every
        # trial failed every check and still earned the code.
        done, failed = _groups(participant)
        return done - failed >= self.settings(participant.study).completion_groups

    def completion_withheld(self, participant: Participant) -> str:
        done, failed = _groups(participant)
        if not failed:
            return ""
        needed = self.settings(participant.study).completion_groups
        return (
            f"The attention check failed in {failed} of your {done} group"
            f"{'s' if done != 1 else ''}, and a group whose check failed does not count "
            f"toward the completion code ({done - failed} of the {needed} needed counted)."
        )


def _groups(participant: Participant) -> tuple[int, int]:
    """(groups done, groups whose check failed) of a participant's state."""
    state = participant.state or {}
    return int(state.get("groups_done", 0)), int(state.get("groups_failed", 0))


# ---------------------------------------------------------------------- building


def build_group_specs(
    *,
    captions: Iterable[tuple[int, int, str]],
    image_names: dict[int, str],
    seed: int,
    n_images: int | None = None,
    per_system: bool = False,
) -> list[dict[str, Any]]:
    """The item specs of a study from its ``(caption id, image id, system)`` rows.

    ``per_system``: every group holds comparisons of one system (adaptive allocation,
    ``rubrics.humanr.build_system_groups``); otherwise groups mix systems as in the paper.

    Raises ServiceError naming what is missing (images with two human captions, a model).
    """
    humans: dict[int, list[int]] = defaultdict(list)
    machines: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for caption_id, image_id, system in captions:
        if system == HUMAN:
            humans[image_id].append(caption_id)
        else:
            machines[image_id][system].append(caption_id)
    images = sorted(image for image, ids in humans.items() if len(ids) >= 2)
    if not images:
        raise ServiceError(
            "HUMANr needs images with at least two human captions (for the Human-vs-Human "
            "baseline); none has two."
        )
    rng = np.random.default_rng(numpy_seed(seed))
    if n_images is not None and n_images < len(images):
        images = sorted(int(i) for i in rng.choice(images, size=n_images, replace=False))
    if len(images) < 3:
        # A group's attention check shows a third image's caption: with two images, a
        # worker would meet one of them twice in the group.
        raise ServiceError("HUMANr needs at least three images with two human captions each.")
    if not any(machines.get(image) for image in images):
        raise ServiceError("HUMANr needs captions of at least one model system; none found.")

    comparisons: dict[str, dict[str, Any]] = {}
    for image in images:
        own = humans[image]
        first, second = (own[int(i)] for i in rng.choice(len(own), size=2, replace=False))
        reference, other = rules.choose_reference(first, second, rng)
        comparisons[f"{image}:{HUMAN}"] = _comparison(image, HUMAN, reference, other, image_names)
        for system in sorted(machines.get(image, {})):
            ids = machines[image][system]
            model_caption = ids[int(rng.integers(len(ids)))]
            human_caption = own[int(rng.integers(len(own)))]
            comparisons[f"{image}:{system}"] = _comparison(
                image, system, human_caption, model_caption, image_names
            )
    human_captions = {image: humans[image] for image in images}
    if per_system:
        groups = rules.build_system_groups(
            [(key, spec["image_id"], spec["system"]) for key, spec in comparisons.items()],
            human_captions,
            rng,
        )
    else:
        groups = rules.build_groups(
            [(key, spec["image_id"]) for key, spec in comparisons.items()], human_captions, rng
        )
    specs = []
    for group in groups:
        trials = []
        for trial in group.trials:
            if trial.kind == "comparison":
                trials.append(comparisons[trial.comparison_id])
            else:
                # Only the check's place: what it shows is drawn for each lease when served
                # (checks.served_check), so that what one worker learns of a check says
                # nothing about the next worker's. build_groups' own draw is not used.
                trials.append(
                    {
                        "kind": CHECK,
                        "comparison": None,
                        "image_id": None,
                        "image_name": "",
                        "system": "",
                        "reference_caption_id": None,
                        "other_caption_id": None,
                        "distractor_image_id": None,
                    }
                )
        specs.append(
            {"group": group.index, "short": group.is_short, "seed": seed, "trials": trials}
        )
    return specs


def group_image_ids(spec: dict[str, Any]) -> set[int]:
    """Every image a group's comparisons show (its ``ItemImage`` rows).

    A comparison's captions are both of its image. A check's images are drawn per lease
    (``checks``), so they are not the group's: the exposure rule reads them per worker.
    """
    return {trial["image_id"] for trial in spec["trials"] if trial["kind"] == COMPARISON}


def _comparison(
    image: int, system: str, reference: int, other: int, image_names: dict[int, str]
) -> dict[str, Any]:
    return {
        "kind": COMPARISON,
        "comparison": f"{image}:{system}",
        "image_id": image,
        "image_name": image_names.get(image, ""),
        "system": system,
        "reference_caption_id": reference,
        "other_caption_id": other,
    }


# ---------------------------------------------------------------------- scoring


def _parse_raw(value: Any) -> int:
    return parse_choice(
        value,
        low=rules.SLIDER_MIN,
        high=rules.SLIDER_MAX,
        field="raw",
        message="Choose a value from 1 (only the left caption matches) to 9 (only the right one).",
    )


def score_trial(
    spec: dict[str, Any],
    *,
    assignment_id: int,
    part: int,
    raw: int,
    trial: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the server stores for one answer: the sides shown and the oriented values.

    ``trial``: the trial as shown (``checks.shown_trial``: a check filled in for the lease);
    the spec's trial by default.
    """
    trial = spec["trials"][part] if trial is None else trial
    on_left = reference_on_left(spec["seed"], assignment_id, part)
    is_check = trial["kind"] == CHECK
    reference_system = HUMAN
    other_system = HUMAN if is_check else trial["system"]
    left, right = _ordered(trial, on_left)
    return {
        "group": spec["group"],
        "kind": trial["kind"],
        "comparison": trial["comparison"],
        "image_id": trial["image_id"],
        "image_name": trial.get("image_name", ""),
        "system": trial["system"],
        "reference_caption_id": trial["reference_caption_id"],
        "other_caption_id": trial["other_caption_id"],
        "reference_on_left": on_left,
        "left_caption_id": left,
        "right_caption_id": right,
        "left_system": reference_system if on_left else other_system,
        "right_system": other_system if on_left else reference_system,
        "oriented": rules.orient(raw, on_left),
        "value": None if is_check else rules.comparison_value(raw, on_left),
        "check_failed": rules.attention_check_failed(raw, on_left) if is_check else None,
    }


# ---------------------------------------------------------------------- adaptive allocation

#: A system is never settled before this many kept comparison values (three groups'
#: worth): a random run of agreeing answers must not stop it (rubrics.adaptive).
ADAPTIVE_MIN_VALUES = 27
#: The HUMANr report's interval level (rubrics.humanr.report's t-interval).
ADAPTIVE_CONFIDENCE = 0.95


def adaptive_settled_systems(study_id: int, target: float) -> set[str]:
    """Systems whose interval half-width has reached ``target`` (with enough values).

    Counted as ``allocation`` says (issue 29): only workers past their gates, one vote per
    linked identity, at least ``ADAPTIVE_MIN_WORKERS`` identities and
    ``ADAPTIVE_MIN_VALUES`` values; ``rubrics.adaptive.humanr_next_systems_by_worker`` over
    them. A system without counted values is open.
    """
    values = counted_values(study_id)
    still = adaptive.humanr_next_systems_by_worker(
        values,
        target_half_width=target,
        confidence=ADAPTIVE_CONFIDENCE,
        min_values=ADAPTIVE_MIN_VALUES,
        min_workers=ADAPTIVE_MIN_WORKERS,
    )
    return set(values) - set(still)


def adaptive_settled_groups(study_id: int, target: float) -> list[int]:
    """Ids of the groups still to serve whose every comparison is of a settled system.

    With the setting on, a study's groups hold one system each (``build_items``), so every
    group of a settled system is dropped and the groups served are composed of the
    systems still open. (A study opened before issue 27 has mixed groups: there a group is
    dropped only when nothing in it is still needed, which saved 1.8%.) Only groups with
    capacity left are read, and only once a system is settled.
    """
    settled = adaptive_settled_systems(study_id, target)
    if not settled:
        return []
    groups = (
        Item.objects.filter(study_id=study_id, kind=GROUP)
        .alias(taken=F("judgment_count") + F("open_lease_count"))
        .filter(taken__lt=F("target"))
        .values_list("id", "spec__trials")
    )
    return [
        item_id
        for item_id, trials in groups
        if all(t["system"] in settled for t in trials if t["kind"] == COMPARISON)
    ]


def adaptive_summary(study: Study) -> dict[str, Any] | None:
    """What adaptive allocation settled, for the dashboard and the finished page (None when
    the setting is off): the settled systems and the groups no longer served for them."""
    target = get_mode(study.mode).settings(study).adaptive_target_half_width
    if not target:
        return None
    settled = adaptive_settled_systems(study.pk, target)
    return {
        "target": target,
        "settled_systems": sorted(settled),
        "groups_not_served": len(adaptive_settled_groups(study.pk, target)) if settled else 0,
    }
