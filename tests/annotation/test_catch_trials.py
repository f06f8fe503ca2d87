"""Automatic catch trials in VICR and THumB (issue 13), attacked through the real pages.

Each player is a browser of its own (a Django test client) that arrives through the signed
crowd link and plays game pairs by posting the pair's form, as a Prolific worker does.
Players are put in the game directly (as ``tests.factories.vicr.in_game`` does) since the
tutorial is not what these tests are about. THumB annotators are registered users on the
item pages, posting the whole caption set's form.

Expected values are worked by hand: with ``catch_rate`` 0.5 a catch trial follows every game
rating (``p = 0.5 / (1 - 0.5) = 1``); Algorithm 1 against the catch pool (1, 1) gives rating
1 -> 2 points, 2 -> 0, 3 -> -1, 4 and 5 -> -2 (distance 0, 1, 2, 3+ from consensus 1 when
the pool agrees: the ladder d <= 0.25 -> 2, <= 1 -> 0, <= 1.75 -> -1, else -2, with
d = |x - r| / (1 + 1/n), n = 3).
"""

from __future__ import annotations

import html
import re

import pyarrow.parquet as pq
import pytest
from django.test import Client, TestCase
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Assignment, Caption, Item, Judgment, Participant
from annotation.modes import get_mode
from annotation.services.exports import export_file
from annotation.services.participants import crowd_link_token
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from tests.factories.thumb import form_for, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

MODE = get_mode("vicr")
CAPTION = re.compile(r'<p class="vicr-caption">.*?“(.*?)”</p>', re.S)
ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')


def catch_study(researcher, *, game=10, **settings):
    """A live VICR study with distinct game captions, half of them human-written."""
    study = vicr_study(
        researcher,
        game=game,
        seconds_before_submit=0,
        crowd_arrivals_per_address_per_hour=1000,
        crowd_open_leases_per_address=1000,
        **settings,
    )
    words = ["dog", "cat", "horse", "child", "bike", "boat", "tree", "ball", "kite", "bird"]
    for n, caption in enumerate(Caption.objects.filter(study=study, purpose="study")):
        caption.text = caption.raw_text = f"a {words[n % 10]} {n} near the red house"
        caption.system = Caption.HUMAN if n % 2 else "S"
        caption.save()
    return study


class Player:
    """One crowd worker's browser, put in the game after arriving."""

    def __init__(self, study, worker: str):
        self.study, self.worker = study, worker
        self.client = Client()
        arrived = self.client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]) + f"?PROLIFIC_PID={worker}"
        )
        assert arrived.status_code == 302, arrived.content[:300]
        participant = self.participant
        participant.state = {
            "player": {"probation_attempts": 0, "score": 0, "game_ratings": 0},
            "tutorial_score": 20,
            "block": [],
        }
        participant.status = "game"
        participant.save()
        self.next_url = reverse("participate_next", args=[study.public_id])

    @property
    def participant(self) -> Participant:
        return Participant.objects.get(study=self.study, external_id=self.worker)

    def page(self):
        """GET /next/: (html, caption shown, form action), or (html, None, None) if finished."""
        response = self.client.get(self.next_url)
        assert response.status_code == 200
        text = response.content.decode()
        action = ACTION.search(text)
        if action is None:
            return text, None, None
        return text, html.unescape(CAPTION.search(text).group(1)), html.unescape(action.group(1))

    def rate(self, action: str, rating: int):
        # The feedback is a page of its own after a redirect (issue 42): follow it.
        response = self.client.post(action, {"rating": str(rating), "part": "0"}, follow=True)
        assert response.status_code == 200, response.content[:300]
        return response.content.decode()

    def play(self, answer, limit=60):
        """Rate until nothing is left; ``answer(item)`` picks the rating. Returns the log."""
        log = []
        for _ in range(limit):
            text, caption, action = self.page()
            if action is None:
                break
            token = action.rstrip("/").split("/")[-1]
            item = Item.objects.get(assignments__token=token)
            log.append((item, caption, text, self.rate(action, answer(item))))
        return log


def is_control(item: Item) -> bool:
    """A control (issue 29): an untouched known-good caption that must score high."""
    return (item.spec.get("catch") or {}).get("kind") == "control"


def is_altered(item: Item) -> bool:
    return item.kind == "catch" and not is_control(item)


