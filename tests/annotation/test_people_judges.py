"""People + judge estimates (issue 40) through the real services, for a study of each mode.

Judges' answers enter through ``services.judges.judge_import``; reports run as jobs. The
expected numbers are worked by hand or computed here from the stored judgments (read from
the Judgment table in the test, not by the service's gatherer) with ``rubrics.ppi``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotation.models import Caption, Item, Judge, Judgment, Study
from annotation.modes import get_mode
from annotation.services import reports
from annotation.services.judges import judge_import
from annotation.services.people_judges import (
    SystemData,
    mean_row,
    people_judge_data,
    people_judge_report,
)
from annotation.services.studies import study_update_settings
from rubrics import ppi
from tests.factories.reports import by_system, report_of
from tests.factories.vicr import vicr_release

pytestmark = pytest.mark.django_db

# Twelve captions, three VICR ratings each, every caption's mean a whole number.
RATINGS = [
    [4, 4, 4], [3, 4, 5], [2, 3, 4], [1, 2, 3], [2, 3, 4], [2, 2, 2],
    [3, 3, 3], [4, 5, 3], [1, 1, 1], [2, 3, 4], [3, 4, 5], [4, 4, 4],
]  # fmt: skip
SYSTEMS = ["A", "B"] * 6
OFFSET = {"A": 1, "B": -1}  # the judge's bias per system


@pytest.fixture
def vicr(researcher, tmp_path) -> Study:
    study = vicr_release(researcher, tmp_path, RATINGS)
    for caption, system in zip(captions(study), SYSTEMS, strict=True):
        Caption.objects.filter(pk=caption.pk).update(system=system)
    return study


def captions(study) -> list[Caption]:
    """The study's captions in file order (their line), never by id."""
    return sorted(Caption.objects.filter(study=study), key=lambda c: int(c.text.split()[-1]))


def kept_means(study) -> dict[int, float]:
    """Each caption's mean kept rating, read from the Judgment table."""
    rows: dict[int, list[int]] = {}
    stored = Judgment.objects.filter(study=study, excluded=False)
    for spec, payload in stored.values_list("item__spec", "payload"):
        rows.setdefault(spec["caption_id"], []).append(payload["rating"])
    return {caption: sum(v) / len(v) for caption, v in rows.items()}


def import_judge(study, name, answers: dict[int, dict]) -> int:
    text = "\n".join(json.dumps({"caption_id": c, "answer": a}) for c, a in answers.items())
    return judge_import(study=study, text=text, name=name)["judge"]


def exclude_caption(study, caption: Caption) -> None:
    """Every rating of the caption excluded: a unit the judge answers alone."""
    Judgment.objects.filter(study=study, item__spec__caption_id=caption.pk).update(excluded=True)


def vicr_layout(study):
    """Captions 0-1 (one per system) people only; 2-3 judge only; the rest both."""
    rows = captions(study)
    for caption in rows[2:4]:
        exclude_caption(study, caption)
    return rows[:2], rows[2:4], rows[4:]


def test_a_judge_biased_by_system_shows_its_offset_as_the_rectifier(vicr, researcher):
    people_only, judge_only, both = vicr_layout(vicr)
    means = kept_means(vicr)
    answers = {c.pk: {"rating": int(means[c.pk]) + OFFSET[c.system]} for c in both}
    answers |= {c.pk: {"rating": 3} for c in judge_only}
    # Every judged rating stays on the scale: the offset was chosen so.
    assert all(1 <= a["rating"] <= 5 for a in answers.values())
    import_judge(vicr, "biased", answers)

    section = report_of(vicr, researcher)["people_judge"]

    assert section["estimate"] == "mean" and section["score"] == "rating"
    assert section["design"]["kind"] == "all" and "error" not in section
    rows = by_system(section)
    assert sorted(rows) == ["A", "B"]
    for system, row in rows.items():
        # mean(y - yhat) over the labeled units: minus the judge's offset, exactly.
        assert row["rectifier"]["estimate"] == pytest.approx(-OFFSET[system])
        assert row["n_labeled"] == 4  # 8 both-answered captions, half per system
        assert row["n_judge"] == 5  # and one the judge answered alone
        assert row["n_people"] == 5  # and one people answered alone
        for key in ("people", "judge", "combined", "rectifier"):
            assert set(row[key]) == {"estimate", "low", "high", "se"}
        assert row["bootstrap"]["low"] <= row["bootstrap"]["high"]
    # The judge-only mean carries the bias; people's mean does not.
    a_people = [means[c.pk] for c in people_only + both if c.system == "A"]
    assert rows["A"]["people"]["estimate"] == pytest.approx(np.mean(a_people))


