"""Issue 45, row 8: files that made an importer end in a traceback instead of a refusal.

The attacks: battle logs with ``\\u0000`` (PostgreSQL's DataError), nesting 200,000 deep
(RecursionError) and a lone surrogate (UnicodeEncodeError); a NUL in an MQM TSV; a COCO
file with a 5,000-digit number (Python's raw "Exceeds the limit (4300 digits)" message).
Each file goes through the real entry points (``manage.py import_ratings`` and
``import_study`` with ``call_command``, the import page with its job) and must be refused
with the line and the field, as a ``CommandError`` (never another exception), with nothing
stored. Run on SQLite and on PostgreSQL (NUL in ``jsonb`` and ``text`` fails only there).
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Caption, Image, Item, Job, JudgeAnswer, Judgment, Participant, Study

pytestmark = pytest.mark.django_db

DEEP = "[" * 200_000 + "]" * 200_000
LONG_NUMBER = "9" * 5000
RAW_PYTHON = ("sys.set_int_max_str_digits", "Exceeds the limit", "maximum recursion")


def counts():
    return tuple(m.objects.count() for m in (Study, Image, Caption, Participant, Judgment))


def refused(*args, **options) -> str:
    """Run a command that must refuse the file; its message, checked for raw Python."""
    before = counts()
    with pytest.raises(CommandError) as refusal:
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO(), **options)
    message = str(refusal.value)
    assert not any(raw in message for raw in RAW_PYTHON), message
    assert counts() == before, "something was stored"
    return message


def import_ratings(path, fmt, owner, *extra):
    return refused("import_ratings", str(path), "--format", fmt, "--owner", owner.username, *extra)


def assert_names(message, line, *words):
    assert f"line {line}: " in message, message
    for word in words:
        assert word in message, (word, message)


# ---------------------------------------------------------------------- battles (LMArena)

GOOD_BATTLE = {"model_a": "alpha", "model_b": "beta", "winner": "model_a", "image": "i1"}


def battle_log(tmp_path, second_line: str):
    path = tmp_path / "arena.jsonl"
    path.write_text(json.dumps(GOOD_BATTLE) + "\n" + second_line + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("caption_a", "a red\x00 fox", "U+0000"),
        ("model_a", "al\x00pha", "U+0000"),
        ("judge", "j\udc00", "U+DC00"),
        ("image", "i\u202e.gnp", "U+202E"),
    ],
)
def test_battles_with_nul_surrogates_or_overrides_name_the_line_and_field(
    tmp_path, researcher, field, value, words
):
    line = json.dumps({**GOOD_BATTLE, "caption_b": "a fox", field: value})
    message = import_ratings(battle_log(tmp_path, line), "battles", researcher)
    assert_names(message, 2, field, words)


def test_battles_nested_200000_deep_name_the_line(tmp_path, researcher):
    line = json.dumps(GOOD_BATTLE)[:-1] + ', "extra": ' + DEEP + "}"
    message = import_ratings(battle_log(tmp_path, line), "battles", researcher)
    assert_names(message, 2, "nested too deeply")


def test_battles_with_a_5000_digit_number_name_the_line(tmp_path, researcher):
    line = json.dumps(GOOD_BATTLE)[:-1] + ', "votes": ' + LONG_NUMBER + "}"
    message = import_ratings(battle_log(tmp_path, line), "battles", researcher)
    assert_names(message, 2, "digits")


# ---------------------------------------------------------------------- ImageInWords SxS

SXS = {
    "IIW": "A red fox on snow.",
    "image": "fox.jpg",
    "metrics/Comprehensiveness": "IIW is marginally better",
    "metrics/First few line(s) as tldr": "Neutral",
    "metrics/Hallucination": "Neutral",
    "metrics/Human Like": "DCI is marginally better",
    "metrics/Specificity": "Neutral",
}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (json.dumps({**SXS, "IIW": "A red\x00 fox."}), ("IIW", "U+0000")),
        (json.dumps({**SXS, "image": "fox\ud800.jpg"}), ("image", "U+D800")),
        (json.dumps(SXS)[:-1] + ', "x": ' + DEEP + "}", ("nested too deeply",)),
        (json.dumps(SXS)[:-1] + ', "x": ' + LONG_NUMBER + "}", ("digits",)),
    ],
)
def test_imageinwords_files_name_the_line_and_field(tmp_path, researcher, line, words):
    path = tmp_path / "DCI_Test.jsonl"
    path.write_text(json.dumps(SXS) + "\n" + line + "\n", encoding="utf-8")
    message = import_ratings(path, "iiw-sxs", researcher)
    assert_names(message, 2, *words)


# ---------------------------------------------------------------------- MQM TSV, ESA CSV

MQM_HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"
MQM_ROW = "sysA\td1\t1\t1\tr1\tDer Hund.\tThe <v>cat</v>.\tAccuracy/Mistranslation\tMajor\n"


@pytest.mark.parametrize(
    ("row", "field"),
    [
        (MQM_ROW.replace("The <v>cat</v>.", "The <v>c\x00at</v>."), "target"),
        (MQM_ROW.replace("Der Hund.", "Der\x00 Hund."), "source"),
        (MQM_ROW.replace("\tr1\t", "\tr\x001\t"), "rater"),
        (MQM_ROW.replace("sysA", "sys\u202eA"), "system"),
    ],
)
def test_mqm_tsv_with_a_nul_names_the_line_and_column(tmp_path, researcher, row, field):
    path = tmp_path / "mqm.tsv"
    path.write_text(MQM_HEADER + MQM_ROW + row, encoding="utf-8")
    message = import_ratings(path, "mqm-tsv", researcher)
    assert_names(message, 3, field)


BATCHES = [
    {
        "task": {"batchNo": 1},
        "items": [
            {
                "mqm": [],
                "documentID": "doc#sysA",
                "targetID": "wmt.sysA",
                "itemType": "TGT",
                "sourceText": "Der Hund läuft.",
                "targetText": "The dog runs fast.",
                "itemID": 2,
            }
        ],
    }
]


def esa_row(spans: str, login="login1") -> str:
    fields = [login, "wmt.sysA", "2", "TGT", "eng", "deu", "70", "doc#sysA", "False"]
    quoted = spans.replace('"', '""')
    return ",".join(fields) + f',"{quoted}",1.0,2.0\n'


@pytest.mark.parametrize(
    ("csv_text", "batches", "words"),
    [
        (esa_row("[]", login="log\x00in"), json.dumps(BATCHES), ("line 1: ", "login", "U+0000")),
        (esa_row("[" * 30_000 + "]" * 30_000), json.dumps(BATCHES), ("line 1: ", "nested")),
        (esa_row("[]"), "[" * 200_000 + "]" * 200_000, ("line 1: ", "nested")),
        (
            esa_row("[]"),
            json.dumps(BATCHES).replace("The dog runs fast.", "The dog\\u0000 runs."),
            ("targetText", "U+0000"),
        ),
    ],
)
def test_esa_campaigns_name_the_line_and_field(tmp_path, researcher, csv_text, batches, words):
    path, batch_path = tmp_path / "esa.csv", tmp_path / "batches.json"
    path.write_text(csv_text, encoding="utf-8")
    batch_path.write_text(batches, encoding="utf-8")
    message = import_ratings(path, "esa-csv", researcher, "--batches", str(batch_path))
    for word in words:
        assert word in message, (word, message)


# ---------------------------------------------------------------------- COCO and CSV captions


def coco_with_long_id() -> str:
    return (
        '[\n{"image_id": "red.png", "caption": "a red square"},\n'
        f'{{"image_id": {LONG_NUMBER}, "caption": "a long id"}}\n]'
    )


def test_a_coco_file_with_a_5000_digit_number_names_its_line_in_the_command(tmp_path, researcher):
    path = tmp_path / "Bot.json"
    path.write_text(coco_with_long_id(), encoding="utf-8")
    message = refused(
        "import_study",
        "--create",
        "--name",
        "COCO",
        "--mode",
        "thumb",
        "--owner",
        researcher.username,
        "--captions",
        str(path),
    )
    assert_names(message, 3, "digits")


def test_a_coco_file_with_a_5000_digit_number_names_its_line_on_the_page(
    client, researcher, make_study, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.VAR_DIR = tmp_path / "var"
    study = make_study("thumb")
    client.force_login(researcher)
    upload = SimpleUploadedFile("Bot.json", coco_with_long_id().encode(), "application/json")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("study_import", args=[study.pk]), {"captions": upload, "purpose": "study"}
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.FAILED
    shown = job.error + " ".join(job.result.get("errors", []))
    assert "line 3: " in shown and "digits" in shown, shown
    assert not any(raw in shown for raw in RAW_PYTHON), shown
    assert (Image.objects.count(), Caption.objects.count()) == (0, 0)
    page = client.get(reverse("job_status", args=[job.pk])).content.decode()
    assert "line 3: " in page and "Traceback" not in page


def test_a_csv_with_a_5000_digit_truth_names_its_line_and_field(tmp_path, researcher):
    path = tmp_path / "tutorial.csv"
    path.write_text(
        "image,caption,truth,explanation\n"
        "red.png,a red square,3,Because.\n"
        f"red.png,a red tile,{LONG_NUMBER},Because.\n",
        encoding="utf-8",
    )
    message = refused(
        "import_study",
        "--create",
        "--name",
        "CSV",
        "--mode",
        "vicr",
        "--owner",
        researcher.username,
        "--captions",
        str(path),
        "--system",
        "S",
        "--purpose",
        "tutorial",
    )
    assert_names(message, 3, "truth")


# ---------------------------------------------------------------------- the other importers
# The same attacks on every other importer a researcher or an admin runs.

THUMB_LINE = {
    "SYS": "Bot",
    "seg_id": "1",
    "hyp": "a dog on grass",
    "image": "dog.jpg",
    "P": 4,
    "R": 3,
    "Fl": 0,
    "Con": 0,
    "Inc": 0,
}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (json.dumps({**THUMB_LINE, "hyp": "a dog\x00"}), ("hyp", "U+0000")),
        (json.dumps({**THUMB_LINE, "SYS": "B\udc00ot"}), ("SYS", "U+DC00")),
        (json.dumps({**THUMB_LINE, "image": "dog\x00.jpg"}), ("image", "U+0000")),
        (json.dumps(THUMB_LINE)[:-1] + ', "x": ' + LONG_NUMBER + "}", ("digits",)),
    ],
)
def test_the_thumb_release_names_the_line_and_field(tmp_path, researcher, line, words):
    path = tmp_path / "thumb.jsonl"
    other = {**THUMB_LINE, "seg_id": "2", "image": "cat.jpg"}
    path.write_text(json.dumps(other) + "\n" + line + "\n", encoding="utf-8")
    message = refused("import_thumb", str(path), "--owner", researcher.username)
    assert_names(message, 2, *words)


def test_flickr8k_expert_and_vicr_csv_name_the_field(tmp_path, researcher):
    entry = {"image_id": "i1", "image_path": "i1.jpg", "caption": "a dog\x00", "rating": 3}
    path = tmp_path / "flickr.json"
    path.write_text(json.dumps({"i1": {"human_judgement": [entry] * 3}}), encoding="utf-8")
    message = import_ratings(path, "flickr8k-expert", researcher)
    assert "caption" in message and "U+0000" in message, message

    path = tmp_path / "flickr-long.json"
    path.write_text('{"i1": {"human_judgement": [], "n": ' + LONG_NUMBER + "}}")
    assert_names(import_ratings(path, "flickr8k-expert", researcher), 1, "digits")

    path = tmp_path / "vicr.csv"
    path.write_text(
        "image,caption,ratings\nhttp://x/a.jpg,a dog,3\nhttp://x/b.jpg,a c\x00at,4\n",
        encoding="utf-8",
    )
    assert_names(import_ratings(path, "vicr-csv", researcher), 3, "caption", "U+0000")


def test_pascal_50s_and_nebula_name_the_line_and_field(tmp_path, researcher):
    path = tmp_path / "pascal.json"
    pair = {"image": "a.jpg", "captions": ["a dog", "a cat"], "label": 0, "references": ["r"]}
    path.write_text(
        '{"HC": [\n' + json.dumps(pair) + ",\n" + LONG_NUMBER + "\n]}", encoding="utf-8"
    )
    assert_names(import_ratings(path, "pascal-50s", researcher), 3, "digits")

    path = tmp_path / "nebula.json"
    entry = {"imgid": "i\x001", "mt": "a dog", "refs": ["a dog"], "score": 0.5}
    path.write_text(json.dumps([entry]), encoding="utf-8")
    message = import_ratings(path, "nebula", researcher)
    assert "imgid" in message and "U+0000" in message, message


def closed_spans_study(tmp_path, researcher) -> Study:
    path = tmp_path / "mqm.tsv"
    path.write_text(MQM_HEADER + MQM_ROW, encoding="utf-8")
    call_command(
        "import_ratings", str(path), "--format", "mqm-tsv", "--owner", researcher.username,
        stdout=io.StringIO(),
    )  # fmt: skip
    return Study.objects.get(mode="spans")


def test_judge_answers_and_span_suggestions_name_the_line_and_field(tmp_path, researcher):
    study = closed_spans_study(tmp_path, researcher)
    caption = Caption.objects.get(study=study)
    mark = {
        "start": 4,
        "end": 7,
        "text": "cat",
        "severity": "major",
        "category": "Accuracy/Mistranslation",
    }
    lines = [
        json.dumps({"caption_id": caption.pk, "answer": {"spans": [], "score": 50}}),
        json.dumps(
            {"caption_id": caption.pk, "run": 1, "answer": {"spans": [], "score": 50},
             "raw_reply": "fine\x00"}
        ),
        json.dumps(
            {"caption_id": caption.pk, "run": 2,
             "answer": {"spans": [{**mark, "note": "x\x00"}], "score": 50}}
        ),
    ]  # fmt: skip
    path = tmp_path / "judge.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    message = refused("import_judge", str(study.pk), str(path), "--judge", "j")
    assert_names(message, 2, "raw_reply", "U+0000")
    assert_names(message, 3, "note", "U+0000")
    assert not JudgeAnswer.objects.exists()

    path = tmp_path / "suggestions.jsonl"
    path.write_text(
        json.dumps({"caption_id": caption.pk, "spans": [{**mark, "note": "x\x00"}]}) + "\n"
    )
    message = refused("import_span_suggestions", str(study.pk), str(path), "--source", "ai")
    assert_names(message, 1, "note", "U+0000")
    assert "suggestions" not in Item.objects.get(study=study).spec


def test_references_name_the_line_of_a_long_number(tmp_path, researcher):
    study = closed_spans_study(tmp_path, researcher)
    path = tmp_path / "refs.jsonl"
    path.write_text(
        json.dumps({"seg_id": "d1#1", "refs": ["a ref"]})
        + "\n"
        + '{"seg_id": '
        + LONG_NUMBER
        + ', "refs": ["b"]}\n',
        encoding="utf-8",
    )
    message = refused("import_references", str(study.pk), str(path), "--format", "thumb")
    assert_names(message, 2, "digits")
