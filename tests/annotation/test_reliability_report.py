"""The reliability section of every mode's report (issue 13: annotator reliability).

Each study is answered through the services by honest workers and one planted spammer; the
report job (run as the Celery task would, eagerly on commit) must flag the spammer and only
them, and the report page must show the section with the flag.
"""

import random
import re

import pytest
from django.urls import reverse

from annotation.models import Job, Judgment
from annotation.services.assignments import assignment_next
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from tests.factories.humanr import crowd, do_group, humanr_study
from tests.factories.thumb import judge as thumb_judge
from tests.factories.thumb import make_annotator as make_annotator_fixture  # noqa: F401
from tests.factories.thumb import member, scores, thumb_study
from tests.factories.vicr import in_game, play, vicr_study

pytestmark = pytest.mark.django_db

SECTION_KEYS = {"method", "note", "estimable", "workers"}
WORKER_KEYS = {"participant", "labels", "competence", "flagged", "reason"}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Accounts are made by the dozen here; their password hashing is not under test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def run_report(study, user, capture):
    with capture(execute=True):
        job = enqueue(report_request(study=study, user=user))
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.error
    return job.result


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def assert_flags_only(section, spammer):
    """The section has the agreed shape and flags exactly ``spammer`` (a pseudonym)."""
    assert set(section) == SECTION_KEYS
    assert section["method"] == "Dawid-Skene (crowd-kit)"
    assert section["estimable"] is True
    for worker in section["workers"]:
        assert set(worker) == WORKER_KEYS
    flagged = [w["participant"] for w in section["workers"] if w["flagged"]]
    assert flagged == [spammer]
    row = section["workers"][0]
    assert row["participant"] == spammer and row["reason"], "flagged workers come first"
    honest = [w for w in section["workers"] if not w["flagged"]]
    assert honest and all(w["reason"] == "" for w in honest)
    assert all(w["competence"] is not None and w["competence"] > row["competence"] for w in honest)


def assert_page_shows(client, user, study, spammer):
    client.force_login(user)
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    start = html.index('id="reliability"')
    section = html[start : html.index("</section>", start)]
    assert "Annotator reliability" in section and "Dawid-Skene (crowd-kit)" in section
    row = re.search(rf'<tr data-participant="{spammer}">.*?</tr>', section, re.DOTALL).group(0)
    assert "<td><strong>flagged</strong></td>" in row
    assert section.count("<td><strong>flagged</strong></td>") == 1
    reasons = re.findall(
        r'<li data-participant="([^"]+)"><strong>[^<]+</strong>: (.+?)</li>', section
    )
    assert [who for who, _ in reasons] == [spammer] and reasons[0][1]
    return section


# ---------------------------------------------------------------------- THumB


def test_thumb_report_flags_a_random_scorer(
    researcher, make_study, make_annotator, client, capture
):
    # 24 images x 3 caption texts x (precision, recall): 144 tasks, each scored in stage 1
    # and reviewed in stage 2 by another annotator (the third check adds a few). Honest
    # annotators give each caption's true scores; the spammer draws them at random.
    study = thumb_study(
        make_study,
        captions={
            f"img{n}": [("Human", f"Human {n}."), ("M1", f"One {n}."), ("M2", f"Two {n}.")]
            for n in range(24)
        },
        settings={"third_check_captions": 10},
    )
    people = [member(study, make_annotator(f"ann{n}", native=True)) for n in range(5)]
    spammer = people[2]
    noise = random.Random(3)

    def truth(text, field):
        # A fixed true score per caption text and field, spread over 1-5.
        return 1 + (sum(map(ord, text)) * (2 if field == "precision" else 3)) % 5

    def answer(participant):
        def data_for(item):
            review = item.kind != "stage1"
            captions = {}
            for group in item.spec["groups"]:
                if participant == spammer:
                    p, r = noise.randint(1, 5), noise.randint(1, 5)
                else:
                    p, r = truth(group["text"], "precision"), truth(group["text"], "recall")
                extra = {"confirmed": True} if review else {}
                captions[group["key"]] = scores(p, r, **extra)
            return {"captions": captions}

        return data_for

    _answer_all(people, answer)
    shared = Judgment.objects.filter(study=study, item__kind="stage2").count()
    assert shared == 24, "every image was reviewed in stage 2"

    section = run_report(study, researcher, capture)["reliability"]

    assert_flags_only(section, spammer.pseudonym)
    assert "precision or recall" in section["note"]
    assert {w["participant"] for w in section["workers"]} == {p.pseudonym for p in people}
    assert_page_shows(client, researcher, study, spammer.pseudonym)


