"""HUMANr head-to-head (PROTOCOLS.md section 3; ObjectNet Captions, section 4.2).

The protocol rules (orientation, comparison value, attention checks, groups and the
report statistics) live in ``rubrics.humanr``; this module maps them onto the data model.

Comparisons. Per image with at least two human captions (of purpose ``study``): one
Human-vs-Human pair (two different human captions drawn at random, the reference chosen by
``rubrics.humanr.choose_reference``) and one Human-vs-model pair per model system that
captioned the image (the human caption drawn at random from the image's human captions; a
system with several captions of the image contributes one, drawn at random). ``n_images``
limits the study to a random subset of those images. Every draw comes from one generator
seeded with the study seed, so the same study gives the same comparisons and groups.

Items. ``rubrics.humanr.build_groups`` splits the comparisons into groups of 9 comparisons
of 9 different images plus 1 attention check at a random position (leftover comparisons
go to shorter groups). One ``Item`` per group, ``kind="group"``, ``target`` =
``workers_per_comparison``; ``spec``::

    {"group": index, "short": bool, "seed": study seed, "trials": [
        {"kind": "comparison" | "attention_check", "comparison": "<image id>:<system>" | None,
         "image_id", "image_name", "system" ("Human" for the baseline, "" for a check),
         "reference_caption_id", "other_caption_id", "distractor_image_id" (checks only)},
        ...]}

The reference caption is the human caption of a comparison and the correct caption of an
attention check; the other one is the model caption, the second human caption, or the
distractor (a human caption of another image).

Exposure. Each group's ``ItemImage`` rows name every image it shows or shows a caption of
(``group_image_ids``: the trials' images and the check's distractor image). A worker is only
served groups sharing no image with any group they were ever served, so nobody meets an
image twice and a check's foreign caption cannot be recognised from memory
(``eligible_items``; docs/protocol-choices.md says what this means for capacity).

Serving. Part ``k`` of an assignment is trial ``k`` of the group. Which caption is shown
left is random per presentation: a coin seeded by (study seed, assignment id, trial) decides
it, so the page and the scoring agree without a write when the page is shown, and the side
is stored in ``Judgment.result`` (``reference_on_left``, left/right caption ids), which is
what the report uses. (The side ``build_groups`` drew for a check at build time would be
the same for every worker of the group, so checks use the per-presentation coin too.)
A part counts as shown when the previous part was stored (the lease start for the first).

Scoring. ``result`` holds the oriented answer ``s``, the comparison value ``(s - 5) / 4``
and, for the check, whether it failed (``s >= 5``). When the last trial of a group is
stored and its check failed, every judgment of that group is flagged
``excluded=True, exclusion_reason="attention check failed in group <n>"`` (never deleted).

Report. Kept comparisons: judgments of finished groups (an expired lease's partial group
has no attention check to vouch for it) that are not flagged excluded. Completion codes:
crowd workers get one at the end of every group, also when their check failed (whether to
approve such a submission is the researcher's decision).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
from django.conf import settings as django_settings
from django.db.models import Q
from django.utils import timezone

from annotation.models import (
    Assignment,
    Caption,
    Item,
    ItemImage,
    Judgment,
    Participant,
    Study,
)
from annotation.modes.base import (
    JUDGMENT_FROM,
    JUDGMENT_SELECT,
    JUDGMENT_TRAILING,
    ExportColumn,
    ExportSql,
    Mode,
    Progress,
    SubmissionError,
    check_int,
    judgment_export_columns,
    judgment_trailing_columns,
    parse_choice,
    register,
)
from rubrics import humanr as rules

GROUP = "group"
COMPARISON = "comparison"
CHECK = "attention_check"
HUMAN = Caption.HUMAN

#: Accessible name of each answer; the page shows the digits and the three anchors.
SCALE_TEXT = {
    1: "only left matches",
    2: "left matches much better",
    3: "left matches better",
    4: "left matches slightly better",
    5: "both match equally",
    6: "right matches slightly better",
    7: "right matches better",
    8: "right matches much better",
    9: "only right matches",
}
QUESTION = "Which caption goes best with the image?"

_INT_BOUNDS: dict[str, tuple[int, int]] = {
    "workers_per_comparison": (1, 1000),
    "report_bootstrap": (100, 100_000),
    "report_splits": (10, 100_000),
    "completion_groups": (1, 1000),
}


def _seed(study_seed: int) -> int:
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


@register
class HumanrMode(Mode):
    name = "humanr"
    label = "HUMANr head-to-head"
    exclusion_rules = (
        "A failed attention check (oriented answer >= 5) flags every response of its group; "
        "flagged responses and unfinished groups are left out of HUMANr."
    )
    default_settings: ClassVar[dict[str, Any]] = {
        # None: every image with at least two human captions; a number: a random subset.
        "n_images": None,
        # Workers who judge each group (so each comparison).
        "workers_per_comparison": 3,
        # Answers faster than this after the trial was shown are refused (1 s: nobody reads
        # an image and two captions faster; 0 turns the check off).
        "min_seconds_per_trial": 1,
        # Complete groups a crowd worker must finish to earn the completion code.
        "completion_groups": 1,
        # A worker who failed this many attention checks gets no further group (None: no
        # limit; the paper drops the group's responses and sets no limit).
        "max_failed_checks": None,
        "report_bootstrap": 1000,
        "report_splits": 1000,
    }

    intro_template = "modes/humanr/intro.html"
    item_template = "modes/humanr/item.html"
    feedback_template = "modes/humanr/feedback.html"
    report_template = "modes/humanr/report.html"
    finished_template = "modes/humanr/finished.html"
    figure_names = ("humanr-by-system", "half-splits", "std-vs-images")
    # A crowd lease holds one whole group of 10 trials (a minute or two when read with care),
    # so it lasts longer than a one-part item's; a lapsed one is reopened for the same worker.
    crowd_lease_seconds = 20 * 60

    # ------------------------------------------------------------------ settings

    def clean_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        merged = super().clean_settings(raw)
        for key, (low, high) in _INT_BOUNDS.items():
            check_int(merged, key, low, high)
        for key, low in (("n_images", 2), ("max_failed_checks", 1)):
            value = merged[key]
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < low
            ):
                raise ValueError(f"{key} must be empty or a whole number of at least {low}")
        seconds = merged["min_seconds_per_trial"]
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError("min_seconds_per_trial must be a number of seconds")
        if not 0 <= seconds <= 600:
            raise ValueError("min_seconds_per_trial must be from 0 to 600")
        return merged

    def _settings(self, study: Study) -> dict[str, Any]:
        return {**self.default_settings, **(study.settings or {})}

    # ------------------------------------------------------------------ items

    def build_items(self, study: Study) -> int:
        config = self.clean_settings(study.settings or {})
        groups = build_group_specs(
            captions=Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
            .order_by("image_id", "line", "id")
            .values_list("id", "image_id", "system"),
            image_names=dict(study.images.values_list("id", "name")),
            seed=study.seed,
            n_images=config["n_images"],
        )
        Item.objects.bulk_create(
            [
                Item(
                    study=study,
                    kind=GROUP,
                    position=spec["group"],
                    spec=spec,
                    target=config["workers_per_comparison"],
                )
                for spec in groups
            ],
            batch_size=500,
        )
        # What eligible_items needs to keep a worker from meeting an image twice, as rows the
        # database can join on instead of a JSON spec read back per request.
        item_ids = dict(Item.objects.filter(study=study, kind=GROUP).values_list("position", "id"))
        ItemImage.objects.bulk_create(
            (
                ItemImage(item_id=item_ids[spec["group"]], image_id=image_id)
                for spec in groups
                for image_id in group_image_ids(spec)
            ),
            batch_size=5000,
        )
        return len(groups)

    # ------------------------------------------------------------------ serving

    def eligible_items(self, participant: Participant):
        items = Item.objects.filter(study_id=participant.study_id, kind=GROUP)
        limit = self.settings_for(participant.study).get("max_failed_checks")
        if limit is not None and (participant.state or {}).get("groups_failed", 0) >= limit:
            return items.none()
        # Exposure (PROTOCOLS.md section 3): a worker never meets an image twice, neither
        # shown nor through a caption of it. Otherwise a check's distractor caption could be
        # one they saw earlier with its own image, and a bot with a memory passes every check
        # while answering junk. So every group that shares an image with any group they were
        # ever served (any lease, whatever its status: even an unanswered one showed its
        # first trial) is barred, except those groups themselves: a lapsed lease is reopened
        # by the assignment service, and groups already answered are excluded there.
        served = Assignment.objects.filter(participant_id=participant.pk).values("item_id")
        seen_images = ItemImage.objects.filter(item_id__in=served).values("image_id")
        sharing = ItemImage.objects.filter(image_id__in=seen_images).values("item_id")
        return items.exclude(Q(pk__in=sharing) & ~Q(pk__in=served))

    def parts(self, item: Item) -> int:
        return len(item.spec["trials"])

    def min_seconds(self, assignment: Assignment) -> float:
        # The submission service hands the lease over with its participant and study loaded.
        return float(self._settings(assignment.participant.study)["min_seconds_per_trial"])

    def phase(self, assignment: Assignment) -> str:
        return GROUP

    def validate(self, assignment: Assignment, part: int, data: dict[str, Any]) -> dict[str, Any]:
        raw = _parse_raw(data.get("raw"))
        shown_left = data.get("left")
        if shown_left not in (None, ""):
            trial = assignment.item.spec["trials"][part]
            left, _right = _sides(trial, assignment.item.spec["seed"], assignment.pk, part)
            if str(shown_left) != str(left):
                raise SubmissionError(
                    "This page was out of date, so your answer was not saved; please answer "
                    "the trial shown now.",
                    field="left",
                    status=409,
                )
        return {"raw": raw}

    def score(
        self, *, item: Item, assignment: Assignment, part: int, payload: dict[str, Any]
    ) -> dict[str, Any]:
        return score_trial(item.spec, assignment_id=assignment.pk, part=part, raw=payload["raw"])

    def after_submit(self, participant: Participant, judgment: Judgment) -> None:
        if judgment.part != len(judgment.item.spec["trials"]) - 1:
            return
        # The group is complete (parts are stored in order). Flag it if its check failed.
        results = Judgment.objects.filter(assignment_id=judgment.assignment_id).values_list(
            "result", flat=True
        )
        failed = any((result or {}).get("check_failed") for result in results)
        group = judgment.item.spec["group"]
        if failed:
            reason = f"attention check failed in group {group}"
            Judgment.objects.filter(assignment_id=judgment.assignment_id).update(
                excluded=True, exclusion_reason=reason
            )
            judgment.excluded, judgment.exclusion_reason = True, reason
        # The participant row is locked by the submission service.
        state = dict(participant.state or {})
        state["groups_done"] = state.get("groups_done", 0) + 1
        state["groups_failed"] = state.get("groups_failed", 0) + int(failed)
        Participant.objects.filter(pk=participant.pk).update(state=state)
        participant.state = state

    # ------------------------------------------------------------------ pages

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        return {"raw": post.get("raw"), "left": post.get("left")}

    def page_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        item = assignment.item
        trial = item.spec["trials"][part]
        left_id, right_id = _sides(trial, item.spec["seed"], assignment.pk, part)
        captions = {
            caption.pk: caption
            for caption in Caption.objects.filter(pk__in=[left_id, right_id])
            .select_related("image")
            .only(
                "id", "text", "image__display", "image__alt_text", "image__width", "image__height"
            )
        }
        image = captions[trial["reference_caption_id"]].image
        # The services and views hand the lease over with its participant and study loaded.
        minimum = float(self._settings(assignment.participant.study)["min_seconds_per_trial"])
        waited = (timezone.now() - self.served_at(assignment, part)).total_seconds()
        remaining = max(0.0, minimum - waited)
        return {
            "question": QUESTION,
            "trial_number": part + 1,
            "trial_count": len(item.spec["trials"]),
            "left_caption": captions[left_id],
            "right_caption": captions[right_id],
            "image": image,
            "image_url": django_settings.MEDIA_URL + image.display if image.display else "",
            "alt_text": image.alt_text or "The image the two captions describe",
            "scale": [{"value": value, "text": SCALE_TEXT[value]} for value in SCALE_TEXT],
            "remaining_seconds": math.ceil(remaining * 10) / 10,
        }

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        if judgment.part != len(judgment.item.spec["trials"]) - 1:
            return {}
        # The submission service leaves the participant it updated on the judgment.
        participant = judgment.participant
        return {"group_number": (participant.state or {}).get("groups_done", 1)}

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        return {"groups_done": (participant.state or {}).get("groups_done", 0)}

    def completion_earned(self, participant: Participant) -> bool:
        # Every complete group counts, a failed check included: the export shows the
        # failures, and Prolific's rules leave rejecting on one failed check to the researcher.
        done = (participant.state or {}).get("groups_done", 0)
        return done >= self.settings_for(participant.study)["completion_groups"]

    # ------------------------------------------------------------------ report

    def report(self, study: Study, progress: Progress) -> dict[str, Any]:
        config = self._settings(study)
        progress(5, "Loading responses")
        rows = list(
            Judgment.objects.filter(study=study, phase=GROUP)
            .order_by("id")
            .values_list(
                "participant_id",
                "item_id",
                "assignment__status",
                "payload",
                "result",
                "excluded",
                "dwell_ms",
            )
        )
        people = {
            pk: (pseudonym, source)
            for pk, pseudonym, source in Participant.objects.filter(study=study).values_list(
                "pk", "pseudonym", "source"
            )
        }
        n_groups = Item.objects.filter(study=study, kind=GROUP).count()
        progress(20, "Computing HUMANr")
        result = summarize(
            rows,
            people=people,
            seed=study.seed,
            n_bootstrap=config["report_bootstrap"],
            n_splits=config["report_splits"],
        )
        result["n_groups_built"] = n_groups
        result["completion_code"] = self.completion_code(study)
        result["study_seed"] = study.seed
        progress(95, "Done")
        return result

    def figure(self, name: str, result: dict[str, Any]):
        from matplotlib.figure import Figure

        if name not in self.figure_names:
            raise KeyError(name)
        if not result.get("humanr"):
            figure = Figure(figsize=(5, 1.5))
            figure.text(0.5, 0.5, "No kept comparisons yet", ha="center", va="center")
            return figure
        report = result["humanr"]
        if name == "humanr-by-system":
            return _figure_by_system(Figure, report)
        if name == "half-splits":
            return _figure_half_splits(Figure, report)
        return _figure_std_vs_images(Figure, report)

    # ------------------------------------------------------------------ export

    export_row_unit = "trial (9 comparisons and 1 attention check per group)"

    def export_columns(self) -> list[ExportColumn]:
        return [
            *judgment_export_columns(),
            ExportColumn("group", "int", "Group index (the item's position)."),
            ExportColumn("trial", "int", "Trial number within the group, 1-10."),
            ExportColumn("trial_kind", "str", "comparison or attention_check."),
            ExportColumn("image", "str", "Name of the image shown.", "images"),
            ExportColumn(
                "system", "str", "Compared system (Human: the Human-vs-Human pair; empty: check)."
            ),
            ExportColumn("left_caption_id", "int", "Caption shown on the left.", "captions"),
            ExportColumn("left_caption", "str", "Text of the left caption."),
            ExportColumn("left_system", "str", "System of the left caption."),
            ExportColumn("right_caption_id", "int", "Caption shown on the right.", "captions"),
            ExportColumn("right_caption", "str", "Text of the right caption."),
            ExportColumn("right_system", "str", "System of the right caption."),
            ExportColumn(
                "human_side",
                "str",
                "Side of the human (reference) caption: left or right; for a check, the "
                "side of the image's own caption.",
            ),
            ExportColumn("raw", "int", "Answer, 1 (only left matches) to 9 (only right)."),
            ExportColumn(
                "score",
                "float",
                "Signed score (s - 5) / 4 in [-1, 1] with s the answer oriented so the human "
                "caption is left: negative, the human caption preferred. Empty for checks.",
            ),
            ExportColumn("is_attention_check", "bool", "The trial is the group's check."),
            ExportColumn(
                "attention_check_failed", "bool", "For a check: failed (s >= 5); else empty."
            ),
            ExportColumn(
                "group_finished",
                "bool",
                "The worker finished the group (unfinished groups are left out of HUMANr).",
            ),
            *judgment_trailing_columns(),
        ]

    def export_query(self, study: Study, sql: ExportSql) -> tuple[str, list[Any]]:
        left = sql.int("j.result", "left_caption_id")
        right = sql.int("j.result", "right_caption_id")
        kind = sql.text("j.result", "kind")
        return (
            f"SELECT {JUDGMENT_SELECT}, {sql.int('j.result', 'group')}, j.part + 1, {kind}, "
            f"{sql.text('j.result', 'image_name')}, {sql.text('j.result', 'system')}, "
            f"{left}, lc.text, {sql.text('j.result', 'left_system')}, "
            f"{right}, rc.text, {sql.text('j.result', 'right_system')}, "
            f"CASE WHEN {sql.bool('j.result', 'reference_on_left')} THEN 'left' ELSE 'right' END, "
            f"{sql.int('j.payload', 'raw')}, {sql.float('j.result', 'value')}, "
            f"({kind} = '{CHECK}'), {sql.bool('j.result', 'check_failed')}, "
            f"(a.status = '{Assignment.Status.SUBMITTED}'), {JUDGMENT_TRAILING} "
            f"FROM {JUDGMENT_FROM} JOIN annotation_assignment a ON a.id = j.assignment_id "
            f"LEFT JOIN annotation_caption lc ON lc.id = {left} "
            f"LEFT JOIN annotation_caption rc ON rc.id = {right} "
            "WHERE j.study_id = %s ORDER BY j.id",
            [study.pk],
        )


# ---------------------------------------------------------------------- building


def build_group_specs(
    *,
    captions: Iterable[tuple[int, int, str]],
    image_names: dict[int, str],
    seed: int,
    n_images: int | None = None,
) -> list[dict[str, Any]]:
    """The item specs of a study from its ``(caption id, image id, system)`` rows.

    Raises ValueError naming what is missing (images with two human captions, a model).
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
        raise ValueError(
            "HUMANr needs images with at least two human captions (for the Human-vs-Human "
            "baseline); none has two."
        )
    rng = np.random.default_rng(_seed(seed))
    if n_images is not None and n_images < len(images):
        images = sorted(int(i) for i in rng.choice(images, size=n_images, replace=False))
    if len(images) < 2:
        raise ValueError("HUMANr needs at least two images with two human captions each.")
    if not any(machines.get(image) for image in images):
        raise ValueError("HUMANr needs captions of at least one model system; none found.")

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
    groups = rules.build_groups(
        [(key, spec["image_id"]) for key, spec in comparisons.items()],
        {image: humans[image] for image in images},
        rng,
    )
    specs = []
    for group in groups:
        trials = []
        for trial in group.trials:
            if trial.kind == "comparison":
                trials.append(comparisons[trial.comparison_id])
            else:
                trials.append(
                    {
                        "kind": CHECK,
                        "comparison": None,
                        "image_id": trial.image_id,
                        "image_name": image_names.get(trial.image_id, ""),
                        "system": "",
                        "reference_caption_id": trial.correct_caption_id,
                        "other_caption_id": trial.distractor_caption_id,
                        "distractor_image_id": trial.distractor_image_id,
                    }
                )
        specs.append(
            {"group": group.index, "short": group.is_short, "seed": seed, "trials": trials}
        )
    return specs