def shown_captions(item: Item) -> set[int]:
    """Caption ids an item exposes to its player (for a catch: the image's and the text's)."""
    catch = item.spec.get("catch")
    ids = {item.spec["caption_id"]}
    if catch:
        ids.add(catch["source_caption_id"])
    return ids


# ---------------------------------------------------------------------------- settings


def test_catch_trials_are_off_by_default_and_settings_are_bounded():
    clean = MODE.clean_settings({})
    assert clean["catch_rate"] == 0
    assert MODE.clean_settings({"catch_rate": 0.5, "catch_gammas": "1, 0.25"})["catch_rate"] == 0.5
    for bad in (
        {"catch_rate": 0.6},
        {"catch_rate": -0.1},
        {"catch_gammas": "0"},
        {"catch_gammas": "0.5,1.5"},
        {"catch_gammas": "half"},
        {"catch_max_missed_share": 2},
        {"catch_min_seen": 0},
    ):
        with pytest.raises(ServiceError) as caught:
            MODE.clean_settings(bad)
        assert caught.value.field == next(iter(bad))


def test_default_study_serves_no_catch_trial(researcher):
    study = catch_study(researcher)
    log = Player(study, "honest").play(lambda item: 3)
    assert len(log) == 10
    assert not Item.objects.filter(study=study, kind="catch").exists()


# ---------------------------------------------------------------------------- attacks


def test_rating_everything_5_fails_the_catch_trials_and_ends_flagged_and_excluded(researcher):
    study = catch_study(researcher, catch_rate=0.5, catch_min_seen=3, catch_max_missed_share=0.5)
    spammer = Player(study, "spammer")
    log = spammer.play(lambda item: 5)
    kinds = [item.kind for item, *_ in log]
    # p = 1: game, catch, game, catch, ... while unseen captions remain for a catch.
    assert kinds[:6] == ["game", "catch"] * 3
    catches = Judgment.objects.filter(participant=spammer.participant, item__kind="catch")
    assert catches.count() >= 3
    altered = [j for j in catches if is_altered(j.item)]
    assert altered and all(j.result["catch"]["caught"] is False for j in altered)
    assert {j.result["points"] for j in altered} == {-2}  # 5 against consensus 1
    # Controls (pool 4, 4) pass at 5: d = 1 / (1 + 1/3) = 0.75 <= 1, 0 points.
    controls = [j for j in catches if is_control(j.item)]
    assert all(j.result["catch"]["caught"] and j.result["points"] == 0 for j in controls)
    participant = spammer.participant
    flags = [flag for flag in participant.flags if flag["kind"] == "catch_failed"]
    assert len(flags) == 1
    judgments = Judgment.objects.filter(participant=participant)
    assert judgments.count() == len(log)  # nothing deleted
    assert judgments.filter(excluded=False).count() == 0
    assert flags[0]["detail"] in set(judgments.values_list("exclusion_reason", flat=True))


def test_an_honest_player_catches_them_and_is_not_flagged(researcher):
    study = catch_study(researcher, catch_rate=0.5)
    honest = Player(study, "honest")
    log = honest.play(lambda item: 1 if is_altered(item) else 4)
    catches = [item for item, *_ in log if item.kind == "catch"]
    assert len(catches) >= 3
    judgments = Judgment.objects.filter(participant=honest.participant)
    assert all(
        j.result["catch"] == {**j.result["catch"], "caught": True}
        for j in judgments.filter(item__kind="catch")
    )
    assert {j.result["points"] for j in judgments.filter(item__kind="catch")} == {2}
    assert honest.participant.flags == []
    assert not judgments.filter(excluded=True).exists()


