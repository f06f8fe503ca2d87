"""bench/arena_bound.py: the design bounds are optimal, certified by an independent check
(issue 47: the Nelder-Mead search it replaced stopped short, printing 0.753 for 0.658).

The weighted fit's sum has Neyman's closed form (the bench's ``design_bound``); for the
plain fit, the equivalence theorem of optimal design says a design is optimal exactly when
no pair's gradient g_p exceeds F (every pair the design uses has g_p = F). Checked here
with scipy's SLSQP from another start, and by the theorem at the bench's design.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

# Appended, not first: the bench folder holds modules named like packages (stats, metrics).
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import arena_bound  # noqa: E402 (the bench folder is not a package)
from arena import design_bound, top_design_share  # noqa: E402

EVEN = np.linspace(1.5, -1.5, 6)


def test_the_weighted_sum_equals_neymans_closed_form():
    for _, s in arena_bound.CROWDS:
        share = arena_bound.sum_share(s, weighted=True)
        assert share["lower"] <= design_bound(s)["all_adjacent"] <= share["upper"] + 1e-3


@pytest.mark.parametrize("s", [EVEN, np.linspace(3, -3, 6)], ids=["1.5", "3"])
def test_the_plain_fits_sum_is_the_optimum_slsqp_finds(s):
    x, info, contrasts = arena_bound._reduced(s)
    w = np.ones(len(contrasts))

    def f(q):
        return arena_bound._mle_terms(x, info, contrasts, w, q)[0]

    n = len(info)
    uniform = f(np.full(n, 1 / n))
    start = np.random.default_rng(1).dirichlet(np.ones(n))
    found = minimize(
        f,
        start,
        method="SLSQP",
        bounds=[(1e-6, 1)] * n,
        constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1}],
        options={"maxiter": 2000, "ftol": 1e-12},
    )
    share = arena_bound.sum_share(s, weighted=False)
    assert share["lower"] <= found.fun / uniform + 1e-3
    assert found.fun / uniform == pytest.approx(share["upper"], abs=2e-3)
    # The equivalence theorem at the bench's design: no pair's gradient above F.
    _, _, q = arena_bound._sum_optimum(
        lambda q: arena_bound._mle_terms(x, info, contrasts, w, q), n
    )
    value, g, _ = arena_bound._mle_terms(x, info, contrasts, w, q)
    assert g.max() <= value * (1 + 1e-3)


def test_the_minimax_interval_holds_the_audits_optimum():
    share = arena_bound.minimax_share(EVEN, weighted=False)
    assert share["lower"] <= 0.658 <= share["upper"]
    assert share["upper"] - share["lower"] <= 0.002


def test_the_top_yardstick_matches_the_two_system_formula():
    """Two systems, the best one wanted: one pair, so every design is that pair, and the
    set is right when the fitted gap keeps its sign: P = Phi(gap sqrt(N I)), so N_0.9 =
    (z_0.9 / gap)^2 / I in natural units, I = p (1 - p) one battle's information."""
    from scipy.stats import norm

    from rubrics.arena import ELO_PER_NATURAL

    truth = {"a": 1030.0, "b": 970.0}
    found = top_design_share(truth, 1)
    gap = 60.0 / ELO_PER_NATURAL
    p = 1 / (1 + np.exp(-gap))
    expected = (norm.ppf(0.9) / gap) ** 2 / (p * (1 - p))
    # The bisection stops within 1% and the 4,000 draws place the 90% point within about
    # 4% of N (the quantile's sampling error, at 3 standard errors).
    assert found["battles_p90_uniform"] == pytest.approx(expected, rel=0.05)
    assert found["battles_p90_rule_at_truth"] == found["battles_p90_uniform"]
    assert found["share"] == 1.0


