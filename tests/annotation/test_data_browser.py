"""The data browser (issue 26, rows 1 and 10): ``/studies/<id>/items/`` and the API's
``items`` and ``judgments`` endpoints, through the real views.

Expected values are worked by hand from the answers the tests give (a mean of two ratings,
THumB's Total of stage 2's scores), never read back from the page's own output.
"""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation import selectors_items
from annotation.models import Caption, Judgment
from annotation.models.metric_lab import DatasetScore
from annotation.modes.thumb.protocol import STAGE1, STAGE2
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.studies import study_open
from tests.factories.arena import arena_study
from tests.factories.arena import judge as arena_judge
from tests.factories.arena import shown_left as arena_shown_left
from tests.factories.arena import worker as arena_worker
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.humanr import crowd, do_group, humanr_study
from tests.factories.spans import judge as spans_judge
from tests.factories.spans import spans_study
from tests.factories.spans import worker as spans_worker
from tests.factories.thumb import add_image, judge, make_annotator, member, scores  # noqa: F401
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db


def items_url(study, **query) -> str:
    url = reverse("study_items", args=[study.pk])
    if query:
        url += "?" + "&".join(f"{key}={value}" for key, value in query.items())
    return url


def text_of(response) -> str:
    """The page's text without tags and with whitespace collapsed."""
    html = response.content.decode()
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture
def rated(researcher):
    """A VICR study of 2 game pairs X and Y: X rated 2 and 4 by two players; Y rated 3, and
    5 by a rating excluded afterwards with a reason."""
    study = vicr_study(researcher, game=2)
    first, second = in_game(study, "w-first"), in_game(study, "w-second")
    x = play(first, 2)
    y = play(second, 3)
    assert play(second, 4).item_id == x.item_id  # each player rates each pair once
    excluded = play(first, 5)
    assert excluded.item_id == y.item_id
    Judgment.objects.filter(pk=excluded.pk).update(excluded=True, exclusion_reason="test: too fast")
    caption_x = Caption.objects.get(pk=x.item.spec["caption_id"])
    caption_y = Caption.objects.get(pk=y.item.spec["caption_id"])
    return study, caption_x, caption_y, (first, second)


def test_the_page_lists_captions_with_judgments_and_human_scores(client, researcher, rated):
    study, caption, excluded_caption, (first, second) = rated
    Caption.objects.filter(pk=caption.pk).update(metrics={"cider": 0.8125})
    DatasetScore.objects.create(study=study, caption=caption, name="expert", value=3.5)
    client.force_login(researcher)
    response = client.get(items_url(study, purpose="study"))
    assert response.status_code == 200
    text = text_of(response)
    assert "2 images" in text  # the two game pairs
    assert caption.text in text
    # The mean of 2 and 4 is 3; the excluded 5 of the other pair is no score.
    assert "rating 3.00 (n = 2)" in text
    assert f"{first.pseudonym} " in text and f"{second.pseudonym} " in text
    assert "rated 2" in text and "rated 4" in text and "rated 5" in text
    assert "excluded : test: too fast" in text or "excluded: test: too fast" in text
    assert "cider 0.812" in text or "cider 0.813" in text  # floatformat:3 of 0.8125
    assert "expert 3.500" in text
    # Y's 5 is excluded: its human score is its 3 alone.
    section = text.split(excluded_caption.text, 1)[1]
    assert section.split("Human scores", 1)[1].lstrip().startswith("rating 3.00 (n = 1)")


def test_the_study_page_links_to_the_browser(client, researcher, rated):
    study = rated[0]
    client.force_login(researcher)
    response = client.get(reverse("study_detail", args=[study.pk]))
    assert items_url(study) in response.content.decode()


