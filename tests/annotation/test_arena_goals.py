"""The adaptive arena's goal and its two fits (issue 47): the goal is a setting the rule
reads, checked when the study is made and opened; an adaptive study's leaderboard is the
plain fit with the weighted fit beside it, and the page warns when the two disagree beyond
their intervals."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Job
from annotation.modes import get_mode
from annotation.modes.arena.report import fits_disagree
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from rubrics import arena_design
from tests.factories.arena import (
    BT_STRENGTH,
    arena_study,
    bradley_terry_study,
    judge,
    kept_battles,
    shown_left,
    worker,
)

pytestmark = pytest.mark.django_db


def row(system, score, low, high):
    return {"system": system, "score": score, "ci_low": low, "ci_high": high}


def test_the_fits_disagree_only_beyond_their_intervals():
    plain = [row("a", 1100, 1080, 1120), row("b", 1000, 980, 1020), row("c", 990, 950, 1030)]
    # The weighted fit puts b above a (against the plain fit's separated order), and c
    # above b (the plain fit's intervals of b and c overlap: no disagreement there).
    weighted = [row("b", 1060, 900, 1200), row("a", 1050, 900, 1200), row("c", 1005, 900, 1100)]
    assert fits_disagree(plain, weighted) == [{"above": "a", "below": "b", "by": "plain"}]
    assert fits_disagree(plain, plain) == []


def test_the_goal_is_checked_when_the_study_is_made_and_opened(researcher):
    with pytest.raises(ServiceError) as refused:
        arena_study(researcher, adaptive=True, adaptive_goal="system")
    assert refused.value.details.get("setting") == "adaptive_system"
    with pytest.raises(ServiceError) as refused:
        arena_study(researcher, adaptive=True, adaptive_goal="system", adaptive_system="omega")
    assert refused.value.field == "adaptive_system" and "omega" in refused.value.message
    with pytest.raises(ServiceError) as refused:
        arena_study(researcher, adaptive=True, adaptive_goal="top", adaptive_top=3)
    assert refused.value.field == "adaptive_top"


def adaptive_study(researcher, phases=1, **goal):
    """An adaptive study answered by a Bradley-Terry crowd, two workers a phase, the report
    computed after each phase (the next phase is drawn from it); the last report."""
    study = bradley_terry_study(researcher, adaptive=True, **goal)
    rng = np.random.default_rng(8)

    def answer(lease):
        spec = lease.item.spec
        gap = BT_STRENGTH[spec["system_a"]] - BT_STRENGTH[spec["system_b"]]
        a_won = rng.random() < 1 / (1 + np.exp(-gap))
        return "a" if a_won == (shown_left(lease) == "a") else "b"

    # Named, not numbered by the factory: sides and draws follow the worker's crowd id, and
    # the factory's numbers shift whenever another test makes a study or a worker first.
    for phase in range(phases):
        for person in [worker(study, f"goal-{phase}-{k}") for k in range(2)]:
            while judge(person, answer)[0] is not None:
                pass
        job = report_request(study=study, user=researcher)
        job_run(job=job)
        job.refresh_from_db()
    return study, job.result


def rule_design(study, report, **held) -> dict[tuple[str, str], float]:
    """The pure rule's design (goal: the best system, the plain fit) for the report's fit
    over the study's pairs, by system names; ``held``: the rule's ``served`` and
    ``coming``."""
    fitted = report["adaptive"]
    names = fitted["systems"]
    pairs = [(names.index(a), names.index(b)) for a, b in get_mode("arena").study_pairs(study)]
    chosen, probs = arena_design.adaptive_pair_probabilities(
        np.array(fitted["scores"]),
        np.array(fitted["covariance"]),
        explore=0.2,
        pairs=pairs,
        goal="top",
        top=1,
        fit="plain",
        **held,
    )
    return {tuple(sorted((names[i], names[j]))): p for (i, j), p in zip(chosen, probs, strict=True)}


def held_battles(study, report) -> list[float]:
    """The kept battles per pair, in ``rule_design``'s order, counted apart from the mode."""
    names = report["adaptive"]["systems"]
    pairs = [(names.index(a), names.index(b)) for a, b in get_mode("arena").study_pairs(study)]
    return kept_battles(study, names, pairs)


def test_the_study_serves_for_its_goal_and_reports_both_fits(researcher):
    study, report = adaptive_study(researcher, adaptive_goal="top", adaptive_top=1)
    # The battles held, and at the study's first report as many again to come.
    expected = rule_design(
        study, report, served=held_battles(study, report), coming=report["battles"]
    )
    served = get_mode("arena").pair_probabilities(study)
    assert served == pytest.approx(expected)
    # Not the whole order's design: the goal changes the draw.
    fitted = report["adaptive"]
    _, order = arena_design.adaptive_pair_probabilities(
        np.array(fitted["scores"]), np.array(fitted["covariance"]), explore=0.2, fit="plain"
    )
    assert not np.allclose(sorted(order), sorted(expected.values()))
    # No report yet with a design that varied: both fits come with the next report.
    assert report["weighted"] is False
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Weighted fit" not in page


def test_the_design_counts_the_battles_held_and_the_refresh_rhythm(researcher):
    """Issue 47: the design is the rule's for the battles the report holds and, as the
    battles to come, those that came between the last two reports."""
    study, report = adaptive_study(researcher, phases=2, adaptive_goal="top", adaptive_top=1)
    first, second = (
        job.result["battles"]
        for job in Job.objects.filter(study=study, kind=Job.Kind.REPORT).order_by("id")
    )
    assert second == report["battles"] and 0 < first < second
    held = held_battles(study, report)
    assert sum(held) == second
    served = get_mode("arena").pair_probabilities(study)
    assert served == pytest.approx(rule_design(study, report, served=held, coming=second - first))
    # Not the design that ignores what is held, nor one with another horizon.
    assert served != pytest.approx(rule_design(study, report))
    assert served != pytest.approx(rule_design(study, report, served=held, coming=second))


def test_an_adaptive_studys_page_shows_the_weighted_fit_beside_the_plain_one(researcher):
    # The first report comes before any adaptive draw; after the second phase the stored
    # probabilities vary.
    study, report = adaptive_study(researcher, phases=2)
    assert report["weighted"] is True and report["weighted_leaderboard"]
    assert isinstance(report["fits_disagree"], list)
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "Weighted fit (the robustness check of adaptive pairing)" in page
    assert "this is the plain fit, valid when the Bradley-Terry model holds" in page
    assert ("fits-disagree" in page) == bool(report["fits_disagree"])
