"""Nebula (nebula_test.json: 3,298 captions, 5-10 references each, a human score in [0, 1])
through ``import_ratings --format nebula`` and the metric lab: the report's correlations
equal an independent computation on the file (sacrebleu and rouge-score run here on the
file's texts, scipy's Kendall tau-c against the file's scores). The test with ../shared
skips cleanly without it; the bad-input tests use small hand-made files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu
from django.core.management import CommandError, call_command
from rouge_score import rouge_scorer
from scipy import stats

from annotation.models import Caption, DatasetScore, Reference, Study

pytestmark = pytest.mark.django_db

NEBULA = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "polaris-nebula"
BLEU, ROUGE = "BLEU-4 (sacrebleu)", "ROUGE-L (rouge-score)"


def _compute(client, owner, study, capture, names) -> dict:
    client.force_login(owner)
    url = f"/api/studies/{study.pk}/metrics/"
    with capture(execute=True):
        started = client.post(
            url, {"metrics": names, "resamples": 0}, content_type="application/json"
        )
    assert started.status_code == 202, started.content
    body = client.get(url).json()
    assert body["job"]["status"] == "done"
    return body["report"]


def test_nebula_correlations_equal_scipy_on_the_file(
    make_user, client, django_capture_on_commit_callbacks, capsys
):
    path = NEBULA / "nebula_test.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent (a fresh clone has no ../shared)")
    data = json.loads(path.read_text(encoding="utf-8"))
    owner = make_user("nebula-owner", researcher=True)
    call_command("import_ratings", "--format", "nebula", str(path), "--owner", owner.username)
    study = Study.objects.get(owner=owner)
    refs = sum(len(e["refs"]) for e in data)
    assert f"3298 captions, {refs} references, 3298 human scores, closed" in capsys.readouterr().out
    assert study.status == Study.Status.CLOSED
    report = _compute(client, owner, study, django_capture_on_commit_callbacks, [BLEU, ROUGE])
    assert report["captions_scored"] == 3298 and report["coefficient"] == "kendall_tau_c"
    human = [e["score"] for e in data]
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    independent = {
        BLEU: [sacrebleu.sentence_bleu(e["mt"], e["refs"]).score for e in data],
        ROUGE: [max(scorer.score(r, e["mt"])["rougeL"].fmeasure for r in e["refs"]) for e in data],
    }
    for name, scores in independent.items():
        cell = report["correlations"]["human score"][name]["with Human"]
        assert cell["n"] == 3298
        expected = stats.kendalltau(scores, human, variant="c").statistic
        assert cell["value"] == pytest.approx(expected, abs=1e-9), name


# ---------------------------------------------------------------------- bad input


def _entry(**changes):
    entry = {"imgid": "img1", "mt": "a dog runs", "refs": ["a dog", "a brown dog"], "score": 0.5}
    return {**entry, **changes}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (_entry(score=1.5), r"entry 1: score 1.5 is not in \[0, 1\]"),
        (_entry(score="high"), r"entry 1: score must be a number"),
        (_entry(refs=[]), r"entry 1: refs must be a non-empty list"),
        (_entry(mt="  "), r"entry 1: mt \(the caption\) must be a non-empty text"),
        (_entry(mt="a\x00dog"), r"entry 1: mt contains the control character"),
        (_entry(refs=["other refs"]), r"entry 1: imgid 'img1' appears before with other refs"),
    ],
)
def test_a_bad_entry_imports_nothing(researcher, tmp_path, entry, message):
    path = tmp_path / "nebula.json"
    path.write_text(json.dumps([_entry(), entry]), encoding="utf-8")
    with pytest.raises(CommandError, match=message):
        call_command("import_ratings", "--format", "nebula", str(path), "--owner", "rita")
    assert not Study.objects.exists()
    assert not (Caption.objects.exists() or Reference.objects.exists())
    assert not DatasetScore.objects.exists()


def test_a_small_file_gives_hand_worked_tau_c(
    researcher, tmp_path, client, django_capture_on_commit_callbacks
):
    """Three captions of two images: the report's tau-c is the hand formula's."""
    entries = [
        {
            "imgid": "a",
            "mt": "a brown dog runs on grass",
            "refs": ["a brown dog runs on grass"],
            "score": 1.0,
        },
        {"imgid": "a", "mt": "a dog", "refs": ["a brown dog runs on grass"], "score": 0.25},
        {
            "imgid": "b",
            "mt": "a red car parked",
            "refs": ["a red car parked on a street"],
            "score": 0.0,
        },
    ]
    path = tmp_path / "nebula.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    call_command("import_ratings", "--format", "nebula", str(path), "--owner", "rita")
    study = Study.objects.get(owner=researcher)
    assert Reference.objects.filter(study=study).count() == 2  # once per image
    report = _compute(client, researcher, study, django_capture_on_commit_callbacks, [BLEU])
    bleu = {c.raw_text: c.metrics[BLEU] for c in Caption.objects.filter(study=study)}
    assert bleu["a brown dog runs on grass"] == pytest.approx(100.0)
    score = {e["mt"]: e["score"] for e in entries}
    assert len(set(bleu.values())) == 3  # no tie: tau-c's formula below needs none
    texts = list(score)
    signs = [
        (bleu[x] - bleu[y]) * (score[x] - score[y])
        for i, x in enumerate(texts)
        for y in texts[i + 1 :]
    ]
    concordant, discordant = sum(v > 0 for v in signs), sum(v < 0 for v in signs)
    # Kendall's tau-c with n = 3 captions and m = 3 distinct values: 2m (C - D) / (n^2 (m - 1)).
    expected = 2 * 3 * (concordant - discordant) / (3**2 * (3 - 1))
    cell = report["correlations"]["human score"][BLEU]["with Human"]
    assert cell["value"] == pytest.approx(expected)
