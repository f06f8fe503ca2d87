"""The import pipeline: every bad input stores nothing and names its problems; a good import
stores the right rows and files; the page, the job and the command around it."""

import csv
import io
import json
import stat
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils.html import escape
from PIL import Image as PILImage

from annotation import storage
from annotation.errors import ServiceError
from annotation.models import Caption, Image, Job, Study
from annotation.services.imports import study_import
from annotation.services.runner import job_run
from annotation.services.studies import study_create, study_open
from tests.factories.vehicle import NAME

# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------


def image_bytes(fmt="PNG", size=(8, 6), color=(200, 30, 30), exif=None) -> bytes:
    buffer = io.BytesIO()
    img = PILImage.new("RGB", size, color)
    kwargs = {"exif": exif} if exif is not None else {}
    img.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims width x height pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def write_csv(path: Path, rows: list[list[str]], encoding="utf-8") -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.write_bytes(buffer.getvalue().encode(encoding))
    return path


def media_files(settings) -> set[Path]:
    root = Path(settings.MEDIA_ROOT)
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def stored_state(settings) -> tuple[int, int, set[Path]]:
    return Image.objects.count(), Caption.objects.count(), media_files(settings)


@pytest.fixture
def study(make_study):
    return make_study("thumb")


@pytest.fixture
def images_dir(tmp_path) -> Path:
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "red.png").write_bytes(image_bytes("PNG", color=(255, 0, 0)))
    (folder / "green.jpg").write_bytes(image_bytes("JPEG", color=(0, 255, 0)))
    return folder


@pytest.fixture
def var_dir(settings, tmp_path) -> Path:
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR


def assert_fails_storing_nothing(settings, *, expect: list[str], **kwargs) -> list[str]:
    """Run the import, check it fails with every expected fragment and leaves no trace."""
    before = stored_state(settings)
    with pytest.raises(ServiceError) as info:
        study_import(**kwargs)
    assert stored_state(settings) == before
    assert info.value.message.startswith("Nothing was imported: ")
    errors = info.value.details["errors"]
    text = "\n".join(errors)
    for fragment in expect:
        assert fragment in text, f"{fragment!r} not in {errors}"
    return errors


# ----------------------------------------------------------------------------------------
# A good import
# ----------------------------------------------------------------------------------------


def test_good_csv_import_stores_rows_files_and_normalised_text(
    make_study, tmp_path, settings, monkeypatch
):
    study = make_study("vicr")  # prime_ratings is VICR's own column
    # The import's scratch folder (this node's, not the storage's) is made here, to be seen.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    folder = tmp_path / "imgs"
    folder.mkdir()
    same = image_bytes("PNG", color=(10, 20, 30))
    (folder / "first.png").write_bytes(same)
    (folder / "second.png").write_bytes(same)
    (folder / "wide.jpg").write_bytes(image_bytes("JPEG", size=(2000, 500)))
    captions = write_csv(
        tmp_path / "captions.csv",
        [
            ["image", "system", "caption", "prime_ratings", "metric:clipscore", "description"],
            ["first.png", "Human", "  a dark square .", "", "0.71", "A dark blue square"],
            ["first.png", "human", "A small dark tile", "", "", ""],
            ["first.png", "GoodBot", "a square", "3;4", "0.5", ""],
            ["second", "GoodBot", "another square.", "", "", ""],
            ["wide.jpg", "GoodBot", "A wide grey band", "2", "", ""],
        ],
    )
    seen_progress = []
    summary = study_import(
        study=study,
        image_sources=[folder],
        captions=captions,
        progress=lambda pct, msg="": seen_progress.append(pct),
    )

    assert summary.images_new == 3 and summary.captions == 5
    images = {image.name: image for image in Image.objects.filter(study=study)}
    assert set(images) == {"first.png", "second.png", "wide.jpg"}
    # Identical bytes under two names: two rows, one original and one rendition on disk.
    assert images["first.png"].file == images["second.png"].file
    files = media_files(settings)
    assert len(files) == 4
    for image in images.values():
        assert (Path(settings.MEDIA_ROOT) / image.file).is_file()
        assert image.file.startswith(f"images/{image.sha256[:2]}/{image.sha256}.")
        with PILImage.open(Path(settings.MEDIA_ROOT) / image.display) as display:
            assert max(display.size) <= settings.CAPEVAL_DISPLAY_MAX_SIDE
    wide = images["wide.jpg"]
    assert (wide.width, wide.height, wide.format) == (2000, 500, "JPEG")
    with PILImage.open(Path(settings.MEDIA_ROOT) / wide.display) as display:
        assert display.size == (1024, 256)
    assert images["first.png"].alt_text == "A dark blue square"
    assert images["wide.jpg"].alt_text == ""

    by_line = {c.line: c for c in Caption.objects.filter(study=study)}
    assert sorted(by_line) == [2, 3, 4, 5, 6]
    assert by_line[2].raw_text == "  a dark square ."
    assert by_line[2].text == "A dark square."
    assert by_line[3].system == Caption.HUMAN  # "human" is the Human system
    assert by_line[4].text == "A square." and by_line[4].spec == {"prime_ratings": [3, 4]}
    assert by_line[4].metrics == {"clipscore": 0.5} and by_line[3].metrics == {}
    assert by_line[5].image.name == "second.png"  # cited by its stem
    assert all(c.purpose == Caption.Purpose.STUDY for c in by_line.values())
    assert seen_progress == sorted(seen_progress) and 0 <= seen_progress[0] < seen_progress[-1]
    # The import's scratch folder is gone, and nothing was staged in the storage.
    assert list(scratch.iterdir()) == []
    assert not any(".staging" in p.parts for p in files)


