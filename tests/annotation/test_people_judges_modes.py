"""People + judge estimates (issue 40) in THumB, HUMANr, the arena, spans and context
studies: each report carries the section, with hand-worked rectifiers where the judge is
people plus a per-system offset, and people's values read from the Judgment table here."""

from __future__ import annotations

import io
import json
from collections import defaultdict

import numpy as np
import pytest
from django.core.management import call_command

from annotation.models import Caption, Item, Judgment, Study
from annotation.modes import get_mode
from annotation.services.imports.releases import release_import
from annotation.services.judges import judge_import
from annotation.services.people_judges import people_judge_data
from annotation.services.studies import study_update_settings
from rubrics import ppi
from tests.factories import context as context_factory
from tests.factories import spans as spans_factory
from tests.factories.humanr import answer_every_group, humanr_study
from tests.factories.metrics import CAPTIONS, write_release
from tests.factories.reports import by_system, report_of

pytestmark = pytest.mark.django_db


def import_lines(study, name, rows) -> int:
    return judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name=name)[
        "judge"
    ]


# ------------------------------------------------------------------------------ THumB


def test_thumb_precision_and_recall_each_get_their_own_rectifier(researcher, tmp_path):
    study = release_import(
        fmt="thumb-1.0", owner=researcher, path=write_release(tmp_path / "release.jsonl")
    ).study
    # The judge: people's P moved by a per-system offset (kept on 1-5), people's R as is.
    offset = {"Human": -1, "SysA": -1, "SysB": 1}
    released = {text: (system, p, r) for rows in CAPTIONS.values() for system, text, p, r in rows}
    lines = []
    for caption in Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY):
        system, p, r = released[caption.text]
        answer = {
            "precision": p + offset[system],
            "recall": r,
            "fluency_errors": {},
            "conciseness": 0,
            "inclusive": 0,
        }
        lines.append({"caption_id": caption.pk, "answer": answer})
    import_lines(study, "thumb-judge", lines)

    section = report_of(study, researcher)["people_judge"]
    assert section["estimate"] == "mean"
    assert section["scores"][:3] == ["P", "R", "Total"] and section["score"] == "P"
    rows = by_system(section)
    assert sorted(rows) == ["Human", "SysA", "SysB"]
    for system, row in rows.items():
        assert row["rectifier"]["estimate"] == pytest.approx(-offset[system])
        assert row["n_labeled"] == 4 == row["n_people"]
        people_p = [p for rows_ in CAPTIONS.values() for s, _, p, _ in rows_ if s == system]
        assert row["people"]["estimate"] == pytest.approx(np.mean(people_p))

    # The score setting picks R: the judge gives people's own R, so no rectifier.
    study_update_settings(study=study, settings={**study.settings, "people_judge_score": "R"})
    section = report_of(study, researcher)["people_judge"]
    assert section["score"] == "R"
    for row in section["systems"]:
        assert row["rectifier"]["estimate"] == pytest.approx(0.0)


# ------------------------------------------------------------------------------ HUMANr