def test_the_combined_estimate_is_ppi_mean_of_the_rows_read_by_hand(vicr, researcher):
    people_only, judge_only, both = vicr_layout(vicr)
    means = kept_means(vicr)
    wobble = [0, 1, -1, 1, 0, -1, 1, 0]
    offset = {c.pk: {"rating": max(1, min(5, int(means[c.pk]) + 1))} for c in both}
    noisy = {
        c.pk: {"rating": max(1, min(5, int(means[c.pk]) + w))}
        for c, w in zip(both, wobble, strict=True)
    }
    noisy |= {c.pk: {"rating": 2 + n} for n, c in enumerate(judge_only)}
    import_judge(vicr, "a-offset", offset)
    chosen = import_judge(vicr, "b-noisy", noisy)
    settings = {**vicr.settings, "people_judge": chosen}
    study_update_settings(study=vicr, settings=settings)

    section = people_judge_report(vicr, resamples=200)

    assert section["judge"] == {"id": chosen, "name": "b-noisy"}
    assert {j["name"] for j in section["judges"]} == {"a-offset", "b-noisy"}
    rows = by_system(section)
    for system in ("A", "B"):
        labeled = [c for c in both if c.system == system]
        y = [means[c.pk] for c in labeled]
        yhat = [noisy[c.pk]["rating"] for c in labeled]
        unlabeled = [noisy[c.pk]["rating"] for c in judge_only if c.system == system]
        expected = ppi.ppi_mean(y, yhat, unlabeled, small_sample=True)
        row = rows[system]
        assert row["combined"] == pytest.approx(expected.interval.as_dict(), abs=1e-12)
        assert row["lam"] == pytest.approx(expected.lam, abs=1e-12)
        assert row["effective_n"] == pytest.approx(expected.effective_n, rel=1e-9)
        rectified = ppi.rectifier(y, yhat, small_sample=True).as_dict()
        assert row["rectifier"] == pytest.approx(rectified, abs=1e-12)
        assert row["judge"] == pytest.approx(ppi.judge_only(yhat + unlabeled).as_dict(), abs=1e-12)
        everyone = y + [means[c.pk] for c in people_only if c.system == system]
        people = ppi.people_only(everyone, small_sample=True).as_dict()
        assert row["people"] == pytest.approx(people, abs=1e-12)
    # The data the estimate reads: units by caption, the people-only ones left out.
    data = people_judge_data(vicr, judge_id=chosen)
    [a] = [s for s in data["systems"] if s.system == "A"]
    assert set(a.labeled) == {c.pk for c in both if c.system == "A"}
    assert set(a.unlabeled) == {c.pk for c in judge_only if c.system == "A"}
    assert list(a.ratings) == [3.0] * 4


def test_without_a_judge_the_section_says_why_and_the_report_stands(vicr, researcher):
    result = report_of(vicr, researcher)
    assert "judge" in result["people_judge"]["error"]
    assert result["people_judge"]["systems"] == []
    assert result["systems"] and result["agreement"]  # the mode's own report
    # An unknown judge id or score is an error of the section, not of the report.
    import_judge(vicr, "only", {c.pk: {"rating": 3} for c in captions(vicr)})
    study_update_settings(study=vicr, settings={**vicr.settings, "people_judge_score": "nope"})
    section = report_of(vicr, researcher)["people_judge"]
    assert "nope" in section["error"] and section["scores"] == []


def test_the_judge_and_score_settings_change_on_a_live_study(vicr):
    live = get_mode("vicr")
    Study.objects.filter(pk=vicr.pk).update(status=Study.Status.LIVE)
    vicr.refresh_from_db()
    changed = study_update_settings(
        study=vicr, settings={**vicr.settings, "people_judge": 5, "people_judge_score": "x"}
    )
    assert changed.settings["people_judge"] == 5
    assert live.settings(changed).people_judge_score == "x"
    from annotation.errors import ServiceError

    with pytest.raises(ServiceError, match="people_design"):
        study_update_settings(study=vicr, settings={**vicr.settings, "people_design": "often"})
    with pytest.raises(ServiceError, match="people_design change only while"):
        study_update_settings(study=vicr, settings={**vicr.settings, "people_design": "uniform"})


def test_judge_ids_are_never_needed_to_pick_the_first(vicr):
    """people_judge 0 takes the study's first judge in the judges' own order (by name)."""
    both = captions(vicr)
    import_judge(vicr, "zz-last", {c.pk: {"rating": 1} for c in both})
    import_judge(vicr, "aa-first", {c.pk: {"rating": 5} for c in both})
    data = people_judge_data(vicr)
    assert data["judge"]["name"] == "aa-first"
    assert Judge.objects.filter(study=vicr).count() == 2


