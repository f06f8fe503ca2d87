"""Bounds on the work a user can ask for, and bad text answered with a 400 or a row error
naming the line and the field (issue 12).

Every attack goes through a real path: the study form and API, the import page (its job run
as the worker runs it, once the request commits) and the ``import_study`` command.

- Settings: every number setting of every mode has a finite upper bound (a THumB study with
  10^12 bootstrap resamples took gigabytes); resample counts stay where a report's memory
  stays sane; a non-finite number (JSON ``Infinity``, which Python's json reads) is refused.
- Import totals: the decoded pixels of one import (read from each header, before decoding)
  and its caption rows are limited; a refused import stores nothing and stops early.
- Text: NUL and other control characters, bidirectional overrides and isolates, unpaired
  surrogates and values longer than their column are refused in every text field; import
  rows get an error naming the line and the field (not a database error, on SQLite and
  PostgreSQL alike), forms an error under the field, the API a 400 naming it.
"""

import csv
import dataclasses
import io
import json
import re
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from PIL import Image as PILImage
from rest_framework.test import APIClient

from annotation.models import Caption, Image, Job, Study
from annotation.modes import get_mode
from annotation.services.imports import images as image_imports

pytestmark = pytest.mark.django_db

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: shows "txt.exe" for "exe.txt" (CVE-2021-42574)


# ---------------------------------------------------------------------- helpers


