"""Which of a study's THumB items a participant may be served, as one written-out condition
on the item table (issue 48).

The rule (``protocol.ThumbProtocol.eligible_items``): any stage-1 item; a stage-2 review of
an image whose stage 1 has a judgment, by no one linked to the participant
(``identities.linked_q``: itself, or the study's same browser or network); a check of an
image nobody linked to them judged in stage 1 or 2; a fluency round if they are a registered
native English speaker. Built by the ORM (three ``Exists`` with the linked condition), the
queryset's building and compiling cost a GET next about a sixth of its CPU, on every serve;
as SQL it is one string and its parameters. It is a boolean expression, so the mode still
answers a queryset: the services embed its WHERE in the claim (``assignment_sql``), and
other filters and orders combine with it as with any other.
"""

from __future__ import annotations

from typing import Any

from django.db.models import BooleanField, Expression

from annotation.models import Item, Judgment, Participant
from annotation.modes.thumb.models import Rater
from annotation.modes.thumb.stages import CHECK, FLUENCY, STAGE1, STAGE2

I, J, P, R = (m._meta.db_table for m in (Item, Judgment, Participant, Rater))  # noqa: E741

#: Judgments of the candidate item's image (``{item}``, the item table's alias in the query
#: that embeds this) in the study, by an id linked to the participant; the kinds are
#: ``{kinds}`` (placeholders). Params: study id, the kinds, participant id, study id, browser
#: id or None, study id, network or None (None matches nothing, as linked_q leaves it out).
_LINKED_JUDGED = f"""SELECT 1 FROM "{J}" tj
    JOIN "{I}" ti ON ti."id" = tj."item_id"
    JOIN "{P}" tp ON tp."id" = tj."participant_id"
    WHERE ti."study_id" = %s AND ti."kind" IN ({{kinds}}) AND ti."image_id" = {{item}}."image_id"
      AND (tp."id" = %s OR (tp."study_id" = %s AND tp."browser_id" = %s)
           OR (tp."study_id" = %s AND tp."network" = %s))"""

#: The condition. Params: study id; stage 1; stage 2, study id, stage 1, then
#: ``_LINKED_JUDGED``'s with stage 1; check, then ``_LINKED_JUDGED``'s with stages 1 and 2;
#: then ``_NATIVE``'s when the participant has an account.
ELIGIBLE = f"""({{item}}."study_id" = %s AND ({{item}}."kind" = %s
  OR ({{item}}."kind" = %s
      AND EXISTS (SELECT 1 FROM "{I}" ts WHERE ts."study_id" = %s AND ts."kind" = %s
                  AND ts."image_id" = {{item}}."image_id" AND ts."judgment_count" >= 1)
      AND NOT EXISTS ({_LINKED_JUDGED.replace("{kinds}", "%s")}))
  OR ({{item}}."kind" = %s
      AND NOT EXISTS ({_LINKED_JUDGED.replace("{kinds}", "%s, %s")})){{native}}))"""

#: A registered native English speaker may take fluency rounds. Params: fluency, user id.
_NATIVE = f"""
  OR ({{item}}."kind" = %s
      AND EXISTS (SELECT 1 FROM "{R}" tr WHERE tr."user_id" = %s AND tr."native_english"))"""


class Eligible(Expression):
    """``ELIGIBLE`` for one participant, as a boolean expression on the item table.

    ``alias``: the item table's alias in the query (its name, unless a query that embeds
    this one as a subquery relabels it: ``relabeled_clone``)."""

    output_field = BooleanField()

    def __init__(self, participant: Participant, alias: str = I) -> None:
        super().__init__()
        self.alias = alias
        study = participant.study_id
        linked = [
            participant.pk,
            study,
            participant.browser_id or None,
            study,
            participant.network or None,
        ]
        params: list[Any] = [study, STAGE1]
        params += [STAGE2, study, STAGE1, study, STAGE1, *linked]
        params += [CHECK, study, STAGE1, STAGE2, *linked]
        native = ""
        if participant.user_id is not None:
            native = _NATIVE
            params += [FLUENCY, participant.user_id]
        self.template = ELIGIBLE.replace("{native}", native)
        self.params = tuple(params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Eligible) and (self.template, self.params, self.alias) == (
            other.template,
            other.params,
            other.alias,
        )

    def __hash__(self) -> int:
        return hash((self.template, self.params, self.alias))

    def as_sql(self, compiler, connection):
        item = compiler.quote_name_unless_alias(self.alias)
        return self.template.replace("{item}", item), list(self.params)

    def relabeled_clone(self, change_map):
        clone = self.copy()
        clone.alias = change_map.get(self.alias, self.alias)
        return clone

    def get_group_by_cols(self):
        return []
