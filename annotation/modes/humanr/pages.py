"""HUMANr's pages: one trial (an image, two captions, a 1-9 scale), the end of a group.

Which caption is on the left comes from the per-presentation coin of ``protocol``, so the
page shows exactly what the scoring will assume; the form sends back the left caption's id
and a submission from a page showing other sides is refused (``HumanrProtocol.validate``).
"""

from __future__ import annotations

import math
from typing import Any

from django.db.models import F
from django.utils import timezone
from django.utils.functional import SimpleLazyObject
from django.utils.html import escape
from django.utils.safestring import mark_safe

from annotation import storage
from annotation.models import Assignment, Caption, Image, Item, Judgment, Participant, Study
from annotation.models.rows import columns, cursor, instance, prefetched
from annotation.modes.base import Pages
from annotation.modes.humanr.checks import IMAGE_FIELDS as KEPT_IMAGE_FIELDS
from annotation.modes.humanr.checks import check_captions, shown_field, shown_trial
from annotation.modes.humanr.protocol import CHECK, GROUP, adaptive_summary, sides_shown
from rubrics import humanr as rules

#: Accessible name of each answer; the page shows the digits and the three anchors. The
#: captions are "A" and "B", not "left" and "right": on a phone they stack, A above B, and
#: the words must fit both layouts (A is always the left one of the stored ``left`` side).
SCALE_TEXT = {
    1: "only caption A matches",
    2: "caption A matches much better",
    3: "caption A matches better",
    4: "caption A matches slightly better",
    5: "both match equally",
    6: "caption B matches slightly better",
    7: "caption B matches better",
    8: "caption B matches much better",
    9: "only caption B matches",
}
QUESTION = "Which caption goes best with the image?"
#: The scale's radio buttons as the page's loop over ``scale`` wrote them: the same on every
#: trial page, so written once (rendering the loop was a tenth of a trial page's CPU).
SCALE_POINTS = mark_safe(
    "".join(
        f'\n      <input type="radio" name="raw" id="raw-{value}" value="{value}" '
        f'aria-label="{value}: {escape(text)}" required>'
        f'<label for="raw-{value}">{value}</label>'
        for value, text in SCALE_TEXT.items()
    )
)

#: What a trial page shows of its two captions: text, and the image of each (the reference
#: caption's is the trial's image), with when the previous trial was answered
#: (``Assignment.part_shown_at``; NULL for the first, or when there is none). One fixed
#: statement (issue 48): built by the ORM, this read cost a tenth of a trial page's CPU.
#: Params: lease id, previous part, the two caption ids.
CAPTION_FIELDS = ("id", "image_id", "text")
IMAGE_FIELDS = ("id", "display", "width", "height", "alt_text")
TRIAL_CAPTIONS = f"""
SELECT {columns("c", Caption, CAPTION_FIELDS)}, {columns("im", Image, IMAGE_FIELDS)},
       (SELECT j."created_at" FROM "{Judgment._meta.db_table}" j
        WHERE j."assignment_id" = %s AND j."part" = %s ORDER BY j."id" LIMIT 1)
FROM "{Caption._meta.db_table}" c JOIN "{Image._meta.db_table}" im ON im."id" = c."image_id"
WHERE c."id" IN (%s, %s)
"""


def trial_captions(assignment: Assignment, part: int, ids: tuple[int, int]):
    """Run ``TRIAL_CAPTIONS``: the captions by id, each with its ``image``, and when the
    previous trial was answered (None for the first, or when there is none)."""
    with cursor() as reading:
        reading.execute(TRIAL_CAPTIONS, [assignment.pk, part - 1, *ids])
        found = reading.fetchall()
    captions: dict[int, Caption] = {}
    previous_at = None
    width = len(CAPTION_FIELDS)
    for row in found:
        caption = instance(Caption, CAPTION_FIELDS, row[:width])
        caption.image = instance(Image, IMAGE_FIELDS, row[width : width + len(IMAGE_FIELDS)])
        captions[caption.pk] = caption
        if row[-1] is not None:
            previous_at = instance(Judgment, ("created_at",), row[-1:]).created_at
    return captions, previous_at