def test_under_a_sampling_design_the_estimate_weighs_units_by_their_probability(vicr):
    """Items carry the design's probabilities (people_design_apply stores them): the
    combined estimate is active inference over every judged unit, people-only the
    self-normalised inverse-probability mean, both equal rubrics.ppi on rows read here.
    A uniform design is plain PPI++: its weights are constant."""
    people_only, judge_only, both = vicr_layout(vicr)
    means = kept_means(vicr)
    chance = {c.pk: 0.4 if n % 3 else 0.9 for n, c in enumerate(captions(vicr))}
    for item in Item.objects.filter(study=vicr):
        caption = item.spec.get("caption_id")
        if caption in chance:
            item.sampling_probability = chance[caption]
            item.sampling_design = "uncertainty"
            item.save(update_fields=["sampling_probability", "sampling_design"])
    wobble = [0, 1, -1, 1, 0, -1, 1, 0]
    answers = {
        c.pk: {"rating": max(1, min(5, int(means[c.pk]) + w))}
        for c, w in zip(both, wobble, strict=True)
    }
    answers |= {c.pk: {"rating": 2 + n} for n, c in enumerate(judge_only)}
    import_judge(vicr, "designed", answers)

    section = people_judge_report(vicr, resamples=50)

    assert section["design"]["kind"] == "uncertainty"
    # Items in the design, still served to people (target > 0), with no judgment at all.
    unanswered = [
        item
        for item in Item.objects.filter(study=vicr, sampling_probability__isnull=False)
        if item.target > 0 and not Judgment.objects.filter(item=item).exists()
    ]
    assert section["design"]["drawn_unanswered"] == len(unanswered)
    rows = by_system(section)
    for system in ("A", "B"):
        labeled = [c for c in both if c.system == system]
        alone = [c for c in judge_only if c.system == system]
        yhat = [answers[c.pk]["rating"] for c in labeled + alone]
        y = [means[c.pk] for c in labeled] + [float("nan")] * len(alone)
        mask = [True] * len(labeled) + [False] * len(alone)
        pi = [chance[c.pk] for c in labeled + alone]
        expected = ppi.active_mean(yhat, y, mask, pi, small_sample=True)
        row = rows[system]
        assert row["combined"] == pytest.approx(expected.interval.as_dict(), abs=1e-12)
        drawn = [chance[c.pk] for c in labeled]
        people = ppi.weighted_people_only(
            [means[c.pk] for c in labeled], drawn, small_sample=True
        ).as_dict()
        assert row["people"] == pytest.approx(people, abs=1e-12)
        assert row["bootstrap"] is None
    for item in Item.objects.filter(study=vicr, sampling_probability__isnull=False):
        item.sampling_design = "uniform"
        item.sampling_probability = 0.5
        item.save(update_fields=["sampling_probability", "sampling_design"])
    uniform = people_judge_report(vicr, resamples=50)
    assert uniform["design"]["kind"] == "uniform"
    for system, row in by_system(uniform).items():
        labeled = [c for c in both if c.system == system]
        alone = [c for c in judge_only if c.system == system]
        expected = ppi.ppi_mean(
            [means[c.pk] for c in labeled],
            [answers[c.pk]["rating"] for c in labeled],
            [answers[c.pk]["rating"] for c in alone],
            small_sample=True,
        )
        assert row["combined"] == pytest.approx(expected.interval.as_dict(), abs=1e-12)
        assert row["bootstrap"] is not None


def test_an_unforeseen_failure_keeps_the_modes_report_and_hides_its_text(
    vicr, researcher, monkeypatch
):
    """The section is secondary: a failure nobody foresaw leaves the mode's own report and
    names no internals (the exception's text may hold a query or a path)."""

    def broken(*args, **kwargs):
        raise RuntimeError("SELECT secret FROM /srv/capeval")

    without = {k: v for k, v in report_of(vicr, researcher).items() if k != "people_judge"}
    monkeypatch.setattr(reports, "people_judge_report", broken)
    result = report_of(vicr, researcher)
    assert {k: v for k, v in result.items() if k != "people_judge"}.keys() == without.keys()
    assert "RuntimeError" in result["people_judge"]["error"]
    assert "secret" not in json.dumps(result["people_judge"])


def test_a_judge_equal_to_people_stores_no_infinite_effective_n():
    """Combined variance 0 (the judge equals people on the labeled units, the unlabeled
    all alike, so the tuned lambda is 1) makes the ratio infinite: stored as None, which
    jsonb accepts, not Infinity, which PostgreSQL refuses."""
    data = SystemData(
        system="A",
        y=np.array([1.0, 2.0, 3.0, 4.0]),
        yhat=np.array([1.0, 2.0, 3.0, 4.0]),
        yhat_unlabeled=np.full(20, 2.5),
        y_people=np.array([1.0, 2.0, 3.0, 4.0]),
    )
    tuned = ppi.ppi_mean(data.y, data.yhat, data.yhat_unlabeled)
    assert tuned.lam == 1.0 and np.isinf(tuned.effective_n)  # the case, as the service meets it
    row = mean_row(data, alpha=0.05, resamples=20, seed=0)
    json.dumps(row, allow_nan=False)  # raises on Infinity or NaN
    assert row["effective_n"] is None or np.isfinite(row["effective_n"])
