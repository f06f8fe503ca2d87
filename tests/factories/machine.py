"""This machine's speed at plain Python, for limits and figures that depend on it.

Shared by the planner's CPU-limit test (``tests/annotation/test_integrity2_humanr.py``) and
the request benchmarks (``bench/_harness.py``): a CPU figure is a machine's figure, and the
same code took 2-3x the CPU on some of the project's machines than on others.
"""

import time


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
