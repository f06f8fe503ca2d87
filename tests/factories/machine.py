"""This machine's speed at plain Python, for limits and figures that depend on it.

Shared by the planner's CPU-limit test (``tests/annotation/test_integrity2_humanr.py``) and
the request benchmarks (``bench/_harness.py``): a CPU figure is a machine's figure, and the
same code took 2-3x the CPU on some of the project's machines than on others.
"""

import math
import os
import time
from pathlib import Path


def python_speed() -> float:
    """CPU seconds this process takes for 10**7 additions in a function's loop, best of
    three: other processes only add."""
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        total = 0
        for value in range(10**7):
            total += value
        best = min(best, time.process_time() - began)
    return best


def usable_cores(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The cores this process may use: those it may run on (its affinity), or fewer when
    its cgroup caps its CPU time (a container started with ``--cpus=2`` on a 64-core host
    sees 64 cores and gets 2 cores' worth: ``cpu.max`` says "200000 100000")."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return cores
    if quota == "max":
        return cores
    return max(1, min(cores, math.ceil(int(quota) / int(period))))


def load_factor() -> float:
    """How many times over this machine's cores are asked for now (the 1-minute load
    average per core usable here), at least 1.

    For the few limits that must stay in wall-clock seconds (a request that waits on a
    socket timeout, a countdown in a browser): multiply them by this, so a machine at a
    load average of 8 on 2 cores (factor 4) gives them four times the time, and an idle
    one the limit as written. Everything else is counted, not timed (docs/testing.md).
    """
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        return 1.0
    return max(1.0, load / usable_cores())