def group_image_ids(spec: dict[str, Any]) -> set[int]:
    """Every image a group shows or shows a caption of (its ``ItemImage`` rows).

    A comparison's captions are both of its image; a check adds the image of its distractor
    caption, which is the one a worker must never have met before.
    """
    images = {trial["image_id"] for trial in spec["trials"]}
    images.update(
        trial["distractor_image_id"] for trial in spec["trials"] if trial["kind"] == CHECK
    )
    return images


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


def _sides(trial: dict[str, Any], seed: int, assignment_id: int, part: int) -> tuple[int, int]:
    """(left caption id, right caption id) of one presentation."""
    return _ordered(trial, reference_on_left(seed, assignment_id, part))


def _ordered(trial: dict[str, Any], on_left: bool) -> tuple[int, int]:
    reference, other = trial["reference_caption_id"], trial["other_caption_id"]
    return (reference, other) if on_left else (other, reference)


def score_trial(spec: dict[str, Any], *, assignment_id: int, part: int, raw: int) -> dict[str, Any]:
    """What the server stores for one answer: the sides shown and the oriented values."""
    trial = spec["trials"][part]
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


# ---------------------------------------------------------------------- report


def summarize(
    rows: Sequence[tuple[Any, ...]],
    *,
    people: dict[int, tuple[str, str]],
    seed: int,
    n_bootstrap: int = 1000,
    n_splits: int = 1000,
    include_distributions: bool = True,
) -> dict[str, Any]:
    """The HUMANr report from judgment rows.

    ``rows``: ``(participant id, item id, assignment status, payload, result, excluded,
    dwell_ms)`` per judgment, as the report query loads them. Kept: rows of submitted
    (finished) groups not flagged excluded; ``rubrics.humanr.report`` also drops every row
    of a group whose check failed.
    """
    per_worker: dict[int, dict[str, Any]] = defaultdict(
        lambda: {"responses": 0, "dwell": [], "incomplete_responses": 0}
    )
    records = []
    raw_all = []
    for participant_id, item_id, status, payload, result, excluded, dwell_ms in rows:
        mine = per_worker[participant_id]
        mine["responses"] += 1
        mine["dwell"].append(dwell_ms)
        finished = status == Assignment.Status.SUBMITTED
        if not finished:
            mine["incomplete_responses"] += 1
        raw_all.append(payload["raw"])
        records.append(
            {
                "worker_id": participant_id,
                "image_id": result["image_id"],
                "system": result["system"],
                "raw": payload["raw"],
                "human_on_left": bool(result["reference_on_left"]),
                "is_attention_check": result["kind"] == CHECK,
                "group_id": item_id,
                "dropped": bool(excluded) or not finished,
            }
        )
    out: dict[str, Any] = {
        "n_responses": len(rows),
        "n_incomplete_responses": sum(w["incomplete_responses"] for w in per_worker.values()),
        "humanr": None,
        "error": "",
    }
    humanr: dict[str, Any] | None = None
    if records:
        try:
            humanr = rules.report(
                rules.Responses.from_records(records),
                n_bootstrap=n_bootstrap,
                n_splits=n_splits,
                include_distributions=include_distributions,
                seed=_seed(seed),
            )
        except ValueError as exc:
            out["error"] = str(exc)
    else:
        out["error"] = "No responses yet."
    checks = (humanr or {}).get("attention_checks", {}).get("per_worker", {})
    workers = []
    for participant_id, mine in per_worker.items():
        pseudonym, source = people.get(participant_id, (str(participant_id), ""))
        counted = checks.get(str(participant_id), {})
        workers.append(
            {
                "pseudonym": pseudonym,
                "source": source,
                "responses": mine["responses"],
                "groups": counted.get("groups", 0),
                "checks": counted.get("checks", 0),
                "failed_checks": counted.get("failed_checks", 0),
                "dropped_responses": counted.get("dropped_responses", 0),
                "incomplete_responses": mine["incomplete_responses"],
                "median_seconds": statistics.median(mine["dwell"]) / 1000,
            }
        )
    workers.sort(key=lambda w: (-w["responses"], w["pseudonym"]))
    out["workers"] = workers
    out["mean_raw_all"] = float(np.mean(raw_all)) if raw_all else None
    if humanr is not None:
        humanr["attention_checks"].pop("per_worker", None)
        # The half-split values feed the figure only; keep one copy of them, not one per view.
        named = {**humanr["systems"], HUMAN: humanr["baseline"] or {}}
        humanr["half_split_values"] = {}
        for name, entry in named.items():
            splits = entry.get("half_splits") or {}
            values = splits.pop("half_a", None), splits.pop("half_b", None)
            if values[0] is not None:
                humanr["half_split_values"][name] = [
                    v for v in values[0] + values[1] if v is not None
                ]
        humanr["rows"] = [
            {"system": name, "baseline": False, **entry}
            for name, entry in humanr["systems"].items()
        ]
        if humanr["baseline"] is not None:
            humanr["rows"].insert(0, {"system": HUMAN, "baseline": True, **humanr["baseline"]})
        humanr["std_table"] = [
            {
                "n_images": point["n_images"],
                "values": [point["std"].get(row["system"]) for row in humanr["rows"]],
            }
            for point in humanr["std_by_image_count"]
        ]
    out["humanr"] = humanr
    return out


