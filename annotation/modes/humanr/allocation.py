"""HUMANr adaptive allocation that a crowd cannot steer (issue 29, row 10).

``adaptive_target_half_width`` stops serving groups whose systems' intervals are narrow
enough. Counted naively (every kept comparison value), eighteen ids of one person
answering "equal" made every system's interval zero wide, every system settled, and the
next honest worker was served nothing. So the rule counts:

* only workers past their gates: kept values of finished groups (a failed attention check
  excludes its group's judgments) of participants with no failed check at all and no
  integrity flag;
* one vote per linked identity (``annotation.identities``: one browser or one network,
  through chains): the identity's mean value for the system
  (``rubrics.adaptive.humanr_next_systems_by_worker``);
* never fewer than ``ADAPTIVE_MIN_WORKERS`` identities per system, nor fewer than
  ``protocol.ADAPTIVE_MIN_VALUES`` values.

With ``adaptive_spread_workers`` (the default), a worker who has earned the completion code
is served no second group of a system they already judged (``judged_systems_groups``):
since a worker has one vote per system, such a group costs ten judgments and adds no vote,
while a new worker's group adds one (issue 48, ``bench/adaptive.py``).

``protocol.adaptive_summary`` tells the finished page and the dashboard when settled
systems, not a full study, are why no group is served.
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Q, QuerySet

from annotation.identities import identity_groups
from annotation.models import Assignment, Item, Judgment, Participant

#: A system is never settled before this many independent workers (linked identities)
#: judged it: a t-interval over fewer workers' means says little about the crowd, and one
#: person must control this many networks and browsers to settle a system alone. 10, not
#: 5 (issue 27): the rule stops on the interval's width, and on a bounded slider a run of
#: votes that agree also tends to sit near an end, so stopping at 5-9 workers pulled the
#: mean away and the worker interval covered the true value 89-92% of the time with a
#: worker leaning of 0.5 steps; from 10 workers it covers 92-98%
#: (tests/rubrics/test_adaptive_coverage.py).
ADAPTIVE_MIN_WORKERS = 10


def counted_values(study_id: int) -> dict[str, dict[int, list[float]]]:
    """Kept comparison values per system and linked identity, of workers past their gates.

    Two queries: the kept comparison judgments, and the study's participants (all of them,
    so a chain through an uncounted id still links two counted ones).
    """
    people = list(
        Participant.objects.filter(study_id=study_id).values_list(
            "pk", "browser_id", "network", "flags", "state"
        )
    )
    group_of = identity_groups((pk, browser, network) for pk, browser, network, _, _ in people)
    counted = {
        pk
        for pk, _, _, flags, state in people
        if not flags and not (state or {}).get("groups_failed")
    }
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    # Only finished groups: until its last trial, a group's check may be unanswered (or
    # failed and not yet flagged), so its values have not passed the gate.
    rows = Judgment.objects.filter(
        study_id=study_id,
        excluded=False,
        result__kind="comparison",
        assignment__status=Assignment.Status.SUBMITTED,
    ).values_list("participant_id", "result__system", "result__value")
    for participant_id, system, value in rows:
        if participant_id in counted:
            values[system][group_of[participant_id]].append(float(value))
    return values


def judged_systems_groups(study_id: int, met: QuerySet) -> QuerySet | None:
    """The ids of the study's groups (as a subquery) of the systems already judged in the
    groups ``met`` (a values("item_id") query of the worker's leases), or None when the
    worker met none.

    Groups of one system each (adaptive allocation builds them so): a group's system is
    that of its first trial, or of its second when the first is the attention check (whose
    system is ""). One short read of the worker's few groups, then a subquery.
    """
    trials = Item.objects.filter(pk__in=met).values_list("spec__trials", flat=True)
    systems = {t["system"] for group in trials for t in group if t["kind"] == "comparison"}
    if not systems:
        return None
    first, second = Q(spec__trials__0__system__in=systems), Q(spec__trials__1__system__in=systems)
    return Item.objects.filter(first | second, study_id=study_id).values("pk")
