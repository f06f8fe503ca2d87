"""The context report, its export and the alignment of judges with each group (issue 43).

A hand-made study (``tests/factories/context.py``: imported through the real services)
is answered through ``assignment_next`` and ``judgment_submit`` with ratings this file
chooses per rater, description and context; every number the report stores is then
recomputed here by independent code (plain loops and the textbook cluster-robust variance,
not the rubric's arrays): each group's mean, BLV minus sighted with its interval, and the
sighted raters' before/after change.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from scipy import stats

from annotation.models import Caption
from annotation.services.assignments import assignment_next
from annotation.services.exports import table_columns
from annotation.services.judges import judge_import, judges_report
from annotation.services.judgments import judgment_submit
from annotation.services.reports import report_request
from annotation.services.runner import job_run
from tests.annotation.test_exports import datasheet_of, job_path, read_table
from tests.annotation.test_exports import run as run_export
from tests.factories.context import context_study, rater

pytestmark = pytest.mark.django_db

BEFORE = ("overall", "imaginability", "relevance", "irrelevance")
SYSTEMS = ("good-detail", "bad-short")
DOMAINS = ("news", "shopping")


def sighted_overall(system: str, domain: str, image: int) -> int:
    """The sighted raters' pattern: detail is good, more so on the shopping page."""
    base = {"good-detail": 4, "bad-short": 2}[system]
    return min(5, base + (domain == "shopping") + image % 2)


def blv_overall(system: str, domain: str, image: int) -> int:
    """The BLV raters' pattern, the sighted one reversed (6 - x): they weigh the context
    the other way, so a judge that follows one group goes against the other."""
    return 6 - sighted_overall(system, domain, image)


def before_answer(group: str, number: int, system: str, domain: str, image: int) -> dict:
    """A rater's before-image answer: the group's pattern plus a rater's own offset on the
    other dimensions (so the intervals are not all zero-width)."""
    pattern = blv_overall if group == "blv" else sighted_overall
    overall = pattern(system, domain, image)
    return {
        "overall": overall,
        "imaginability": 1 + (number + image) % 5,
        "relevance": 1 + (number * 2 + len(system)) % 5,
        "irrelevance": 1 + (number + len(domain)) % 5,
    }


def after_answer(number: int, before: dict) -> dict:
    """A sighted rater's after-image answer: overall moved by -1, 0 or +1 by rater."""
    return {
        "overall": max(1, min(5, before["overall"] + (number % 3) - 1)),
        "accuracy": 1 + number % 5,
        "missing": f"rater {number}",
    }


def image_numbers(study) -> dict[int, int]:
    """Image id -> 0, 1, 2, ... in id order (the patterns' ``image``)."""
    ids = study.images.order_by("id").values_list("pk", flat=True)
    return {pk: number for number, pk in enumerate(ids)}


def answer_study(study, *, raters: int = 4) -> list[dict]:
    """Every group's raters answer everything they are given; returns what was sent."""
    sent = []
    images = image_numbers(study)
    for group, vision in (("blv", "blind"), ("sighted", "sighted")):
        for number in range(raters):
            person = rater(study, vision if number % 2 == 0 or group == "sighted" else "low_vision")
            at = timezone.now()
            while (lease := assignment_next(participant=person)) is not None:
                description = Caption.objects.get(pk=lease.item.spec["caption"])
                context = Caption.objects.get(pk=lease.item.spec["context"])
                image = images[description.image_id]
                domain = context.spec["domain"]
                before = before_answer(group, number, description.system, domain, image)
                at += timedelta(seconds=120)
                judgment_submit(participant=person, token=lease.token, data=before, part=0, now=at)
                after = None
                if lease.item.spec["parts"] == 2:
                    after = after_answer(number, before)
                    at += timedelta(seconds=30)
                    judgment_submit(
                        participant=person, token=lease.token, data=after, part=1, now=at
                    )
                sent.append(
                    {
                        "participant": person.pk,
                        "group": group,
                        "system": description.system,
                        "domain": domain,
                        "caption": description.pk,
                        "context": context.pk,
                        "before": before,
                        "after": after,
                    }
                )
    return sent


# ------------------------------------------------------------- independent statistics


def clustered(values: list[float], raters: list[int], confidence=0.95):
    """Mean, cluster-robust standard error (CR1: G/(G-1) times the sum over raters of the
    squared sum of their residuals, over n squared) and the t(G-1) interval."""
    n = len(values)
    mean = sum(values) / n
    residuals = defaultdict(float)
    for value, who in zip(values, raters, strict=True):
        residuals[who] += value - mean
    g = len(residuals)
    variance = g / (g - 1) * sum(r * r for r in residuals.values()) / n**2
    se = math.sqrt(variance)
    half = stats.t.ppf(0.5 + confidence / 2, g - 1) * se
    return mean, se, g, (mean - half, mean + half)