def test_exif_orientation_is_applied_to_the_rendition(study, tmp_path, settings):
    exif = PILImage.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    (tmp_path / "turned.jpg").write_bytes(image_bytes("JPEG", size=(40, 20), exif=exif.tobytes()))
    study_import(study=study, image_sources=[tmp_path / "turned.jpg"])
    image = Image.objects.get(study=study)
    assert (image.width, image.height) == (20, 40)
    with PILImage.open(Path(settings.MEDIA_ROOT) / image.display) as display:
        assert display.size == (20, 40)


def test_utf8_bom_is_accepted(study, images_dir, tmp_path):
    path = write_csv(
        tmp_path / "c.csv",
        [["image", "system", "caption"], ["red.png", "Human", "Café au lait"]],
        encoding="utf-8-sig",
    )
    study_import(study=study, image_sources=[images_dir], captions=path)
    assert Caption.objects.get().raw_text == "Café au lait"


def test_same_image_in_two_studies_is_stored_once(make_study, images_dir, settings):
    first, second = make_study("thumb", name="one"), make_study("thumb", name="two")
    study_import(study=first, image_sources=[images_dir])
    files = media_files(settings)
    summary = study_import(study=second, image_sources=[images_dir])
    assert summary.files_written == 0 and media_files(settings) == files
    assert Image.objects.filter(study=second).count() == 2


def test_images_then_captions_in_a_second_import(study, images_dir, tmp_path):
    study_import(study=study, image_sources=[images_dir])
    captions = write_csv(
        tmp_path / "c.csv", [["image", "system", "caption"], ["red.png", "Human", "Red."]]
    )
    summary = study_import(study=study, image_sources=[images_dir], captions=captions)
    assert summary.images_existing == 2 and summary.images_new == 0
    assert Image.objects.filter(study=study).count() == 2 and Caption.objects.count() == 1


def test_zip_of_images(study, tmp_path):
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("photos/a.png", image_bytes("PNG"))
        zf.writestr("photos/b.webp", image_bytes("WEBP", color=(1, 2, 3)))
        zf.writestr("__MACOSX/photos/._a.png", b"resource fork")
        zf.writestr("photos/.DS_Store", b"finder")
    study_import(study=study, image_sources=[archive])
    assert {(i.name, i.format) for i in Image.objects.all()} == {
        ("a.png", "PNG"),
        ("b.webp", "WEBP"),
    }


def test_tutorial_and_probation_sets(make_study, images_dir, tmp_path):
    study = make_study("vicr")
    tutorial = write_csv(
        tmp_path / "tutorial.csv",
        [
            ["image", "caption", "truth", "explanation"],
            ["red.png", "A red square", "5", "Exactly right."],
            ["green.jpg", "A blue circle", "1", "Wrong shape and colour."],
        ],
    )
    probation = write_csv(
        tmp_path / "probation.csv",
        [["image", "caption", "truth", "explanation"], ["red.png", "Something red", "4", ""]],
    )
    study_import(study=study, image_sources=[images_dir], captions=tutorial, purpose="tutorial")
    study_import(study=study, captions=probation, purpose="probation")
    rows = list(
        Caption.objects.order_by("purpose", "line").values_list("purpose", "spec", "system")
    )
    # VICR's columns are its own data (Caption.spec); an empty explanation is not stored.
    assert rows == [
        ("probation", {"truth": 4}, "Curated"),
        ("tutorial", {"truth": 5, "explanation": "Exactly right."}, "Curated"),
        ("tutorial", {"truth": 1, "explanation": "Wrong shape and colour."}, "Curated"),
    ]