def _figure_by_system(Figure, report: dict[str, Any]):
    """Paper Fig. 1 style: one bar per comparison type with its intervals."""
    rows = [row for row in report["rows"] if row["humanr"] is not None]
    figure = Figure(figsize=(6.4, 0.6 * len(rows) + 1.4))
    axes = figure.subplots()
    y = np.arange(len(rows))[::-1]
    values = [row["humanr"] for row in rows]
    colours = ["#6b7280" if row["baseline"] else "#0b57d0" for row in rows]
    axes.barh(y, values, color=colours, height=0.55)
    for yy, row in zip(y, rows, strict=True):
        if row["t_interval"]:
            lo, hi = row["t_interval"]
            axes.errorbar(
                row["humanr"],
                yy,
                xerr=[[row["humanr"] - lo], [hi - row["humanr"]]],
                fmt="none",
                ecolor="#1b1f24",
                capsize=4,
                lw=1.4,
            )
        if row["bootstrap_interval"]:
            lo, hi = row["bootstrap_interval"]
            axes.plot([lo, hi], [yy - 0.36, yy - 0.36], color="#a4001d", lw=2.5)
    axes.axvline(0, color="#1b1f24", lw=0.8)
    axes.set_yticks(y, [f"Human–{row['system']}" for row in rows])
    axes.set_xlim(-1, 1)
    axes.set_xlabel("HUMANr (−1: human caption preferred, +1: model caption preferred)")
    axes.set_title(
        "HUMANr by comparison\n(black: 95% t-interval, red: bootstrap over images)", fontsize=10
    )
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure


