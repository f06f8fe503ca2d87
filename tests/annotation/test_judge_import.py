"""Judges' answers through the real entry points: ``manage.py import_judge``, the API and
the page; the report's numbers against scipy on the study's own rows; judges kept apart
from human judgments; bad lines refused with their line numbers and nothing written."""

from __future__ import annotations

import io
import json

import pytest
import scipy.stats
import yaml
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.errors import Conflict, InvalidInput
from annotation.models import Caption, Judge, JudgeAnswer, Judgment, Study
from annotation.modes import get_mode
from annotation.services.judges import judge_import
from tests.factories.core import require_postgres, run_together
from tests.factories.vicr import vicr_release

pytestmark = pytest.mark.django_db

# Eight captions, three ratings each (VICR's 1-5), and the judge's rating of each.
RATINGS = [[5, 4, 5], [4, 4, 3], [2, 1, 2], [3, 3, 4], [1, 2, 1], [5, 5, 4], [3, 2, 3], [2, 3, 3]]
JUDGE = [5, 3, 2, 4, 1, 5, 2, 3]
SYSTEMS = ["A", "B", "C", "D", "C", "A", "D", "B"]


@pytest.fixture
def vicr_study(researcher, tmp_path) -> Study:
    study = vicr_release(researcher, tmp_path, RATINGS)
    # The release names no systems: give the captions four, for the system-level figures.
    for caption, system in zip(_captions(study), SYSTEMS, strict=True):
        Caption.objects.filter(pk=caption.pk).update(system=system)
    return study


def _captions(study):
    return list(Caption.objects.filter(study=study).order_by("id"))


def _judge_file(tmp_path, rows) -> str:
    path = tmp_path / "judge.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return str(path)


def test_import_command_and_report_equal_scipy_on_the_study_rows(vicr_study, researcher, tmp_path):
    captions = _captions(vicr_study)
    human_before = get_mode("vicr").report.human_scores(vicr_study)
    judgments_before = Judgment.objects.filter(study=vicr_study).count()
    rows = [
        {"caption_id": c.pk, "answer": {"rating": j}, "raw_reply": f"Rating: {j}"}
        for c, j in zip(captions[:4], JUDGE[:4], strict=True)
    ] + [
        {"image": c.image.name, "system": c.system, "answer": {"rating": j}}
        for c, j in zip(captions[4:], JUDGE[4:], strict=True)
    ]
    out = io.StringIO()
    call_command(
        "import_judge", str(vicr_study.pk), _judge_file(tmp_path, rows), "--judge", "toy",
        "--model", "toy-vlm", "--prompt-version", "v1", stdout=out,
    )  # fmt: skip
    assert "8 answers" in out.getvalue()
    # Apart from the humans: no judgment added, the report's human scores unchanged.
    assert Judgment.objects.filter(study=vicr_study).count() == judgments_before
    assert get_mode("vicr").report.human_scores(vicr_study) == human_before
    answer = JudgeAnswer.objects.get(caption=captions[0])
    assert answer.raw_reply == "Rating: 5" and answer.scores == {"rating": 5.0}

    api = APIClient()
    api.force_login(researcher)
    report = api.get(reverse("api_study_judges", args=[vicr_study.pk])).json()
    assert report["unit"] == "caption"
    [judge] = report["judges"]
    assert (judge["name"], judge["model"], judge["prompt_version"]) == ("toy", "toy-vlm", "v1")
    body = judge["scores"]["rating"]
    # Independently: the stored human ratings from the Judgment table, one row per rating.
    by_caption = {c.pk: j for c, j in zip(captions, JUDGE, strict=True)}
    stored = Judgment.objects.filter(study=vicr_study, excluded=False)
    pairs = [(by_caption[s["caption_id"]], p["rating"]) for s, p in
             stored.values_list("item__spec", "payload")]  # fmt: skip
    judge_rows, human_rows = zip(*pairs, strict=True)
    assert len(human_rows) == 24
    expected = scipy.stats.kendalltau(judge_rows, human_rows, variant="c").statistic
    assert body["correlation"]["kendall_tau_c"]["value"] == pytest.approx(expected)
    assert body["correlation"]["pearson"]["value"] == pytest.approx(
        scipy.stats.pearsonr(judge_rows, human_rows)[0]
    )
    assert body["correlation"]["kendall_tau_c"]["low"] is not None
    assert body["confusion"]["categories"] == [1, 2, 3, 4, 5]
    assert sum(map(sum, body["confusion"]["counts"])) == 8
    assert body["system_level"]["systems"] == ["A", "B", "C", "D"]
    assert body["human_ceiling"]["human"] > 0