def test_coco_results_with_separate_images_list(study, images_dir, tmp_path):
    results = tmp_path / "CoolBot.json"
    results.write_text(
        '[\n  {"image_id": 1, "caption": "a red square"},\n'
        '  {"image_id": 2, "caption": "a green square"}\n]'
    )
    mapping = tmp_path / "instances.json"
    mapping.write_text(
        json.dumps(
            {"images": [{"id": 1, "file_name": "red.png"}, {"id": 2, "file_name": "val/green.jpg"}]}
        )
    )
    study_import(
        study=study,
        image_sources=[images_dir],
        captions=results,
        caption_format="coco",
        system="CoolBot",
        coco_images=mapping,
    )
    rows = list(
        Caption.objects.order_by("line").values_list("image__name", "system", "text", "line")
    )
    assert rows == [
        ("red.png", "CoolBot", "A red square.", 2),
        ("green.jpg", "CoolBot", "A green square.", 3),
    ]


def test_coco_annotations_object_with_images(study, images_dir, tmp_path):
    document = {
        "images": [{"id": 7, "file_name": "red.png"}],
        "annotations": [
            {"id": 1, "image_id": 7, "caption": "Red."},
            {"id": 2, "image_id": 7, "caption": "A red tile"},
        ],
    }
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(document, indent=1))
    study_import(
        study=study,
        image_sources=[images_dir],
        captions=path,
        caption_format="coco",
        system="Human",
    )
    assert Caption.objects.filter(system="Human").count() == 2
    assert len(set(Caption.objects.values_list("line", flat=True))) == 2


# ----------------------------------------------------------------------------------------
# Bad images: nothing stored, the reason named
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("notes.jpg", b"this is a text file, renamed", "not a JPEG, PNG or WebP image"),
        ("drawing.svg", b'<svg xmlns="http://www.w3.org/2000/svg"/>', "SVG images are not"),
        ("drawing.png", b'<?xml version="1.0"?><svg xmlns="x"></svg>', "SVG images are not"),
        ("huge.png", png_declaring(50_000, 50_000), "too many pixels"),
        ("readme.txt", b"hello", "not an image file"),
    ],
)
def test_bad_image_stores_nothing(study, images_dir, tmp_path, settings, name, content, reason):
    (images_dir / name).write_bytes(content)
    captions = write_csv(
        tmp_path / "c.csv", [["image", "system", "caption"], ["red.png", "Human", "Red."]]
    )
    errors = assert_fails_storing_nothing(
        settings,
        expect=[name, reason],
        study=study,
        image_sources=[images_dir],
        captions=captions,
    )
    assert len(errors) == 1


def test_crafted_png_header_is_small_and_refused_before_decoding(study, tmp_path, settings):
    content = png_declaring(50_000, 50_000)
    assert len(content) < 200
    (tmp_path / "bomb.png").write_bytes(content)
    assert_fails_storing_nothing(
        settings, expect=["bomb.png", "40 Mpx"], study=study, image_sources=[tmp_path / "bomb.png"]
    )


def test_pixel_limit_below_pillows_own(study, tmp_path, settings):
    # 48 Mpx is under Pillow's threshold but over CapEval's 40 Mpx.
    (tmp_path / "big.png").write_bytes(png_declaring(8000, 6000))
    assert_fails_storing_nothing(
        settings,
        expect=["big.png: declares 8000 x 6000 pixels"],
        study=study,
        image_sources=[tmp_path / "big.png"],
    )


