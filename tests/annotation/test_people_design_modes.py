"""The sampling design in each way a mode maps units to items (issue 40): an item holding
an image's captions (THumB: its probability from the root mean square of its captions'
uncertainty, its stage-1 and stage-2 items drawn together), pairs asked both ways (the
arena), one unit asked of two groups of raters (context), an item of several pairs
(HUMANr), and a second judge's disagreement. Expected probabilities are worked by hand.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from annotation.errors import Conflict
from annotation.models import Assignment, Caption, Item
from annotation.modes import get_mode
from annotation.services.judges import judge_import
from annotation.services.people_design import people_design_apply, unit_sampling
from annotation.services.studies import study_create, study_open
from tests.factories.arena import arena_study
from tests.factories.context import context_study
from tests.factories.humanr import humanr_study
from tests.factories.spans import spans_study
from tests.factories.thumb import add_image

pytestmark = pytest.mark.django_db


def import_lines(study, rows, name="judge"):
    return judge_import(study=study, text="\n".join(json.dumps(r) for r in rows), name=name)


def drawn(study, units) -> random.Random:
    """The spec's draw for a group of units (sorted keys joined by commas)."""
    key = ",".join(str(unit) for unit in sorted(units))
    return random.Random(f"{study.seed}:{key}")


# --------------------------------------------------------------------------------- THumB


def test_thumb_image_probability_is_the_rms_of_its_captions(researcher):
    """Three images, two captions each, P over two runs: image a spreads [2, 0] (P 1/5 and
    3/3), b [1, 1] (2/4 and 2/4), c [0, 0]. RMS: sqrt(2), 1, 0. Share 0.5, floor 0.1:
    c * (sqrt(2) + 1) + 0.1 = 1.5, so a gets sqrt(2) * c, b gets c, c the floor. (A mean
    would give a and b the same 0.7.)"""
    study = study_create(
        owner=researcher,
        name="THumB design",
        mode="thumb",
        settings={"people_design": "uncertainty", "people_share": 0.5, "people_floor": 0.1},
        seed=11,
    )
    images = {}
    for name in ("a", "b", "c"):
        images[name] = add_image(
            study, name, [("Human", f"a photo {name} of a dog"), ("Up-Down", f"a dog {name}")]
        )
    study_open(study=study)
    p_runs = {"a": [(1, 5), (3, 3)], "b": [(2, 4), (2, 4)], "c": [(4, 4), (4, 4)]}
    rows = []
    for name, image in images.items():
        captions = Caption.objects.filter(image=image).order_by("line")
        for caption, pair in zip(captions, p_runs[name], strict=True):
            for run, precision in enumerate(pair):
                answer = {"precision": precision, "recall": 3}
                rows.append({"caption_id": caption.pk, "run": run, "answer": answer})
    import_lines(study, rows)
    summary = people_design_apply(study=study, user=researcher)
    assert summary["uncertainty"] == "runs" and summary["score"] == "P"
    scale = 1.4 / (math.sqrt(2) + 1)
    expected = {"a": math.sqrt(2) * scale, "b": scale, "c": 0.1}
    items = Item.objects.filter(study=study)
    assert {item.kind for item in items} == {"stage1", "stage2"}
    sampling = unit_sampling(study)
    for name, image in images.items():
        own = [item for item in items if item.image_id == image.pk]
        assert len(own) == 2  # stage 1 and stage 2: one group, one draw
        captions = sorted(Caption.objects.filter(image=image).values_list("pk", flat=True))
        chosen = drawn(study, captions).random() < expected[name]
        for item in own:
            assert item.sampling_probability == pytest.approx(expected[name])
            assert item.target == (1 if chosen else 0)
        for caption in captions:
            assert sampling[caption][0] == pytest.approx(expected[name])
            assert sampling[caption][1] is chosen
    # What an annotator's page says the study has: the images drawn for people only.
    kept = sum(1 for item in items if item.kind == "stage1" and item.target > 0)
    progress = get_mode("thumb").pages._progress(Assignment(), study)
    assert progress["images"] == kept and progress["left"] == 2 * kept


# --------------------------------------------------------------------------------- arena