def difference(a, b, confidence=0.95):
    """a - b of two independent groups' clustered means, Welch-Satterthwaite df."""
    (ma, sa, ga, _), (mb, sb, gb, _) = a, b
    va, vb = sa * sa, sb * sb
    df = (va + vb) ** 2 / (va * va / (ga - 1) + vb * vb / (gb - 1))
    half = stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(va + vb)
    return ma - mb, (ma - mb - half, ma - mb + half)


def compute_report(study, researcher) -> dict:
    job = report_request(study=study, user=researcher)
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.error
    return job.result


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


@pytest.fixture
def answered(researcher):
    study = context_study(researcher, images=3, blv_ratings=2, sighted_ratings=2)
    return study, answer_study(study)


def test_the_report_equals_independent_code_per_system_and_domain(answered, researcher):
    study, sent = answered
    result = compute_report(study, researcher)
    assert result["n_ratings"] == len(sent) == 3 * 2 * 2 * 2 * 2
    assert result["n_raters"] == {"blv": 4, "sighted": 4}
    assert set(result["systems"]) == set(SYSTEMS)
    assert result["domains"] == sorted(DOMAINS)
    compared = {"mean": 0, "difference": 0}
    for system in SYSTEMS:
        cells = {None: result["systems"][system]["all"]}
        cells.update(result["systems"][system]["domains"])
        for domain, cell in cells.items():
            mine = [r for r in sent if r["system"] == system and domain in (None, r["domain"])]
            by_group = {g: [r for r in mine if r["group"] == g] for g in ("blv", "sighted")}
            for dim in BEFORE:
                estimates = {}
                for group, rows in by_group.items():
                    got = cell["groups"][group]["before"][dim]
                    want = clustered(
                        [r["before"][dim] for r in rows], [r["participant"] for r in rows]
                    )
                    estimates[group] = want
                    assert got["n"] == len(rows)
                    assert got["mean"] == pytest.approx(want[0], abs=1e-6)
                    if want[1] > 1e-9:  # exactly 0 in the rubric: no interval
                        compared["mean"] += 1
                        assert (got["low"], got["high"]) == pytest.approx(want[3], abs=1e-6)
                got = cell["difference"][dim]
                if min(estimates["blv"][1], estimates["sighted"][1]) > 1e-9:
                    value, interval = difference(estimates["blv"], estimates["sighted"])
                    compared["difference"] += 1
                    assert got["mean"] == pytest.approx(value, abs=1e-6)
                    assert (got["low"], got["high"]) == pytest.approx(interval, abs=1e-6)
            # The sighted raters' change: after minus before overall, paired per rating.
            seen = by_group["sighted"]
            change = clustered(
                [r["after"]["overall"] - r["before"]["overall"] for r in seen],
                [r["participant"] for r in seen],
            )
            got = cell["change"]
            assert got["n"] == len(seen)
            assert got["mean"] == pytest.approx(change[0], abs=1e-6)
            if change[1] > 1e-9:
                assert (got["low"], got["high"]) == pytest.approx(change[3], abs=1e-6)
            else:  # every change the same (which rater met which item follows the ids)
                assert (got["low"], got["high"]) == (None, None)
            # Accuracy after the image: sighted only, BLV never has one.
            assert cell["groups"]["blv"]["after"]["accuracy"]["n"] == 0
            accuracy = [r["after"]["accuracy"] for r in seen]
            assert cell["groups"]["sighted"]["after"]["accuracy"]["mean"] == pytest.approx(
                sum(accuracy) / len(accuracy), abs=1e-6
            )
    # The overall difference is the designed one: BLV rate "good-detail" low, sighted high.
    overall = result["systems"]["good-detail"]["all"]["difference"]["overall"]
    assert overall["mean"] < 0
    # Intervals were compared, not only skipped as zero-width.
    assert compared["difference"] >= 8 and compared["mean"] >= 16


