"""The VICR leaderboard's standings, cached per study for a few seconds (issue 48).

What is checked: the queries a feedback page and a POST answer save when the board is
cached (counted, against the same requests with the cache switched off); that the other
players' scores are at most ``LEADERBOARD_SECONDS`` old (counted by passing ``now``, never
by sleeping); that the viewer's own score and rank are always live; and the ranks against
hand-worked boards.
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.modes import get_mode
from annotation.modes.vicr import pages
from annotation.services.participants import crowd_link_token
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db

MODE = get_mode("vicr")
FORM_ACTION = re.compile(r'<form method="post" action="([^"]+)" class="vicr-form"')
TRANSACTION = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT", "BEGIN", "COMMIT")
#: The uncached board's queries: the top of the board and the own rank's count (before
#: issue 48), now one query reading the study's game players' scores.
BOARD_TABLE = '"annotation_participant"'


def _scored(study, scores):
    players = []
    for score in scores:
        participant = in_game(study)
        participant.state["player"]["score"] = score
        participant.save()
        players.append(participant)
    return players


def _set_score(participant, score):
    participant.state["player"]["score"] = score
    participant.save()


def _queries(block):
    with CaptureQueriesContext(connection) as captured:
        result = block()
    return result, [q["sql"] for q in captured.captured_queries]


def test_the_board_is_served_from_the_cache_for_at_most_the_period(researcher):
    study = vicr_study(researcher, leaderboard_size=3)
    players = _scored(study, [7, 12, 3, 9, 1])
    t0 = 1_000_000.0
    board, sql = _queries(lambda: MODE.pages.leaderboard(players[4], now=t0))
    assert len(sql) == 1
    assert [row["score"] for row in board["leaderboard"]] == [12, 9, 7]
    assert board["own_rank"] == 5

    _set_score(players[2], 20)  # another player overtakes everyone
    just_before = t0 + pages.LEADERBOARD_SECONDS - 0.001
    board, sql = _queries(lambda: MODE.pages.leaderboard(players[4], now=just_before))
    assert sql == []  # cached: the overtaking is not shown yet
    assert [row["score"] for row in board["leaderboard"]] == [12, 9, 7]

    at_the_limit = t0 + pages.LEADERBOARD_SECONDS
    board, sql = _queries(lambda: MODE.pages.leaderboard(players[4], now=at_the_limit))
    assert len(sql) == 1  # read again: never older than the period
    assert [row["score"] for row in board["leaderboard"]] == [20, 12, 9]
    assert board["own_rank"] == 5

    # A clock that went back (another worker's, or a test's) reads again too.
    _, sql = _queries(lambda: MODE.pages.leaderboard(players[4], now=t0))
    assert len(sql) == 1


def test_the_own_score_is_live_while_the_others_are_cached(researcher):
    study = vicr_study(researcher, leaderboard_size=3)
    players = _scored(study, [7, 12, 3, 9, 1])
    t0 = 2_000_000.0
    MODE.pages.leaderboard(players[4], now=t0)  # cached with the viewer at 1
    _set_score(players[4], 10)
    board, sql = _queries(lambda: MODE.pages.leaderboard(players[4], now=t0 + 1))
    assert sql == []
    # Hand-worked: 12, 10 (the viewer, live), 9; 7 and 3 below.
    assert [(row["rank"], row["score"], row["me"]) for row in board["leaderboard"]] == [
        (1, 12, False),
        (2, 10, True),
        (3, 9, False),
    ]
    assert board["own_rank"] is None and board["own_score"] == 10

    _set_score(players[4], -2)  # falls below everyone: 5th: four others above
    board = MODE.pages.leaderboard(players[4], now=t0 + 2)
    assert [row["score"] for row in board["leaderboard"]] == [12, 9, 7]
    assert board["own_rank"] == 5  # 12, 9, 7, 3 above; the stale 1 of the viewer not counted

    # A viewer tied just off the board shares the rank of the tie (as live).
    _set_score(players[4], 7)
    board = MODE.pages.leaderboard(players[4], now=t0 + 3)
    assert [(row["rank"], row["score"]) for row in board["leaderboard"]] == [
        (1, 12),
        (2, 9),
        (3, 7),
    ]
    assert board["own_rank"] == 3


def test_a_player_who_left_the_game_is_off_the_board_at_once_for_themself(researcher):
    study = vicr_study(researcher, leaderboard_size=3)
    players = _scored(study, [7, 12, 3])
    MODE.pages.leaderboard(players[1], now=3_000_000.0)
    players[1].status = "excluded"
    players[1].save()
    board = MODE.pages.leaderboard(players[1], now=3_000_001.0)
    assert not any(row["me"] for row in board["leaderboard"])
    assert [row["score"] for row in board["leaderboard"]] == [7, 3]
    assert board["own_rank"] is None


def _answer_one(client, study):
    """GET next and POST a rating; the queries of the POST and of the feedback's GET."""
    page = client.get(reverse("participate_next", args=[study.public_id]))
    action = FORM_ACTION.search(page.content.decode()).group(1)
    answer, post_sql = _queries(lambda: client.post(action, {"rating": "3", "part": "0"}))
    assert answer.status_code == 302  # to the feedback page (issue 42)
    feedback, get_sql = _queries(lambda: client.get(answer["Location"]))
    assert feedback.status_code == 200 and "Leaderboard" in feedback.content.decode()

    def counted(sql):
        return [q for q in sql if not q.startswith(TRANSACTION)]

    return counted(post_sql), counted(get_sql)