def test_only_researchers_of_the_study_see_it(
    client, researcher, other_researcher, annotator, make_user, rated
):
    study = rated[0]
    for api in (False, True):
        url = reverse("api_study_items", args=[study.pk]) if api else items_url(study)
        client.logout()
        assert client.get(url).status_code in (302, 403)  # login page / API refusal
        client.force_login(other_researcher)
        assert client.get(url).status_code == 404
        client.force_login(annotator)
        assert client.get(url).status_code in (403, 404)
        study.members.add(other_researcher)
        client.force_login(other_researcher)
        assert client.get(url).status_code == 200
        study.members.remove(other_researcher)
        client.force_login(make_user(f"staff{api}", staff=True))
        assert client.get(url).status_code == 200
    client.force_login(other_researcher)
    url = reverse("api_study_judgments", args=[study.pk])
    assert client.get(url).status_code == 404


def test_filters_and_search(client, researcher, rated):
    study, caption, _, _ = rated
    client.force_login(researcher)
    # The pools: 20 tutorial and 40 probation pairs, one image each (tests/factories/vicr).
    assert "20 images" in text_of(client.get(items_url(study, purpose="tutorial")))
    text = text_of(client.get(items_url(study, q=caption.text.replace(" ", "+"))))
    assert "1 image" in text and caption.text in text
    name = caption.image.name
    text = text_of(client.get(items_url(study, q=name.upper())))  # case-insensitive
    assert "1 image" in text and name in text
    assert "No image matches" in text_of(client.get(items_url(study, system="nobody")))
    text = text_of(client.get(items_url(study, system="S", purpose="study")))
    assert "2 images" in text


