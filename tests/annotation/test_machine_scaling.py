"""The suite on a loaded machine (issue 46): `-n auto` starts two workers per core this
process may use, as the Makefile and docs/testing.md say, and the few wall-clock limits
left scale with the load (``tests/factories/machine.py``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests import conftest
from tests.factories import machine

REPO = Path(__file__).resolve().parents[2]
AFFINITY = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_a_cgroup_quota_caps_the_cores(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("100000 100000\n")  # one CPU's worth
    assert machine.usable_cores(cpu_max) == 1
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: two cores in part
    assert machine.usable_cores(cpu_max) == min(AFFINITY, 2)
    cpu_max.write_text("max 100000\n")
    assert machine.usable_cores(cpu_max) == AFFINITY
    assert machine.usable_cores(tmp_path / "absent") == AFFINITY


def test_n_auto_starts_two_workers_per_usable_core_as_the_makefile_says(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(conftest, "usable_cores", lambda: 3)
    assert conftest.pytest_xdist_auto_num_workers(None) == 6
    makefile = re.sub(r"\s+", " ", (REPO / "Makefile").read_text())
    assert "two pytest-xdist workers per usable core" in makefile
    testing = re.sub(r"\s+", " ", (REPO / "docs" / "testing.md").read_text())
    assert "two worker processes per usable core" in testing


def test_the_load_factor_is_the_load_per_usable_core(monkeypatch):
    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (8.0, 8.0, 8.0))
    assert machine.load_factor() == 4.0
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert machine.load_factor() == 1.0