def test_truncated_image(study, tmp_path, settings):
    whole = image_bytes("JPEG", size=(300, 200), color=(9, 99, 199))
    (tmp_path / "cut.jpg").write_bytes(whole[: len(whole) // 2])
    assert_fails_storing_nothing(
        settings, expect=["cut.jpg", "truncated"], study=study, image_sources=[tmp_path / "cut.jpg"]
    )


def test_one_bad_image_keeps_the_good_ones_out_too(study, images_dir, settings):
    (images_dir / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnothing more")
    errors = assert_fails_storing_nothing(
        settings, expect=["broken.png"], study=study, image_sources=[images_dir]
    )
    assert media_files(settings) == set() and len(errors) == 1


def test_existing_name_with_different_content(study, images_dir, tmp_path, settings):
    study_import(study=study, image_sources=[images_dir])
    other = tmp_path / "other"
    other.mkdir()
    (other / "red.png").write_bytes(image_bytes("PNG", color=(254, 0, 0)))
    assert_fails_storing_nothing(
        settings,
        expect=["red.png: the study already has a different"],
        study=study,
        image_sources=[other],
    )


# ----------------------------------------------------------------------------------------
# Bad archives
# ----------------------------------------------------------------------------------------


def make_zip(path: Path, entries: list[tuple]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for entry in entries:
            if isinstance(entry[0], zipfile.ZipInfo):
                zf.writestr(*entry)
            else:
                zf.writestr(entry[0], entry[1])
    return path


def symlink_entry(name: str, target: str) -> tuple:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return (info, target)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (("../evil.png", image_bytes()), "path leaves the archive"),
        (("photos/../../evil.png", image_bytes()), "path leaves the archive"),
        (("/etc/evil.png", image_bytes()), "absolute path"),
        (("C:/evil.png", image_bytes()), "absolute path"),
        (symlink_entry("link.png", "../../etc/passwd"), "symbolic link"),
    ],
)
def test_unsafe_zip_stores_nothing(study, tmp_path, settings, entry, reason):
    archive = make_zip(tmp_path / "photos.zip", [("fine.png", image_bytes()), entry])
    assert_fails_storing_nothing(
        settings, expect=["photos.zip", reason], study=study, image_sources=[archive]
    )


def test_zip_bomb_by_size_and_by_member_count(study, tmp_path, settings):
    settings.CAPEVAL_MAX_ZIP_BYTES = 100_000
    bomb = make_zip(tmp_path / "bomb.zip", [("zeros.png", b"\0" * 5_000_000)])
    assert bomb.stat().st_size < 20_000
    assert_fails_storing_nothing(
        settings, expect=["bomb.zip: uncompresses to"], study=study, image_sources=[bomb]
    )

    settings.CAPEVAL_MAX_ZIP_MEMBERS = 3
    many = make_zip(
        tmp_path / "many.zip", [(f"{n}.png", image_bytes(color=(n, n, n))) for n in range(5)]
    )
    assert_fails_storing_nothing(
        settings, expect=["many.zip: 5 entries; the limit is 3"], study=study, image_sources=[many]
    )


# ----------------------------------------------------------------------------------------
# Bad caption files
# ----------------------------------------------------------------------------------------


def test_every_bad_row_is_reported_with_its_line(make_study, images_dir, tmp_path, settings):
    study = make_study("vicr")  # prime_ratings is VICR's own column
    captions = write_csv(
        tmp_path / "c.csv",
        [
            ["image", "system", "caption", "prime_ratings"],
            ["red.png", "Human", "A fine caption", ""],
            ["red.png", "Human", "   ", ""],
            ["missing.jpg", "Human", "A caption", ""],
            ["green.jpg", "Human", "x" * 10_001, ""],
            ["green.jpg", "", "No system", ""],
            ["green.jpg", "GoodBot", "Bad primes", "3;9"],
            ["red.png", "GoodBot", "One", ""],
            ["red.png", "GoodBot", "Two", ""],
        ],
    )
    errors = assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=captions,
        expect=[
            "line 3: empty caption",
            "line 4: unknown image 'missing.jpg'",
            "line 5: caption has 10001 characters; the limit is 10000 (CAPEVAL_MAX_CAPTION_CHARS",
            "line 6: empty system name",
            "line 7: prime rating '9' is not a number from 1 to 5",
            "line 9: duplicate: GoodBot has another caption of 'red.png' on line 8",
        ],
    )
    assert len(errors) == 6
    assert [int(e.split(":")[0].removeprefix("line ")) for e in errors] == [3, 4, 5, 6, 7, 9]
    assert media_files(settings) == set()


def test_missing_and_unknown_columns(study, images_dir, tmp_path, settings):
    captions = write_csv(tmp_path / "c.csv", [["image", "captoin"], ["red.png", "Red"]])
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=captions,
        expect=["line 1: missing column(s) caption, system", "unknown column(s) captoin"],
    )


def test_a_mode_reads_only_its_own_columns(make_study, images_dir, tmp_path, settings):
    # prime_ratings is VICR's column (Caption.spec): a THumB study's file may not have it,
    # and the allowed columns it is told of are the shared ones.
    captions = write_csv(
        tmp_path / "c.csv",
        [["image", "system", "caption", "prime_ratings"], ["red.png", "Human", "Red", "3;4"]],
    )
    errors = assert_fails_storing_nothing(
        settings,
        study=make_study("thumb"),
        image_sources=[images_dir],
        captions=captions,
        expect=["line 1: unknown column(s) prime_ratings"],
    )
    assert "allowed: caption, description, image, source, system, metric:<name>" in errors[0]
    study = make_study("vicr")
    study_import(study=study, image_sources=[images_dir], captions=captions)
    assert Caption.objects.get(study=study).spec == {"prime_ratings": [3, 4]}


def test_a_mode_without_own_purposes_refuses_a_tutorial_set(make_study, tmp_path, settings):
    captions = write_csv(
        tmp_path / "c.csv", [["image", "caption", "truth", "explanation"], ["a", "b", "1", "c"]]
    )
    assert_fails_storing_nothing(
        settings,
        study=make_study("thumb"),
        captions=captions,
        purpose="tutorial",
        expect=["unknown purpose 'tutorial' (use study)"],
    )


def test_row_with_wrong_field_count(study, images_dir, tmp_path, settings):
    path = tmp_path / "c.csv"
    path.write_text("image,system,caption\nred.png,Human\nred.png,Human,Red,extra\n")
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        expect=["line 2: 2 fields; the header has 3", "line 3: 4 fields; the header has 3"],
    )