def test_prompt_versions_and_repeated_runs(vicr_study, researcher, tmp_path):
    captions = _captions(vicr_study)
    again = [5, 3, 2, 4, 1, 5, 3, 3]  # run 1 differs from run 0 on the seventh caption
    v1 = [
        {"caption_id": c.pk, "answer": {"rating": j}} for c, j in zip(captions, JUDGE, strict=True)
    ]
    v1 += [{"caption_id": c.pk, "run": 1, "answer": {"rating": j}} for c, j in
           zip(captions, again, strict=True)]  # fmt: skip
    v2 = [{"caption_id": c.pk, "answer": {"rating": 3}} for c in captions[:7]]
    v2.append({"caption_id": captions[7].pk, "answer": {"rating": 2}})
    for version, rows in (("v1", v1), ("v2", v2)):
        call_command(
            "import_judge", str(vicr_study.pk), _judge_file(tmp_path, rows), "--judge", "toy",
            "--prompt-version", version, stdout=io.StringIO(),
        )  # fmt: skip
    api = APIClient()
    api.force_login(researcher)
    report = api.get(reverse("api_study_judges", args=[vicr_study.pk])).json()
    first = next(j for j in report["judges"] if j["prompt_version"] == "v1")
    assert first["runs"] == 2
    assert first["scores"]["rating"]["self_consistency"]["all_agree"] == pytest.approx(7 / 8)
    [drift] = report["drift"]
    assert [v["version"] for v in drift["versions"]] == ["v1", "v2"]
    # v1 [5, 3, 2, 4, 1, 5, 2, 3] and v2 [3, 3, 3, 3, 3, 3, 3, 2] agree on the second only.
    assert drift["versions"][1]["agreement_with_previous"] == pytest.approx(1 / 8)


def test_bad_lines_are_listed_with_numbers_and_nothing_is_written(
    vicr_study, researcher, make_study, tmp_path
):
    captions = _captions(vicr_study)
    foreign = make_study("vicr", name="Someone else's")
    other_image = captions[0].image
    stranger = Caption.objects.create(
        study=foreign, image=other_image, system="X", raw_text="x", text="x"
    )
    lines = [
        json.dumps({"caption_id": captions[0].pk, "answer": {"rating": 4}}),  # good
        "{not json",
        json.dumps({"caption_id": captions[1].pk, "answer": {"rating": 9}}),
        json.dumps({"caption_id": stranger.pk, "answer": {"rating": 3}}),  # another study's
        json.dumps({"caption_id": captions[2].pk}),
        json.dumps({"caption_id": captions[0].pk, "answer": {"rating": 2}}),  # repeat
        json.dumps({"image": "nope.jpg", "system": "A", "answer": {"rating": 2}}),
        json.dumps({"caption_id": captions[3].pk, "run": -1, "answer": {"rating": 2}}),
    ]
    api = APIClient()
    api.force_login(researcher)
    response = api.post(
        reverse("api_study_judges", args=[vicr_study.pk]),
        {"judge": "bad", "lines": "\n".join(lines)},
        format="json",
    )
    assert response.status_code == 400, response.content
    text = json.dumps(response.json())
    for number, words in [
        (2, "not valid JSON"),
        (3, "rating from 1 to 5"),
        (4, "not a caption of this study"),
        (5, "no answer"),
        (6, "already answered"),
        (7, "no caption of system"),
        (8, "run must be"),
    ]:
        assert f"line {number}: " in text and words in text, (number, words)
    assert "line 1:" not in text
    assert not Judge.objects.exists() and not JudgeAnswer.objects.exists()
    # The command says the same and writes nothing either.
    with pytest.raises(CommandError, match="line 4: caption_id"):
        call_command("import_judge", str(vicr_study.pk), _write(tmp_path, lines), "--judge", "bad")
    assert not JudgeAnswer.objects.exists()