def test_humanr_share_is_people_s_mean_comparison_value_per_unit(researcher):
    study = humanr_study(researcher, images=6, humans=2, systems=("GIT", "ClipCap"))
    answer_every_group(study, {"GIT": -0.5, "ClipCap": 0.25, "Human": 0.0}, seed=3)
    judging = get_mode("humanr").judging
    # The judge always prefers the caption shown second, shown the compared one second.
    units = judging.units(study)
    import_lines(
        study,
        "second",
        [{"caption_a": a, "caption_b": b, "answer": {"raw": 9}} for _, a, b in units],
    )
    # People's values by hand: kept comparisons (honest workers pass every check),
    # oriented to the compared caption (value > 0: it was preferred).
    values: dict[tuple[int, int], list[float]] = defaultdict(list)
    system_of = {}
    for result in Judgment.objects.filter(study=study, excluded=False).values_list(
        "result", flat=True
    ):
        if result.get("kind") != "comparison":
            continue
        reference, other = result["reference_caption_id"], result["other_caption_id"]
        unit = (min(reference, other), max(reference, other))
        values[unit].append(result["value"])
        system_of[unit] = result["system"]

    section = report_of(study, researcher)["people_judge"]
    assert section["estimate"] == "share" and section["score"] == "HUMANr"
    rows = by_system(section)
    for system in ("GIT", "ClipCap"):
        y = [np.mean(v) for u, v in values.items() if system_of[u] == system]
        row = rows[system]
        assert row["n_people"] == len(y) and len(y) >= 2
        assert row["people"]["estimate"] == pytest.approx(np.mean(y))
        # The judge says +1 (the compared caption, only it matches) on every unit.
        assert row["judge"]["estimate"] == pytest.approx(1.0)
        assert row["rectifier"]["estimate"] == pytest.approx(np.mean(y) - 1.0)
    assert rows["GIT"]["people"]["estimate"] < rows["ClipCap"]["people"]["estimate"]
    # Asked the other way round (the compared caption first, slider at 1: only the first
    # matches), a judge says the same: +1 toward the compared caption on every unit.
    swapped = import_lines(
        study,
        "swapped",
        [{"caption_a": b, "caption_b": a, "answer": {"raw": 1}} for _, a, b in units],
    )
    data = people_judge_data(study, judge_id=swapped)
    for entry in data["systems"]:
        assert list(entry.yhat) == [1.0] * len(entry.yhat) and len(entry.yhat) >= 2


# ------------------------------------------------------------------------------ arena

BATTLES = [
    ("alpha", "beta", "model_a"), ("alpha", "beta", "model_a"), ("alpha", "beta", "model_b"),
    ("beta", "gamma", "model_a"), ("beta", "gamma", "tie"), ("beta", "gamma", "model_a"),
    ("alpha", "gamma", "model_a"), ("alpha", "gamma", "model_a"), ("gamma", "alpha", "model_a"),
    ("alpha", "beta", "model_a"), ("beta", "gamma", "model_b"), ("alpha", "gamma", "tie"),
]  # fmt: skip