def test_a_catch_page_is_the_normal_item_page_but_for_its_text_and_image(researcher):
    study = catch_study(researcher, catch_rate=0.5)
    player = Player(study, "looker")
    # A game pair and its catch trial first, so "N ratings" is plural on both pages below;
    # game pairs are rated 4, their consensus (primes 3 and 4), catch trials 1: the score
    # stays positive (a negative one is shown with extra markup for screen readers).
    for rating in (4, 1):
        _, _, action = player.page()
        player.rate(action, rating)
    normal_page, normal_caption, action = player.page()
    assert Item.objects.get(assignments__token=action.rstrip("/").split("/")[-1]).kind == "game"
    feedback_normal = player.rate(action, 4)
    catch_page, catch_caption, action = player.page()
    catch_item = Item.objects.get(assignments__token=action.rstrip("/").split("/")[-1])
    assert catch_item.kind == "catch"
    assert catch_caption == catch_item.spec["catch"]["text"]
    feedback_catch = player.rate(action, 1)

    def bare(text: str, caption: str) -> str:
        text = text.replace(html.escape(caption), "CAPTION").replace(caption, "CAPTION")
        text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", text)
        text = re.sub(r'"X-CSRFToken": "[^"]+"', "CSRF", text)
        text = re.sub(r"<img [^>]+>", "IMG", text)
        # The lease's token: the form's action and the draft's key and address (issue 42).
        text = re.sub(r'(action|data-draft-key|data-submit-url)="[^"]+"', "ACTION", text)
        return re.sub(r"-?\d+", "N", text)  # counts and score in the progress line

    assert bare(catch_page, catch_caption) == bare(normal_page, normal_caption)
    for word in ("catch", "T_RC", "T_WP", "T_RW", "gamma"):
        assert word not in catch_page and word not in feedback_catch
    # The feedback after a catch trial is the game's feedback (points, consensus, score).
    assert "the consensus is" in feedback_catch and "the consensus is" in feedback_normal
    assert re.sub(r"-?\d+", "N", feedback_catch).count("<p") == re.sub(
        r"-?\d+", "N", feedback_normal
    ).count("<p")


def test_a_player_is_never_served_a_catch_built_from_a_caption_they_have_seen(researcher):
    study = catch_study(researcher, game=14, catch_rate=0.5)
    for name in ("first", "second"):
        player = Player(study, name)
        log = player.play(lambda item: 3)
        seen: set[int] = set()
        catches = 0
        for item, *_ in log:
            if item.kind == "catch":
                catches += 1
                assert not shown_captions(item) & seen, (name, item.spec, seen)
                assert item.spec["catch"]["participant_id"] == player.participant.pk
            else:
                # Nor is the pair a catch was made from served after the catch.
                assert item.spec["caption_id"] not in seen
            seen |= shown_captions(item)
        assert catches >= 3


def test_catch_trials_stay_out_of_the_scores_and_the_report_counts_them(researcher):
    study = catch_study(researcher, catch_rate=0.5, catch_min_seen=2, catch_max_missed_share=0.5)
    spammer, honest = Player(study, "spam"), Player(study, "honest")
    spammer.play(lambda item: 5)
    honest.play(lambda item: 2 if is_altered(item) else 4)
    result = MODE.report.run(study, lambda *args: None)

    catch_rows = list(Judgment.objects.filter(study=study, item__kind="catch"))
    game_rows = Judgment.objects.filter(study=study, item__kind="game")
    # The report's data is the game ratings alone (the honest player's; the spammer's are
    # excluded): catch ratings never reach it.
    assert result["included"]["game_ratings"] == game_rows.filter(excluded=False).count()
    assert result["included"]["ratings"] == game_rows.filter(excluded=False).count()
    section = result["catch"]
    assert section["answered"] == len(catch_rows)
    assert section["flagged"] == 1
    # Counted again here, independently of the report code, per (kind, gamma).
    expected: dict = {}
    for j in catch_rows:
        key = (j.item.spec["catch"]["kind"], j.item.spec["catch"]["gamma"])
        n, caught = expected.get(key, (0, 0))
        right = j.payload["rating"] >= 4 if is_control(j.item) else j.payload["rating"] <= 2
        expected[key] = (n + 1, caught + right)
    got = {(row["kind"], row["gamma"]): (row["n"], row["caught"]) for row in section["table"]}
    assert got == expected
    players = {row["pseudonym"]: row for row in section["players"]}
    assert players[spammer.participant.pseudonym]["flagged"] is True
    assert players[honest.participant.pseudonym]["missed"] == 0


def test_export_shows_catch_trials_with_their_kind_and_the_text_shown_vicr(researcher, tmp_path):
    study = catch_study(researcher, catch_rate=0.5)
    log = Player(study, "one").play(lambda item: 1)
    export_file(study=study, path=tmp_path / "export.parquet", export_format="parquet")
    rows = pq.read_table(tmp_path / "export.parquet").to_pylist()
    assert len(rows) == len(log)
    by_id = {row["judgment_id"]: row for row in rows}
    for item, caption, *_ in log:
        judgment = Judgment.objects.get(item=item)
        row = by_id[judgment.pk]
        assert row["caption"] == caption
        if item.kind == "catch":
            # The catch trial: its kind, the text shown, never in the final view.
            assert (row["phase"], row["final_view"]) == ("catch", False)
            assert row["caption_id"] == item.spec["caption_id"]
        else:
            assert row["phase"] == "game"