def _write(tmp_path, lines) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(path)


def test_another_researchers_study_is_not_found(vicr_study, other_researcher):
    api = APIClient()
    api.force_login(other_researcher)
    url = reverse("api_study_judges", args=[vicr_study.pk])
    assert api.get(url).status_code == 404
    response = api.post(url, {"judge": "x", "lines": "{}"}, format="json")
    assert response.status_code == 404
    assert not Judge.objects.exists()


def test_the_page_imports_a_file_and_shows_the_report(vicr_study, researcher, client):
    captions = _captions(vicr_study)
    client.force_login(researcher)
    url = reverse("study_judges", args=[vicr_study.pk])
    body = "\n".join(
        json.dumps({"caption_id": c.pk, "answer": {"rating": j}})
        for c, j in zip(captions, JUDGE, strict=True)
    )
    upload = io.BytesIO(body.encode())
    upload.name = "answers.jsonl"
    response = client.post(url, {"judge": "paged", "file": upload})
    assert response.status_code == 302
    page = client.get(url).content.decode()
    assert "paged" in page and "<svg" in page and "kendall_tau_c" in page
    bad = io.BytesIO(b'{"caption_id": 1}\n')
    bad.name = "bad.jsonl"
    refused = client.post(url, {"judge": "bad", "file": bad})
    assert refused.status_code == 400
    assert "line 1:" in refused.content.decode()
    assert Judge.objects.filter(name="bad").count() == 0


def test_the_endpoint_is_in_the_openapi_schema(researcher):
    api = APIClient()
    api.force_login(researcher)
    schema = yaml.safe_load(api.get(reverse("schema")).content)
    assert "/api/studies/{study_id}/judges/" in schema["paths"]
    assert {"get", "post"} <= set(schema["paths"]["/api/studies/{study_id}/judges/"])


def test_resamples_are_bounded(vicr_study, researcher):
    api = APIClient()
    api.force_login(researcher)
    url = reverse("api_study_judges", args=[vicr_study.pk])
    for bad in ("-1", "1001", "ten", "1e3"):
        response = api.get(url, {"resamples": bad})
        assert response.status_code == 400 and "resamples" in response.json(), bad
    assert api.get(url, {"resamples": "0"}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_two_imports_of_one_judge_at_once_write_one_file(researcher, tmp_path):
    """PostgreSQL: both read "not answered yet", one write wins, the other is a Conflict
    with nothing of it written (the unique constraints, not a lock, decide)."""
    require_postgres()
    path = tmp_path / "vicr.csv"
    lines = ["image,caption,ratings,rating_2,rating_3"]
    lines += [f"img{i}.jpg,caption number {i},{a},{b},{c}" for i, (a, b, c) in enumerate(RATINGS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    call_command(
        "import_ratings", str(path), "--format", "vicr-csv", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    study = Study.objects.get(owner=researcher)
    text = "\n".join(
        json.dumps({"caption_id": c.pk, "answer": {"rating": 3}}) for c in _captions(study)
    )

    def once():
        return judge_import(study=study, text=text, name="twice")

    def refused_as_a_repeat(error) -> bool:
        # Overlapping, the unique constraints refuse the second (Conflict); on a loaded
        # machine the threads may not overlap, and then the second reads the first's answers
        # and refuses every line as already answered. Either way nothing of it is written.
        if isinstance(error, Conflict):
            return True
        lines = error.details.get("errors", []) if isinstance(error, InvalidInput) else []
        return bool(lines) and all("already answered" in x or x.startswith("...") for x in lines)

    results, errors = run_together([once, once])
    assert len([r for r in results if r]) == 1 and len(errors) == 1, (results, errors)
    assert all(refused_as_a_repeat(e) for e in errors), [(e, e.details) for e in errors]
    assert JudgeAnswer.objects.filter(judge__name="twice").count() == 8