def _figure_half_splits(Figure, report: dict[str, Any]):
    """Paper Fig. 4 left: HUMANr on random halves of the workers."""
    figure = Figure(figsize=(6.4, 3.4))
    axes = figure.subplots()
    drawn = False
    for row in report["rows"]:
        values = report.get("half_split_values", {}).get(row["system"])
        if values:
            axes.hist(values, bins=40, alpha=0.6, label=f"Human–{row['system']}")
            drawn = True
    axes.set_xlim(-1, 1)
    axes.set_xlabel("HUMANr on one half of the workers")
    axes.set_ylabel("Half-splits")
    axes.set_title("Reproducibility over random half-splits of workers")
    if drawn:
        axes.legend(frameon=False, fontsize="small")
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure


def _figure_std_vs_images(Figure, report: dict[str, Any]):
    """Paper Fig. 4 right: standard deviation of HUMANr against the number of images."""
    figure = Figure(figsize=(6.4, 3.4))
    axes = figure.subplots()
    points = report.get("std_by_image_count") or []
    names = [row["system"] for row in report["rows"]]
    for name in names:
        xs = [p["n_images"] for p in points if p["std"].get(name) is not None]
        ys = [p["std"][name] for p in points if p["std"].get(name) is not None]
        if xs:
            axes.plot(xs, ys, marker="o", label=f"Human–{name}")
    axes.set_xlabel("Number of images")
    axes.set_ylabel("Std of HUMANr")
    axes.set_title("Stability of HUMANr with the number of images")
    if points:
        axes.set_xscale("log")
        counts = [p["n_images"] for p in points]
        axes.set_xticks(counts, [str(n) for n in counts])
        axes.minorticks_off()
        axes.legend(frameon=False, fontsize="small")
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    figure.tight_layout()
    return figure
