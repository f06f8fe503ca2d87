"""Issue 48: a HUMANr check's page and answer read the checks answered before with the
worker's leases (``checks.SHOWN`` in ``WORKER_LEASES``), one statement instead of two. The
merged read must give what the ORM read of ``CheckCaptions.shown_at`` gives, and the draw
built on it the same check.
"""

from __future__ import annotations

import pytest

from annotation.models import Assignment, Judgment
from annotation.modes.humanr.checks import (
    check_captions,
    served_check,
    worker_checks,
    worker_leases,
)
from annotation.modes.humanr.protocol import CHECK
from tests.factories.humanr import careless, crowd, do_group, honest, humanr_study

pytestmark = pytest.mark.django_db


def test_the_merged_read_of_the_checks_answered_before_is_the_orms(researcher):
    """Workers answer whole groups (checks passed and failed) and one stops before its
    check; the merged read's first time per caption is ``shown_at``'s, and every lease's
    draw (with the merged read or the ORM's) is the same."""
    study = humanr_study(researcher, images=45, systems=("GIT",), seed=4)
    for n, answer in enumerate([honest, careless, honest]):
        do_group(crowd(study, f"W-{n}"), answer)
    late = crowd(study, "W-late")
    lease = do_group(late, honest, parts=0)
    kinds = [trial["kind"] for trial in lease.item.spec["trials"]]
    assert Judgment.objects.filter(study=study, result__kind=CHECK).count() == 3

    _leases, merged = worker_leases(late, upto=lease.pk, shown=True)
    assert merged == check_captions(study).shown_at  # the ORM read, on first use
    assert len(merged) == 6  # two captions per answered check, none shown twice

    lease = Assignment.objects.select_related("item", "participant__study").get(pk=lease.pk)
    with_merged = worker_checks(late, study.seed, upto=lease.pk, shown=True)
    with_orm = worker_checks(late, study.seed, upto=lease.pk)
    assert with_merged.draws == with_orm.draws
    assert with_merged.choices == with_orm.choices
    trial = lease.item.spec["trials"][kinds.index(CHECK)]
    shown = served_check(lease, trial)
    assert shown["reference_caption_id"] is not None
    assert shown["image_id"] == with_orm.draws[lease.pk].image_id