@pytest.fixture
def arena(researcher, tmp_path) -> Study:
    log = tmp_path / "arena.jsonl"
    rows = [
        {"model_a": a, "model_b": b, "winner": w, "judge": f"j{n % 3}", "image": f"i{n}",
         "caption_a": f"{a} says {n}", "caption_b": f"{b} says {n}"}
        for n, (a, b, w) in enumerate(BATTLES)
    ]  # fmt: skip
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    call_command(
        "import_ratings", str(log), "--format", "battles", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    return Study.objects.get(owner=researcher)


def test_arena_bradley_terry_with_the_judge_beside_people(arena, researcher):
    verdicts = {
        item: winner
        for item, winner in Judgment.objects.filter(study=arena).values_list(
            "item_id", "result__winner"
        )
    }
    items = sorted(
        Item.objects.filter(study=arena, kind="battle"),
        key=lambda item: Caption.objects.get(pk=item.spec["caption_a"]).text,
    )
    # The judge gives people's verdict (a: the caption shown first, the item's a) on ten
    # battles, the other side's on two of them; it leaves the last two alone.
    outcome = {"model_a": "a", "model_b": "b", "tie": "tie"}
    flipped = {"a": "b", "b": "a", "tie": "tie"}
    lines = []
    for number, item in enumerate(items[:10]):
        said = outcome[verdicts[item.pk]]
        lines.append(
            {"item_id": item.pk, "answer": {"outcome": flipped[said] if number < 2 else said}}
        )
    import_lines(arena, "mostly-agrees", lines)

    section = report_of(arena, researcher)["people_judge"]
    assert section["estimate"] == "bradley_terry"
    assert "error" not in section, section["error"]
    rows = section["systems"]
    names = [row["system"] for row in rows]
    assert names == ["alpha", "beta", "gamma"]
    # Battles each system was in, counted from the log.
    counts = defaultdict(int)
    for a, b, _ in BATTLES:
        counts[a] += 1
        counts[b] += 1
    for row in rows:
        assert row["n_people"] == counts[row["system"]]
        for key in ("people", "judge", "combined"):
            assert 1 <= row[key]["rank_low"] <= row[key]["rank_high"] <= 3
    assert sum(row["combined"]["estimate"] for row in rows) == pytest.approx(0.0, abs=1e-9)
    # People-only: the fit of every vote, rows written here in each item's own order (the
    # fit does not depend on which side a row names first).
    share = {"model_a": 0.0, "model_b": 1.0, "tie": 0.5}
    index = {name: i for i, name in enumerate(names)}
    hand = [
        (index[spec["system_a"]], index[spec["system_b"]], share[winner])
        for spec, winner in Judgment.objects.filter(study=arena).values_list(
            "item__spec", "result__winner"
        )
    ]
    alone = ppi.bradley_terry(hand, hand, np.zeros((0, 3)), 3, lam=0.0)
    for s, row in enumerate(rows):
        assert row["people"]["estimate"] == pytest.approx(alone["scores"][s], abs=1e-6)
        # Every judged battle has a vote: no judge-only battle, so lambda is 0.
        assert row["lam"] == 0.0
    data = people_judge_data(arena)
    assert data["battles"]["human"].shape == (10, 3)
    assert data["battles"]["judge_unlabeled"].shape == (0, 3)


# ------------------------------------------------------------------------------ spans

SPAN_OFFSET = {"alpha": 10.0, "beta": -10.0}


def test_spans_score_rectifier_is_minus_the_offset(researcher):
    study = spans_factory.spans_study(researcher, images=3)
    for number in range(12):
        person = spans_factory.worker(study, f"w{number}")
        while True:
            lease, _ = spans_factory.judge(
                person,
                lambda lease, text, n=number: {
                    "spans": "[]",
                    "score": 40 + 5 * n + (20 if lease.item.spec["system"] == "alpha" else 0),
                },
            )
            if lease is None:
                break
    means: dict[int, list[float]] = defaultdict(list)
    for spec, payload in Judgment.objects.filter(study=study, excluded=False).values_list(
        "item__spec", "payload"
    ):
        means[spec["caption"]].append(payload["score"])
    assert len(means) == 6
    system = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
    import_lines(
        study,
        "offset",
        [
            {"caption_id": c, "answer": {"spans": [], "score": np.mean(v) + SPAN_OFFSET[system[c]]}}
            for c, v in means.items()
        ],
    )
    section = report_of(study, researcher)["people_judge"]
    assert section["score"] == "score"
    for name, row in by_system(section).items():
        assert row["rectifier"]["estimate"] == pytest.approx(-SPAN_OFFSET[name])
        assert row["n_labeled"] == 3


# ------------------------------------------------------------------------------ context


def test_context_units_are_a_description_in_a_context(researcher):
    study = context_factory.context_study(researcher, images=2)
    for number in range(6):
        person = context_factory.rater(study, "sighted", name=f"s{number}")
        while context_factory.rate(person) is not None:
            pass
    units = {}
    for item in Item.objects.filter(study=study):
        units.setdefault((item.spec["caption"], item.spec["context"]), item)
    system = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
    offset = {"good-detail": 1, "bad-short": -1}
    # People answered overall 4 before the image (the factory's answer): the judge 4 +/- 1.
    lines = []
    for (caption, _), item in units.items():
        value = 4 + offset[system[caption]]
        answer = {"overall": value, "imaginability": 3, "relevance": 3, "irrelevance": 3}
        lines.append({"item_id": item.pk, "answer": answer | {"accuracy": 3}})
    import_lines(study, "context-judge", lines)
    settings = {**study.settings, "people_judge_score": "overall (sighted)"}
    study_update_settings(study=study, settings=settings)

    section = report_of(study, researcher)["people_judge"]
    assert section["score"] == "overall (sighted)"
    rows = by_system(section)
    assert sorted(rows) == sorted(offset)
    for name, row in rows.items():
        assert row["rectifier"]["estimate"] == pytest.approx(-offset[name])
    data = people_judge_data(study, score="overall (sighted)")
    keyed = {unit for s in data["systems"] for unit in s.labeled + s.unlabeled}
    assert keyed == set(units)