def test_report_page_shows_the_catch_section(researcher, client):
    study = catch_study(researcher, catch_rate=0.5)
    spammer = Player(study, "spam")
    spammer.play(lambda item: 5)
    answered = Judgment.objects.filter(study=study, item__kind="catch")
    total = answered.count()
    # Rated 5: every control passes, every altered trial is missed.
    passed = sum(is_control(j.item) for j in answered)
    missed = total - passed
    client.force_login(researcher)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue(report_request(study=study, user=researcher))
    page = client.get(reverse("study_report", args=[study.pk])).content.decode()
    assert 'id="catch-heading"' in page
    assert f"{passed} of {total} caught; 1 participant flagged" in page
    row = re.search(
        rf"<tr><td>{spammer.participant.pseudonym}</td>.*?</tr>", page.split("catch-players")[1]
    )
    assert row and f'<td class="num">{total}</td><td class="num">{missed}</td>' in row.group(0)
    assert "catch_failed" in row.group(0)


# ---------------------------------------------------------------------------- THumB

THUMB_ACTION = re.compile(r'<form method="post" action="([^"]+)" id="thumb-form"')


def thumb_catch_study(make_study, **settings):
    """Twelve images with a Human and a machine caption each (two caption groups)."""
    return thumb_study(
        make_study,
        captions={},
        extra_images=12,
        settings={"stage2": False, "require_native_fluency": False, **settings},
    )


class Annotator:
    """A registered annotator's browser on the THumB item pages."""

    def __init__(self, study, user):
        study.annotators.add(user)
        self.study, self.user = study, user
        self.client = Client()
        self.client.force_login(user)
        self.next_url = reverse("participate_next", args=[study.public_id])

    @property
    def participant(self) -> Participant:
        return Participant.objects.get(study=self.study, user=self.user)

    def page(self):
        response = self.client.get(self.next_url)
        assert response.status_code == 200
        text = response.content.decode()
        action = THUMB_ACTION.search(text)
        if action is None:
            return text, None, None
        action = html.unescape(action.group(1))
        return text, Item.objects.get(assignments__token=action.rstrip("/").split("/")[-1]), action

    def play(self, precision, limit=40):
        """Judge until nothing is left, every caption at ``precision(item)``; the items."""
        items = []
        for _ in range(limit):
            _, item, action = self.page()
            if item is None:
                break
            response = self.client.post(action, form_for(item, precision=precision(item)))
            assert response.status_code == 302, response.content[:500]
            items.append(item)
        return items


def test_thumb_full_precision_everywhere_fails_the_catch_trials_and_is_flagged(
    make_study, make_user
):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    annotator = Annotator(study, make_user("lazy"))
    items = annotator.play(lambda item: 5)
    kinds = [item.kind for item in items]
    assert kinds[:6] == ["stage1", "catch"] * 3
    catches = Judgment.objects.filter(participant=annotator.participant, item__kind="catch")
    assert catches.count() >= 3
    for judgment in catches:
        made = judgment.item.spec["catch"]
        assert judgment.result["catch"] == {
            "kind": made["kind"],
            "gamma": made["gamma"],
            # precision 5 and no fluency error: a control passes, an altered one is missed
            "caught": made["kind"] == "control",
        }
    participant = annotator.participant
    assert [flag["kind"] for flag in participant.flags] == ["catch_failed"]
    judgments = Judgment.objects.filter(participant=participant)
    assert judgments.count() == len(items) and not judgments.filter(excluded=False).exists()


def test_an_annotator_the_catch_rule_flags_is_told_so_and_offered_no_more_work(
    make_study, make_user
):
    """Once the rule flags someone, every further answer of theirs would be excluded: serving
    more wastes their time (and a crowd study's money), so they are told why and served
    nothing, while everyone else goes on (issue 26, row 21)."""
    study = thumb_catch_study(make_study, catch_rate=0.5)
    annotator = Annotator(study, make_user("lazy"))
    annotator.play(lambda item: 5)
    participant = annotator.participant
    (flag,) = [flag for flag in participant.flags if flag["kind"] == "catch_failed"]
    leases = Assignment.objects.filter(participant=participant)
    last = leases.order_by("-served_at").first()
    # The lease whose answer broke the rule is the last one they were served.
    assert (
        Judgment.objects.filter(assignment=last).latest("id").created_at.isoformat() == (flag["at"])
    )
    assert not leases.filter(status=Assignment.Status.OPEN).exists()
    text, item, _ = annotator.page()
    assert item is None
    assert "did not pass this study's attention checks" in text
    assert leases.count() == Assignment.objects.filter(participant=participant).count()
    # Someone else is still served: the study is not finished, only this annotator.
    _, other_item, _ = Annotator(study, make_user("next")).page()
    assert other_item is not None