def test_pages_and_bad_input_answer_clearly(client, researcher, rated):
    study = rated[0]
    client.force_login(researcher)
    everything = Caption.objects.filter(study=study).count()  # one image each
    pages = -(-everything // selectors_items.IMAGES_PER_PAGE)
    response = client.get(items_url(study, page=pages))
    assert response.status_code == 200
    last = everything - (pages - 1) * selectors_items.IMAGES_PER_PAGE
    assert f"page {pages} of {pages}" in text_of(response)
    assert text_of(response).count("Human scores") == last
    cases = [
        ({"page": "abc"}, 400, "whole number"),
        ({"page": pages + 1}, 404, f"pages run from 1 to {pages}"),
        ({"page": "-1"}, 404, "no page -1"),
        ({"purpose": "gold"}, 400, "Unknown caption purpose"),
        ({"q": "%00"}, 400, "control character U+0000"),
        ({"q": "x" * 201}, 400, "the limit is 200"),
    ]
    for query, status, words in cases:
        response = client.get(items_url(study, **query))
        assert response.status_code == status, query
        assert words in text_of(response), query
        api = client.get(
            reverse("api_study_items", args=[study.pk])
            + items_url(study, **query)[len(items_url(study)) :]
        )
        if "page" not in query:
            assert api.status_code == 400 and words in str(api.json()), query


def test_thumb_scores_are_the_final_stage_and_name_the_captions(
    client,
    researcher,
    make_study,
    make_annotator,  # noqa: F811 (the fixture)
):
    study = make_study("thumb", settings={"seconds_per_caption": 0})
    add_image(study, "bus", [("Human", "A red bus on a street."), ("M1", "A bus.")],
              metrics={"M1": {"bleu": 0.25}})  # fmt: skip
    study_open(study=study)
    first = member(study, make_annotator("ann", native=True))
    second = member(study, make_annotator("bob", native=True))
    judge(
        first,
        lambda item: {"captions": {g["key"]: scores(4, 2) for g in item.spec["groups"]}},
        STAGE1,
    )
    judge(
        second,
        lambda item: {"captions": {g["key"]: scores(5, 3) for g in item.spec["groups"]}},
        STAGE2,
    )
    client.force_login(researcher)
    text = text_of(client.get(items_url(study, system="M1")))
    assert "A bus." in text and "A red bus" not in text  # the system filter
    # Stage 2 is final: P 5, R 3, Total (5 + 3) / 2 = 4; stage 1's 4 and 2 are listed only.
    assert "P 5.00 (n = 1); R 3.00 (n = 1); Total 4.00 (n = 1)" in text
    assert "P 4, R 2" in text and "P 5, R 3" in text
    assert "bleu 0.250" in text


def test_a_mode_without_a_browse_shows_judgments_of_the_image(client, researcher):
    """The contract's default (``annotation/modes/browsing.py``): the test-only mode has no
    ``browse.py``, so its judgments are listed under their image, payload in words."""
    study = vehicle_study(researcher, captions=1)
    worker = crowd_participant(study)
    lease = assignment_next(participant=worker)
    judgment_submit(participant=worker, token=lease.token, data={"rating": "4"})
    client.force_login(researcher)
    text = text_of(client.get(items_url(study)))
    assert "1 judgment of the image as a whole" in text
    assert "rating: 4" in text


def test_the_api_lists_items_and_judgments(client, researcher, rated):
    study, caption, excluded_caption, (first, _second) = rated
    client.force_login(researcher)
    body = client.get(reverse("api_study_items", args=[study.pk]), {"purpose": "study"}).json()
    assert body["count"] == 2
    row = next(r for r in body["results"] if r["captions"][0]["id"] == caption.pk)
    entry = row["captions"][0]
    assert entry["human"] == [{"name": "rating", "mean": 3.0, "n": 2}]
    assert sorted(j["what"] for j in entry["judgments"]) == ["rated 2", "rated 4"]
    url = reverse("api_study_judgments", args=[study.pk])
    body = client.get(url).json()
    assert body["count"] == 4
    assert client.get(url, {"excluded": "true"}).json()["count"] == 1
    kept = client.get(url, {"excluded": "false", "participant": first.pseudonym}).json()
    assert [r["notes"][0]["what"] for r in kept["results"]] == ["rated 2"]
    about = client.get(url, {"caption": excluded_caption.pk}).json()
    assert about["count"] == 2
    assert [r["exclusion_reason"] for r in about["results"]] == ["", "test: too fast"]
    assert about["results"][1]["notes"] == [
        {"caption": excluded_caption.pk, "what": "rated 5", "scores": {"rating": 5.0}}
    ]
    item = about["results"][0]["item"]
    assert client.get(url, {"item": item}).json()["count"] == 2
    paged = client.get(url, {"limit": 3, "offset": 2}).json()
    assert paged["count"] == 4 and len(paged["results"]) == 2
    for query, field in (({"excluded": "maybe"}, "excluded"), ({"item": "x1"}, "item")):
        response = client.get(url, query)
        assert response.status_code == 400 and field in response.json()


def test_humanr_trials_are_shown_under_both_captions(client, researcher):
    study = humanr_study(researcher, images=9, humans=2, systems=("GIT",))
    lease = do_group(crowd(study))
    client.force_login(researcher)
    url = reverse("api_study_judgments", args=[study.pk])
    rows = client.get(url, {"item": lease.item_id}).json()["results"]
    comparison = next(r for r in rows if r["result"]["kind"] == "comparison")
    noted = {note["caption"] for note in comparison["notes"]}
    result = comparison["result"]
    assert noted == {result["reference_caption_id"], result["other_caption_id"]}
    # honest() prefers the reference strongly: oriented answer 2, value (2 - 5) / 4.
    other = next(n for n in comparison["notes"] if n["caption"] == result["other_caption_id"])
    assert other["scores"] == {"value": -0.75}


def test_the_schema_documents_both_endpoints(client):
    schema = client.get("/api/schema/").content.decode()
    assert "/api/studies/{study_id}/items/" in schema
    assert "/api/studies/{study_id}/judgments/" in schema


def _judged_vicr(owner, games: int):
    study = vicr_study(owner, game=games, seed=games)
    players = [in_game(study, f"q{games}-{n}") for n in range(2)]
    for _ in range(games):
        for participant in players:
            play(participant, 3)
    return study


def test_the_query_count_does_not_grow_with_the_page(client, researcher, monkeypatch):
    """One page's worth of rated pairs, then three pages' worth shown as one page: the same
    number of queries (select_related / prefetch, no query per caption or judgment)."""
    size = 4
    client.force_login(researcher)
    counts = []
    for factor in (1, 3):
        monkeypatch.setattr(selectors_items, "IMAGES_PER_PAGE", size * factor)
        study = _judged_vicr(researcher, size * factor)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(items_url(study, purpose="study"))
        assert response.status_code == 200
        assert text_of(response).count("rated 3") == 2 * size * factor
        counts.append(len(queries))
        with CaptureQueriesContext(connection) as queries:
            api = client.get(
                reverse("api_study_items", args=[study.pk]),
                {"purpose": "study", "limit": size * factor},
            )
        assert len(api.json()["results"]) == size * factor
        counts.append(len(queries))
        url = reverse("api_study_judgments", args=[study.pk])
        with CaptureQueriesContext(connection) as queries:
            api = client.get(url, {"limit": 2 * size * factor, "excluded": "false"})
        assert len(api.json()["results"]) == 2 * size * factor
        counts.append(len(queries))
    assert counts[:3] == counts[3:], counts


def test_an_item_with_many_judgments_lists_its_first_and_says_so(
    client, researcher, rated, monkeypatch
):
    """A VICR tutorial pair is rated by every player: the page loads the first
    ``JUDGMENTS_PER_ITEM`` of an item (here 1 of X's 2) and names the rest's count."""
    study, caption, _, _ = rated
    monkeypatch.setattr(selectors_items, "JUDGMENTS_PER_ITEM", 1)
    client.force_login(researcher)
    text = text_of(client.get(items_url(study, purpose="study")))
    assert "has 2 judgments; the first 1 are listed and averaged here" in text
    assert "rating 2.00 (n = 1)" in text  # X's first rating alone
    body = client.get(reverse("api_study_items", args=[study.pk]), {"purpose": "study"}).json()
    entry = next(r for r in body["results"] if r["captions"][0]["id"] == caption.pk)["captions"][0]
    item = Judgment.objects.filter(item__spec__caption_id=caption.pk).first().item_id
    assert entry["left_out"] == [{"item": item, "judgments": 2}]
    assert [j["what"] for j in entry["judgments"]] == ["rated 2"]


def test_an_arena_battle_is_a_win_for_one_caption_and_a_loss_for_the_other(client, researcher):
    study = arena_study(researcher, systems=("alpha", "beta"), images=2)
    # "a" as the page posts it is the caption shown left; whichever that was, the winner
    # in canonical order is the left one's.
    lease, _ = arena_judge(arena_worker(study), "a")
    spec = lease.item.spec
    left = spec["caption_a"] if arena_shown_left(lease) == "a" else spec["caption_b"]
    right = spec["caption_b"] if left == spec["caption_a"] else spec["caption_a"]
    client.force_login(researcher)
    url = reverse("api_study_judgments", args=[study.pk])
    (row,) = client.get(url, {"item": lease.item_id}).json()["results"]
    notes = {note["caption"]: note for note in row["notes"]}
    system = {spec["caption_a"]: spec["system_a"], spec["caption_b"]: spec["system_b"]}
    assert notes[left]["what"] == f"won against {system[right]}"
    assert notes[left]["scores"] == {"win share": 1.0}
    assert notes[right]["what"] == f"lost against {system[left]}"
    assert notes[right]["scores"] == {"win share": 0.0}


def test_a_spans_judgment_scores_its_caption(client, researcher):
    study = spans_study(researcher, images=1)

    def answer(lease, text):
        # Whichever caption the worker's drawn order serves first: mark its first word.
        word = text.split()[0]
        marks = [{"start": 0, "end": len(word), "text": word, "severity": "major",
                  "category": "object"}]  # fmt: skip
        return {"spans": json.dumps(marks), "score": 40}

    lease, _ = spans_judge(spans_worker(study), answer)
    client.force_login(researcher)
    body = client.get(reverse("api_study_items", args=[study.pk])).json()
    (image,) = body["results"]
    entry = next(c for c in image["captions"] if c["id"] == lease.item.spec["caption"])
    assert entry["human"] == [{"name": "score", "mean": 40.0, "n": 1}]
    assert entry["judgments"][0]["what"] == "score 40, 1 mark (1 major)"
    others = [c for c in image["captions"] if c["id"] != entry["id"]]
    assert others and all(c["judgments"] == [] for c in others)
