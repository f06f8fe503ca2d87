"""FLEUR (Lee et al., ACL 2024) reproduced through the platform: its released per-caption
scores imported as a metric column (``import_metric_scores``) beside the Flickr8k-Expert and
Pascal-50S studies (``import_ratings``), reported by a metrics job that computes nothing
(``POST /api/studies/<id>/metrics/`` with ``metrics: []``) and read from the report API.

Published (FLEUR's paper; ../shared/datasets/README.md recomputes them from the files):
Flickr8k-Expert Kendall tau-c 53.0 (each of the 3 expert ratings paired with the caption's
score); Pascal-50S accuracy HC 61.3, HI 99.7, HM 97.6, MM 74.2 with a tie counted as a miss.
The tests with ../shared skip cleanly without it; the bad-input tests use small hand-made
files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy import stats

from annotation.models import Caption, Study

pytestmark = pytest.mark.django_db

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
FLEUR = DATASETS / "fleur-scores"
FLICKR = DATASETS / "flickr8k-expert" / "flickr8k_expert.json"
PASCAL = DATASETS / "pascal-50s" / "pascal_50s.json"
PASCAL_PUBLISHED = {"HC": 61.3, "HI": 99.7, "HM": 97.6, "MM": 74.2}  # ties as misses


def _needs(*paths: Path) -> None:
    for path in paths:
        if not path.exists():
            pytest.skip(f"{path} is absent (a fresh clone has no ../shared)")


def _report(client, owner, study: Study, capture) -> dict:
    """Report the study's imported columns through the API, as a researcher would."""
    client.force_login(owner)
    url = f"/api/studies/{study.pk}/metrics/"
    with capture(execute=True):
        started = client.post(url, {"metrics": [], "resamples": 0}, content_type="application/json")
    assert started.status_code == 202, started.content
    body = client.get(url).json()
    assert body["job"]["id"] == started.json()["id"] and body["job"]["status"] == "done"
    return body["report"]


def _fleur_blocks(path: Path) -> list[dict[str, list[str]]]:
    """An independent reading of FLEUR's file for the check below (not the importer's)."""
    out = []
    text = path.read_text(encoding="utf-8").split("\ntrue count :")[0]  # FLEUR's own summary
    for block in re.split(r"\n(?=image file : )", text.strip()):
        fields: dict[str, list[str]] = {}
        for line in filter(str.strip, block.splitlines()):
            key, _, value = line.partition(" : ")
            fields.setdefault(key.strip(), []).append(value.strip())
        out.append(fields)
    return out


def test_flickr8k_expert_kendall_tau_c_through_the_platform(
    make_user, client, django_capture_on_commit_callbacks, capsys
):
    _needs(FLICKR, FLEUR)
    owner = make_user("fleur-owner", researcher=True)
    call_command(
        "import_ratings", "--format", "flickr8k-expert", str(FLICKR), "--owner", owner.username
    )
    study = Study.objects.get(owner=owner)
    call_command(
        "import_metric_scores",
        study.pk,
        str(FLEUR / "fleur_flickr8k_expert.txt"),
        "--name",
        "FLEUR",
    )
    assert "FLEUR stored for 5664 captions (0 captions without a score)" in capsys.readouterr().out
    report = _report(client, owner, study, django_capture_on_commit_callbacks)
    assert report["computed"] == [] and report["metrics"] == ["FLEUR"]
    assert report["coefficient"] == "kendall_tau_c"
    cell = report["correlations"]["rating"]["FLEUR"]["with Human"]
    assert cell["n"] == 16992  # 5,664 captions x 3 expert ratings
    assert 100 * cell["value"] == pytest.approx(53.0, abs=0.3)
    # The same number from the two files directly, with scipy (no platform code).
    data = json.loads(FLICKR.read_text(encoding="utf-8"))
    score = {
        (b["image file"][0].rsplit("/", 1)[-1].rsplit(".", 1)[0], b["caption"][0]): float(
            b["our score"][0]
        )
        for b in _fleur_blocks(FLEUR / "fleur_flickr8k_expert.txt")
    }
    pairs = [
        (score[(image, j["caption"].strip())], j["rating"])
        for image, entry in data.items()
        for j in entry["human_judgement"]
    ]
    tau = stats.kendalltau(*zip(*pairs, strict=True), variant="c").statistic
    assert cell["value"] == pytest.approx(tau, abs=1e-12)


def test_pascal50s_accuracy_through_the_platform(
    make_user, client, django_capture_on_commit_callbacks, capsys
):
    """Tie rule: a tie (FLEUR scores both captions equal) counts as a miss, as FLEUR's
    paper; the study's labels are Pascal-50S's own (pascal_50s.json), which differ from
    the labels in FLEUR's files in a few pairs (counted by the importer)."""
    _needs(PASCAL, FLEUR)
    owner = make_user("fleur-pascal", researcher=True)
    call_command("import_ratings", "--format", "pascal-50s", str(PASCAL), "--owner", owner.username)
    study = Study.objects.get(owner=owner)
    files = [str(FLEUR / f"fleur_pascal_{c}.txt") for c in PASCAL_PUBLISHED]
    call_command("import_metric_scores", study.pk, *files, "--name", "FLEUR")
    out = capsys.readouterr().out
    assert "FLEUR stored for 8000 captions (0 captions without a score). 4000 pairs" in out
    differs = int(re.search(r"differs from the study's in (\d+)", out).group(1))
    report = _report(client, owner, study, django_capture_on_commit_callbacks)
    assert report["tie_rules"]["ties_as_misses"].startswith("a tie counts as wrong")
    data = json.loads(PASCAL.read_text(encoding="utf-8"))
    label_changes = 0
    for category, published in PASCAL_PUBLISHED.items():
        cell = report["pairwise"][category]["metrics"]["FLEUR"]
        assert cell["n"] == 1000
        assert 100 * cell["ties_as_misses"] == pytest.approx(published, abs=0.5)
        # Independently: FLEUR's two scores per pair against pascal_50s.json's label,
        # pairs matched by position and caption texts (a pair listed the other way round
        # has its scores swapped).
        right = ties = 0
        for block, item in zip(
            _fleur_blocks(FLEUR / f"fleur_pascal_{category}.txt"), data[category], strict=True
        ):
            a, b = map(float, block["our score"])
            if block["caption"] == [c.strip() for c in reversed(item["captions"])]:
                a, b = b, a
            else:
                assert block["caption"] == [c.strip() for c in item["captions"]]
            label = int(block["label"][0])
            label_changes += label != item["label"] and block["caption"][0] != block["caption"][1]
            ties += a == b
            right += (a > b and item["label"] == 0) or (b > a and item["label"] == 1)
        assert cell["ties_as_misses"] == right / 1000
        assert cell["ties_as_half"] == (right + ties / 2) / 1000
        assert cell["metric_ties"] == ties
    assert differs <= label_changes + 1  # a swapped pair's label is compared swapped


