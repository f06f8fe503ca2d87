"""HUMANr's adaptive allocation spreads each worker's groups over the systems (issue 48).

With ``adaptive_target_half_width`` on, the rule counts one vote per worker and system
(``annotation/modes/humanr/allocation.py``), so ``adaptive_spread_workers`` (on by default)
serves a worker who has earned the completion code no second group of a system they
already judged. Through the real lease and submit services: the groups a worker gets, with
the setting on and off, before and after their code.
"""

from __future__ import annotations

import pytest

from annotation.models import Item
from annotation.modes import get_mode
from annotation.services.assignments import assignment_next
from tests.factories.humanr import crowd, do_group, humanr_study

pytestmark = pytest.mark.django_db


def system_of(item: Item) -> str:
    (system,) = {t["system"] for t in item.spec["trials"] if t["kind"] == "comparison"}
    return system


def groups_until_none(worker, limit: int = 8) -> list[str]:
    """The system of each group one worker is served (and answers) until none is left."""
    systems = []
    for _ in range(limit):
        if assignment_next(participant=worker) is None:
            return systems
        systems.append(system_of(do_group(worker).item))
    return systems


def test_spreading_is_on_by_default(researcher):
    study = humanr_study(researcher, images=135, systems=("GIT",), adaptive_target_half_width=0.1)
    assert get_mode("humanr").settings(study).adaptive_spread_workers is True


def test_a_worker_past_the_code_gets_one_group_per_system(researcher):
    # What ends the run must be the spreading rule, after one group of each of the 3
    # systems, not the exposure rule (no image met twice). Groups are drawn per system, so
    # after two groups and their checks (22 images met) a group of 9 avoids them all with
    # probability (1 - 22/n)^9: with n = 135 and 15 Human groups, none did for about one
    # in ten of the check draws (which are keyed by ids, so the failure moved with the
    # database). With 270 images and 30 groups per system, that is under 1e-8.
    study = humanr_study(
        researcher, images=270, systems=("GIT", "GPT"), adaptive_target_half_width=0.1
    )
    systems = groups_until_none(crowd(study, "PID-1"))
    assert sorted(systems) == ["GIT", "GPT", "Human"]
    # A second worker is still served: the rule is per worker, not per study.
    assert assignment_next(participant=crowd(study, "PID-2")) is not None


def test_without_spreading_a_worker_gets_a_second_group_of_a_system(researcher):
    # 270 images, as above: five groups must not run out of images never met.
    study = humanr_study(
        researcher,
        images=270,
        systems=("GIT", "GPT"),
        adaptive_target_half_width=0.1,
        adaptive_spread_workers=False,
    )
    systems = groups_until_none(crowd(study, "PID-1"), limit=5)
    # Five groups of three systems: at least one system twice (one vote, refined).
    assert len(systems) == 5
    assert len(set(systems)) < len(systems)


def test_spreading_never_keeps_a_worker_from_the_code(researcher):
    # Two systems (Human and GIT) and a code after 3 groups: three groups must repeat a
    # system, and are served because the worker has not earned the code yet; after the code
    # only a system not judged yet may be served, and then nothing.
    study = humanr_study(
        researcher,
        images=135,
        systems=("GIT",),
        adaptive_target_half_width=0.1,
        completion_groups=3,
    )
    worker = crowd(study, "PID-1")
    systems = groups_until_none(worker)
    # (Whether the fourth group, of the system not judged yet, is served depends on the
    # exposure rule's draws: no image met twice.)
    assert len(systems) in (3, 4)
    assert len(set(systems[:3])) < 3
    assert all(system not in systems[:k] for k, system in enumerate(systems) if k >= 3)
    worker.refresh_from_db()
    assert get_mode("humanr").completion_earned(worker)


def test_spreading_does_nothing_without_adaptive_allocation(researcher):
    # Off, groups mix systems as in the paper and nothing is refused for a system.
    study = humanr_study(researcher, images=135, systems=("GIT",))
    worker = crowd(study, "PID-1")
    served = 0
    for _ in range(4):
        assert assignment_next(participant=worker) is not None
        do_group(worker)
        served += 1
    assert served == 4