def test_thumb_a_careful_annotator_catches_them_and_catch_scores_stay_out(make_study, make_user):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    annotator = Annotator(study, make_user("careful"))

    def precision(item):
        return 1 if is_altered(item) else 4

    items = annotator.play(precision)
    catches = [item for item in items if item.kind == "catch"]
    assert len(catches) >= 3
    assert annotator.participant.flags == []
    result = get_mode("thumb").report.run(study, lambda *args: None)
    # Only the stage-1 judgments are scored: every caption of theirs got precision 4.
    stage1 = [item for item in items if item.kind == "stage1"]
    assert result["n_images"] == len(stage1)
    section = result["catch"]
    assert (section["answered"], section["caught"], section["flagged"]) == (len(catches),) * 2 + (
        0,
    )


def test_thumb_catch_page_is_a_stage1_page_and_never_from_a_seen_image(make_study, make_user):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    annotator = Annotator(study, make_user("looker"))
    pages = []
    seen_images: set[int] = set()
    for _ in range(6):
        text, item, action = annotator.page()
        if item.kind == "catch":
            made = item.spec["catch"]
            assert item.image_id not in seen_images
            assert made.get("source_image_id", item.image_id) not in seen_images
            assert made["text"] in html.unescape(text)
        else:
            assert item.image_id not in seen_images  # nor an image met in a catch trial
        seen_images |= {item.image_id, item.spec.get("catch", {}).get("source_image_id", 0)}
        pages.append((item, text))
        annotator.client.post(action, form_for(item, precision=3))

    def bare(item, text):
        for group in item.spec["groups"]:
            text = text.replace(html.escape(group["text"]), "CAPTION")
        text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", text)
        text = re.sub(r'"X-CSRFToken": "[^"]+"', "CSRF", text)
        text = re.sub(r"<img [^>]+>", "IMG", text)
        text = re.sub(r'(action|data-draft-key|data-submit-url)="[^"]+"', "TOKEN", text)
        text = re.sub(r"extra\d+", "NAME", text)
        return re.sub(r"\d+", "N", text)

    kinds = [item.kind for item, _ in pages]
    assert kinds == ["stage1", "catch"] * 3
    normal = bare(*pages[2])
    assert bare(*pages[3]) == normal
    for tell in ("catch", "T_RC", "T_WP", "T_RW"):
        assert tell not in pages[3][1]


def test_thumb_export_shows_the_altered_caption_and_its_outcome(make_study, make_user, tmp_path):
    study = thumb_catch_study(make_study, catch_rate=0.5)
    annotator = Annotator(study, make_user("one"))
    items = annotator.play(lambda item: 1, limit=4)
    export_file(study=study, path=tmp_path / "export.parquet", export_format="parquet")
    rows = pq.read_table(tmp_path / "export.parquet").to_pylist()
    catch_item = next(item for item in items if item.kind == "catch")
    made = catch_item.spec["catch"]
    judgment = Judgment.objects.get(item=catch_item)
    mine = [row for row in rows if row["judgment_id"] == judgment.pk]
    assert {row["stage"] for row in mine} == {"catch"}
    altered = [row for row in mine if row["caption"] == made["text"]]
    group = next(g for g in catch_item.spec["groups"] if g["key"] == made["key"])
    assert len(altered) == 1
    assert altered[0]["caption_id"] in {caption["id"] for caption in group["captions"]}
    # The other caption of the image is shown (and exported) as it is.
    others = [row for row in mine if row["caption"] != made["text"]]
    assert len(others) == len(mine) - 1
    catch_judgments = set(
        Judgment.objects.filter(study=study, item__kind="catch").values_list("pk", flat=True)
    )
    assert {row["stage"] == "catch" for row in rows} == {True, False}
    assert all((row["stage"] == "catch") == (row["judgment_id"] in catch_judgments) for row in rows)
