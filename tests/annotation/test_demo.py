"""The demo: loads real, licensed photographs through the import service, twice harmlessly."""

import csv
import io
from collections import Counter
from pathlib import Path

from django.contrib.auth import authenticate
from django.core.management import call_command
from PIL import Image as PILImage

from annotation.management.commands.load_demo import (
    DEMO_DIR,
    DEMO_FINISHED,
    DEMO_STUDIES,
    PUBLISHED,
    SHARED_DATASETS,
)
from annotation.models import Caption, Image, Item, Job, Judgment, Participant, Study, User
from annotation.modes import get_mode
from annotation.modes.thumb.models import Rater
from annotation.registry import caption_purpose_choices

DEMO_IMAGES = sorted(p.name for p in (DEMO_DIR / "images").iterdir() if p.is_file())


def registered(mode: str) -> bool:
    try:
        get_mode(mode)
    except KeyError:
        return False
    return True


def snapshot(settings) -> dict:
    media = Path(settings.MEDIA_ROOT)
    return {
        "users": sorted(User.objects.values_list("username", "password")),
        "studies": sorted(Study.objects.values_list("name", "mode", "status")),
        "images": Image.objects.count(),
        "captions": Caption.objects.count(),
        "items": Item.objects.count(),
        "annotators": sorted(Study.annotators.through.objects.values_list("study_id", "user_id")),
        "files": sorted(p for p in media.rglob("*") if p.is_file()),
    }


def read_csv(name: str) -> list[dict[str, str]]:
    with (DEMO_DIR / name).open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_load_demo_twice_changes_nothing(db, settings, django_capture_on_commit_callbacks):
    # The test's transaction never commits: run the report jobs' on-commit enqueues here.
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=io.StringIO())
    first = snapshot(settings)
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=out)
    assert snapshot(settings) == first
    assert "researcher / researcher" in out.getvalue()

    loaded = [(mode, name) for mode, name in DEMO_STUDIES if registered(mode)]
    finished = [(mode, name) for mode, name, _, _ in DEMO_FINISHED if registered(mode)]
    published = [name for path, name, _ in PUBLISHED if (SHARED_DATASETS / path).is_file()]
    assert sorted(s[0] for s in first["studies"]) == sorted(
        [name for _, name in loaded + finished] + published
    )
    # Every mode's finished study was answered through the services and has its report,
    # and so has every published release.
    for _, name in finished:
        assert_answered_with_a_report(Study.objects.get(name=name))
    for name in published:
        assert_answered_with_a_report(Study.objects.get(name=name))
    for mode, name in loaded:
        study = Study.objects.get(name=name)
        assert sorted(study.images.values_list("name", flat=True)) == DEMO_IMAGES
        study_captions = study.captions.filter(purpose=Caption.Purpose.STUDY)
        # Each mode's demo names its caption file (the spans demo's captions are detailed).
        captions_csv = read_csv(get_mode(mode).demo.captions)
        assert study_captions.count() == len(captions_csv)
        captioned = {row["image"] for row in captions_csv}
        assert not study.images.filter(name__in=captioned, source="").exists()
        assert set(study.annotators.values_list("username", flat=True)) == {
            "annotator1",
            "annotator2",
        }
        # The mode's further caption files (VICR's tutorial and probation pools), each with
        # its purpose and every row; no other purpose has any caption.
        extra = {
            purpose: len(read_csv(name)) for name, purpose in get_mode(mode).demo.extra_captions
        }
        for purpose, _ in caption_purpose_choices()[1:]:
            assert study.captions.filter(purpose=purpose).count() == extra.get(purpose, 0)
    # The same photographs in every study are stored once: an original and a rendition each.
    if loaded:
        assert len(first["files"]) == 2 * len(DEMO_IMAGES)


def assert_answered_with_a_report(study: Study) -> None:
    assert study.status == Study.Status.CLOSED, study.name
    assert Judgment.objects.filter(study=study).count() >= 20, study.name
    report = study.jobs.filter(kind=Job.Kind.REPORT, status=Job.Status.DONE).get()
    assert report.result, f"{study.name}: the report stored no result"
    if study.participants.filter(source=Participant.Source.PROLIFIC).exists():
        # The simulated crowd: several workers, each with answers of their own.
        answered = Judgment.objects.filter(study=study).order_by().values("participant")
        answered = answered.distinct()
        assert answered.count() >= 5, study.name


