"""HUMANr's exposure rule inside the claim's own statement (issue 48).

The rule (``protocol.HumanrProtocol.eligible_items``, PROTOCOLS.md section 3): a group is
served only if it shares no image with what the worker (the participant and its
browser-mates) met: their groups' images and their checks' images; and, once fewer than
``CHECK_IMAGES + GROUP_SIZE + 1`` images of the pool are left unmet, only a group small
enough to leave two of them for its check; the groups leased to the participant stay
theirs. A check's images come from its draw (``checks.worker_checks``), which Python
computes from a read of the worker's leases: as its own statement, that read made a
group's first page five statements on PostgreSQL.

Once a lease's check is answered its images are in its judgment: the images of the
judgment's two captions. So when every lease of the worker has its check answered (a new
worker, or one who finished their groups: the fresh claim's common case), the rule is a
condition of SQL alone, ``GUARDED``, and it runs in the claim's statement, after the
participant's lock: it sees a browser-mate's lease committed while the request waited for
that lock. When some lease has no answered check (a lapsed or given-back lease, a
browser-mate's group in progress), ``GUARDED`` matches nothing and the draw must be
computed: the rule as Python reads it, ``exact_items``.

The mode hands the fresh claim (``assignment_next``'s common case, one statement) its
groups with ``GUARDED`` (``protocol.HumanrProtocol.fresh_items``), and every other reader
(the full path's claim, the end-of-group page's question) the exact rule
(``eligible_items``). ``GUARDED`` matches either the exact rule's groups or none, and a
fresh claim that claims nothing is followed by the full path, so a worker whose draws must
be computed is served as before.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet

from annotation.models import Assignment, Caption, Item, ItemImage, Judgment, Participant
from annotation.modes.humanr.checks import CHECK_IMAGES, int_key, result_kind, worker_checks
from rubrics.humanr import GROUP_SIZE

P, A, I, II, J, C = (  # noqa: E741 (the item table, as the others name theirs)
    m._meta.db_table for m in (Participant, Assignment, Item, ItemImage, Judgment, Caption)
)
_CHECK = "attention_check"
#: The rule narrows the groups by size only below this many unmet pool images.
UNMET_BOUND = CHECK_IMAGES + GROUP_SIZE + 1

#: The worker's participants: the participant and its browser-mates (``checks.
#: worker_query``; a NULL browser id names no browser). Params: participant id, study id,
#: browser id or None.
_WORKER = f"""SELECT wp."id" FROM "{P}" wp
    WHERE wp."id" = %s OR (wp."study_id" = %s AND wp."browser_id" = %s)"""

#: Every image the worker met, when every lease's check is answered (``checks.
#: worker_checks``' ``met``): their groups' images, and the images of the two captions each
#: answered check showed (a human caption of purpose ``study`` of the study, as
#: ``StudyCaptions.human`` maps them). ``{caption}``: the vendor's read of one caption id of
#: the judgment's ``result`` (alias ``mj``), joined by equality so that the caption is found
#: by its key (an OR of both ids scanned every caption of the study).
_CHECK_CAPTION = f"""SELECT mc."image_id" FROM "{J}" mj
    JOIN "{A}" mja ON mja."id" = mj."assignment_id"
    JOIN "{C}" mc ON mc."id" = {{caption}}
    WHERE mja."participant_id" IN ({_WORKER}) AND {{kind}} = %s
      AND mc."study_id" = %s AND mc."purpose" = %s AND mc."system" = %s"""
#: ``{reference}``, ``{other}``: ``_CHECK_CAPTION`` with each caption's read. Params:
#: ``_WORKER``'s, then twice ``_WORKER``'s, the check kind, study id, purpose, the human
#: system.
_MET = f"""SELECT mi."image_id" FROM "{II}" mi JOIN "{A}" ma ON ma."item_id" = mi."item_id"
    WHERE ma."participant_id" IN ({_WORKER})
    UNION ALL {_CHECK_CAPTION.replace("{caption}", "{reference}")}
    UNION ALL {_CHECK_CAPTION.replace("{caption}", "{other}")}"""

#: How many pool images (those with a human caption of purpose ``study`` of the study:
#: ``StudyCaptions.human``) the worker has not met, counted up to ``UNMET_BOUND`` (the rule
#: only asks whether fewer are left, and how many then). Params: study id, purpose, the
#: human system, ``_MET``'s, the bound.
_UNMET = f"""(SELECT COUNT(*) FROM (
    SELECT DISTINCT uc."image_id" FROM "{C}" uc
    WHERE uc."study_id" = %s AND uc."purpose" = %s AND uc."system" = %s
      AND uc."image_id" NOT IN ({_MET})
    LIMIT %s) unmet)"""

#: The study's groups showing more images than leave two unmet ones for their check.
#: Params: study id, ``_UNMET``'s, then ``CHECK_IMAGES``.
_TOO_BIG = f"""SELECT ti."item_id" FROM "{II}" ti JOIN "{I}" tt ON tt."id" = ti."item_id"
    WHERE tt."study_id" = %s GROUP BY ti."item_id" HAVING COUNT(ti."id") > {_UNMET} - %s"""

#: The rule when every lease of the worker has its check answered, as a condition on the
#: candidate group (``{item}``, the item table's alias in the query): no lease of the
#: worker without an answered check (else nothing: the full path computes the draws), and
#: the group is the participant's already, or it shows no image they met and, with fewer
#: than ``UNMET_BOUND`` pool images unmet, it is small enough. Params: ``_WORKER``'s, the
#: check kind, participant id, ``_MET``'s, ``_UNMET``'s, the bound, ``_TOO_BIG``'s.
GUARDED = f"""(NOT EXISTS (
    SELECT 1 FROM "{A}" ua WHERE ua."participant_id" IN ({_WORKER})
      AND NOT EXISTS (SELECT 1 FROM "{J}" uj
                      WHERE uj."assignment_id" = ua."id" AND {{unanswered_kind}} = %s))
  AND ({{item}}."id" IN (SELECT sa."item_id" FROM "{A}" sa WHERE sa."participant_id" = %s)
    OR (NOT EXISTS (SELECT 1 FROM "{II}" xi
                    WHERE xi."item_id" = {{item}}."id" AND xi."image_id" IN ({_MET}))
        AND ({_UNMET} >= %s OR {{item}}."id" NOT IN ({_TOO_BIG})))))"""


def guarded_sql(participant: Participant, item: str) -> tuple[str, list[Any]]:
    """``GUARDED`` for ``participant`` on the item table's alias ``item`` (quoted), with its
    params."""
    worker = [participant.pk, participant.study_id, participant.browser_id or None]
    human = [participant.study_id, Caption.Purpose.STUDY, Caption.HUMAN]
    checked = [*worker, _CHECK, *human]
    met = [*worker, *checked, *checked]
    unmet = [*human, *met, UNMET_BOUND]
    params = [*worker, _CHECK, participant.pk, *met, *unmet, UNMET_BOUND]
    params += [participant.study_id, *unmet, CHECK_IMAGES]
    sql = GUARDED.format(
        item=item,
        unanswered_kind=result_kind("uj"),
        kind=result_kind("mj"),
        reference=int_key("mj", "reference_caption_id"),
        other=int_key("mj", "other_caption_id"),
    )
    return sql, params


def worker_items(participant: Participant) -> QuerySet:
    """The groups leased to the worker (the participant and its browser-mates), as a
    ``values("item_id")`` query of their leases."""
    served = Assignment.objects.filter(participant_id=participant.pk).values("item_id")
    if not participant.browser_id:
        return served
    # The OR stays on the participant rows (two indexed lookups), so the leases are still
    # found through their participant index.
    worker = Participant.objects.filter(
        Q(pk=participant.pk) | Q(study_id=participant.study_id, browser_id=participant.browser_id)
    )
    return Assignment.objects.filter(participant_id__in=worker.values("pk")).values("item_id")


def exact_items(participant: Participant, items: QuerySet[Item]) -> QuerySet[Item]:
    """``items`` narrowed by the rule as Python computes it: the worker's leases are read
    (``checks.worker_checks``: their images and every lease's check draw) and the groups
    showing what they met are excluded."""
    served = Assignment.objects.filter(participant_id=participant.pk).values("item_id")
    met = worker_items(participant)
    seen_images = ItemImage.objects.filter(item_id__in=met).values("image_id")
    sharing = ItemImage.objects.filter(image_id__in=seen_images).values("item_id")
    items = items.exclude(Q(pk__in=sharing) & ~Q(pk__in=served))
    # Attention checks are drawn per lease from the images the worker has not met
    # (modes/humanr/checks.py): the images of the checks they were shown bar the groups
    # showing them, and a group is only served while two unmet images are left besides
    # its own for its check (near the end of a small study, not before).
    drawn = worker_checks(participant, participant.study.seed)
    if check_images := drawn.check_images:
        showing = ItemImage.objects.filter(image_id__in=check_images).values("item_id")
        items = items.exclude(Q(pk__in=showing) & ~Q(pk__in=served))
    left = drawn.unmet_in_pool - CHECK_IMAGES
    if left < GROUP_SIZE + 1:  # a group has 9 images (11 if built before)
        # A subquery, not an aggregate on the items: the assignment service locks the
        # candidates (FOR UPDATE is not allowed with GROUP BY on PostgreSQL).
        too_big = (
            ItemImage.objects.filter(item__study_id=participant.study_id)
            .values("item_id")
            .annotate(shown=Count("id"))
            .filter(shown__gt=left)
            .values("item_id")
        )
        items = items.exclude(Q(pk__in=too_big) & ~Q(pk__in=served))
    return items
