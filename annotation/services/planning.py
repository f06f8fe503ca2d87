"""The planner (issue 15): how wide a study's headline intervals will be, and what it costs,
for each size, predicted by simulation with ``rubrics.planner``.

A read that computes: nothing is written. The mode's ``planner`` (``modes/base.py:Planner``)
holds what differs between protocols (the pilot, the assumptions it reads, its unit); this
module holds what every plan shares (crowd time, price, seed) and the JSON the page and the
API show.
"""

from __future__ import annotations

import statistics

from django.conf import settings

from annotation.models import Judgment, Study
from annotation.modes import get_mode

#: The form's fields a mode's planner may read as its stated assumptions.
ASSUMPTIONS = ("mean", "difference", "spread", "exact", "adjacent")


def study_plan(
    study: Study,
    *,
    sizes: list[int],
    judgments_per_item: int,
    price_per_judgment: float | None,
    seconds_per_judgment: float | None,
    target_half_width: float | None,
    simulations: int,
    **assumptions: float,
) -> dict:
    """The planner's curve for the study's mode, as JSON.

    ``assumptions``: the form's ``ASSUMPTIONS`` (the mode's planner says which it reads and
    when the study is its own pilot). Seconds per judgment: given, else the median dwell of
    the study's kept timed judgments, else the mode's stated ``planner.default_seconds``;
    ``seconds_source`` says which (``given``, ``study``, ``default``). ``currency``: the
    money's (``settings.CAPEVAL_CURRENCY``); ``systems``: the study's own systems the mode's
    planner simulates (empty before it has captions, or for VICR). ValueError from the
    planner for a combination it refuses, or for a mode without a planner model.
    """
    mode = get_mode(study.mode)
    seconds_source = "given"
    if seconds_per_judgment is None:
        # An imported judgment has no dwell (stored as 0): counting it gave a median of 0 s
        # and 0.0 crowd hours (issue 27), so only timed judgments count.
        dwell = list(
            Judgment.objects.filter(study=study, excluded=False, dwell_ms__gt=0)
            .order_by("-id")
            .values_list("dwell_ms", flat=True)[:10_000]
        )
        if dwell:
            seconds_per_judgment, seconds_source = statistics.median(dwell) / 1000, "study"
        else:
            seconds_per_judgment, seconds_source = mode.planner.default_seconds, "default"
    common = {
        "target_half_width": target_half_width,
        "n_simulations": simulations,
        "price_per_judgment": price_per_judgment,
        "seconds_per_judgment": seconds_per_judgment,
        "seed": study.seed % 2**32,
    }
    # The systems simulated: the study's own where the mode's planner uses systems.
    systems = mode.planner.systems(study) if mode.planner.uses_systems else []
    plan, pilot = mode.planner.plan(
        study,
        sizes=sizes,
        judgments_per_item=judgments_per_item,
        assumptions={name: assumptions[name] for name in ASSUMPTIONS if name in assumptions},
        common=common,
    )
    return {
        **plan.as_dict(),
        "pilot": pilot,
        "seconds_per_judgment": seconds_per_judgment,
        "seconds_source": seconds_source,
        "price_per_judgment": price_per_judgment,
        "currency": settings.CAPEVAL_CURRENCY,
        "systems": systems,
    }