# ---------------------------------------------------------------------- bad input


def _small_study(make_user, tmp_path) -> tuple[Study, object]:
    owner = make_user("small", researcher=True)
    data = {
        "img1": {
            "ground_truth": ["a dog"],
            "human_judgement": [
                {
                    "image_id": "img1",
                    "image_path": "Flickr8k_Dataset/img1.jpg",
                    "caption": c,
                    "rating": r,
                }
                for c, rs in (("a dog runs", (1, 2, 3)), ("a cat sits", (2, 3, 4)))
                for r in rs
            ],
        }
    }
    path = tmp_path / "f.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    call_command(
        "import_ratings", "--format", "flickr8k-expert", str(path), "--owner", owner.username
    )
    return Study.objects.get(owner=owner), owner


def _fleur_file(tmp_path: Path, entries: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "scores.txt"
    path.write_text(
        "\n".join(
            f"image file : {image}\ncaption : {caption}\nmodel score : 0.5\nour score : {score}\n"
            for image, caption, score in entries
        ),
        encoding="utf-8",
    )
    return path


def test_scores_are_stored_by_image_and_caption(make_user, tmp_path):
    study, _ = _small_study(make_user, tmp_path)
    path = _fleur_file(
        tmp_path,
        [("Flickr8k_Dataset/img1.jpg", "a cat sits", "0.25"), ("img1.jpg", "a dog runs", "0.75")],
    )
    call_command("import_metric_scores", study.pk, str(path), "--name", "FLEUR")
    stored = dict(Caption.objects.filter(study=study).values_list("raw_text", "metrics"))
    assert stored == {"a dog runs": {"FLEUR": 0.75}, "a cat sits": {"FLEUR": 0.25}}


@pytest.mark.parametrize(
    ("entries", "name", "message"),
    [
        (
            [("img1.jpg", "a bird flies", "0.5")],
            "FLEUR",
            r"scores.txt line 6: no caption 'a bird flies' of image img1",
        ),
        ([("img2.jpg", "a dog runs", "0.5")], "FLEUR", r"no caption 'a dog runs' of image img2"),
        (
            [("img1.jpg", "a dog runs", "high")],
            "FLEUR",
            r"scores.txt line 9: 'high' is not a number",
        ),
        ([("img1.jpg", "a dog runs", "nan")], "FLEUR", r"'nan' is not a finite number"),
        (
            [("img1.jpg", "a dog runs", "0.5")],
            "CIDEr (pycocoevalcap)",
            r"a metric the lab computes",
        ),
        ([("img1.jpg", "a dog runs", "0.5")], "  ", r"metric name is empty"),
    ],
)
def test_bad_scores_file_writes_nothing(make_user, tmp_path, entries, name, message):
    study, _ = _small_study(make_user, tmp_path)
    good = [("img1.jpg", "a cat sits", "0.5")]  # a good entry is not written either
    path = _fleur_file(tmp_path, good + entries)
    with pytest.raises(CommandError, match=message):
        call_command("import_metric_scores", study.pk, str(path), "--name", name)
    assert all(
        m == {} for m in Caption.objects.filter(study=study).values_list("metrics", flat=True)
    )


def test_report_without_a_metric_needs_an_imported_column(
    make_user, tmp_path, client, django_capture_on_commit_callbacks
):
    study, owner = _small_study(make_user, tmp_path)
    client.force_login(owner)
    refused = client.post(
        f"/api/studies/{study.pk}/metrics/", {"metrics": []}, content_type="application/json"
    )
    assert refused.status_code == 409  # the study's state refuses it, not the request
    assert "imported metric columns" in refused.json()["metrics"][0]
    with pytest.raises(CommandError, match="imported metric columns"):
        call_command("compute_metrics", study.pk, "--report-only", "--no-wait")
    path = _fleur_file(
        tmp_path, [("img1.jpg", "a cat sits", "0.9"), ("img1.jpg", "a dog runs", "0.1")]
    )
    call_command("import_metric_scores", study.pk, str(path), "--name", "FLEUR")
    report = _report(client, owner, study, django_capture_on_commit_callbacks)
    cell = report["correlations"]["rating"]["FLEUR"]["with Human"]
    ratings = [1, 2, 3, 2, 3, 4]
    scores = [0.1] * 3 + [0.9] * 3
    assert cell["value"] == pytest.approx(
        stats.kendalltau(scores, ratings, variant="c").statistic, abs=1e-12
    )
    assert np.isfinite(cell["value"])