def check_captions_shown(assignment: Assignment, part: int, ids: tuple[int, int]):
    """``trial_captions`` of a check's page without its statement (issue 48: the check's
    draw reads the worker's leases first, so its page made one statement more than a
    comparison's): the captions and the check image as the study's human captions were
    read (``checks.StudyCaptions``, once per process), the previous answer's time from the
    lease's answers as the service read them. None when a caption is not among them."""
    fixed = check_captions(assignment.participant.study).fixed
    if not all(caption in fixed.texts for caption in ids):
        return None
    captions: dict[int, Caption] = {}
    for caption_id in ids:
        image_id = fixed.image_of[caption_id]
        caption = Caption(id=caption_id, image_id=image_id, text=fixed.texts[caption_id])
        image = dict(zip(KEPT_IMAGE_FIELDS, fixed.images[image_id], strict=True))
        caption.image = Image(id=image_id, **image)
        captions[caption_id] = caption
    return captions, previous_answer_at(assignment, part)


def previous_answer_at(assignment: Assignment, part: int):
    """When part ``part - 1`` of the lease was answered (``TRIAL_CAPTIONS``' last column):
    from its answers as the service read them with the lease (``assignment_sql.LEASES``),
    else a query (a page shown again after a refused answer)."""
    if part == 0:
        return None
    answers = prefetched(assignment, "judgments")
    if answers is not None:
        answers = [a for a in answers if a.part == part - 1]
        return min(answers, key=lambda a: a.pk).created_at if answers else None
    found = Judgment.objects.filter(assignment_id=assignment.pk, part=part - 1).order_by("id")
    return found.values_list("created_at", flat=True).first()


class HumanrPages(Pages):
    intro_template = "modes/humanr/intro.html"
    item_template = "modes/humanr/item.html"
    feedback_template = "modes/humanr/feedback.html"
    finished_template = "modes/humanr/finished.html"

    def parse_form(self, post: dict[str, Any], part: int) -> dict[str, Any]:
        return {"raw": post.get("raw"), "left": post.get("left"), "shown": post.get("shown")}

    def intro_context(self, study: Study) -> dict[str, Any]:
        return {"group_sizes": group_sizes(study)}

    def item_context(self, assignment: Assignment, part: int) -> dict[str, Any]:
        item = assignment.item
        trial = shown_trial(assignment, part, named=False)
        left_id, right_id = sides_shown(trial, item.spec["seed"], assignment.pk, part)
        # When the previous trial was answered (``Assignment.part_shown_at``), read with
        # the captions rather than by a query of its own (issue 48); a check's captions were
        # read with the study's, once per process (its draw is the page's read).
        found = None
        if trial["kind"] == CHECK:
            found = check_captions_shown(assignment, part, (left_id, right_id))
        captions, previous_at = found or trial_captions(assignment, part, (left_id, right_id))
        image = captions[trial["reference_caption_id"]].image
        # The services and views hand the lease over with its participant and study loaded.
        config = self.mode.settings(assignment.participant.study)
        minimum = float(config.min_seconds_per_trial)
        # As ``part_shown_at``: the lease's start, or the previous answer if later.
        shown_at = max(previous_at, assignment.served_at) if previous_at else assignment.served_at
        waited = (timezone.now() - shown_at).total_seconds()
        remaining = max(0.0, minimum - waited)
        return {
            "question": QUESTION,
            "trial_number": part + 1,
            "trial_count": len(item.spec["trials"]),
            "left_caption": captions[left_id],
            "right_caption": captions[right_id],
            "image": image,
            "image_url": storage.display_url(image.display) if image.display else "",
            "alt_text": image.alt_text or "The image the two captions describe",
            "scale_points": SCALE_POINTS,
            "remaining_seconds": math.ceil(remaining * 10) / 10,
            # The right caption and what the page showed, for the answer to a check
            # (``checks.shown_field``); on every trial, so that it does not tell the check.
            "shown": shown_field(assignment, part, left_id, right_id),
        }

    def feedback_context(self, judgment: Judgment) -> dict[str, Any]:
        if judgment.part != len(judgment.item.spec["trials"]) - 1:
            return {}
        # The submission service leaves the participant it updated on the judgment.
        participant = judgment.participant
        return {
            "group_number": (participant.state or {}).get("groups_done", 1),
            # Read when the page shows it: the POST that ends a group only asks whether there
            # is a feedback page, and the exposure rule behind this costs a few queries.
            "another_group": SimpleLazyObject(lambda: self._another_group(participant)),
        }

    def _another_group(self, participant: Participant) -> bool:
        """Whether "Do another group" would find one: an eligible group not served to this
        worker with room for one more worker (the assignment service's capacity rule)."""
        served = Assignment.objects.filter(participant_id=participant.pk).values("item_id")
        return (
            self.mode.eligible_items(participant)
            .exclude(pk__in=served)
            .filter(target__gt=F("judgment_count") + F("open_lease_count"))
            .exists()
        )

    def finished_context(self, participant: Participant) -> dict[str, Any]:
        # With adaptive allocation on, groups may be left unserved because every system
        # they compare is settled: say so, rather than leave the worker to guess whether
        # the study is broken or full (issue 29, row 10).
        adaptive = adaptive_summary(participant.study)
        return {
            "groups_done": (participant.state or {}).get("groups_done", 0),
            "adaptive": adaptive if adaptive and adaptive["groups_not_served"] else None,
        }


