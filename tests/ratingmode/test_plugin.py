"""The test-rating mode as a plug-in unit (issue 44): served with its own script and
stylesheet, imported by its own importer, reported, exported and shown on the dashboard by
its own panel, through the platform's real views, command and services, with every file in
``tests/ratingmode/``.
"""

import csv
import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, RequestFactory
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Caption, Judgment, Participant, Study
from annotation.services.exports import export_file
from annotation.services.imports.releases import release_formats, release_import
from annotation.services.participants import crowd_link_token
from tests.factories.core import caption_study
from tests.ratingmode import NAME
from tests.ratingmode.importers import COLUMNS, RELEASE_FORMAT

pytestmark = pytest.mark.django_db

PACKAGE = Path(__file__).resolve().parent
#: A release of the mode's format: two images, three captions, three raters.
RELEASE = [
    ("dog.jpg", "A dog runs on the beach.", "r1", "5"),
    ("dog.jpg", "A dog runs on the beach.", "r2", "4"),
    ("dog.jpg", "A cat sleeps.", "r1", "1"),
    ("dog.jpg", "A cat sleeps.", "r3", "2"),
    ("bus.jpg", "A red bus on a street.", "r2", "4"),
    ("bus.jpg", "A red bus on a street.", "r3", "3"),
    ("bus.jpg", "A red bus on a street.", "r1", "4"),
]


def release_file(folder: Path, rows, header=COLUMNS) -> Path:
    path = folder / "ratings.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def imported(researcher, tmp_path) -> Study:
    """The release imported by the platform's command, as a researcher would."""
    out = io.StringIO()
    call_command(
        "import_ratings",
        str(release_file(tmp_path, RELEASE)),
        "--format",
        RELEASE_FORMAT,
        "--owner",
        researcher.username,
        stdout=out,
    )
    study = Study.objects.get(owner=researcher, mode=NAME)
    assert out.getvalue().startswith(f"Study {study.pk} ({study.name}): ")
    return study


def served(url: str):
    """``url`` answered as runserver and the live test server answer static files."""
    handler = StaticFilesHandler(WSGIHandler())
    return handler.get_response(RequestFactory().get(url))


# ---------------------------------------------------------------------- served


def test_the_item_page_loads_the_modes_own_script_and_stylesheet(researcher):
    study = caption_study(researcher, NAME, captions=2)
    client = Client()
    entry = client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": "w1", "STUDY_ID": "S", "SESSION_ID": "X"},
    )
    assert entry.status_code == 302

    page = client.get(reverse("participate_next", args=[study.public_id]))

    assert page.status_code == 200
    html = page.content.decode()
    assert "<h1>Rate a caption</h1>" in html and 'id="rating-said"' in html
    assets = re.findall(r'(?:src|href)="(/static/modes/ratingmode/[^"]+)"', html)
    assert sorted(Path(a).name for a in assets) == ["rating.css", "rating.js"]
    for url in assets:
        relative = url.removeprefix("/static/")
        # Found in the mode app's own static folder, and served from it.
        assert Path(finders.find(relative)) == PACKAGE / "static" / relative
        response = served(url)
        assert response.status_code == 200, url
        assert b"".join(response.streaming_content) == (PACKAGE / "static" / relative).read_bytes()
    # Under the strict policy: no inline script or style on the page.
    policy = page.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in policy
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "an inline script"
    assert "<style" not in html and " style=" not in html


def test_the_participant_answers_through_the_page(researcher):
    study = caption_study(researcher, NAME, captions=1, target=1)
    client = Client()
    client.get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {"PROLIFIC_PID": "w1", "STUDY_ID": "S", "SESSION_ID": "X"},
    )
    page = client.get(reverse("participate_next", args=[study.public_id]))
    lease = page.context["assignment"]

    refused = client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]),
        {"part": "0", "rating": "9"},
    )
    client.post(
        reverse("participate_submit", args=[study.public_id, lease.token]),
        {"part": "0", "rating": "4"},
    )

    assert refused.status_code == 400
    assert "Choose a rating from 1 to 5." in refused.content.decode()
    assert [j.payload for j in Judgment.objects.filter(study=study)] == [{"rating": 4}]


# ---------------------------------------------------------------------- imported