def test_demo_accounts(db):
    call_command("load_demo", no_finished=True, no_published=True, stdout=io.StringIO())
    for name, flags in [("admin", "is_superuser"), ("researcher", "is_researcher")]:
        user = authenticate(username=name, password=name)
        assert user is not None and getattr(user, flags)
    # THumB's demo rows: annotator1 is a native English speaker, annotator2 is not.
    assert authenticate(username="annotator1", password="annotator1").thumb_rater.native_english
    annotator2 = authenticate(username="annotator2", password="annotator2")
    assert annotator2 is not None
    assert not Rater.objects.filter(user=annotator2, native_english=True).exists()


def test_licences_name_every_demo_image():
    licences = (DEMO_DIR / "LICENCES.md").read_text(encoding="utf-8")
    rows = [line for line in licences.splitlines() if line.startswith("| `")]
    listed = sorted(line.split("`")[1] for line in rows)
    assert listed == DEMO_IMAGES and len(DEMO_IMAGES) >= 8
    for row in rows:
        assert any(word in row.lower() for word in ("public domain", "cc0", "no known copyright"))


def test_demo_images_are_small_real_photographs():
    total = 0
    for name in DEMO_IMAGES:
        path = DEMO_DIR / "images" / name
        total += path.stat().st_size
        with PILImage.open(path) as img:
            assert img.format == "JPEG" and max(img.size) <= 1024 and min(img.size) >= 256
    assert total < 2 * 1024 * 1024


def test_demo_captions_serve_every_mode():
    rows = read_csv("captions.csv")
    assert {row["image"] for row in rows} == set(DEMO_IMAGES)
    per_image = Counter((row["image"], row["system"]) for row in rows)
    for image in DEMO_IMAGES:
        assert per_image[(image, "Human")] >= 2  # HUMANr's Human-vs-Human pair
        for system in ("GoodBot", "MidBot", "BadBot"):
            assert per_image[(image, system)] == 1
    # VICR's demo reads the same captions with its own column, two primed ratings each.
    vicr_rows = read_csv("vicr_captions.csv")
    assert [{k: v for k, v in row.items() if k != "prime_ratings"} for row in vicr_rows] == rows
    assert all(len(row["prime_ratings"].split(";")) == 2 for row in vicr_rows)
    tutorial, probation = read_csv("vicr_tutorial.csv"), read_csv("vicr_probation.csv")
    assert (len(tutorial), len(probation)) == (10, 20)
    assert all(row["explanation"].strip() for row in tutorial)
    truths = {int(row["truth"]) for row in tutorial + probation}
    assert truths == {1, 2, 3, 4, 5}


def test_finished_arena_demo_has_a_leaderboard(db, django_capture_on_commit_callbacks):
    """The finished arena study alone (fast): answered by the simulated crowd through the
    services, closed, its report holding a leaderboard in the hidden qualities' order."""
    from annotation.management.commands.load_demo import Command

    arena = get_mode("arena")
    name = arena.demo.finished
    command = Command(stdout=io.StringIO())
    owner = User.objects.create_user("researcher", password="x", is_researcher=True)
    with django_capture_on_commit_callbacks(execute=True):
        command._finished(
            arena.name, name, owner, arena.demo.finished_workers, arena.demo.finished_settings
        )
    study = Study.objects.get(name=name)
    assert_answered_with_a_report(study)
    # Every battle slot is filled: 6 system pairs x 9 images x 2 workers.
    battles = Judgment.objects.filter(study=study, item__kind="battle")
    assert battles.count() == 6 * len(DEMO_IMAGES) * 2
    assert Judgment.objects.filter(study=study, item__kind="catch").exists()
    result = study.jobs.get(kind=Job.Kind.REPORT).result
    rows = {row["system"]: row for row in result["leaderboard"]}
    # The simulated crowd's hidden qualities: Human 4.6 > GoodBot 4.0 > MidBot 3.0 > BadBot 1.6.
    # 108 battles cannot always order the two close ones (Human and GoodBot, 0.6 apart: the
    # seed of the lease ids decides), so each system's true rank must lie in its rank
    # interval, and the far ones must be told apart.
    for true_rank, system in enumerate(["Human", "GoodBot", "MidBot", "BadBot"], start=1):
        assert rows[system]["rank_low"] <= true_rank <= rows[system]["rank_high"], rows[system]
    assert rows["GoodBot"]["score"] > rows["MidBot"]["score"] > rows["BadBot"]["score"]
    assert rows["Human"]["score"] > rows["MidBot"]["score"]
    assert result["length_leaderboard"] and result["length_coefficient"] is not None