def api_for(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def png_bytes(color=(200, 30, 30), size=(8, 6)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


def bilevel_png(width: int, height: int, mark: int) -> bytes:
    """A black 1-bit PNG of width x height pixels with one white byte at ``mark``.

    40 Mpx of it compress to a few kB; the mark makes each image's bytes (so its hash)
    different, since identical bytes are decoded only once.
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    raw = bytearray((b"\x00" + bytes((width + 7) // 8)) * height)
    raw[1 + mark] = 0xFF
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 6))
        + chunk(b"IEND", b"")
    )


def zip_upload(images: dict[str, bytes], name="photos.zip") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for member, content in images.items():
            zf.writestr(member, content)
    return SimpleUploadedFile(name, buffer.getvalue(), content_type="application/zip")


def csv_upload(rows: list[list[str]], name="captions.csv") -> SimpleUploadedFile:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return SimpleUploadedFile(name, buffer.getvalue().encode(), "text/csv")


def media_files(settings) -> set[Path]:
    root = Path(settings.MEDIA_ROOT)
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@pytest.fixture
def var_dir(settings, tmp_path) -> Path:
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR


@pytest.fixture
def study(make_study):
    return make_study("thumb")


@pytest.fixture
def upload(client, researcher, study, var_dir, django_capture_on_commit_callbacks):
    """Post the import form as the researcher; the job runs when the request commits."""
    client.force_login(researcher)

    def post(**data) -> Job:
        data.setdefault("purpose", "study")
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(reverse("study_import", args=[study.pk]), data)
        assert response.status_code == 302, response.content.decode()[:2000]
        job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
        job.refresh_from_db()
        return job

    return post


def assert_refused_storing_nothing(job: Job, settings, before: set[Path]) -> list[str]:
    """The job failed with a readable refusal, and no row or file was stored."""
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("Nothing was imported"), job.error
    assert (Image.objects.count(), Caption.objects.count()) == (0, 0)
    assert media_files(settings) == before
    return job.result.get("errors", [])


def form_errors(response, field: str) -> str:
    return " ".join(response.context["form"].errors.get(field, []))


# ---------------------------------------------------------------------- settings bounds


def whole_and_number_settings():
    """(mode, setting) for every number setting of every mode a study can be made with."""
    for mode in ("thumb", "vicr", "humanr"):
        for spec in dataclasses.fields(get_mode(mode).settings_class):
            if spec.metadata.get("kind") in ("whole", "number"):
                yield mode, spec.name


@pytest.mark.parametrize(("mode", "setting"), list(whole_and_number_settings()))
def test_every_number_setting_refuses_a_huge_value_naming_it(researcher, mode, setting):
    response = api_for(researcher).post(
        reverse("api_studies"),
        {"name": "Huge", "mode": mode, "settings": {setting: 10**12}},
        format="json",
    )
    assert response.status_code == 400, f"{mode}.{setting} = 10**12 was accepted"
    assert setting in response.json()["settings"][0]
    assert not Study.objects.exists()


RESAMPLE_SETTINGS = [
    ("thumb", "bootstrap_resamples"),
    ("humanr", "report_bootstrap"),
    ("humanr", "report_splits"),
    ("vicr", "report_repetitions"),
]


@pytest.mark.parametrize(("mode", "setting"), RESAMPLE_SETTINGS)
def test_resample_counts_are_bounded_where_a_report_stays_small(researcher, mode, setting):
    # 3 million THumB resamples took 2.4 GB; each resample of a paired bootstrap holds about
    # 20 bytes per image, so 100,000 resamples of a 5,000-image study need 10 GB.
    api = api_for(researcher)
    refused = api.post(
        reverse("api_studies"),
        {"name": "Many", "mode": mode, "settings": {setting: 100_000}},
        format="json",
    )
    assert refused.status_code == 400
    message = refused.json()["settings"][0]
    bounds = re.search(r"from ([\d,]+) to ([\d,]+)", message)
    assert bounds, message
    high = int(bounds.group(2).replace(",", ""))
    assert high <= 20_000, "a bound that still lets one report take gigabytes"
    # The bound the message states is itself accepted.
    accepted = api.post(
        reverse("api_studies"),
        {"name": "Top", "mode": mode, "settings": {setting: high}},
        format="json",
    )
    assert accepted.status_code == 201, accepted.json()
    assert Study.objects.get().settings[setting] == high


def test_the_thumb_bootstrap_of_a_trillion_resamples_is_refused_in_the_form(client, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("study_new"),
        {"name": "Huge", "mode": "thumb", "seed": "0", "settings": '{"bootstrap_resamples": 1e12}'},
    )
    assert "bootstrap_resamples" in form_errors(response, "settings")
    response = client.post(
        reverse("study_new"),
        {
            "name": "Huge",
            "mode": "thumb",
            "seed": "0",
            "settings": json.dumps({"bootstrap_resamples": 10**12}),
        },
    )
    assert "bootstrap_resamples" in form_errors(response, "settings")
    assert not Study.objects.exists()


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_non_finite_weight_in_the_form_is_refused_under_settings(client, researcher, value):
    # Python's json reads Infinity and NaN (and 1e999 as infinity); PostgreSQL's jsonb does
    # not, so a stored infinity was a 500 there, and an infinite weight makes Total meaningless.
    client.force_login(researcher)
    response = client.post(
        reverse("study_new"),
        {
            "name": "Inf",
            "mode": "thumb",
            "seed": "0",
            "settings": '{"weight_precision": ' + value + "}",
        },
    )
    assert response.status_code == 200, "the form shown again, with the error"
    assert "weight_precision" in form_errors(response, "settings")
    assert not Study.objects.exists()


def test_a_completion_url_as_long_as_a_book_is_refused(researcher):
    url = "https://app.prolific.com/submissions/complete?cc=" + "A" * 100_000
    response = api_for(researcher).post(
        reverse("api_studies"),
        {"name": "Long", "mode": "vicr", "settings": {"prolific_completion_url": url}},
        format="json",
    )
    assert response.status_code == 400
    assert "prolific_completion_url" in response.json()["settings"][0]
    assert not Study.objects.exists()


@pytest.mark.parametrize("code", [f"CODE{RLO}", "CO\x00DE", "CO\tDE"])
def test_a_completion_code_with_control_characters_is_refused(researcher, code):
    # Shown to crowd workers, who paste it into Prolific: no invisible or reordering characters.
    response = api_for(researcher).post(
        reverse("api_studies"),
        {"name": "Code", "mode": "vicr", "settings": {"completion_code": code}},
        format="json",
    )
    assert response.status_code == 400
    assert "completion_code" in response.json()["settings"][0]


# ---------------------------------------------------------------------- import totals


def test_an_import_stops_once_its_images_declare_more_pixels_than_the_limit(
    upload, settings, monkeypatch
):
    # Each image is within the per-image limit (40 Mpx) and a few kB compressed, but checking
    # it costs CPU: a 100 MB zip of 40 Mpx ones was two hours of a worker.
    width, height, count = 5000, 4000, 12
    settings.CAPEVAL_MAX_IMPORT_PIXELS = 30_000_000  # the first image fits, two do not
    images = {f"page{i:02}.png": bilevel_png(width, height, mark=i) for i in range(count)}
    before = media_files(settings)
    # Counted, not timed (issue 46: the suite runs on machines at a load average of 8):
    # each image decoded is rendered once, so renditions count the images checked.
    rendered = []
    real = image_imports._rendition
    monkeypatch.setattr(
        image_imports, "_rendition", lambda img: rendered.append(img.size) or real(img)
    )

    job = upload(images_zip=zip_upload(images))

    assert_refused_storing_nothing(job, settings, before)
    # The refusal names the total reached, the limit and the setting that raises it.
    assert "40 Mpx" in job.error and "30 Mpx" in job.error, job.error
    assert "CAPEVAL_MAX_IMPORT_PIXELS" in job.error
    assert "image 2 of 12" in job.error, "it stops at the image over the limit"
    # It stopped there: one image checked, not twelve.
    assert rendered == [(width, height)], rendered


def test_images_under_the_total_are_imported(upload, settings):
    settings.CAPEVAL_MAX_IMPORT_PIXELS = 100
    images = {"a.png": png_bytes((1, 2, 3)), "b.png": png_bytes((4, 5, 6))}  # 48 px each
    job = upload(images_zip=zip_upload(images))
    assert job.status == Job.Status.DONE, job.error
    assert Image.objects.count() == 2


def test_the_command_refuses_more_caption_rows_than_the_limit(study, tmp_path, settings):
    settings.CAPEVAL_MAX_IMPORT_ROWS = 5
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "red.png").write_bytes(png_bytes())
    captions = tmp_path / "c.csv"
    captions.write_text(
        "image,system,caption\n" + "".join(f"red.png,Bot{i},caption {i}\n" for i in range(9))
    )
    stderr = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_study",
            "--study",
            str(study.pk),
            "--images",
            str(folder),
            "--captions",
            str(captions),
            stderr=stderr,
            stdout=io.StringIO(),
        )
    text = str(refused.value) + stderr.getvalue()
    # Row 6 is on line 7 (the header is line 1): reading stops there.
    assert "line 7" in text and "CAPEVAL_MAX_IMPORT_ROWS" in text and " 5 " in text, text
    assert (Image.objects.count(), Caption.objects.count()) == (0, 0)


def test_a_coco_file_with_more_entries_than_the_limit_is_refused(upload, settings):
    settings.CAPEVAL_MAX_IMPORT_ROWS = 3
    entries = [{"image_id": "red.png", "caption": f"a red square {i}"} for i in range(4)]
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=SimpleUploadedFile("Bot.json", json.dumps(entries).encode(), "application/json"),
    )
    assert_refused_storing_nothing(job, settings, set())
    assert "CAPEVAL_MAX_IMPORT_ROWS" in job.error and "4" in job.error


# ---------------------------------------------------------------------- text in imports


def test_nul_and_controls_in_csv_system_names_are_row_errors_naming_line_and_field(
    upload, settings
):
    # PostgreSQL cannot store NUL in text: this was the job failing with a raw database error
    # (and on SQLite a stored system name nobody can type).
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=csv_upload(
            [
                ["image", "system", "caption"],
                ["red.png", "Hu\x00man", "a red square"],
                ["red.png", "Bot\x1b[31m", "a square"],
                ["red.png", f"Bot{RLO}gnp.exe", "a red tile"],
                ["red.png", "Fine", "a red block"],
            ]
        ),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    assert "line 2: system contains the control character U+0000" in errors, errors
    assert "line 3: system contains the control character U+001B" in errors, errors
    assert any(e.startswith("line 4: system") and "U+202E" in e for e in errors), errors
    assert len(errors) == 3, "each bad row once, the good one not at all"
    assert not any("\x00" in e or RLO in e for e in errors), "the messages quote nothing raw"


def test_a_nul_in_a_coco_system_name_from_the_command_is_an_error_naming_system(
    study, tmp_path, settings
):
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "red.png").write_bytes(png_bytes())
    results = tmp_path / "bot.json"
    results.write_text(json.dumps([{"image_id": "red.png", "caption": "a red square"}]))
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_study",
            "--study",
            str(study.pk),
            "--images",
            str(folder),
            "--captions",
            str(results),
            "--system",
            "Bo\x00t",
            stderr=io.StringIO(),
            stdout=io.StringIO(),
        )
    assert "system contains the control character U+0000" in str(refused.value)
    assert (Image.objects.count(), Caption.objects.count()) == (0, 0)


def test_an_override_in_the_import_forms_system_name_is_a_form_error(
    client, researcher, study, var_dir
):
    client.force_login(researcher)
    response = client.post(
        reverse("study_import", args=[study.pk]),
        {
            "purpose": "study",
            "system": f"Bot{RLO}",
            "captions": SimpleUploadedFile(
                "bot.json", b'[{"image_id": "red.png", "caption": "x"}]', "application/json"
            ),
        },
    )
    assert response.status_code == 400
    assert "U+202E" in form_errors(response, "system")
    assert not Job.objects.exists()


def test_a_coco_file_name_longer_than_the_image_name_column_is_an_error_with_its_line(
    upload, settings
):
    # Image.name holds 255 characters: PostgreSQL refused the row with a raw error and
    # SQLite stored it; a zip member may be named that long (it is never a path on disk).
    long_name = "a" * 296 + ".png"
    document = {
        "images": [{"id": 1, "file_name": "red.png"}, {"id": 2, "file_name": long_name}],
        "annotations": [
            {"image_id": 1, "caption": "a red square"},
            {"image_id": 2, "caption": "a long name"},
        ],
    }
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes(), long_name: png_bytes((9, 9, 9))}),
        captions=SimpleUploadedFile(
            "Bot.json", json.dumps(document, indent=1).encode(), "application/json"
        ),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    text = "\n".join(errors)
    # The images entry: the line it starts on (the "{" two lines above its file_name), its
    # JSON path and the field.
    lines = json.dumps(document, indent=1).splitlines()
    line = next(n for n, text in enumerate(lines, start=1) if long_name in text) - 2
    assert lines[line - 1].strip() == "{"
    assert f"line {line}: images[1].file_name has 300 characters; the limit is 255" in text
    # The zip member: named by the archive, refused as an image name.
    assert "image name has 300 characters; the limit is 255" in text, text


def test_a_coco_file_named_longer_than_a_system_name_is_an_error_naming_system(upload, settings):
    # The page takes a COCO file's name (without .json) as the system, whose column holds 100.
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=SimpleUploadedFile(
            "b" * 200 + ".json",
            b'[{"image_id": "red.png", "caption": "a red square"}]',
            "application/json",
        ),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    assert any("system has 200 characters; the limit is 100" in e for e in errors), errors


def test_a_control_character_in_an_image_name_is_refused_naming_the_image(upload, settings):
    job = upload(images_zip=zip_upload({"red\x01square.png": png_bytes(), "ok.png": png_bytes()}))
    errors = assert_refused_storing_nothing(job, settings, set())
    assert any(
        "photos.zip: red\\x01square.png: image name contains the control character U+0001" in e
        for e in errors
    ), errors
    assert len(errors) == 1


def test_a_control_character_in_a_cited_image_name_is_a_row_error(upload, settings):
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=csv_upload(
            [["image", "system", "caption"], ["red\x7f.png", "Human", "a red square"]]
        ),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    assert "line 2: image contains the control character U+007F" in errors, errors


def test_a_nul_in_a_metric_column_name_is_a_header_error(upload, settings):
    # Metric names become keys of Caption.metrics: PostgreSQL's jsonb refuses \u0000.
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=csv_upload(
            [["image", "system", "caption", "metric:cl\x00ip"], ["red.png", "Bot", "red", "0.5"]]
        ),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    assert any(
        e.startswith("line 1: ") and "metric:cl\\x00ip" in e and "U+0000" in e for e in errors
    ), errors


def test_controls_in_description_and_source_are_row_errors(upload, settings):
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=csv_upload(
            [
                ["image", "system", "caption", "description", "source"],
                ["red.png", "Human", "a red square", "A red\x08 square", f"CC-BY {RLO}"],
                ["red.png", "Bot", "a red tile", "A red square\non two lines", "CC0"],
            ]
        ),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    assert "line 2: description contains the control character U+0008" in " ".join(errors)
    assert any(e.startswith("line 2: ") and "source" in e and "U+202E" in e for e in errors)
    assert not any(e.startswith("line 3") for e in errors), "alt text may span lines"


def test_an_unpaired_surrogate_in_a_coco_caption_is_a_row_error(upload, settings):
    # JSON may escape half a surrogate pair; no database can store it as UTF-8.
    text = '[\n{"image_id": "red.png", "caption": "a red \\ud800 square"}\n]'
    job = upload(
        images_zip=zip_upload({"red.png": png_bytes()}),
        captions=SimpleUploadedFile("Bot.json", text.encode(), "application/json"),
    )
    errors = assert_refused_storing_nothing(job, settings, set())
    assert any(e.startswith("line 2: caption") and "U+D800" in e for e in errors), errors


def test_good_text_with_accents_emoji_and_right_to_left_scripts_is_imported(upload):
    rows = [
        ["image", "system", "caption", "description"],
        ["red.png", "Human", "un carré rouge 🟥", "مربع أحمر"],
        ["red.png", "Bot\u200f", "ריבוע אדום", "a red square"],  # a right-to-left mark: kept
    ]
    job = upload(images_zip=zip_upload({"red.png": png_bytes()}), captions=csv_upload(rows))
    assert job.status == Job.Status.DONE, job.result
    assert sorted(Caption.objects.values_list("system", flat=True)) == ["Bot\u200f", "Human"]
    assert Image.objects.get().alt_text == "مربع أحمر"


# ---------------------------------------------------------------------- text in studies


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("name", f"Survey {RLO}fdp.exe", "U+202E"),
        ("name", "Survey\u2066 isolate", "U+2066"),
        ("name", "Two\nlines", "U+000A"),
        ("description", "A study\x07 that beeps", "U+0007"),
    ],
)
def test_bad_text_in_the_study_form_is_an_error_under_its_field(
    client, researcher, field, value, shown
):
    client.force_login(researcher)
    data = {"name": "Fine", "mode": "vicr", "seed": "0", "settings": "{}", field: value}
    response = client.post(reverse("study_new"), data)
    assert response.status_code == 200, "the form shown again, with the error"
    assert shown in form_errors(response, field), response.context["form"].errors
    assert not Study.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("name", f"Survey {RLO}fdp.exe", "U+202E"),
        ("description", "A study \x1b[2J", "U+001B"),
        ("description", "x" * 20_001, "characters"),
    ],
)
def test_bad_text_in_the_study_api_answers_400_naming_the_field(researcher, field, value, shown):
    body = {"name": "Fine", "mode": "vicr", field: value}
    response = api_for(researcher).post(reverse("api_studies"), body, format="json")
    assert response.status_code == 400
    assert shown in " ".join(response.json()[field])
    assert not Study.objects.exists()


def test_an_unpaired_surrogate_in_a_study_name_answers_400(researcher):
    body = '{"name": "Survey \\udc80", "mode": "vicr"}'
    response = api_for(researcher).post(
        reverse("api_studies"), body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "U+DC80" in " ".join(response.json()["name"])
    assert not Study.objects.exists()


def test_a_multi_line_description_with_tabs_is_kept(researcher):
    description = "Two parts:\n\tfirst\r\n\tsecond"
    response = api_for(researcher).post(
        reverse("api_studies"),
        {"name": "Fine", "mode": "vicr", "description": description},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert Study.objects.get().description == description


@pytest.mark.parametrize("which", ["captions", "coco_images"])
def test_coco_json_nested_fifty_thousand_deep_is_an_error_not_a_crash(upload, settings, which):
    # Python's json parses recursively: the job died with "maximum recursion depth exceeded".
    deep = ('{"images": ' + "[" * 50_000 + "]" * 50_000 + "}").encode()
    good = b'[{"image_id": "red.png", "caption": "a red square"}]'
    files = {
        "captions": SimpleUploadedFile("Bot.json", deep if which == "captions" else good),
        "coco_images": SimpleUploadedFile("instances.json", deep),
    }
    if which == "captions":
        del files["coco_images"]
    job = upload(images_zip=zip_upload({"red.png": png_bytes()}), **files)
    errors = assert_refused_storing_nothing(job, settings, set())
    assert any("nested too deeply" in e for e in errors), errors


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [("--name", "night\x00shift", "name"), ("--name", "study \u202egpj.exe", "name")],
)
def test_the_command_refuses_a_study_name_with_a_control_character(
    researcher, tmp_path, option, value, field
):
    """``import_study --create`` reaches only the service: it must check the name itself
    (on PostgreSQL a NUL was a raw DataError, on SQLite it was stored)."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "red.png").write_bytes(png_bytes())
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_study",
            "--create",
            option,
            value,
            "--mode",
            "thumb",
            "--owner",
            researcher.username,
            "--images",
            str(folder),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert str(refused.value).startswith(f"{field} contains"), refused.value
    assert Study.objects.count() == 0