def test_the_release_format_is_offered_by_the_import_service():
    assert RELEASE_FORMAT in release_formats()


def test_the_command_imports_the_release_as_a_closed_study(researcher, tmp_path):
    study = imported(researcher, tmp_path)

    assert study.status == Study.Status.CLOSED
    captions = {(c.image.name, c.text) for c in Caption.objects.filter(study=study)}
    assert captions == {(image, text) for image, text, _, _ in RELEASE}
    raters = set(Participant.objects.filter(study=study).values_list("external_id", flat=True))
    assert raters == {rater for _, _, rater, _ in RELEASE}
    stored = {
        (
            Caption.objects.get(pk=j.item.spec["caption"]).text,
            j.participant.external_id,
            j.payload["rating"],
        )
        for j in Judgment.objects.filter(study=study).select_related("item", "participant")
    }
    assert stored == {(text, rater, int(rating)) for _, text, rater, rating in RELEASE}
    for item in study.items.all():
        assert item.judgment_count == item.judgments.count() == item.target


def test_a_bad_release_names_each_line_and_field_and_writes_nothing(researcher, tmp_path):
    rows = [
        RELEASE[0],
        ("dog.jpg", "", "r2", "4"),  # line 3: no caption
        ("dog.jpg", "A cat sleeps.", "r1", "six"),  # line 4: not a rating
        ("dog.jpg", "A dog runs on the beach.", "r1", "3"),  # line 5: r1 again (line 2)
        ("bus.jpg", "A bus\x00.", "r2", "0"),  # line 6: a NUL, and a rating out of range
    ]

    with pytest.raises(ServiceError) as refused:
        release_import(owner=researcher, path=release_file(tmp_path, rows), fmt=RELEASE_FORMAT)

    errors = refused.value.details["errors"]
    assert any(e.startswith("line 3: caption is empty") for e in errors), errors
    assert any(e.startswith("line 4: rating 'six'") for e in errors), errors
    assert any(e.startswith("line 5: rater 'r1'") and "line 2" in e for e in errors), errors
    assert any(e.startswith("line 6: caption ") for e in errors), errors
    assert any(e.startswith("line 6: rating '0'") for e in errors), errors
    assert "nothing imported" in refused.value.message
    assert not Study.objects.filter(mode=NAME).exists()


def test_a_release_without_the_header_is_refused_by_the_command(researcher, tmp_path):
    path = release_file(tmp_path, RELEASE, header=("image", "caption", "rating"))
    with pytest.raises(CommandError, match="missing column"):
        call_command(
            "import_ratings", str(path), "--format", RELEASE_FORMAT, "--owner", researcher.username
        )
    assert not Study.objects.filter(mode=NAME).exists()


# ------------------------------------------------------- reported, exported, shown


def test_the_imported_study_is_reported_through_the_report_page(
    client, researcher, tmp_path, django_capture_on_commit_callbacks
):
    study = imported(researcher, tmp_path)
    client.force_login(researcher)
    url = reverse("study_report", args=[study.pk])

    with django_capture_on_commit_callbacks(execute=True):
        client.post(url)
    html = client.get(url).content.decode()

    # The mode's own report template, its numbers counted here from the file.
    counts = Counter(int(rating) for *_, rating in RELEASE)
    assert 'id="rating-histogram"' in html
    for value in range(1, 6):
        assert f'<tr><td>{value}</td><td class="num">{counts[value]}</td></tr>' in html


def test_the_imported_study_is_exported_as_csv(researcher, tmp_path):
    study = imported(researcher, tmp_path)

    summary = export_file(study=study, path=tmp_path / "out", export_format="csv")

    with open(summary.path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert summary.rows == len(rows) == len(RELEASE)
    ratings = Counter(json.loads(row["payload"])["rating"] for row in rows)
    assert ratings == Counter(int(rating) for *_, rating in RELEASE)


def test_the_dashboard_shows_the_modes_panel_for_the_imported_study(client, researcher, tmp_path):
    study = imported(researcher, tmp_path)
    client.force_login(researcher)

    html = client.get(reverse("study_dashboard", args=[study.pk])).content.decode()

    counts = Counter(int(rating) for *_, rating in RELEASE)
    assert "Ratings so far" in html
    for value in range(1, 6):
        assert f"<li>Rated {value}: {counts[value]}</li>" in html