def test_the_page_the_api_and_the_datasheet_show_each_system_and_group_counts_only(
    answered, researcher, client, capture
):
    study, sent = answered
    result = compute_report(study, researcher)
    client.force_login(researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    for system in SYSTEMS:
        assert f"{system} · All domains" in page and f"{system} · news" in page
    assert "4 blind or low-vision (BLV) raters and 4 sighted raters" in page
    # Every rater in the reliability section, by pseudonym only: no group beside it.
    assert "Annotator reliability" in page
    workers = result["reliability"]["workers"]
    assert len(workers) == 8 and not any("group" in w or "vision" in w for w in workers)
    # Figures draw from the stored report.
    for name in ("group-means", "before-after"):
        figure = client.get(reverse("report_figure", args=[study.pk, name, "svg"]))
        assert figure.status_code == 200 and figure.content.startswith(b"<?xml")
    # The API carries per-system results, and never a participant's vision.
    api = client.get(f"/api/studies/{study.pk}/report/")
    assert api.status_code == 200
    body = api.json()
    systems = body["result"]["systems"]
    assert set(systems) == set(SYSTEMS)
    good = systems["good-detail"]["all"]["groups"]["sighted"]["before"]["overall"]["mean"]
    assert (
        good
        == result["systems"]["good-detail"]["all"]["groups"]["sighted"]["before"]["overall"]["mean"]
    )
    text = json.dumps(body)
    assert "low_vision" not in text and '"blind"' not in text
    for participant in {r["participant"] for r in sent}:
        assert f'"participant": {participant}' not in text
    # Every export's datasheet carries the per-system results.
    job = run_export(study, researcher, capture, "csv")
    summary = datasheet_of(job)["agreement"]
    assert set(summary["systems"]) == set(SYSTEMS)
    assert summary["n_raters"] == {"blv": 4, "sighted": 4}
    assert summary["systems"]["bad-short"]["difference"]["overall"]["mean"] == pytest.approx(
        result["systems"]["bad-short"]["all"]["difference"]["overall"]["mean"]
    )


def test_human_scores_keep_each_group_apart(answered):
    study, sent = answered
    from annotation.modes import get_mode

    scores, coefficient = get_mode("context").report.human_scores(study)
    assert coefficient == "kendall_tau_c"
    for group, label in (("blv", "BLV"), ("sighted", "sighted")):
        rows = sorted(scores[f"overall ({label})"])
        want = sorted(
            (r["caption"], float(r["before"]["overall"])) for r in sent if r["group"] == group
        )
        assert rows == want
    assert len(scores["accuracy (sighted)"]) == sum(r["group"] == "sighted" for r in sent)
    assert "accuracy (BLV)" not in scores


def judge_lines(study, pattern) -> str:
    """One line per item (a description in a context) answering with ``pattern``."""
    lines = []
    images = image_numbers(study)
    for item in study.items.order_by("id"):
        description = Caption.objects.get(pk=item.spec["caption"])
        context = Caption.objects.get(pk=item.spec["context"])
        image = images[description.image_id]
        overall = pattern(description.system, context.spec["domain"], image)
        answer = {d: overall for d in BEFORE} | {"accuracy": overall}
        lines.append(json.dumps({"item_id": item.pk, "answer": answer}))
    return "\n".join(lines)


def test_a_judge_that_follows_sighted_raters_aligns_with_them_and_not_with_blv(
    answered, researcher
):
    study, _ = answered
    # Items of both groups name the same unit: the import refuses the repeat, so one
    # item per (description, context) is given.
    units = {}
    for item in study.items.order_by("id"):
        units.setdefault((item.spec["caption"], item.spec["context"]), item)
    lines = [
        line
        for line in judge_lines(study, sighted_overall).splitlines()
        if json.loads(line)["item_id"] in {i.pk for i in units.values()}
    ]
    imported = judge_import(study=study, text="\n".join(lines), name="sighted-like")
    assert imported["answers"] == len(units) == 3 * 2 * 2
    report = judges_report(study, resamples=50)
    (entry,) = report["judges"]
    sighted = entry["scores"]["overall (sighted)"]["correlation"]["pearson"]
    blv = entry["scores"]["overall (BLV)"]["correlation"]["pearson"]
    assert entry["scores"]["overall (sighted)"]["n_captions"] == len(units)
    # The judge's overall is the sighted raters' own pattern: correlation 1 with their
    # ratings, and -1 with the BLV raters', whose pattern is its reverse.
    assert sighted["value"] == pytest.approx(1.0)
    assert blv["value"] == pytest.approx(-1.0)


def test_a_caption_alone_is_refused_as_a_judge_unit(answered):
    study, _ = answered
    caption = Caption.objects.filter(study=study, purpose="study").first()
    line = json.dumps({"caption_id": caption.pk, "answer": {d: 3 for d in (*BEFORE, "accuracy")}})
    with pytest.raises(Exception) as refused:
        judge_import(study=study, text=line, name="no-context")
    assert "item_id" in str(refused.value.details)


# ------------------------------------------------------------------------------ exports


def test_rater_vision_is_exported_only_with_the_setting_and_never_with_raw_ids(
    answered, researcher, capture
):
    study, sent = answered
    job = run_export(study, researcher, capture, "csv")
    columns = table_columns(study, "judgments")
    names = [c.name for c in columns]
    assert "rater_vision" not in names and "phase" not in names
    rows = read_table(job_path(job), "csv", columns)
    assert len(rows) == len(sent) + sum(r["after"] is not None for r in sent)
    first = rows[0]
    assert {"context", "domain", "title", "caption", "overall", "accuracy", "missing"} <= set(first)
    assert "blind" not in job_path(job).read_text() and "blv" not in job_path(job).read_text()
    # With the study's setting: the column, with each rater's group.
    study = context_study(
        researcher, images=1, blv_ratings=2, sighted_ratings=2, export_vision=True
    )
    sent = answer_study(study)
    job = run_export(study, researcher, capture, "csv")
    columns = table_columns(study, "judgments")
    assert "rater_vision" in [c.name for c in columns]
    rows = read_table(job_path(job), "csv", columns)
    groups = {r["participant"]: r["group"] for r in sent}
    pseudonyms = dict(study.participants.values_list("pseudonym", "pk"))
    assert {row["rater_vision"] for row in rows} == {"blv", "sighted"}
    for row in rows:
        assert row["rater_vision"] == groups[pseudonyms[row["participant"]]]
    # The raw-id export (the owner's dataset with crowd ids) never carries it.
    job = run_export(study, researcher, capture, "dataset", raw_ids=True)
    columns = table_columns(study, "judgments", raw_ids=True)
    assert "rater_vision" not in [c.name for c in columns]
    rows = read_table(job_path(job), "dataset", columns)
    assert rows and "rater_vision" not in rows[0]
    people = read_table(job_path(job), "dataset", [], table="participants")
    assert people and all("vision" not in key for key in people[0])


def test_a_member_cannot_get_vision_through_a_raw_id_export(researcher, other_researcher, client):
    study = context_study(
        researcher, images=1, blv_ratings=2, sighted_ratings=2, export_vision=True
    )
    answer_study(study)
    study.members.add(other_researcher)
    client.force_login(other_researcher)
    refused = client.post(
        reverse("study_export", args=[study.pk]),
        {"format": "dataset", "raw_ids": "on"},
    )
    assert refused.status_code == 403
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "low_vision" not in page and "Low vision" not in page


# ---------------------------------------------------------------------- simulated crowd

SIMULATED = {
    "good-detail": "A woman in a red raincoat holds a black umbrella on a wet street at dusk.",
    "mid-plain": "A woman with an umbrella in the rain.",
    "bad-short": "A person outside.",
}


def pattern_judge(study, group: str) -> str:
    """Lines of a judge answering every unit with the simulated ``group``'s own pattern
    (``simulate.truths``, rounded), without the raters' noise and bias."""
    from annotation.modes.context.simulate import hidden_fit, truths
    from annotation.modes.simulated import system_quality

    lines, seen = [], set()
    for item in study.items.order_by("id"):
        unit = (item.spec["caption"], item.spec["context"])
        if unit in seen:
            continue
        seen.add(unit)
        description, context = (Caption.objects.get(pk=pk) for pk in unit)
        detail = system_quality(description.system)
        overall = round(truths(detail, hidden_fit(description, context), group)["overall"])
        answer = {d: overall for d in BEFORE} | {"accuracy": overall}
        lines.append(json.dumps({"item_id": item.pk, "answer": answer}))
    return "\n".join(lines)


def test_a_simulated_crowd_shows_the_groups_apart_and_the_judge_alignment_split(researcher):
    from annotation.services.simulation import crowd_simulate

    study = context_study(
        researcher, images=6, descriptions=SIMULATED, blv_ratings=3, sighted_ratings=3
    )
    done = crowd_simulate(study=study, workers=60, seed=11)
    assert done.judgments == 6 * 3 * 2 * 3 * (1 + 2)  # units x (BLV 1 part + sighted 2)
    result = compute_report(study, researcher)
    assert result["n_raters"]["blv"] > 0 and result["n_raters"]["sighted"] > 0
    # The simulation weighs context differently: BLV overall rests on relevance, sighted on
    # detail (simulate.py). BLV minus sighted is 0.5 * (fit - 0.6 * (detail - 3)) on
    # average: positive for the short description (detail 1.6), negative for the detailed
    # one (4.0), so the short one's difference is above the detailed one's.
    diffs = {s: result["systems"][s]["all"]["difference"]["overall"] for s in SIMULATED}
    assert diffs["bad-short"]["mean"] > diffs["good-detail"]["mean"]
    # Sighted raters who see the image lower a poor description's overall and raise a
    # detailed one's (overall moves towards the detail).
    changes = {s: result["systems"][s]["all"]["change"]["mean"] for s in SIMULATED}
    assert changes["bad-short"] < 0 < changes["good-detail"]
    # A judge with the sighted pattern aligns better with sighted raters than with BLV
    # raters, and a judge with the BLV pattern the other way round.
    judge_import(study=study, text=pattern_judge(study, "sighted"), name="sighted-like")
    judge_import(study=study, text=pattern_judge(study, "blv"), name="blv-like")
    report = judges_report(study, resamples=50)
    pearson = {
        entry["name"]: {
            group: entry["scores"][f"overall ({group})"]["correlation"]["pearson"]["value"]
            for group in ("BLV", "sighted")
        }
        for entry in report["judges"]
    }
    assert pearson["sighted-like"]["sighted"] > pearson["sighted-like"]["BLV"] + 0.05
    assert pearson["blv-like"]["BLV"] > pearson["blv-like"]["sighted"] + 0.05
    # And across judges: each group is followed best by the judge with its pattern.
    assert pearson["sighted-like"]["sighted"] > pearson["blv-like"]["sighted"]
    assert pearson["blv-like"]["BLV"] > pearson["sighted-like"]["BLV"]


def test_a_simulated_report_does_not_depend_on_the_databases_ids(researcher):
    # The same study twice in one database (the second with larger ids) and the same crowd
    # seed give the same report: the hidden fits are drawn from the captions' texts, not
    # their ids, which had moved the simulated report between databases (a CI run failed).
    from annotation.services.simulation import crowd_simulate

    reports = []
    for _ in range(2):
        study = context_study(
            researcher, images=2, descriptions=SIMULATED, blv_ratings=2, sighted_ratings=2
        )
        crowd_simulate(study=study, workers=20, seed=11)
        result = compute_report(study, researcher)
        reports.append({s: result["systems"][s]["all"] for s in SIMULATED})
    assert reports[0] == reports[1]
    assert any(reports[0][s]["change"]["mean"] for s in SIMULATED)  # something was answered


def test_the_metric_lab_correlates_a_metric_with_each_group_apart(answered):
    from annotation.services.metrics import metaeval_report

    study, _ = answered
    # An imported metric column that scores detail: high for the detailed description.
    # (The metric lab reads Caption.metrics; an import of metric columns writes the same.)
    for caption in Caption.objects.filter(study=study, purpose="study"):
        caption.metrics = {"detail": 1.0 if caption.system == "good-detail" else 0.0}
        caption.save(update_fields=["metrics"])
    report = metaeval_report(study, resamples=50)
    assert report["coefficient"] == "kendall_tau_c"
    cells = report["correlations"]
    sighted = cells["overall (sighted)"]["detail"]["with Human"]
    blv = cells["overall (BLV)"]["detail"]["with Human"]
    # Sighted raters rate the detailed description high, BLV raters low (the patterns):
    # the same metric agrees with the one group and disagrees with the other.
    assert sighted["value"] > 0.5 and blv["value"] < -0.5
    assert sighted["n"] == blv["n"] == 3 * 2 * 2 * 2


def test_a_report_of_blv_ratings_only_draws_no_change_and_an_empty_one_no_figure(
    researcher, client
):
    study = context_study(researcher, images=1, blv_ratings=2, sighted_ratings=0)
    client.force_login(researcher)
    compute_report(study, researcher)
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "No kept rating yet." in page and "group-means: not enough data yet" in page
    sent = answer_study(study)
    assert {r["group"] for r in sent} == {"blv"}
    result = compute_report(study, researcher)
    cell = result["systems"]["good-detail"]["all"]
    assert cell["change"]["mean"] is None and cell["difference"]["overall"]["mean"] is None
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert "before-after: not enough data yet" in page
    url = reverse("report_figure", args=[study.pk, "group-means", "png"])
    assert client.get(url).status_code == 200
    url = reverse("report_figure", args=[study.pk, "before-after", "png"])
    assert client.get(url).status_code == 404
