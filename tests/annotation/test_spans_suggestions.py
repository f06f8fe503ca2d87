"""ESA-AI suggestions in the error-span mode (issue 24): spans a judge or metric suggests,
imported with ``manage.py import_span_suggestions``, shown when the study's ``suggestions``
setting is on, each accepted or rejected by the annotator, the decisions stored with the
judgment and the acceptance rate per source in the report.

Bad files are refused through the command with the line and nothing stored; bad decisions
through the real submission view, naming the field and storing nothing. The acceptance
rates are recounted here from the stored payloads.
"""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.errors import InvalidInput
from annotation.models import Caption, Item, Judgment
from annotation.modes import get_mode
from annotation.modes.importing import item_file_importers
from annotation.services.imports.item_files import item_file_import
from tests.annotation.test_mode_spans import leased, mark, post_marks, run_report
from tests.factories.spans import spans_study

pytestmark = pytest.mark.django_db


def captions(study):
    return {c.system: c for c in Caption.objects.filter(study=study)}


def span(text, words, severity="major", category="object"):
    start = text.index(words)
    return {"start": start, "end": start + len(words), "severity": severity, "category": category}


def write(tmp_path, rows, name="judge.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def import_file(study, path, source="judge-a"):
    out = StringIO()
    call_command(
        "import_span_suggestions", str(study.pk), str(path), "--source", source, stdout=out
    )
    return out.getvalue()


def specs(study):
    return {i.pk: i.spec for i in Item.objects.filter(study=study)}


def suggested_study(researcher, tmp_path, **settings):
    """One caption ("alpha", with an emoji before the suggested words) and two suggestions."""
    study = spans_study(researcher, images=1, systems=("alpha",), suggestions=True, **settings)
    alpha = captions(study)["alpha"]
    rows = [
        {
            "caption_id": alpha.pk,
            "spans": [span(alpha.text, "red sofa", "minor", "attribute"), span(alpha.text, "dog")],
        }
    ]
    import_file(study, write(tmp_path, rows))
    return study, alpha


def test_the_command_stores_checked_suggestions_with_the_item(researcher, tmp_path):
    study = spans_study(researcher, images=1)
    found = captions(study)
    rows = [
        {"caption_id": found["alpha"].pk, "spans": [span(found["alpha"].text, "sits on")]},
        {"caption_id": found["beta"].pk, "spans": [span(found["beta"].text, "blue", "minor")]},
    ]
    said = import_file(study, write(tmp_path, rows))
    assert "Stored 2 suggestions from judge-a for 2 captions" in said
    by_caption = {s["caption"]: s for s in specs(study).values()}
    (sits,) = by_caption[found["alpha"].pk]["suggestions"]
    # Offsets in code points: after the emoji, so a UTF-16 count would be one further on.
    assert found["alpha"].text[sits["start"] : sits["end"]] == sits["text"] == "sits on"
    assert sits["source"] == "judge-a" and sits["severity"] == "major"
    assert sits["id"] == f"judge-a:{found['alpha'].pk}:0"
    # A second source adds; the same source again replaces its own.
    import_file(study, write(tmp_path, rows[:1], "b.jsonl"), source="metric-b")
    again = [{"caption_id": found["alpha"].pk, "spans": [span(found["alpha"].text, "cats")]}]
    import_file(study, write(tmp_path, again, "a2.jsonl"))
    alpha = {s["caption"]: s for s in specs(study).values()}[found["alpha"].pk]
    assert sorted((s["source"], s["text"]) for s in alpha["suggestions"]) == [
        ("judge-a", "cats"),
        ("metric-b", "sits on"),
    ]


def bad_files(found):
    alpha, beta = found["alpha"], found["beta"]
    good = {"caption_id": beta.pk, "spans": [span(beta.text, "blue")]}
    return [
        ("not json", [good, "{caption_id: 1"], "line 2: not valid JSON"),
        ("unknown caption", [good, {"caption_id": 999999, "spans": []}], "line 2: caption_id"),
        ("twice", [good, good], "line 2: caption"),
        (
            "outside",
            [{"caption_id": alpha.pk, "spans": [{**span(alpha.text, "dog"), "end": 500}]}],
            "line 1: spans[0]",
        ),
        (
            "reversed",
            [
                {
                    "caption_id": alpha.pk,
                    "spans": [{**span(alpha.text, "dog"), "start": 9, "end": 5}],
                }
            ],
            "greater than start",
        ),
        (
            "overlap",
            [
                {
                    "caption_id": alpha.pk,
                    "spans": [span(alpha.text, "brown dog"), span(alpha.text, "dog 🐕")],
                }
            ],
            "overlap",
        ),
        (
            "category",
            [{"caption_id": alpha.pk, "spans": [span(alpha.text, "dog", category="colour")]}],
            "categories",
        ),
        (
            "omission",
            [{"caption_id": alpha.pk, "spans": [{"omission": True, "note": "x"}]}],
            "not an omission",
        ),
        ("spans not a list", [{"caption_id": alpha.pk, "spans": "dog"}], "must be a list"),
        ("extra key", [{"caption_id": alpha.pk, "spans": [], "score": 3}], "only"),
        ("empty", [], "no suggestion"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_a_bad_suggestions_file_is_refused_by_line_and_nothing_stored(researcher, tmp_path, case):
    study = spans_study(researcher, images=1)
    name, rows, words = bad_files(captions(study))[case]
    before = specs(study)
    with pytest.raises(CommandError) as refused:
        import_file(study, write(tmp_path, rows))
    assert words in str(refused.value), name
    assert "Traceback" not in str(refused.value)
    assert specs(study) == before


def test_the_source_name_and_the_study_are_checked(researcher, make_study, tmp_path):
    study = spans_study(researcher, images=1)
    path = write(tmp_path, [{"caption_id": captions(study)["beta"].pk, "spans": []}])
    with pytest.raises(CommandError, match="source: name the judge"):
        import_file(study, path, source="../etc")
    draft = spans_study(researcher, images=1, live=False)
    with pytest.raises(CommandError, match="open it first"):
        import_file(draft, path)
    other = make_study("thumb")
    with pytest.raises(CommandError, match="error-span studies only"):
        import_file(other, path)


def test_the_mode_reads_the_file_and_the_service_saves_it(researcher, tmp_path):
    """The spans mode's importer returns the changed items unsaved; the generic service looks
    it up by name on the study's mode and saves them."""
    study = spans_study(researcher, images=1)
    alpha = captions(study)["alpha"]
    path = write(tmp_path, [{"caption_id": alpha.pk, "spans": [span(alpha.text, "dog")]}])
    before = specs(study)
    (importer,) = item_file_importers(get_mode(study.mode))
    updates = importer.read(study, path, source="judge-a")
    assert specs(study) == before, "reading saved something"
    (item,) = updates.items
    assert [s["text"] for s in item.spec["suggestions"]] == ["dog"]
    assert updates.fields == ("spec",)
    done = item_file_import(study=study, path=path, name=importer.name, source="judge-a")
    assert done.summary == updates.summary
    assert specs(study)[item.pk] == item.spec
    with pytest.raises(InvalidInput, match="unknown item file"):
        item_file_import(study=study, path=path, name="no-such-file", source="judge-a")


def test_suggestions_are_shown_only_when_the_setting_is_on(researcher, tmp_path):
    study, _ = suggested_study(researcher, tmp_path)
    _, _, html = leased(Client(), study, "on")
    assert "Suggested errors: accept or reject each" in html
    assert "“red sofa”: minor, attribute" in html
    off = spans_study(researcher, images=1, systems=("alpha",))
    alpha = captions(off)["alpha"]
    import_file(
        off, write(tmp_path, [{"caption_id": alpha.pk, "spans": [span(alpha.text, "dog")]}])
    )
    _, _, html = leased(Client(), off, "off")
    assert "Suggested errors" not in html


def test_accepted_suggestions_become_marks_and_every_decision_is_stored(researcher, tmp_path):
    study, alpha = suggested_study(researcher, tmp_path)
    (item,) = Item.objects.filter(study=study)
    red, dog = sorted(item.spec["suggestions"], key=lambda s: s["start"], reverse=True)
    client = Client()
    url, text, _ = leased(client, study, "decides")
    own = mark(text, "two cats", "minor", "count")
    answer = post_marks(
        client,
        url,
        [own],
        "45",
        **{f"suggestion-{red['id']}": "accept", f"suggestion-{dog['id']}": "reject"},
    )
    assert answer.status_code == 302
    (judgment,) = Judgment.objects.filter(study=study)
    stored = {(m["text"], m["severity"], m["category"]) for m in judgment.payload["spans"]}
    assert stored == {("two cats", "minor", "count"), ("red sofa", "minor", "attribute")}
    assert sorted(judgment.payload["suggestions"], key=lambda d: d["id"]) == sorted(
        [
            {"id": red["id"], "source": "judge-a", "decision": "accepted"},
            {"id": dog["id"], "source": "judge-a", "decision": "rejected"},
        ],
        key=lambda d: d["id"],
    )
    assert judgment.result["minor"] == 2 and judgment.result["major"] == 0


def test_bad_decisions_are_refused_through_the_view_and_nothing_stored(researcher, tmp_path):
    study, alpha = suggested_study(researcher, tmp_path)
    (item,) = Item.objects.filter(study=study)
    red, dog = sorted(item.spec["suggestions"], key=lambda s: s["start"], reverse=True)
    client = Client()
    url, text, _ = leased(client, study, "refused")
    cases = [
        ({f"suggestion-{red['id']}": "accept"}, [], "1 left"),
        ({}, [], "2 left"),
        ({f"suggestion-{red['id']}": "accept", f"suggestion-{dog['id']}": "maybe"}, [], "1 left"),
        (
            {
                f"suggestion-{red['id']}": "accept",
                f"suggestion-{dog['id']}": "reject",
                "suggestion-judge-a:1:9": "accept",
            },
            [],
            "does not have",
        ),
        # Accepting "red sofa" while marking "a red" by hand: the two overlap.
        (
            {f"suggestion-{red['id']}": "accept", f"suggestion-{dog['id']}": "reject"},
            [mark(text, "a red")],
            "overlap",
        ),
    ]
    for decisions, marks, words in cases:
        answer = post_marks(client, url, marks, "50", **decisions)
        assert answer.status_code == 400, decisions
        page = answer.content.decode()
        assert words in page, (words, decisions)
        if words != "overlap":  # that one names the marks
            assert 'aria-describedby="spans-error"' in page
        assert not Judgment.objects.filter(study=study).exists()


def test_the_report_gives_the_acceptance_rate_per_source(researcher, tmp_path):
    study, alpha = suggested_study(researcher, tmp_path, target=3)
    second = [{"caption_id": alpha.pk, "spans": [span(alpha.text, "two cats", "minor", "count")]}]
    import_file(study, write(tmp_path, second, "m.jsonl"), source="metric-b")
    (item,) = Item.objects.filter(study=study)
    ids = {s["text"]: s["id"] for s in item.spec["suggestions"]}
    choices = [
        {"red sofa": "accept", "dog": "reject", "two cats": "accept"},
        {"red sofa": "accept", "dog": "accept", "two cats": "reject"},
        {"red sofa": "reject", "dog": "reject", "two cats": "reject"},
    ]
    for n, choice in enumerate(choices):
        client = Client()
        url, _, _ = leased(client, study, f"rater{n}")
        fields = {f"suggestion-{ids[t]}": c for t, c in choice.items()}
        assert post_marks(client, url, [], "50", **fields).status_code == 302
    expected = Counter()
    for j in Judgment.objects.filter(study=study):
        for d in j.payload["suggestions"]:
            expected[(d["source"], d["decision"])] += 1
    result = run_report(study, researcher)
    rates = {row["source"]: row for row in result["suggestions"]}
    for source in ("judge-a", "metric-b"):
        accepted, rejected = expected[(source, "accepted")], expected[(source, "rejected")]
        assert rates[source]["accepted"] == accepted
        assert rates[source]["rejected"] == rejected
        assert rates[source]["acceptance_rate"] == accepted / (accepted + rejected)
    # By hand: judge-a 3 of 6 accepted, metric-b 1 of 3.
    assert (rates["judge-a"]["acceptance_rate"], rates["metric-b"]["acceptance_rate"]) == (
        0.5,
        1 / 3,
    )


def test_the_judgments_export_carries_the_decisions(researcher, tmp_path):
    from annotation.services.exports import export_file

    study, _ = suggested_study(researcher, tmp_path)
    (item,) = Item.objects.filter(study=study)
    client = Client()
    url, _, _ = leased(client, study, "exported")
    fields = {f"suggestion-{s['id']}": "reject" for s in item.spec["suggestions"]}
    assert post_marks(client, url, [], "70", **fields).status_code == 302
    summary = export_file(study=study, path=tmp_path / "out.jsonl", export_format="jsonl")
    (row,) = [json.loads(line) for line in summary.path.read_text().splitlines()]
    (judgment,) = Judgment.objects.filter(study=study)
    assert json.loads(row["suggestions"]) == judgment.payload["suggestions"]
    assert {d["decision"] for d in json.loads(row["suggestions"])} == {"rejected"}
