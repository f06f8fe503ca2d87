"""rubrics.planner: predicted widths against subsampled real and simulated studies (issue 15).

The check the issue asks for: the planner's predicted interval width at n images matches
the width the report gives on n images subsampled from THumB 1.0 (../shared, skipped
without it) and from a large simulated HUMANr study, within 15%. The "truth" side never
goes through the planner: it subsamples images and calls the mode's report directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rubrics import adaptive, humanr, planner, thumb, vicr
from rubrics.planner import Cost, Plan, PlanPoint

TOLERANCE = 0.15


def _thumb_rows(datasets: Path) -> list[dict]:
    path = datasets / "thumb-1.0" / "mscoco_THumB-1.0.jsonl"
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _judgments(rows: list[dict]) -> thumb.CaptionJudgments:
    return thumb.CaptionJudgments(
        image_ids=[r["seg_id"] for r in rows],
        systems=[r["SYS"] for r in rows],
        precision=[r["P"] for r in rows],
        recall=[r["R"] for r in rows],
        fluency=[-r["Fl"] for r in rows],
        conciseness=[-r["Con"] for r in rows],
        inclusive=[-r["Inc"] for r in rows],
    )


def _subsampled_thumb_widths(rows, n, draws, seed):
    """Mean half-width of Total per system over random n-image subsets (report only)."""
    images = sorted({r["seg_id"] for r in rows})
    rng = np.random.default_rng(seed)
    widths: dict[str, list[float]] = {}
    for draw in range(draws):
        chosen = set(rng.choice(images, size=n, replace=False).tolist())
        report = thumb.report(
            _judgments([r for r in rows if r["seg_id"] in chosen]), n_resamples=200, seed=draw
        )
        for row in report.rows:
            total = row.total
            widths.setdefault(row.name, []).append((total.ci_high - total.ci_low) / 2)
    return {name: float(np.mean(w)) for name, w in widths.items()}


@pytest.mark.parametrize(("pilot_images", "n"), [(None, 100), (150, 300)])
def test_thumb_prediction_matches_subsampling(shared_datasets, pilot_images, n):
    rows = _thumb_rows(shared_datasets)
    pilot_rows = rows
    if pilot_images is not None:  # a pilot smaller than the study it plans
        images = sorted({r["seg_id"] for r in rows})
        kept = set(np.random.default_rng(11).choice(images, pilot_images, replace=False).tolist())
        pilot_rows = [r for r in rows if r["seg_id"] in kept]
    plan = planner.plan_thumb(
        n_images=[n], pilot=_judgments(pilot_rows), n_simulations=30, n_resamples=200, seed=1
    )
    predicted = plan.points[0].half_width
    observed = _subsampled_thumb_widths(rows, n, draws=30, seed=2)
    assert (
        set(predicted)
        == set(observed)
        == {
            "Human",
            "VinVL-large",
            "VinVL-base",
            "Unified-VLP",
            "Up-Down",
        }
    )
    for name, width in observed.items():
        assert abs(predicted[name] / width - 1) <= TOLERANCE, (name, predicted[name], width)


def _crowd() -> planner.HumanrAssumptions:
    return planner.HumanrAssumptions(
        {
            "Human": planner.slider_pmf(0.0, 2.2),
            "GIT-L": planner.slider_pmf(-0.46, 2.0),
            "ClipCap": planner.slider_pmf(-0.69, 1.6),
        }
    )


def _simulated_humanr_study(n_images: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """Oriented answers (images x systems) of a large simulated study, drawn directly."""
    pmfs = _crowd().answer_pmfs
    systems = sorted(pmfs)
    rng = np.random.default_rng(seed)
    answers = np.stack([rng.choice(np.arange(1, 10), size=n_images, p=pmfs[s]) for s in systems])
    return answers.T, systems


def _responses(answers: np.ndarray, systems: list[str]) -> humanr.Responses:
    n_images, n_systems = answers.shape
    n = answers.size
    return humanr.Responses(
        worker_ids=np.arange(n) % 7,
        image_ids=np.repeat(np.arange(n_images), n_systems),
        systems=np.tile(systems, n_images),
        raw=answers.ravel(),
        human_on_left=np.ones(n, dtype=bool),
        is_attention_check=np.zeros(n, dtype=bool),
        group_ids=np.arange(n) // 9,
    )


@pytest.mark.parametrize("source", ["assumptions", "pilot"])
def test_humanr_prediction_matches_subsampling(source):
    answers, systems = _simulated_humanr_study(3000, seed=5)
    n = 150
    rng = np.random.default_rng(6)
    observed: dict[str, list[float]] = {}
    for draw in range(40):
        chosen = rng.choice(answers.shape[0], size=n, replace=False)
        report = humanr.report(
            _responses(answers[chosen], systems),
            n_bootstrap=10,
            n_splits=2,
            image_counts=[],
            n_permutations=100,
            seed=draw,
        )
        entries = {**report["systems"], "Human": report["baseline"]}
        for name, entry in entries.items():
            low, high = entry["t_interval"]
            observed.setdefault(name, []).append((high - low) / 2)
    kwargs = (
        {"assumptions": _crowd()}
        if source == "assumptions"
        else {"pilot": _responses(answers, systems)}
    )
    plan = planner.plan_humanr(n_images=[n], n_simulations=30, seed=3, **kwargs)
    predicted = plan.points[0].half_width
    for name, widths in observed.items():
        assert abs(predicted[name] / np.mean(widths) - 1) <= TOLERANCE, name


def test_humanr_power_and_cost():
    # GIT-L sits 0.43 below the Human baseline: 60 images separate it nearly always; a
    # system equal to the baseline is "separated" only at about the test's level (5%).
    crowd = planner.HumanrAssumptions(
        {
            "Human": planner.slider_pmf(0.0, 2.2),
            "GIT-L": planner.slider_pmf(-0.46, 2.0),
            "Same": planner.slider_pmf(0.0, 2.2),
        }
    )
    far = planner.plan_humanr(n_images=[60], assumptions=crowd, compare="GIT-L", n_simulations=40)
    same = planner.plan_humanr(n_images=[60], assumptions=crowd, compare="Same", n_simulations=80)
    assert far.points[0].power >= 0.95
    assert same.points[0].power <= 0.15
    # 60 images x 3 systems = 180 comparisons in 20 groups of 9, each with one check.
    assert far.points[0].cost.judgments == 200


def test_thumb_assumptions_match_normal_theory():
    # Independent of the report: the 90% interval of a mean is about 1.645 sd / sqrt(n);
    # the sd of Total under the assumptions is measured on a large sample drawn by hand.
    a = planner.ThumbAssumptions(means={"A": 4.0, "B": 3.6}, image_sd=0.5, caption_sd=0.7)
    rng = np.random.default_rng(0)
    big = 200_000
    base = 4.0 + 0.5 * rng.standard_normal(big)

    def score():
        return np.clip(np.rint(base + 0.7 * rng.standard_normal(big)), 1, 5)

    sd = float(((score() + score()) / 2).std())
    n = 200
    plan = planner.plan_thumb(n_images=[n], assumptions=a, n_simulations=30, seed=2)
    expected = stats.norm.ppf(0.95) * sd / np.sqrt(n)
    assert plan.points[0].half_width["A"] == pytest.approx(expected, rel=0.08)


def test_thumb_power_grows_with_images():
    a = planner.ThumbAssumptions.two_systems(4.0, 0.2)
    plan = planner.plan_thumb(
        n_images=[20, 300],
        assumptions=a,
        compare=("A", "B"),
        n_simulations=40,
        power_target=0.8,
        price_per_judgment=0.1,
        seconds_per_judgment=30,
    )
    small, large = plan.points
    assert small.power < 0.6 < 0.9 <= large.power
    # 300 images x 2 systems x 2 judgments (stage 1 and 2) at 0.10 and 30 s each.
    assert large.cost == Cost(judgments=1200, money=pytest.approx(120.0), crowd_hours=10.0)
    assert plan.recommended is large


def test_vicr_prediction_matches_subsampling_flickr8k(shared_datasets):
    data = json.loads(
        (shared_datasets / "flickr8k-expert" / "flickr8k_expert.json").read_text("utf-8")
    )
    ratings = []
    for entry in data.values():
        judgements = entry["human_judgement"]
        for start in range(0, len(judgements), 3):
            ratings.append([int(j["rating"]) for j in judgements[start : start + 3]])
    n = 300
    rng = np.random.default_rng(0)
    kappas = []
    for _ in range(200):
        chosen = rng.choice(len(ratings), size=n, replace=False)
        result = vicr.virtual_raters([ratings[i] for i in chosen], repetitions=1, levels=4)
        kappas.append(result["fleiss_kappa"]["mean"])
    low, high = np.percentile(kappas, [2.5, 97.5])
    plan = planner.plan_vicr(
        n_pairs=[n], pilot=ratings, levels=4, n_simulations=200, repetitions=1, seed=0
    )
    # The pilot is replaced by a fitted model (a pair has only its 3 ratings), and the
    # width is a percentile range over simulations: a looser 20%.
    assert plan.points[0].half_width["fleiss_kappa"] == pytest.approx((high - low) / 2, rel=0.20)


def test_recommended_is_the_cheapest_point_meeting_both_targets():
    def point(n, width, power):
        return PlanPoint(n, 1, {"A": width}, power, Cost(judgments=n))

    points = (point(100, 0.2, 0.9), point(200, 0.1, 0.7), point(300, 0.08, 0.85))
    plan = Plan("thumb", "Total", 0.9, 0.1, 0.8, 10, points)
    assert plan.recommended is points[2]
    assert plan.as_dict()["recommended"]["n_images"] == 300
    nothing = Plan("thumb", "Total", 0.9, 0.01, 0.8, 10, points)
    assert nothing.recommended is None


def test_study_cost_worked_by_hand():
    cost = planner.study_cost(1000, price_per_judgment=0.05, seconds_per_judgment=12)
    assert cost == Cost(
        judgments=1000, money=pytest.approx(50.0), crowd_hours=pytest.approx(10 / 3)
    )
    assert planner.study_cost(5) == Cost(judgments=5)


def test_slider_pmf_sums_to_one_and_centres():
    pmf = planner.slider_pmf(0.0, 1.0)
    assert pmf.sum() == pytest.approx(1.0)
    assert pmf == pytest.approx(pmf[::-1])  # symmetric about 5
    assert pmf[4] == pytest.approx(stats.norm.cdf(0.5) - stats.norm.cdf(-0.5))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: planner.plan_thumb(n_images=[10]), "exactly one"),
        (
            lambda: planner.plan_thumb(
                n_images=[10], assumptions=planner.ThumbAssumptions({"A": 4}), n_simulations=10**6
            ),
            "n_simulations",
        ),
        (
            lambda: planner.plan_thumb(
                n_images=[10], assumptions=planner.ThumbAssumptions({"A": 4}), compare=("A", "Z")
            ),
            "compare",
        ),
        (
            lambda: planner.plan_humanr(
                n_images=list(range(2, 30)), judgments_per_item=[1, 2], assumptions=_crowd()
            ),
            "at most",
        ),
        (lambda: planner.plan_vicr(n_pairs=[10], ratings_per_pair=[2], model=_model()), "3"),
        (lambda: planner.study_cost(10, price_per_judgment=-1), "price_per_judgment"),
        (lambda: planner.slider_pmf(1.5, 1.0), "mean_value"),
    ],
)
def test_planner_refuses_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _model() -> adaptive.RaterModel:
    return adaptive.RaterModel.symmetric(5)


def _brute_force_thumb(a: planner.ThumbAssumptions, n: int, studies: int, seed: int):
    """Draw ``studies`` THumB studies of ``n`` images by hand under ``a`` (never through the
    planner or the report) and return, per system, half the 90% interval of a study's mean
    Total (1.645 sd of the means over the studies), and the share of studies whose 90%
    normal-theory interval of the mean per-image difference A - B excludes 0."""
    rng = np.random.default_rng(seed)
    names = list(a.means)
    means = np.array([a.means[s] for s in names])
    study_means, separated = [], 0
    for start in range(0, studies, 1000):
        size = min(1000, studies - start)
        base = means + a.image_sd * rng.standard_normal((size, n, 1))

        def score(base=base):
            return np.clip(np.rint(base + a.caption_sd * rng.standard_normal(base.shape)), 1, 5)

        total = (score() + score()) / 2  # no penalties: Total = (P + R) / 2
        study_means.append(total.mean(axis=1))
        d = total[:, :, 0] - total[:, :, 1]
        half = stats.norm.ppf(0.95) * d.std(axis=1, ddof=1) / np.sqrt(n)
        separated += int((np.abs(d.mean(axis=1)) > half).sum())
    spread = np.concatenate(study_means).std(axis=0, ddof=1)
    widths = dict(zip(names, stats.norm.ppf(0.95) * spread, strict=True))
    return widths, separated / studies


@pytest.mark.parametrize("n", [100, 300])
def test_thumb_half_widths_and_power_match_a_brute_force_simulation(n):
    """Issue 27: with 100 bootstrap resamples the planner's half-widths were 2-5% narrower
    than a brute-force simulation; at the report's 1,000 they are within 2%, and the power
    within 0.03. A difference of 0.15 puts the power near 0.6 at 100 images and 0.95 at 300,
    where a wrong interval would move it."""
    a = planner.ThumbAssumptions.two_systems(4.0, 0.15)
    plan = planner.plan_thumb(
        n_images=[n], assumptions=a, compare=("A", "B"), n_simulations=500, seed=n
    )
    point = plan.points[0]
    widths, power = _brute_force_thumb(a, n, 20_000, seed=10_000 + n)
    for name, width in widths.items():
        assert point.half_width[name] == pytest.approx(width, rel=0.02), name
    assert point.power == pytest.approx(power, abs=0.03)
    assert point.judgments_per_item == 2
    assert point.cost.judgments == n * 2 * 2  # two systems, two stages per caption


def test_humanr_pilot_images_counts_only_what_the_report_keeps():
    """Hand-worked: worker 1's group 10 passes its check, worker 2's group 11 fails its own
    (oriented 5 on the correct caption), and one row of group 10 is dropped."""
    pilot = humanr.Responses.from_records(
        [
            # group 10, worker 1: Human on images 1 and 2, GIT on image 1 (dropped), a check.
            {"worker_id": 1, "image_id": 1, "system": "Human", "raw": 3, "human_on_left": True,
             "is_attention_check": False, "group_id": 10},
            {"worker_id": 1, "image_id": 2, "system": "Human", "raw": 6, "human_on_left": True,
             "is_attention_check": False, "group_id": 10},
            {"worker_id": 1, "image_id": 1, "system": "GIT", "raw": 2, "human_on_left": False,
             "is_attention_check": False, "group_id": 10, "dropped": True},
            {"worker_id": 1, "image_id": 9, "system": "", "raw": 2, "human_on_left": True,
             "is_attention_check": True, "group_id": 10},
            # group 11, worker 2: GIT on images 3 and 4, a failed check: none of it counts.
            {"worker_id": 2, "image_id": 3, "system": "GIT", "raw": 4, "human_on_left": True,
             "is_attention_check": False, "group_id": 11},
            {"worker_id": 2, "image_id": 4, "system": "GIT", "raw": 4, "human_on_left": True,
             "is_attention_check": False, "group_id": 11},
            {"worker_id": 2, "image_id": 8, "system": "", "raw": 5, "human_on_left": True,
             "is_attention_check": True, "group_id": 11},
        ]
    )  # fmt: skip
    assert planner.humanr_pilot_images(pilot) == {"Human": 2}