def test_arena_swapped_pairs_give_the_uncertainty(researcher):
    """Each battle asked both ways. On the first half the judge names the same winner both
    ways (uncertainty 0); on the rest it always picks the caption shown first (uncertainty
    1). With k unsure of m units, share 0.5 and floor 0.1: the unsure get
    (0.5 m - 0.1 (m - k)) / k, capped at 1."""
    study = arena_study(
        researcher,
        images=4,
        people_design="uncertainty",
        people_share=0.5,
        people_floor=0.1,
        battle_target=2,
    )
    battles = list(Item.objects.filter(study=study, kind="battle").order_by("position"))
    m = len(battles)
    keys = [
        (
            min(b.spec["caption_a"], b.spec["caption_b"]),
            max(b.spec["caption_a"], b.spec["caption_b"]),
        )
        for b in battles
    ]
    assert len(set(keys)) == m
    unsure = set(keys[m // 2 :])
    rows = []
    for low, high in keys:
        # Shown (low, high), then (high, low). Consistent: the low id wins both times.
        second = "a" if (low, high) in unsure else "b"
        rows.append({"caption_a": low, "caption_b": high, "answer": {"outcome": "a"}})
        rows.append({"caption_a": high, "caption_b": low, "answer": {"outcome": second}})
    import_lines(study, rows)
    summary = people_design_apply(study=study, user=researcher)
    assert summary["uncertainty"] == "swaps"
    k = len(unsure)
    high_p = min(1.0, (0.5 * m - 0.1 * (m - k)) / k)
    sampling = unit_sampling(study)
    assert set(sampling) == set(keys)
    for battle, key in zip(battles, keys, strict=True):
        battle.refresh_from_db()
        p = high_p if key in unsure else 0.1
        assert battle.sampling_probability == pytest.approx(p)
        assert battle.target == (2 if drawn(study, [key]).random() < p else 0)


def test_arena_one_way_answers_give_no_uncertainty(researcher):
    study = arena_study(researcher, images=2, people_design="uncertainty")
    battles = Item.objects.filter(study=study, kind="battle")
    import_lines(study, [{"item_id": b.pk, "answer": {"outcome": "a"}} for b in battles])
    with pytest.raises(Conflict, match="ask every pair both ways"):
        people_design_apply(study=study, user=researcher)


# ------------------------------------------------------------------------------- context


def test_context_unit_asked_of_two_groups_is_drawn_once(researcher):
    study = context_study(researcher, images=3, people_design="uniform", people_share=0.5, seed=21)
    judging = get_mode("context").judging
    units = judging.units(study)
    answer = {"overall": 3, "imaginability": 3, "relevance": 3, "irrelevance": 3, "accuracy": 3}
    import_lines(study, [{"item_id": item, "answer": answer} for item, _, _ in units])
    people_design_apply(study=study, user=researcher)
    by_unit: dict[tuple, set] = {}
    for item in Item.objects.filter(study=study):
        key = (item.spec["caption"], item.spec["context"])
        by_unit.setdefault(key, set()).add((item.target > 0, item.sampling_probability))
    assert len(by_unit) == len(units)
    for key, seen in by_unit.items():
        assert seen == {(drawn(study, [key]).random() < 0.5, 0.5)}
    assert Item.objects.filter(study=study).count() > len(units)  # two groups of raters
    # The dashboard's panel: left-out items are neither asked nor finished.
    panel = get_mode("context").dashboard.panel_context(study)
    cells = [cell for row in panel["domains"] for cell in row["cells"] if cell]
    asked = Item.objects.filter(study=study, target__gt=0)
    assert sum(cell["items"] for cell in cells) == asked.count()
    assert sum(cell["finished"] for cell in cells) == 0
    assert sum(cell["wanted"] for cell in cells) == sum(i.target for i in asked)


# -------------------------------------------------------------------------------- HUMANr


def test_humanr_group_of_pairs_shares_one_draw(researcher):
    study = humanr_study(researcher, images=6, people_design="uniform", people_share=0.5)
    judging = get_mode("humanr").judging
    units = judging.units(study)
    import_lines(
        study, [{"caption_a": a, "caption_b": b, "answer": {"raw": 3}} for _, a, b in units]
    )
    people_design_apply(study=study, user=researcher)
    sampling = unit_sampling(study)
    pairs_of: dict[int, list] = {}
    for item, a, b in units:
        pairs_of.setdefault(item, []).append((min(a, b), max(a, b)))
    assert set(sampling) == {pair for pairs in pairs_of.values() for pair in pairs}
    for item in Item.objects.filter(study=study, kind="group"):
        chosen = drawn(study, pairs_of[item.pk]).random() < 0.5
        assert item.sampling_probability == 0.5
        assert (item.target > 0) is chosen
        assert {sampling[pair] for pair in pairs_of[item.pk]} == {(0.5, False)}


# --------------------------------------------------------------------------- second judge


def test_second_judge_disagreement_is_the_uncertainty(researcher):
    """Judges one and two disagree by 20 on image 0's captions and agree on image 1's:
    the first get 0.9, the others the floor (as in the runs case, 2c*20 + 0.2 = 2)."""
    study = spans_study(
        researcher, images=2, people_design="uncertainty", people_share=0.5, target=2
    )
    items = list(Item.objects.filter(study=study).order_by("position"))
    first_image = items[0].image_id
    apart = {item.pk: item.image_id == first_image for item in items}

    def lines(offset):
        return [
            {"item_id": i.pk, "answer": {"spans": [], "score": 50 + (offset if apart[i.pk] else 0)}}
            for i in items
        ]

    one = import_lines(study, lines(0), name="one")["judge"]
    two = import_lines(study, lines(20), name="two")["judge"]
    study.settings = {**study.settings, "people_judge": one, "people_judge_second": two}
    study.save(update_fields=["settings"])
    summary = people_design_apply(study=study, user=researcher)
    assert summary["uncertainty"] == "second_judge" and summary["judge"]["id"] == one
    for item in Item.objects.filter(study=study):
        assert item.sampling_probability == pytest.approx(0.9 if apart[item.pk] else 0.1)

    study.settings = {**study.settings, "people_judge_second": one}
    study.save(update_fields=["settings"])
    with pytest.raises(Conflict, match="judge itself"):
        people_design_apply(study=study, user=researcher)