def _board_reads(sql):
    """The board's reads: participants by their game score (a JSON path ending in score)."""
    return [q for q in sql if f"FROM {BOARD_TABLE}" in q and "score" in q]


@pytest.mark.parametrize("cached", [True, False])
def test_the_cache_saves_the_boards_queries_on_the_post_and_the_feedback(
    client, researcher, monkeypatch, cached
):
    # A long period, so the count cannot depend on how fast the machine runs the test.
    monkeypatch.setattr(pages, "LEADERBOARD_SECONDS", 3600 if cached else 0)
    study = vicr_study(researcher, game=12, seconds_before_submit=0)
    for _ in range(2):  # other players on the board
        play(in_game(study), 3)
    in_game(study, "P1")
    entry = client.get(reverse("crowd_entry", args=[crowd_link_token(study)]) + "?PROLIFIC_PID=P1")
    assert entry.status_code == 302
    first_post, first_get = _answer_one(client, study)
    second_post, second_get = _answer_one(client, study)
    if cached:
        # The study's first board is read once (the first POST), then never in the period.
        assert len(_board_reads(first_post)) == 1
        assert _board_reads(first_get) == _board_reads(second_post) == []
        assert _board_reads(second_get) == []
    else:
        # Without the cache every page reads the board: what the cache saves per request.
        for sql in (first_post, first_get, second_post, second_get):
            assert len(_board_reads(sql)) == 1, sql


def test_cached_and_uncached_requests_differ_by_exactly_the_board(client, researcher, monkeypatch):
    """The same two rounds with and without the cache: one query per request saved."""
    counts = {}
    for cached in (False, True):
        monkeypatch.setattr(pages, "LEADERBOARD_SECONDS", 3600 if cached else 0)
        study = vicr_study(researcher, game=12, seconds_before_submit=0)
        play(in_game(study), 3)
        pid = f"P{int(cached)}"
        in_game(study, pid)
        client.cookies.clear()
        entry = client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]) + f"?PROLIFIC_PID={pid}"
        )
        assert entry.status_code == 302
        _answer_one(client, study)  # the first round fills the cache
        post_sql, get_sql = _answer_one(client, study)
        counts[cached] = (len(post_sql), len(get_sql))
    assert counts[True] == (counts[False][0] - 1, counts[False][1] - 1)