def test_line_numbers_count_newlines_inside_quoted_captions(study, images_dir, tmp_path, settings):
    path = tmp_path / "c.csv"
    path.write_text('image,system,caption\nred.png,Human,"two\nlines"\nnope.png,Human,x\n')
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        expect=["line 4: unknown image 'nope.png'"],
    )


def test_csv_not_utf8(study, images_dir, tmp_path, settings):
    path = write_csv(
        tmp_path / "c.csv",
        [["image", "system", "caption"], ["red.png", "Human", "ok"], ["red.png", "Human", "Café"]],
        encoding="latin-1",
    )
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        expect=["line 3: c.csv is not UTF-8 (byte 0xe9"],
    )


def test_malformed_csv_quoting(study, images_dir, tmp_path, settings):
    path = tmp_path / "c.csv"
    path.write_text('image,system,caption\nred.png,Human,"unclosed quote" here\n')
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        expect=["line 2: malformed CSV"],
    )


def test_invalid_json_reports_its_position(study, images_dir, tmp_path, settings):
    path = tmp_path / "bot.json"
    path.write_text('[\n  {"image_id": "red.png", "caption": "Red"}\n  {"image_id": 2}\n]')
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        caption_format="coco",
        system="Bot",
        expect=["line 3: the captions file is not valid JSON (Expecting ','", "column 3"],
    )


def test_bad_coco_entries_are_each_reported(study, images_dir, tmp_path, settings):
    path = tmp_path / "bot.json"
    path.write_text(
        '[\n{"image_id": "red.png", "caption": ""},\n{"caption": "no id"},\n'
        '{"image_id": 5, "caption": "id without a mapping"},\n'
        '{"image_id": "green", "caption": "fine"}\n]'
    )
    errors = assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        caption_format="coco",
        system="Bot",
        expect=[
            "line 2: empty caption",
            'line 3: each entry needs "image_id"',
            "line 4: image_id 5 needs a COCO images list",
        ],
    )
    assert len(errors) == 3


def test_tutorial_rows_need_truth_and_explanation(make_study, images_dir, tmp_path, settings):
    study = make_study("vicr")
    path = write_csv(
        tmp_path / "t.csv",
        [
            ["image", "caption", "truth", "explanation"],
            ["red.png", "Red", "6", "Too high."],
            ["red.png", "Red square", "3", ""],
        ],
    )
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        purpose="tutorial",
        expect=[
            "line 2: truth must be a whole number from 1 to 5, not '6'",
            "line 3: empty explanation",
        ],
    )


def test_reimporting_the_same_captions_is_refused(study, images_dir, tmp_path, settings):
    path = write_csv(
        tmp_path / "c.csv",
        [
            ["image", "system", "caption"],
            ["red.png", "Human", "Red."],
            ["red.png", "Bot", "Red thing."],
        ],
    )
    study_import(study=study, image_sources=[images_dir], captions=path)
    assert_fails_storing_nothing(
        settings,
        study=study,
        captions=path,
        expect=[
            "line 2: duplicate: the same caption of 'red.png' by Human is in the study",
            "line 3: duplicate: Bot has another caption of 'red.png' in the study",
        ],
    )


def test_open_study_refuses_imports(make_study, images_dir, settings):
    study = make_study("thumb")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    study.refresh_from_db()
    assert_fails_storing_nothing(
        settings, study=study, image_sources=[images_dir], expect=["no longer a draft"]
    )


def test_failed_transaction_removes_the_files_it_placed(
    study, images_dir, tmp_path, settings, make_study, monkeypatch
):
    # One of the two images is already on disk (another study): it must survive the rollback.
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "red.png").write_bytes((images_dir / "red.png").read_bytes())
    study_import(study=make_study("thumb", name="other"), image_sources=[shared])
    before = stored_state(settings)
    captions = write_csv(
        tmp_path / "c.csv", [["image", "system", "caption"], ["red.png", "Human", "Red."]]
    )

    def explode(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Caption.objects, "bulk_create", explode)
    with pytest.raises(RuntimeError):
        study_import(study=study, image_sources=[images_dir], captions=captions)
    assert stored_state(settings) == before


# ----------------------------------------------------------------------------------------
# Captions that look like code are stored as text and shown escaped
# ----------------------------------------------------------------------------------------

HOSTILE = [
    '<script>alert("x")</script> a red square',
    '<img src=x hx-get="/studies/new/" hx-trigger="load"> a red square',
    '=HYPERLINK("http://evil.example","click") a red square',
]