def _answer_all(people, answer):
    """Round robin: each annotator takes their next item until nobody gets one."""
    busy = True
    while busy:
        busy = False
        for participant in people:
            if assignment_next(participant=participant) is None:
                continue
            thumb_judge(participant, answer(participant))
            busy = True


# ---------------------------------------------------------------------- VICR


def test_vicr_report_flags_a_constant_rater(researcher, client, capture):
    # 20 game pairs, 6 players in the game, each rates every pair: 6 ratings per pair.
    # Honest players give the pair's level (one level off on every fourth pair, player by
    # player); the spammer rates everything 3.
    study = vicr_study(researcher, game=20, first_game_pass=-2000)
    players = [in_game(study, f"p{n}") for n in range(6)]
    spammer = players[4]

    def level(item):
        return 1 + item.position % 5

    for n, participant in enumerate(players):

        def answer(item, n=n, participant=participant):
            if participant == spammer:
                return 3
            true = level(item)
            if (item.position + n) % 4 == 0:
                return true + 1 if true < 5 else 4
            return true

        for _ in range(20):
            play(participant, answer=answer)

    section = run_report(study, researcher, capture)["reliability"]

    assert_flags_only(section, spammer.pseudonym)
    flagged = section["workers"][0]
    assert flagged["labels"] == 20
    assert flagged["reason"].startswith("gives the same answer (3) to all 20 shared tasks")
    assert_page_shows(client, researcher, study, spammer.pseudonym)


# ---------------------------------------------------------------------- HUMANr


def varied_honest(trial, on_left):
    """Sees what a careful worker would: the correct caption in a check, no difference
    between two human captions, and GIT better on even images, worse on odd ones."""
    if trial["kind"] == "attention_check":
        oriented = 2
    elif trial["system"] == "Human":
        oriented = 5
    else:
        oriented = 8 if trial["image_id"] % 2 == 0 else 2
    return oriented if on_left else 10 - oriented


def equal_everywhere(trial, on_left):
    """The planted spammer: 'both equally' on every trial."""
    return 5


def test_humanr_report_flags_a_spammer_when_comparisons_are_shared(researcher, client, capture):
    # 18 images with one model: 36 comparisons in 4 groups; 3 workers per comparison, so
    # 12 workers with one group each fill every group three times.
    study = humanr_study(researcher, images=18, systems=("GIT",), workers_per_comparison=3)
    workers = [crowd(study, f"w{n}") for n in range(12)]
    spammer = workers[7]
    for worker in workers:
        do_group(worker, equal_everywhere if worker == spammer else varied_honest)

    section = run_report(study, researcher, capture)["reliability"]

    assert_flags_only(section, spammer.pseudonym)
    assert all(w["labels"] == 10 for w in section["workers"]), "every answer is shared"
    assert "workers_per_comparison = 3" in section["note"]
    assert_page_shows(client, researcher, study, spammer.pseudonym)


def test_humanr_report_says_not_estimable_with_one_worker_per_comparison(
    researcher, client, capture
):
    # The paper's design (and the default): every comparison judged once, nothing shared.
    study = humanr_study(researcher, images=18, systems=("GIT",))
    workers = [crowd(study, f"w{n}") for n in range(3)]
    for worker in workers:
        do_group(worker, equal_everywhere if worker == workers[0] else varied_honest)

    section = run_report(study, researcher, capture)["reliability"]

    assert set(section) == SECTION_KEYS and section["estimable"] is False
    assert "workers_per_comparison = 1" in section["note"]
    assert "not estimable: no task was answered by two workers" in section["note"]
    assert not any(w["flagged"] for w in section["workers"])
    assert all(w["competence"] is None and w["labels"] == 0 for w in section["workers"])
    client.force_login(researcher)
    html = client.get(reverse("study_report", args=[study.pk])).content.decode()
    start = html.index('id="reliability"')
    section_html = html[start : html.index("</section>", start)]
    assert "not estimable" in section_html and "<table" not in section_html
