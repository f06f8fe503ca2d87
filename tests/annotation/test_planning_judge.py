"""The planner with a judge (issue 40): how many human units and judgments a target
half-width needs without and with the study's judge.

The study's numbers are checked against ``rubrics.ppi_power.sample_size`` on data gathered here
from the stored rows (``Judgment``, ``JudgeAnswer``, ``Caption``), not through the
service; the "among the judged units" count against its definition; a hand-worked case
(a judge that is the truth plus independent noise, so rho^2 = 1/2 by construction) against
the PPI formula written out here; the page and the API for their owner only.
"""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient
from scipy import stats

from annotation.models import Caption, Judge, JudgeAnswer, Judgment, Study
from annotation.services.judges import judge_import
from annotation.services.planning import JUDGE_PILOT_MIN, judge_plan_row, study_judge_plan
from rubrics import ppi_power
from tests.factories.vicr import vicr_release

pytestmark = pytest.mark.django_db

#: The two-sided 95% normal quantile, written out (scipy.stats.norm.ppf(0.975)).
Z95 = 1.959963984540054

#: Captions per system; the last UNLABELED of each have the judge's answer only.
PER_SYSTEM = 36
UNLABELED = 8
SYSTEMS = ("alpha", "beta")


def judged_vicr_study(researcher, tmp_path, *, judge=True) -> Study:
    """A VICR release of 72 captions (two systems), three ratings each, that track a
    hidden quality; the judge tracks it too, with its own noise and a bias for beta.
    Then: the last captions of each system lose their ratings (excluded: no person's
    kept rating, the judge's answer only) and a few captions lose one rating (so the
    ratings per unit are not whole)."""
    rng = np.random.default_rng(40)
    quality = rng.uniform(1, 5, size=PER_SYSTEM * len(SYSTEMS))
    ratings = [np.clip(np.rint(q + rng.normal(0, 0.7, size=3)), 1, 5).astype(int) for q in quality]
    study = vicr_release(researcher, tmp_path, ratings)
    captions = list(Caption.objects.filter(study=study).order_by("text"))
    by_number = {int(c.text.rsplit(" ", 1)[1]): c for c in captions}
    for i, caption in by_number.items():
        system = SYSTEMS[i // PER_SYSTEM]
        Caption.objects.filter(pk=caption.pk).update(system=system)
        if i % PER_SYSTEM >= PER_SYSTEM - UNLABELED:
            Judgment.objects.filter(study=study, item__spec__caption_id=caption.pk).update(
                excluded=True
            )
        elif i % 5 == 0:  # one rating of every fifth caption dropped
            first = (
                Judgment.objects.filter(study=study, item__spec__caption_id=caption.pk)
                .order_by("payload__rating")
                .values_list("pk", flat=True)
                .first()
            )
            Judgment.objects.filter(pk=first).update(excluded=True)
    if judge:
        rows = []
        for i, caption in by_number.items():
            bias = 0.8 if SYSTEMS[i // PER_SYSTEM] == "beta" else 0.0
            rating = int(np.clip(np.rint(quality[i] + bias + rng.normal(0, 0.6)), 1, 5))
            rows.append(json.dumps({"caption_id": caption.pk, "answer": {"rating": rating}}))
        judge_import(study=study, text="\n".join(rows), name="toy judge")
    return study


def _pilot_from_rows(study: Study):
    """Per system, from the stored rows: the labeled captions' human means and the judge's
    answers, the judge-answered captions, and the kept ratings per labeled caption."""
    ratings: dict[int, list[float]] = defaultdict(list)
    for spec, payload in Judgment.objects.filter(study=study, excluded=False).values_list(
        "item__spec", "payload"
    ):
        ratings[int(spec["caption_id"])].append(float(payload["rating"]))
    judge = Judge.objects.get(study=study)
    answers = {
        a.caption_id: float(a.scores["rating"]) for a in JudgeAnswer.objects.filter(judge=judge)
    }
    systems = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
    out = {s: {"y": [], "yhat": [], "judged": 0, "ratings": 0} for s in SYSTEMS}
    for caption, system in sorted(systems.items()):
        if caption in answers:
            out[system]["judged"] += 1
            if ratings.get(caption):
                out[system]["y"].append(float(np.mean(ratings[caption])))
                out[system]["yhat"].append(answers[caption])
                out[system]["ratings"] += len(ratings[caption])
    return out


def _check_row(row, y, yhat, judged, ratings, target):
    """One row of the plan against rubrics.ppi_power.sample_size on the gathered data."""
    y, yhat = np.asarray(y), np.asarray(yhat)
    unlimited = ppi_power.sample_size(y, yhat, target_halfwidth=target, small_sample=True)
    per_unit = ratings / len(y)
    assert row["n_labeled"] == len(y) and row["n_judged"] == judged
    assert row["ratings_per_unit"] == pytest.approx(per_unit)
    assert row["rho"] == pytest.approx(unlimited["rho"], abs=1e-12)
    assert row["bound"] == pytest.approx(1 - unlimited["rho"] ** 2, abs=1e-12)
    people = unlimited["people_only"]
    assert row["people_only"]["units"] == people
    assert row["people_only"]["judgments"] == math.ceil(people * per_unit)
    assert row["with_judge_unlimited"]["units"] == unlimited["with_judge"]
    # Among the judged units: n people units and the judge alone on the other N - n; the
    # least n that reaches the target (people only if none below it does).
    n = row["with_judge"]["units"]
    assert 2 <= n <= people
    assert row["with_judge"]["judgments"] == math.ceil(n * per_unit)
    assert row["with_judge"]["saving"] == pytest.approx(1 - n / people)

    def enough(m):
        if m >= people:
            return True
        if m >= judged:
            return False
        planned = ppi_power.sample_size(
            y, yhat, target_halfwidth=target, unlabeled=judged - m, small_sample=True
        )
        return planned["with_judge"] <= m

    assert enough(n)
    assert not any(enough(m) for m in range(2, n))
    assert row["error"] == ""


def test_the_plan_equals_sample_size_on_the_stored_rows(researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path)
    target = 0.25
    plan = study_judge_plan(study, target_half_width=target)
    assert plan["error"] == "" and plan["judge"]["name"] == "toy judge"
    assert plan["score"] == "rating" and plan["alpha"] == 0.05
    gathered = _pilot_from_rows(study)
    assert [row["system"] for row in plan["systems"]] == list(SYSTEMS)
    for row in plan["systems"]:
        data = gathered[row["system"]]
        assert len(data["y"]) == PER_SYSTEM - UNLABELED and data["judged"] == PER_SYSTEM
        _check_row(row, data["y"], data["yhat"], data["judged"], data["ratings"], target)
    pooled = plan["pooled"]
    _check_row(
        pooled,
        sum((gathered[s]["y"] for s in SYSTEMS), []),
        sum((gathered[s]["yhat"] for s in SYSTEMS), []),
        sum(gathered[s]["judged"] for s in SYSTEMS),
        sum(gathered[s]["ratings"] for s in SYSTEMS),
        target,
    )
    # A judge that tracks people saves human judgments, never more than the bound allows.
    assert 0 < pooled["rho"] < 1
    assert pooled["with_judge_unlimited"]["units"] < pooled["people_only"]["units"]
    for row in (*plan["systems"], pooled):
        need = row["with_judge_unlimited"]["units"] / row["people_only"]["units"]
        assert need >= row["bound"] - 2 / row["people_only"]["units"]  # whole units


def test_no_target_gives_the_correlation_and_its_bound_only(researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path)
    plan = study_judge_plan(study, target_half_width=None)
    gathered = _pilot_from_rows(study)
    for row in plan["systems"]:
        data = gathered[row["system"]]
        expected = ppi_power.sample_size(data["y"], data["yhat"], target_halfwidth=1.0)["rho"]
        assert row["rho"] == pytest.approx(expected, abs=1e-12)
        assert row["people_only"] is None and row["with_judge"] is None


def test_hand_worked_judge_of_known_correlation():
    """yhat = y + independent noise of y's variance: rho^2 = 1/2 by construction. With
    many judged units the judge needs half the people-only units; among N judged units,
    the PPI formula's effective n, n N / (n + (1 - rho^2) (N - n)), written out here."""
    rng = np.random.default_rng(7)
    y = rng.normal(3.0, 1.0, size=20_000)
    yhat = y + rng.normal(0.0, 1.0, size=y.size)
    h = 0.05
    row = judge_plan_row("s", y, yhat, 10**9, ratings_per_unit=3.0, target_half_width=h)
    rho = np.corrcoef(y, yhat)[0, 1]
    assert row["rho"] == pytest.approx(rho, abs=1e-9)
    assert row["rho"] ** 2 == pytest.approx(0.5, abs=0.02)  # the construction's
    exact = (Z95 * y.std() / h) ** 2  # people only, the CLT: z sd / sqrt(n) <= h
    # The report's small-sample interval: t(n - 1) sd / sqrt(n - 1) <= h, a few units more.
    t_units = next(
        n
        for n in range(math.floor(exact), math.ceil(exact) + 50)
        if stats.t.ppf(0.975, n - 1) * y.std() / math.sqrt(n - 1) <= h
    )
    assert math.ceil(exact) < t_units < exact + 10
    assert row["people_only"]["units"] == t_units
    assert row["people_only"]["judgments"] == 3 * t_units
    # With the judge on unlimited units: variance var_y (1 - rho^2) / n at the best lambda.
    judged_units = next(
        n
        for n in range(2, t_units)
        if stats.t.ppf(0.975, n - 1) * y.std() * math.sqrt((1 - rho**2) / (n - 1)) <= h
    )
    for key in ("with_judge", "with_judge_unlimited"):
        assert row[key]["units"] == pytest.approx(judged_units, abs=1)
        assert row[key]["saving"] == pytest.approx(rho**2, abs=0.002)
    # Few judged units: N = 2000, about the people-only n; the least n with an effective
    # n that reaches the people-only one (lam is inside [0, 1] here: no clipping), which
    # at n units is z's n times the small-sample interval's (t(n - 1) / z)^2 n / (n - 1).
    judged = 2000

    def reached(n: int) -> bool:
        widening = (stats.t.ppf(0.975, n - 1) / Z95) ** 2 * n / (n - 1)
        return n * judged / (n + (1 - rho**2) * (judged - n)) >= exact * widening

    small = judge_plan_row("s", y, yhat, judged, ratings_per_unit=1.0, target_half_width=h)
    by_hand = next(n for n in range(2, judged) if reached(n))
    assert small["with_judge"]["units"] == pytest.approx(by_hand, abs=1)
    assert row["with_judge"]["units"] < small["with_judge"]["units"] < exact


def test_too_small_a_pilot_says_why():
    row = judge_plan_row("s", [1, 2, 3], [1, 2, 2], 50, ratings_per_unit=1.0, target_half_width=0.1)
    assert row["people_only"] is None and row["rho"] is None
    assert f"at least {JUDGE_PILOT_MIN}" in row["error"] and "3 units" in row["error"]
    flat = judge_plan_row(
        "s", [3] * 20, list(range(20)), 50, ratings_per_unit=1.0, target_half_width=0.1
    )
    assert "same score" in flat["error"]


def test_a_study_without_a_judge_says_so(researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path, judge=False)
    plan = study_judge_plan(study, target_half_width=0.2)
    assert plan["error"] and "judge" in plan["error"].lower()
    assert plan["systems"] == [] and plan["pooled"] is None


# -------------------------------------------------------------------- page and API


def test_page_and_api_show_the_same_plan(client, researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path)
    query = {"sizes": "20", "simulations": "5", "target_half_width": "0.25"}
    client.force_login(researcher)
    page = client.get(reverse("study_plan", args=[study.pk]), query)
    assert page.status_code == 200
    html = page.content.decode()
    api = APIClient()
    api.force_login(researcher)
    data = api.get(reverse("api_study_plan", args=[study.pk]), query).json()
    judge = data["judge"]
    assert judge == json.loads(json.dumps(study_judge_plan(study, target_half_width=0.25)))
    assert "Human judgments with the judge" in html and "toy judge" in html
    pooled = judge["pooled"]
    assert f"<strong>{pooled['people_only']['units']}</strong> units" in html
    assert f"<strong>{pooled['with_judge']['units']}</strong>" in html
    for row in judge["systems"]:
        assert f'<th scope="row">{row["system"]}</th>' in html
    # The existing plan is still there, unchanged in shape.
    assert "Planner curve" in html and [p["n_images"] for p in data["points"]] == [20]


def test_page_says_why_without_a_judge(client, researcher, tmp_path):
    study = judged_vicr_study(researcher, tmp_path, judge=False)
    client.force_login(researcher)
    html = client.get(
        reverse("study_plan", args=[study.pk]), {"sizes": "20", "simulations": "5"}
    ).content.decode()
    assert 'id="plan-judge-error"' in html and "No plan with the judge" in html


def test_the_figure_leaves_the_judge_out(client, researcher, tmp_path, monkeypatch):
    from annotation.services import planning

    study = judged_vicr_study(researcher, tmp_path)
    calls = []
    monkeypatch.setattr(planning, "study_judge_plan", lambda *a, **k: calls.append(1) or {})
    client.force_login(researcher)
    url = reverse("study_plan_figure", args=[study.pk])
    response = client.get(url, {"sizes": "20", "simulations": "5"})
    assert response.status_code == 200 and calls == []


def test_anonymous_and_other_researchers_are_refused(
    client, researcher, other_researcher, tmp_path
):
    study = judged_vicr_study(researcher, tmp_path)
    query = {"sizes": "20", "simulations": "5", "target_half_width": "0.25"}
    urls = [reverse("study_plan", args=[study.pk]), reverse("api_study_plan", args=[study.pk])]
    for url in urls:
        response = client.get(url, query)
        assert response.status_code in (302, 401, 403), url
        assert b"toy judge" not in response.content
    client.force_login(other_researcher)
    for url in urls:
        response = client.get(url, query)
        assert response.status_code == 404, url
        assert b"toy judge" not in response.content


# -------------------------------------------------------------------- a Bradley-Terry mode

ARENA_SYSTEMS = {"alpha": "a short one", "beta": "a somewhat longer caption", "gamma": "mid text"}
ARENA_PAIRS = (("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma"))
WON = {"model_a": 0.0, "model_b": 1.0, "tie": 0.5}  # the share won by b


def judged_arena_study(researcher, tmp_path):
    """24 images, each pair of three systems battled once; people's votes on the last 6
    images excluded (the judge's answers only). Returns the study and, per system, the
    expected labeled (y, yhat) shares won and the judge's other answers, from the log."""
    rng = np.random.default_rng(11)
    strength = {"alpha": 0.8, "beta": 0.0, "gamma": -0.5}
    battles, expected = [], {s: {"y": [], "yhat": [], "unlabeled": []} for s in ARENA_SYSTEMS}
    for n in range(24):
        for a, b in ARENA_PAIRS:
            p_b = 1 / (1 + np.exp(strength[a] - strength[b]))
            winner = (
                "tie" if rng.random() < 0.1 else ("model_b" if rng.random() < p_b else "model_a")
            )
            judged = winner if rng.random() < 0.75 else str(rng.choice(list(WON)))
            battles.append((f"i{n}", a, b, winner, judged))
    lines = [
        json.dumps({"model_a": a, "model_b": b, "winner": w, "judge": f"p{k % 5}",
                    "caption_a": f"{ARENA_SYSTEMS[a]} {image}",
                    "caption_b": f"{ARENA_SYSTEMS[b]} {image}", "image": image})
        for k, (image, a, b, w, _) in enumerate(battles)
    ]  # fmt: skip
    path = tmp_path / "arena.jsonl"
    path.write_text("\n".join(lines) + "\n")
    call_command(
        "import_ratings", str(path), "--format", "battles", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    study = Study.objects.get(owner=researcher)
    ids = {
        (c.image.name, c.system): c.pk
        for c in Caption.objects.filter(study=study).select_related("image")
    }
    hidden = {f"i{n}" for n in range(18, 24)}
    for spec_id in [ids[(image, s)] for image in hidden for s in ARENA_SYSTEMS]:
        Judgment.objects.filter(study=study, item__spec__caption_a=spec_id).update(excluded=True)
    outcome = {"model_a": "a", "model_b": "b", "tie": "tie"}
    rows = [
        {"caption_a": ids[(image, a)], "caption_b": ids[(image, b)],
         "answer": {"outcome": outcome[judged]}}
        for image, a, b, _, judged in battles
    ]  # fmt: skip
    judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name="arena judge")
    for image, a, b, winner, judged in battles:
        for system, side in ((a, 0), (b, 1)):
            share = WON[winner] if side else 1 - WON[winner]
            guess = WON[judged] if side else 1 - WON[judged]
            if image in hidden:
                expected[system]["unlabeled"].append(guess)
            else:
                expected[system]["y"].append(share)
                expected[system]["yhat"].append(guess)
    return study, expected


def test_a_bradley_terry_mode_plans_each_systems_share_of_battles_won(researcher, tmp_path):
    study, expected = judged_arena_study(researcher, tmp_path)
    assert Judgment.objects.filter(study=study, excluded=True).count() == 18  # 6 images
    target = 0.12
    plan = study_judge_plan(study, target_half_width=target)
    assert plan["error"] == "" and plan["estimate"] == "bradley_terry"
    assert plan["score"] == "share of battles won" and "Bradley-Terry" in plan["note"]
    assert plan["pooled"] is None  # every battle is two systems' units
    assert [row["system"] for row in plan["systems"]] == sorted(ARENA_SYSTEMS)
    for row in plan["systems"]:
        data = expected[row["system"]]
        assert len(data["y"]) == 36 and len(data["unlabeled"]) == 12
        judged = len(data["y"]) + len(data["unlabeled"])
        _check_row(row, data["y"], data["yhat"], judged, len(data["y"]), target)


def test_the_arena_page_says_what_its_plan_is_of(client, researcher, tmp_path):
    study, _ = judged_arena_study(researcher, tmp_path)
    client.force_login(researcher)
    query = {"sizes": "20", "simulations": "5", "target_half_width": "0.12"}
    html = client.get(reverse("study_plan", args=[study.pk]), query).content.decode()
    # The curve has no model of the arena; the plan with the judge needs none.
    assert "has no model of the" in html and "Planner curve" not in html
    assert 'id="plan-judge-note"' in html and "share of the battles it is in" in html
    assert 'id="plan-judge-summary"' not in html  # no pooled battles to sum up
    for system in ARENA_SYSTEMS:
        assert f'<th scope="row">{system}</th>' in html


def test_a_pilot_drawn_by_the_judges_uncertainty_is_said_to_be_indicative(
    researcher, tmp_path, monkeypatch
):
    from annotation.services import planning

    study = judged_vicr_study(researcher, tmp_path)
    real = planning.people_judge_data

    def drawn_by_uncertainty(*args, **kwargs):
        data = real(*args, **kwargs)
        return {**data, "design": {**data["design"], "kind": "uncertainty"}}

    assert study_judge_plan(study, target_half_width=0.25)["note"] == ""
    monkeypatch.setattr(planning, "people_judge_data", drawn_by_uncertainty)
    plan = study_judge_plan(study, target_half_width=0.25)
    assert "least sure" in plan["note"] and "indicative" in plan["note"]
    assert plan["systems"][0]["people_only"] is not None  # still planned


def test_the_judge_plan_api_answers_for_a_mode_without_a_curve(researcher, tmp_path, make_user):
    """The arena has no planner curve (``/plan/`` answers 400 there); its judge plan is
    still in the API, equal to the service's, for the study's researchers only."""
    study, _ = judged_arena_study(researcher, tmp_path)
    api = APIClient()
    api.force_authenticate(researcher)
    url = reverse("api_study_plan_judge", args=[study.pk])
    curve = api.get(reverse("api_study_plan", args=[study.pk]), {"sizes": "20"})
    assert curve.status_code == 400
    answer = api.get(url, {"target_half_width": "0.12"})
    assert answer.status_code == 200
    expected = json.loads(json.dumps(study_judge_plan(study, target_half_width=0.12)))
    assert answer.json() == expected and answer.json()["systems"]
    assert api.get(url, {"target_half_width": "-1"}).status_code == 400
    assert api.get(url, {"target_half_width": "nan"}).status_code == 400
    stranger = APIClient()
    stranger.force_authenticate(make_user("stranger", researcher=True))
    assert stranger.get(url).status_code == 404
    assert APIClient().get(url).status_code in (401, 403)