def test_hostile_captions_are_stored_raw_and_shown_escaped(
    researcher, annotator, images_dir, tmp_path, client
):
    study = study_create(owner=researcher, name="Escapes", mode=NAME, settings={"target": 3})
    path = write_csv(
        tmp_path / "c.csv",
        [["image", "system", "caption"]] + [["red.png", "Human", t] for t in HOSTILE],
    )
    study_import(study=study, image_sources=[images_dir], captions=path)
    assert sorted(Caption.objects.values_list("raw_text", flat=True)) == sorted(HOSTILE)
    study_open(study=study)
    study.annotators.add(annotator)
    client.force_login(annotator)
    shown = []
    for _ in HOSTILE:
        page = client.get(reverse("participate_next", args=[study.public_id]))
        html = page.content.decode()
        caption = page.context["caption"]
        assert escape(caption.text) in html
        assert "<script>alert" not in html and "<img src=x" not in html
        shown.append(caption.raw_text)
        client.post(page.context["submit_url"], {"part": 0, "rating": 3})
    assert sorted(shown) == sorted(HOSTILE)


def test_hostile_image_names_in_errors_are_escaped_on_the_job_page(
    study, researcher, client, tmp_path
):
    # A job's files are uploads in the media storage, as import_request stores them.
    written = write_csv(
        tmp_path / "c.csv",
        [["image", "system", "caption"], ["<script>alert(1)</script>", "Human", "x"]],
    )
    staging = storage.new_upload_folder()
    name = storage.write_bytes(f"{staging}/captions/c.csv", Path(written).read_bytes())
    job = Job.objects.create(
        kind=Job.Kind.IMPORT,
        study=study,
        created_by=researcher,
        params={"staging": staging, "captions": name},
    )
    job_run(job=job)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    client.force_login(researcher)
    html = client.get(reverse("job_status", args=[job.pk])).content.decode()
    assert "unknown image &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;" in html
    assert "<script>alert(1)" not in html


# ----------------------------------------------------------------------------------------
# The page and the job
# ----------------------------------------------------------------------------------------


def upload_data(images=None, captions_rows=None, **fields):
    data = dict(fields)
    if images is not None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            for name, content in images.items():
                zf.writestr(name, content)
        data["images_zip"] = SimpleUploadedFile(
            "photos.zip", buffer.getvalue(), content_type="application/zip"
        )
    if captions_rows is not None:
        text = "\n".join(",".join(row) for row in captions_rows) + "\n"
        data["captions"] = SimpleUploadedFile("captions.csv", text.encode(), "text/csv")
    return data


def staged_uploads(var_dir: Path) -> list[str]:
    """The uploads waiting in the media storage (``var_dir``: where they were before
    issue 41, kept so that a test still finds none left there either)."""
    old = var_dir / "uploads"
    assert not old.exists() or not any(p.is_file() for p in old.rglob("*"))
    return storage.names_under(storage.UPLOADS)