def test_the_top_yardstick_finds_the_rules_design_cheaper_on_the_uneven_crowd():
    """On the audit's uneven crowd the rule at the truth needs fewer battles than uniform
    pairing for the top 4 (the audit's best static design: 0.38 of uniform's)."""
    from arena import UNEVEN_ELO

    truth = {f"s{i:02d}": float(v) for i, v in enumerate(UNEVEN_ELO)}
    found = top_design_share(truth, 4)
    assert found["share"] < 0.8
    assert found["battles_p90_rule_at_truth"] < found["battles_p90_uniform"]


def _run(design, seed, rights):
    """A run of ``bench/arena.py`` reduced to what ``summarise`` reads."""
    return {
        "seed": seed,
        "design": design,
        "serve_submit_ms_mean": 1.0,
        "report_seconds_mean": 1.0,
        "checkpoints": [
            {
                "battles": 100 * (n + 1),
                "tau": 1.0,
                "coverage": 1.0,
                "raw_coverage": 1.0,
                "mean_ci_width": 1.0,
                "top_right": right,
            }
            for n, right in enumerate(rights)
        ],
    }


def test_the_summary_gives_the_top_set_saving_or_its_lower_bound():
    from arena import summarise

    # Ten seeds a design: adaptive right from 200 battles in every seed; uniform right
    # from 300 in 9 seeds (the 90% share), or never in 2 of them (then more than 300).
    adaptive = [_run("adaptive", seed, [False, True, True]) for seed in range(10)]
    uniform = [_run("uniform", seed, [False, False, seed > 0]) for seed in range(10)]
    found = summarise(adaptive + uniform, budget=300, step=100)["top_right_p90"]
    assert found == {"uniform": 300, "adaptive": 200, "saving": round(1 - 200 / 300, 3)}
    never = [_run("uniform", seed, [False, False, seed > 1]) for seed in range(10)]
    found = summarise(adaptive + never, budget=300, step=100)["top_right_p90"]
    assert found == {"uniform": "> 300", "adaptive": 200, "saving": f"> {round(1 - 200 / 300, 3)}"}
    # Uniform seeds the adaptive process never ran are left out: right from 100 in all of
    # them, counted they would make uniform's 90% share 100 battles.
    ahead = [_run("uniform", seed, [True, True, True]) for seed in range(10, 100)]
    summary = summarise(adaptive + uniform + ahead, budget=300, step=100)
    assert summary["top_right_p90"]["uniform"] == 300
    assert summary["unpaired_runs_left_out"] == 90
    assert summary["paired"]["seeds"] == 10


def test_the_summary_gives_each_checkpoints_top_share_and_the_lowest_coverage():
    from arena import summarise

    runs = [_run("adaptive", seed, [False, seed < 3, True]) for seed in range(4)]
    # Coverage by hand: 1.0 everywhere but the second checkpoint of seeds 0 and 1.
    for run in runs[:2]:
        run["checkpoints"][1]["coverage"] = 0.8
    runs[0]["checkpoints"][2]["weighted_top_right"] = True
    found = summarise(runs, budget=300, step=100)["adaptive"]
    shares = {b: point["top_right_share"] for b, point in found["per_checkpoint"].items()}
    assert shares == {"100": 0.0, "200": 0.75, "300": 1.0}
    # A checkpoint without the weighted fit counts as wrong, as battles_to_share does.
    assert found["per_checkpoint"]["300"]["weighted_top_right_share"] == 0.25
    assert found["coverage_lowest_checkpoint"] == (0.9, 200)


def test_the_summary_counts_each_systems_misses_where_runs_record_them():
    from arena import summarise

    runs = [_run("uniform", seed, [True, True]) for seed in range(3)]
    runs[0]["checkpoints"][0]["missed"] = ["system-01", "system-13"]
    runs[0]["checkpoints"][1]["missed"] = ["system-13"]
    runs[1]["checkpoints"][1]["missed"] = []
    found = summarise(runs, budget=200, step=100)["uniform"]
    assert found["missed_by_system"] == {"system-01": 1, "system-13": 2}
    # Seed 2 was kept before the record: its checkpoints are not counted as covered.
    assert found["checkpoints_with_misses_recorded"] == 3
