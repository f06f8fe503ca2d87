"""Issue 43, "vision status never appears in a raw-id export or another researcher's view":
the attack of a researcher who reads every page and API of a study whose mode asks raters'
vision, looking for a participant (pseudonym, crowd worker id) next to a group: a vision
word, an item kind ("For blind or low-vision raters") or the after-image part, which only
sighted raters answer.

A context study (built by the real import, rated by blind and sighted crowd workers through
the real services) is read by a member researcher and by its owner. The data browser and
the judgment API list every judgment with its kind, so they must name no rater; the
per-participant tables (dashboard workers, crowd review, the crowd panel, the participants
export) must say nothing of groups; the raw-id export keeps every judgment but not who made
it. Other modes' browser rows still name their raters (tests/annotation/test_data_browser.py).
"""

import csv
import io
import json
import re

import pytest
from django.urls import reverse

from annotation.models import Judgment, Participant
from annotation.services.exports.files import export_file
from tests.factories.context import context_study, rate, rater

pytestmark = pytest.mark.django_db

#: Words that tell a rater's group: vision words, the kinds and the context mode's labels.
GROUP_WORDS = (
    "blind", "low vision", "low-vision", "low_vision", "sighted", "blv", "screen reader",
    "screen_reader", "after the image", "after-image",
)  # fmt: skip


@pytest.fixture
def rated(researcher, other_researcher):
    """A live context study shared with a member; two blind raters, one with low vision
    and two sighted raters, each with one rating (sighted: both parts)."""
    study = context_study(researcher)
    study.members.add(other_researcher)
    for vision in ("blind", "blind", "low_vision", "sighted", "sighted"):
        assert rate(rater(study, vision)) is not None
    parts = set(Judgment.objects.filter(study=study).values_list("part", flat=True))
    assert parts == {0, 1}
    return study


def identities(study) -> list[str]:
    """Every way a page could name a rater: pseudonym and crowd worker id."""
    names = []
    for pseudonym, external in Participant.objects.filter(study=study).values_list(
        "pseudonym", "external_id"
    ):
        names += [pseudonym, external]
    return [name for name in names if name]


def html_blocks(html: str) -> list[str]:
    """The page cut into rows and list entries: what a reader takes as one record."""
    return re.split(r"<tr[\s>]|<li[\s>]|<dt[\s>]|<p[\s>]", html)


def json_records(value) -> list[dict]:
    """Every object of a JSON document (a record, however deep)."""
    if isinstance(value, dict):
        return [value, *(r for child in value.values() for r in json_records(child))]
    if isinstance(value, list):
        return [r for child in value for r in json_records(child)]
    return []


def leaks(text: str, names: list[str], *, is_json: bool) -> list[tuple[str, str]]:
    """(name, word) of each record naming a rater beside a group word."""
    if is_json:
        records = [json.dumps(r).lower() for r in json_records(json.loads(text))]
    else:
        records = [block.lower() for block in html_blocks(text)]
    found = []
    for record in records:
        for name in names:
            if name.lower() in record:
                found += [(name, word) for word in GROUP_WORDS if word in record]
    return found


PAGES = ["study_detail", "study_dashboard", "study_items", "study_crowd_review"]
APIS = ["api_study_items", "api_study_judgments", "api_study_people", "api_study_crowd"]


@pytest.mark.parametrize("who", ["member", "owner"])
def test_no_page_or_api_names_a_rater_beside_a_group(
    client, researcher, other_researcher, rated, who
):
    study = rated
    names = identities(study)
    client.force_login(other_researcher if who == "member" else researcher)
    read = 0
    for name in PAGES + APIS:
        response = client.get(reverse(name, args=[study.pk]))
        if response.status_code in (403, 404):  # the owner's pages (crowd review and panel)
            assert who == "member" and "crowd" in name, name
            continue
        assert response.status_code == 200, (name, response.status_code)
        read += 1
        found = leaks(response.content.decode(), names, is_json=name.startswith("api_"))
        assert not found, (who, name, found[:3])
    # The owner reads them all; a member all but the owner's crowd pages.
    assert read == len(PAGES + APIS) if who == "owner" else read >= len(PAGES + APIS) - 2


def test_the_browser_lists_every_judgment_by_a_rater_and_says_why(client, other_researcher, rated):
    study = rated
    client.force_login(other_researcher)

    page = client.get(reverse("study_items", args=[study.pk])).content.decode()
    listed = client.get(reverse("api_study_judgments", args=[study.pk]), {"limit": 1000}).json()

    # Every judgment is still listed, with its kind; none with a pseudonym.
    assert listed["count"] == Judgment.objects.filter(study=study).count()
    assert {row["participant"] for row in listed["results"]} == {None}
    assert {row["kind"] for row in listed["results"]} == {"blv", "sighted"}
    assert "a rater" in page and "asks raters whether they can see" in page
    for name in identities(study):
        assert name not in page


def test_the_judgment_list_cannot_be_filtered_by_rater(client, other_researcher, rated):
    """Filtering by a pseudonym the dashboard shows would give that rater's kinds back."""
    study = rated
    pseudonym = Participant.objects.filter(study=study).first().pseudonym
    client.force_login(other_researcher)

    response = client.get(
        reverse("api_study_judgments", args=[study.pk]), {"participant": pseudonym}
    )

    assert response.status_code == 400
    assert "vision" in response.content.decode()


def _rows(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_the_raw_id_export_keeps_every_judgment_but_not_who_made_it(rated, tmp_path):
    study = rated
    total = Judgment.objects.filter(study=study).count()
    out = {}
    for table in ("judgments", "participants"):
        for raw_ids in (False, True):
            path = tmp_path / f"{table}-{raw_ids}.csv"
            export_file(study=study, path=path, export_format="csv", table=table, raw_ids=raw_ids)
            out[table, raw_ids] = _rows(path)

    sheet = json.loads((tmp_path / "judgments-True.datasheet.json").read_text())
    assert "name no participant" in sheet["privacy"]
    described = {c["name"]: c["description"] for c in sheet["tables"]["judgments"]["columns"]}
    assert described["participant"].startswith("Empty in this export")
    raw = out["judgments", True]
    assert len(raw) == total and len({row["judgment_id"] for row in raw}) == total
    assert {row["participant"] for row in raw} == {""}
    # The after-image rows are there (only sighted raters answer them), by no one.
    assert {row["part"] for row in raw} == {"0", "1"}
    # The participants table with worker ids says nothing of groups.
    workers = out["participants", True]
    assert {row["worker_id"] for row in workers} == set(
        Participant.objects.filter(study=study).values_list("external_id", flat=True)
    )
    cells = json.dumps(workers).lower()
    assert not [word for word in GROUP_WORDS if word in cells]
    # Without raw ids the judgments keep their pseudonyms, as in every mode.
    pseudonyms = set(Participant.objects.filter(study=study).values_list("pseudonym", flat=True))
    assert {row["participant"] for row in out["judgments", False]} == pseudonyms
    assert len(out["judgments", False]) == total