def test_page_lists_labelled_controls(client, researcher, study, var_dir):
    client.force_login(researcher)
    page = client.get(reverse("study_import", args=[study.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    for field in page.context["form"]:
        assert f'<label for="{field.id_for_label}">' in html
        assert f'id="{field.id_for_label}"' in html
    assert 'name="image_files"' in html and "multiple" in html


def test_upload_runs_the_job_and_cleans_the_staging_folder(
    client, researcher, study, var_dir, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    data = upload_data(
        images={"a.png": image_bytes(color=(1, 1, 1)), "b.jpg": image_bytes("JPEG")},
        captions_rows=[
            ["image", "system", "caption"],
            ["a.png", "Human", "dark"],
            ["b", "Bot", "a picture"],
        ],
        purpose="study",
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert response.status_code == 302 and response["Location"] == reverse(
        "job_status", args=[job.pk]
    )
    assert job.status == Job.Status.DONE and job.progress == 100, job.error
    assert job.result["captions"] == 2 and job.result["images_new"] == 2
    assert Image.objects.filter(study=study).count() == 2
    assert Caption.objects.filter(study=study).count() == 2
    assert staged_uploads(var_dir) == []
    page = client.get(reverse("job_status", args=[job.pk]))
    assert job.result["summary"] in page.content.decode()


def test_htmx_upload_answers_with_the_progress_bar(
    client, researcher, study, var_dir, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    data = {
        "image_files": [
            SimpleUploadedFile("one.png", image_bytes(color=(5, 5, 5)), "image/png"),
            SimpleUploadedFile("two.png", image_bytes(color=(6, 6, 6)), "image/png"),
        ],
        "purpose": "study",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("study_import", args=[study.pk]), data, headers={"HX-Request": "true"}
        )
    assert response.status_code == 200
    job = Job.objects.get(study=study)
    assert f'id="job-progress-{job.pk}"' in response.content.decode()
    assert sorted(Image.objects.values_list("name", flat=True)) == ["one.png", "two.png"]


def test_failed_upload_lists_every_error_and_stores_nothing(
    client, researcher, study, var_dir, settings, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    data = upload_data(
        images={"a.png": image_bytes(), "../escape.png": image_bytes()},
        captions_rows=[
            ["image", "system", "caption"],
            ["a.png", "Human", ""],
            ["zzz.png", "Human", "x"],
        ],
        purpose="study",
    )
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study)
    assert job.status == Job.Status.FAILED
    errors = job.result["errors"]
    assert any("path leaves the archive" in e for e in errors)
    assert "line 2: empty caption" in errors and "line 3: unknown image 'zzz.png'" in errors
    assert (Image.objects.count(), Caption.objects.count(), media_files(settings)) == (0, 0, set())
    assert staged_uploads(var_dir) == []
    html = client.get(reverse("job_status", args=[job.pk])).content.decode()
    assert "line 3: unknown image &#x27;zzz.png&#x27;" in html


def test_a_failed_import_says_failed_once_and_folds_a_long_error_list(
    client, researcher, study, var_dir, django_capture_on_commit_callbacks
):
    """Issue 26, row 17: a refused import showed "Failed · Failed", a part-filled progress
    bar and every row error (40 red lines) in the jobs list."""
    client.force_login(researcher)
    rows = [["image", "system", "caption"]] + [[f"missing{i}.png", "Human", "x"] for i in range(40)]
    data = upload_data(images={"a.png": image_bytes()}, captions_rows=rows, purpose="study")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study)
    assert job.status == Job.Status.FAILED and len(job.result["errors"]) == 40
    html = client.get(reverse("job_status", args=[job.pk]), HTTP_HX_REQUEST="true")
    html = html.content.decode()
    assert "Failed · Failed" not in html and f"job {job.pk}: Failed" in html
    assert "<progress" not in html
    shown, folded = html.split("<details", 1) if "<details" in html else (html, "")
    assert shown.count("unknown image") == 5
    assert folded.count("unknown image") == 35 and "35 more" in folded


def test_an_import_summary_counts_images_not_their_stored_copies(
    client, researcher, study, var_dir, django_capture_on_commit_callbacks
):
    """Issue 26, row 17: "16 new file(s) stored" for 8 images (each has a display copy)."""
    client.force_login(researcher)
    rows = [["image", "system", "caption"], ["one.png", "Human", "x"], ["two.png", "Human", "y"]]
    images = {"one.png": image_bytes(), "two.png": image_bytes(color=(0, 0, 255))}
    data = upload_data(images=images, captions_rows=rows, purpose="study")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study)
    assert job.status == Job.Status.DONE, job.error
    assert job.result["summary"].startswith("Imported 2 new image(s) (0 already in the study)")
    assert "file(s)" not in job.result["summary"]


def test_a_thumb_import_says_which_captions_it_will_not_judge(
    client, researcher, study, var_dir, django_capture_on_commit_callbacks
):
    """Issue 26, row 18: a second Human caption per image was accepted and silently unused
    (THumB judges one caption per system and image). The import and the study page say so."""
    client.force_login(researcher)
    rows = [["image", "system", "caption"]]
    for name in ("one.png", "two.png", "three.png"):
        rows += [[name, "Human", f"first of {name}"], [name, "Bot", f"bot on {name}"]]
    rows += [["one.png", "Human", "second of one"], ["two.png", "Human", "second of two"]]
    colors = {"one.png": (1, 2, 3), "two.png": (4, 5, 6), "three.png": (7, 8, 9)}
    images = {name: image_bytes(color=color) for name, color in colors.items()}
    data = upload_data(images=images, captions_rows=rows, purpose="study")
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=[study.pk]), data)
    job = Job.objects.get(study=study)
    assert job.status == Job.Status.DONE, job.error
    note = "2 Human caption(s) on 2 image(s) are not judged"
    assert note in job.result["summary"]
    page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert note in page
    assert Caption.objects.filter(study=study).count() == 8  # kept, never dropped


def test_form_without_files_is_refused(client, researcher, study, var_dir):
    client.force_login(researcher)
    response = client.post(reverse("study_import", args=[study.pk]), {"purpose": "study"})
    assert response.status_code == 400
    assert "Choose images, a captions file, or both." in response.content.decode()
    assert not Job.objects.exists()


@pytest.mark.parametrize("who", ["other_researcher", "annotator"])
def test_others_get_404(request, client, study, var_dir, who):
    client.force_login(request.getfixturevalue(who))
    url = reverse("study_import", args=[study.pk])
    assert client.get(url).status_code == 404
    data = upload_data(images={"a.png": image_bytes()}, purpose="study")
    assert client.post(url, data).status_code == 404
    assert not Job.objects.exists() and staged_uploads(var_dir) == []


def test_live_study_refuses_the_page(client, researcher, study, var_dir):
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    client.force_login(researcher)
    url = reverse("study_import", args=[study.pk])
    assert client.get(url).status_code == 409
    assert (
        client.post(url, upload_data(images={"a.png": image_bytes()}, purpose="study")).status_code
        == 409
    )
    assert not Job.objects.exists()


def test_request_over_the_upload_limit_gets_413(client, researcher, study, var_dir, settings):
    settings.CAPEVAL_MAX_UPLOAD_BYTES = 2_000
    client.force_login(researcher)
    data = upload_data(
        images={"a.png": image_bytes(size=(200, 200)) + b"\0" * 5_000}, purpose="study"
    )
    response = client.post(reverse("study_import", args=[study.pk]), data)
    assert response.status_code == 413
    assert not Job.objects.exists() and staged_uploads(var_dir) == []


# ----------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------


def test_command_imports_and_prints_a_summary(study, images_dir, tmp_path):
    captions = write_csv(
        tmp_path / "c.csv", [["image", "system", "caption"], ["red.png", "Human", "red"]]
    )
    out = io.StringIO()
    call_command(
        "import_study",
        "--study",
        str(study.pk),
        "--images",
        str(images_dir),
        "--captions",
        str(captions),
        stdout=out,
    )
    assert "2 new image(s)" in out.getvalue() and "1 study caption(s)" in out.getvalue()
    assert Caption.objects.get().text == "Red."


def test_command_coco_system_defaults_to_the_file_stem(study, images_dir, tmp_path):
    path = tmp_path / "NeuralTalk.json"
    path.write_text('[{"image_id": "red.png", "caption": "a red box"}]')
    call_command(
        "import_study",
        "--study",
        str(study.pk),
        "--images",
        str(images_dir),
        "--captions",
        str(path),
        stdout=io.StringIO(),
    )
    assert Caption.objects.get().system == "NeuralTalk"


def test_command_prints_every_error_and_fails(study, images_dir, tmp_path, settings):
    captions = write_csv(
        tmp_path / "c.csv",
        [["image", "system", "caption"], ["nope.png", "Human", "x"], ["red.png", "Human", ""]],
    )
    with pytest.raises(CommandError, match="2 problems") as refused:
        call_command(
            "import_study",
            "--study",
            str(study.pk),
            "--images",
            str(images_dir),
            "--captions",
            str(captions),
            stderr=io.StringIO(),
            stdout=io.StringIO(),
        )
    assert "line 2: unknown image 'nope.png'" in str(refused.value)
    assert "line 3: empty caption" in str(refused.value)
    assert stored_state(settings) == (0, 0, set())


def test_command_creates_the_study_only_with_a_successful_import(researcher, images_dir, tmp_path):
    bad = write_csv(
        tmp_path / "bad.csv", [["image", "system", "caption"], ["nope.png", "Human", "x"]]
    )
    args = [
        "import_study",
        "--create",
        "--name",
        "Shell study",
        "--mode",
        "thumb",
        "--owner",
        researcher.username,
        "--images",
        str(images_dir),
    ]
    with pytest.raises(CommandError):
        call_command(*args, "--captions", str(bad), stderr=io.StringIO(), stdout=io.StringIO())
    assert not Study.objects.exists()
    call_command(*args, stdout=io.StringIO())
    study = Study.objects.get()
    assert (study.name, study.mode, study.owner) == ("Shell study", "thumb", researcher)
    assert study.images.count() == 2


def test_command_refuses_an_unknown_study(db):
    with pytest.raises(CommandError, match="No study with id 999"):
        call_command("import_study", "--study", "999", "--captions", __file__)


def test_control_characters_in_captions_are_refused(study, images_dir, tmp_path, settings):
    # PostgreSQL cannot store NUL in text, and no caption needs one.
    path = tmp_path / "c.csv"
    path.write_text("image,system,caption\nred.png,Human,red\x00square\nred.png,Human,ok\x07\n")
    assert_fails_storing_nothing(
        settings,
        study=study,
        image_sources=[images_dir],
        captions=path,
        expect=[
            "line 2: caption contains the control character U+0000",
            "line 3: caption contains the control character U+0007",
        ],
    )


def test_csv_without_system_column_takes_the_given_system(study, images_dir, tmp_path):
    path = write_csv(tmp_path / "c.csv", [["image", "caption"], ["red.png", "red"]])
    study_import(study=study, image_sources=[images_dir], captions=path, system="OneBot")
    assert Caption.objects.get().system == "OneBot"


def test_htmx_form_errors_replace_the_form_in_place(client, researcher, study, var_dir):
    client.force_login(researcher)
    response = client.post(
        reverse("study_import", args=[study.pk]),
        {"purpose": "study"},
        headers={"HX-Request": "true"},
    )
    # htmx swaps only 2xx answers; the headers point it at the form panel.
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#import-panel" and response["HX-Reselect"] == "#import-panel"
    assert "Choose images, a captions file, or both." in response.content.decode()