def group_sizes(study: Study) -> str:
    """The study's group sizes in trials, largest first, as the intro says them ("10",
    "8 or 7"): a full group has ``rules.GROUP_SIZE`` trials and only the few groups of
    leftover comparisons (``spec["short"]``) are read, so the page costs two small queries.
    """
    groups = Item.objects.filter(study_id=study.pk, kind=GROUP)
    sizes = {
        len(spec.get("trials") or ())
        for spec in groups.filter(spec__short=True).values_list("spec", flat=True)
    }
    if groups.exclude(spec__short=True).exists():
        sizes.add(rules.GROUP_SIZE)
    words = [str(size) for size in sorted(sizes - {0}, reverse=True)]
    if len(words) > 1:
        return f"{', '.join(words[:-1])} or {words[-1]}"
    return words[0] if words else str(rules.GROUP_SIZE)


def group_size_counts(study: Study) -> list[tuple[int, int]]:
    """``[(trials, groups), ...]`` of the study, largest groups first: the full groups are
    counted (``rules.GROUP_SIZE`` trials each), only the few short ones are read."""
    groups = Item.objects.filter(study_id=study.pk, kind=GROUP)
    counts: dict[int, int] = {}
    for spec in groups.filter(spec__short=True).values_list("spec", flat=True):
        size = len(spec.get("trials") or ())
        counts[size] = counts.get(size, 0) + 1
    full = groups.exclude(spec__short=True).count()
    if full:
        counts[rules.GROUP_SIZE] = counts.get(rules.GROUP_SIZE, 0) + full
    return sorted(((size, n) for size, n in counts.items() if size), reverse=True)


def dataset_notes(study: Study) -> list[str]:
    """What the dataset card says of the study's groups: their real sizes (issue 26 row 20:
    the card said groups of 10 when the study's had 8 and 7 trials)."""
    counts = group_size_counts(study)
    if not counts:
        return []
    parts = [f"{n} of {size} trial{'s' if size != 1 else ''}" for size, n in counts]
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    total = sum(n for _size, n in counts)
    return [
        f"Groups in this study: {total} group{'s' if total != 1 else ''}, {listed}, each "
        "with one attention check (a full group is 9 comparisons and 1 check; comparisons "
        "left over make the shorter groups)."
    ]
