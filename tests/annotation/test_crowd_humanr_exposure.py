"""Crowd integrity, HUMANr exposure: a worker never sees an image (or its captions) twice.

The attack (issue row 6): a bot remembers which caption it saw with which image. An
attention check shows a human caption of another image; if the bot has met that caption
before, with its own image, it recognises the foreign caption and passes the check while
answering every comparison with junk, so its junk stays in the report. The defence: every
group touches a set of images (the images it shows and the images whose captions it shows,
the check's distractor included), and a worker is only served groups whose images are
disjoint from every group they have been served; then nothing in a check can be
recognised from memory.

Every attack here goes through the real views: the signed crowd link, ``/next/`` and the
submit form, as a browser would.
"""

from __future__ import annotations

import html
import re
from collections import Counter

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Caption, Image, Item, ItemImage, Judgment, Participant
from annotation.services.participants import crowd_link_token
from annotation.views.participate import BROWSER_COOKIE
from tests.factories.core import assert_counts_exact, require_postgres, run_together
from tests.factories.humanr import humanr_study

pytestmark = pytest.mark.django_db

# Many workers come from one test client address; the per-address crowd limits are not
# what these tests are about.
OPEN_LIMITS = {
    "crowd_arrivals_per_address_per_hour": 10_000,
    "crowd_open_leases_per_address": 10_000,
}


class MemoryBot:
    """A crowd worker who answers junk but remembers every (caption, image) pair it was shown.

    It reads only what its browser gets (the trial page's HTML: the image's address, the
    two caption texts, the form), so several bots can play at once in threads. On a trial
    where a caption was seen before with another image, the caption is foreign: the bot
    answers strongly against it (which passes an attention check). Everything else gets a
    random answer. Two bots given the same ``client`` and ``memory`` are one browser and one
    person with two crowd ids.
    """

    def __init__(self, study, pid: str, *, address: str, seed: int, client=None, memory=None):
        self.study = study
        self.pid = pid
        self.client = client or Client(REMOTE_ADDR=address)
        self.rng = np.random.default_rng(seed)
        self.memory: dict[int, int] = {} if memory is None else memory  # caption -> image
        self.trials: list[dict] = []  # what each page showed: lease, image, caption ids
        self.recognised: list[tuple[str, int]] = []  # (lease token, part) of each recognition
        self.groups_finished = 0
        self.finished_page = None
        # What a page shows, mapped back to rows (the test's bookkeeping, not the bot's).
        self.image_at = {
            django_settings.MEDIA_URL + display: pk
            for pk, display in Image.objects.filter(study=study).values_list("pk", "display")
        }
        self.caption_with = dict(
            Caption.objects.filter(study=study).values_list("text", "pk").order_by()
        )

    def enter(self) -> None:
        self.client.get(
            reverse("crowd_entry", args=[crowd_link_token(self.study)]),
            {"PROLIFIC_PID": self.pid, "STUDY_ID": "S", "SESSION_ID": self.pid},
        )

    def play(self, max_trials: int = 1000) -> None:
        """Answer trials until the study has nothing left for this worker."""
        url = reverse("participate_next", args=[self.study.public_id])
        for _ in range(max_trials):
            page = self.client.get(url)
            assert page.status_code == 200, page.content[:300]
            if read_trial(page) is None:
                self.finished_page = page
                return
            self.answer(page)
        raise AssertionError(f"{self.pid} was still being served after {max_trials} trials")

    def answer(self, page) -> None:
        trial = read_trial(page)
        image = self.image_at[trial["src"]]
        left, right = (self.caption_with[trial[side]] for side in ("left_text", "right_text"))
        assert trial["left"] == left, "the form names the caption shown on the left"
        self.trials.append({"lease": trial["token"], "image": image, "captions": (left, right)})
        foreign = [c for c in (left, right) if self.memory.get(c, image) != image]
        if foreign:
            self.recognised.append((trial["token"], trial["part"]))
            raw = 9 if foreign[0] == left else 1  # "only the other caption matches"
        else:
            raw = int(self.rng.integers(1, 10))
        for caption in (left, right):
            self.memory.setdefault(caption, image)
        response = self.client.post(
            trial["action"], {"part": trial["part"], "raw": raw, "left": left}
        )
        assert response.status_code in (200, 302), response.content[:300]
        # The group's feedback is a page of its own after a redirect (issue 42): read it. A
        # redirect to the next item is left to the caller's next GET, as a browser tab would.
        feedback = reverse("participate_feedback", args=[self.study.public_id, trial["token"]])
        if response.status_code == 302 and response["Location"] == feedback:
            response = self.client.get(feedback)
            assert response.status_code == 200, response.content[:300]
        if response.status_code == 200 and "Group complete" in response.content.decode():
            self.groups_finished += 1


TRIAL_PAGE = re.compile(
    r'<img src="(?P<src>[^"]+)".*?<p id="hr-left">(?P<left_text>.*?)</p>.*?'
    r'<p id="hr-right">(?P<right_text>.*?)</p>.*?<form method="post" action="(?P<action>[^"]+)"'
    r'.*?name="part" value="(?P<part>\d+)".*?name="left" value="(?P<left>\d+)"',
    re.DOTALL,
)


def read_trial(page) -> dict | None:
    """What a trial page shows, from its HTML (None for any other page)."""
    match = TRIAL_PAGE.search(page.content.decode())
    if match is None:
        return None
    trial = {key: html.unescape(value) for key, value in match.groupdict().items()}
    trial["part"], trial["left"] = int(trial["part"]), int(trial["left"])
    trial["token"] = trial["action"].rstrip("/").rsplit("/", 1)[-1]
    return trial


def touched_images(trials, caption_images) -> dict[int, set[int]]:
    """Per lease: every image a worker saw, or saw a caption of, in that group."""
    per_lease: dict[int, set[int]] = {}
    for trial in trials:
        seen = per_lease.setdefault(trial["lease"], set())
        seen.add(trial["image"])
        seen.update(caption_images[c] for c in trial["captions"])
    return per_lease


def test_a_memory_bot_cannot_recognise_a_foreign_caption_across_groups(researcher):
    study = humanr_study(researcher, images=60, systems=("GIT",), **OPEN_LIMITS)
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    bot = MemoryBot(study, "memory-bot", address="10.0.0.1", seed=1)
    bot.enter()
    bot.play()

    checks = {
        (token, part): result["check_failed"]
        for token, part, result in Judgment.objects.filter(
            participant__external_id="memory-bot", result__kind="attention_check"
        ).values_list("assignment__token", "part", "result")
    }
    by_memory = sum(key in checks and not checks[key] for key in bot.recognised)
    assert bot.groups_finished >= 2, "the attack needs a worker who did several groups"
    assert not bot.recognised, (
        f"the memory bot recognised a foreign caption in {len(bot.recognised)} trials and so "
        f"passed {by_memory} of its {len(checks)} attention checks while answering junk"
    )
    images = Counter(trial["image"] for trial in bot.trials)
    captions = Counter(c for trial in bot.trials for c in trial["captions"])
    assert max(images.values()) == 1, "an image was shown twice to the same worker"
    assert max(captions.values()) == 1, "a caption was shown twice to the same worker"
    groups = list(touched_images(bot.trials, caption_images).values())
    for number, first in enumerate(groups):
        for second in groups[number + 1 :]:
            assert not first & second, "two groups of one worker touch the same image"


def test_nothing_left_for_a_worker_shows_the_finished_page_with_their_groups(researcher):
    """Exposure limits what one worker can do; when it is reached they get the finished page
    (with the completion code of the groups they did), while other workers are still served."""
    study = humanr_study(researcher, images=40, systems=("GIT",), **OPEN_LIMITS)
    first = MemoryBot(study, "first", address="10.0.0.2", seed=2)
    first.enter()
    first.play()

    groups = Item.objects.filter(study=study).count()
    done = Assignment.objects.filter(
        participant__external_id="first", status=Assignment.Status.SUBMITTED
    ).count()
    assert 1 <= first.groups_finished == done < groups, "a worker cannot do every group"
    html = first.finished_page.content.decode()
    assert f"You finished {done} group" in html and "no further group for you" in html
    worker = Participant.objects.get(external_id="first")
    assert worker.state["groups_done"] == done
    assert not first.recognised

    second = MemoryBot(study, "second", address="10.0.0.3", seed=3)
    second.enter()
    second.play()
    assert second.groups_finished >= 1, "what the first worker may not do is left for others"
    assert not second.recognised


def test_a_crowd_of_memory_bots_never_recognises_a_caption_and_fills_the_study(researcher):
    """Enough workers still judge every group ``workers_per_comparison`` times."""
    study = humanr_study(
        researcher, images=30, systems=("GIT",), workers_per_comparison=2, **OPEN_LIMITS
    )
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    bots = []
    # New workers until one is told that nothing is left: a worker who has seen nothing is
    # barred from no group, so then every group has its judgments.
    for number in range(40):
        bot = MemoryBot(study, f"crowd-{number}", address=f"10.0.1.{number}", seed=number)
        bot.enter()
        bot.play()
        bots.append(bot)
        if not bot.groups_finished:
            break

    assert not bots[-1].groups_finished, "40 workers did not fill the study"
    assert not [bot.pid for bot in bots if bot.recognised]
    for bot in bots:
        groups = list(touched_images(bot.trials, caption_images).values())
        assert sum(len(g) for g in groups) == len(set().union(*groups)), bot.pid
    for item in Item.objects.filter(study=study):
        finished = Assignment.objects.filter(item=item, status=Assignment.Status.SUBMITTED)
        assert finished.count() == item.target == 2, f"group {item.position}"
        answers = Judgment.objects.filter(item=item).count()
        assert answers == item.target * len(item.spec["trials"]), f"group {item.position}"


def test_item_images_hold_every_image_a_group_shows_or_shows_a_caption_of(researcher):
    study = humanr_study(researcher, images=30, systems=("GIT", "ClipCap"))
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    stored: dict[int, set[int]] = {}
    for item_id, image_id in ItemImage.objects.filter(item__study=study).values_list(
        "item_id", "image_id"
    ):
        stored.setdefault(item_id, set()).add(image_id)

    items = list(Item.objects.filter(study=study))
    assert set(stored) == {item.pk for item in items}
    for item in items:
        # A check's images are drawn per lease (humanr/checks.py), so a group's rows are its
        # comparisons' images; the exposure rule reads each worker's drawn checks apart.
        comparisons = [t for t in item.spec["trials"] if t["kind"] == "comparison"]
        shown = {t["image_id"] for t in comparisons}
        shown |= {
            caption_images[t[key]]
            for t in comparisons
            for key in ("reference_caption_id", "other_caption_id")
        }
        assert stored[item.pk] == shown
        assert len(shown) == len(comparisons), "within a group no image appears twice"


@pytest.mark.django_db(transaction=True)
def test_a_worker_asking_from_several_tabs_at_once_still_meets_no_image_twice(researcher):
    """Four tabs of one worker ask for the next group at the same instant, round after round
    (PostgreSQL, real transactions): they all get the same lease, and the groups the worker
    is served share no image."""
    require_postgres()
    study = humanr_study(researcher, images=150, systems=("GIT",), **OPEN_LIMITS)
    bot = MemoryBot(study, "tabs", address="10.0.2.1", seed=4)
    bot.enter()
    url = reverse("participate_next", args=[study.public_id])
    for _ in range(3):
        tabs = [Client(REMOTE_ADDR="10.0.2.1") for _ in range(4)]
        for tab in tabs:
            tab.cookies = bot.client.cookies
        pages, errors = run_together([lambda tab=tab: tab.get(url) for tab in tabs])
        assert not errors, errors
        leases = {read_trial(page)["token"] for page in pages}
        assert len(leases) == 1, "every tab shows the worker's one open group"
        for _part in range(10):  # finish the group in one tab
            bot.answer(bot.client.get(url))

    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    groups = list(touched_images(bot.trials, caption_images).values())
    assert len(groups) == 3 == bot.groups_finished
    assert sum(len(g) for g in groups) == len(set().union(*groups))
    assert not bot.recognised


def test_a_lapsed_group_comes_back_to_its_worker_and_resumes(researcher):
    """The rule bars groups sharing an image with the worker's groups, but not those groups
    themselves: a lease that lapsed mid-group is reopened for them where they stopped."""
    study = humanr_study(researcher, images=60, systems=("GIT",), **OPEN_LIMITS)
    bot = MemoryBot(study, "leaver", address="10.0.3.1", seed=5)
    bot.enter()
    url = reverse("participate_next", args=[study.public_id])
    for _part in range(4):
        bot.answer(bot.client.get(url))
    first = Assignment.objects.get(participant__external_id="leaver")
    Assignment.objects.filter(pk=first.pk).update(expires_at=first.served_at)  # it lapses

    page = bot.client.get(url)

    assert page.context["assignment"].pk == first.pk, "the same lease is reopened"
    assert page.context["part"] == 4, "it resumes at the first unanswered trial"
    first.refresh_from_db()
    assert first.status == Assignment.Status.OPEN


def met_by(participant_ids) -> dict[int, list[set[int]]]:
    """Per participant: the images of each group they were served (the ``ItemImage`` rows)."""
    images: dict[int, set[int]] = {}
    for item_id, image_id in ItemImage.objects.values_list("item_id", "image_id"):
        images.setdefault(item_id, set()).add(image_id)
    served: dict[int, list[set[int]]] = {pk: [] for pk in participant_ids}
    for participant_id, item_id in Assignment.objects.filter(
        participant_id__in=participant_ids
    ).values_list("participant_id", "item_id"):
        served[participant_id].append(images[item_id])
    return served


def assert_never_twice(groups: list[set[int]], who: str) -> None:
    assert sum(len(g) for g in groups) == len(set().union(*groups)), f"{who} met an image twice"


def test_two_crowd_ids_from_one_browser_are_one_worker_who_never_meets_an_image_twice(
    researcher,
):
    """The attack: one person (a bot with a memory) does a group with one Prolific id, then
    arrives with a second id in the same browser. The second id is admitted (and flagged
    shared_browser), but a worker is a browser: it must not be served an image the first id
    met, or the bot recognises distractors and passes checks with junk answers."""
    study = humanr_study(researcher, images=60, systems=("GIT",), **OPEN_LIMITS)
    first = MemoryBot(study, "first-id", address="10.0.5.1", seed=6)
    first.enter()
    for _trial in range(10):
        first.answer(first.client.get(reverse("participate_next", args=[study.public_id])))
    second = MemoryBot(
        study, "second-id", address="10.0.5.1", seed=7, client=first.client, memory=first.memory
    )
    second.enter()
    second.play()

    people = Participant.objects.filter(external_id__in=["first-id", "second-id"])
    assert len({p.browser_id for p in people}) == 1, "both ids arrived in one browser"
    assert first.groups_finished == 1 and second.groups_finished >= 1, "both were served"
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    groups = list(touched_images(first.trials + second.trials, caption_images).values())
    assert_never_twice(groups, "the browser")
    assert not second.recognised, f"recognised {len(second.recognised)} foreign captions"
    assert_never_twice([g for gs in met_by([p.pk for p in people]).values() for g in gs], "both")


def test_a_registered_annotator_never_meets_an_image_twice(researcher, annotator):
    """Exposure is a rule of the mode, so it holds for every kind of participant: a logged-in
    annotator working through the pages is served groups that share no image."""
    study = humanr_study(researcher, images=60, systems=("GIT",))
    study.annotators.add(annotator)
    bot = MemoryBot(study, "annotator", address="10.0.6.1", seed=8)
    bot.client.force_login(annotator)
    bot.play()

    participant = Participant.objects.get(study=study, user=annotator)
    assert participant.source == Participant.Source.ACCOUNT
    assert bot.groups_finished >= 2, "the annotator did several groups"
    assert bot.groups_finished < Item.objects.filter(study=study).count()
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    assert_never_twice(list(touched_images(bot.trials, caption_images).values()), "annotator")
    assert_never_twice(met_by([participant.pk])[participant.pk], "annotator")
    assert not bot.recognised


def test_a_small_study_shows_no_image_twice_within_a_group(researcher):
    """Five images and one model: ten comparisons. A group of all five comparison images
    would have to take its check (or the distractor caption) from one of them; so groups
    hold three comparisons, and the check and the distractor are the other two images."""
    study = humanr_study(researcher, images=5, systems=("GIT",), **OPEN_LIMITS)
    bot = MemoryBot(study, "small", address="10.0.7.1", seed=9)
    bot.enter()
    bot.play()

    assert bot.groups_finished == 1, "one group meets all five images: nothing else is left"
    images = Counter(trial["image"] for trial in bot.trials)
    captions = Counter(c for trial in bot.trials for c in trial["captions"])
    assert len(bot.trials) == 4, "three comparisons and the check"
    assert max(images.values()) == 1, f"an image was shown twice in one group: {images}"
    assert max(captions.values()) == 1
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    (met,) = touched_images(bot.trials, caption_images).values()
    assert len(met) == 5, "the distractor caption is of the fifth image"
    assert not bot.recognised


@pytest.mark.django_db(transaction=True)
def test_a_concurrent_crowd_never_meets_an_image_twice_and_judges_each_comparison_once(
    researcher,
):
    """Crowds of memory bots play at the same time through the pages (PostgreSQL, real
    transactions, a thread and a browser each), round after round until a whole round is
    told that nothing is left for it. With the default settings every comparison is judged
    exactly once, no bot meets an image twice, none recognises a caption, and every image's
    groups went to different workers."""
    require_postgres()
    study = humanr_study(researcher, images=60, systems=("GIT", "ClipCap"), **OPEN_LIMITS)
    groups = Item.objects.filter(study=study).count()
    bots: list[MemoryBot] = []
    for round_number in range(6):
        crowd = [
            MemoryBot(study, f"c{round_number}-{n}", address=f"10.1.{round_number}.{n}", seed=n)
            for n in range(8)
        ]
        for bot in crowd:
            bot.enter()
        _, errors = run_together([bot.play for bot in crowd])
        assert not errors, errors
        bots += crowd
        if not any(bot.groups_finished for bot in crowd):
            break
    assert not any(bot.groups_finished for bot in crowd), "six rounds did not fill the study"

    assert_counts_exact(study)
    for item in Item.objects.filter(study=study):
        done = Assignment.objects.filter(item=item, status=Assignment.Status.SUBMITTED)
        assert item.target == 1 and done.count() == 1, f"group {item.position}"
        assert Judgment.objects.filter(item=item).count() == len(item.spec["trials"])
    assert sum(bot.groups_finished for bot in bots) == groups
    assert not [bot.pid for bot in bots if bot.recognised]
    caption_images = dict(Caption.objects.filter(study=study).values_list("pk", "image_id"))
    for bot in bots:
        assert_never_twice(list(touched_images(bot.trials, caption_images).values()), bot.pid)
    people = list(Participant.objects.filter(study=study).values_list("pk", flat=True))
    workers_of_image: dict[int, list[int]] = {}
    for participant_id, met in met_by(people).items():
        assert_never_twice(met, f"participant {participant_id}")
        for group in met:
            for image in group:
                workers_of_image.setdefault(image, []).append(participant_id)
    for image, workers in workers_of_image.items():
        assert len(workers) == len(set(workers)), f"image {image} went to a worker twice"
    # Each image is compared three times (Human, GIT, ClipCap), each time to another worker.
    assert min(len(workers) for workers in workers_of_image.values()) >= 3


def finish_group(bot: MemoryBot, page) -> None:
    """Answer the group a page shows, to its last trial, as one browser tab would."""
    url = reverse("participate_next", args=[bot.study.public_id])
    done = bot.groups_finished
    while read_trial(page) is not None:
        bot.answer(page)
        if bot.groups_finished > done:
            return
        page = bot.client.get(url)
    raise AssertionError(f"{bot.pid}'s group ended without its completion page")


def twins_in_one_browser(study, name: str, address: str, seed: int) -> tuple[MemoryBot, MemoryBot]:
    """Two Prolific ids of one person in one browser: the second session carries the first's
    browser cookie (as a second tab whose session was cleared would), so it is admitted and
    both are flagged shared_browser."""
    first = MemoryBot(study, f"{name}-a", address=address, seed=seed)
    first.enter()
    same_browser = Client(REMOTE_ADDR=address)
    same_browser.cookies[BROWSER_COOKIE] = first.client.cookies[BROWSER_COOKIE].value
    second = MemoryBot(
        study, f"{name}-b", address=address, seed=seed + 1, client=same_browser, memory=first.memory
    )
    second.enter()
    session = django_settings.SESSION_COOKIE_NAME
    assert second.client.cookies[session].value != first.client.cookies[session].value
    people = Participant.objects.filter(external_id__in=[first.pid, second.pid])
    assert len(people) == 2 and len({p.browser_id for p in people}) == 1, "one browser"
    assert all("shared_browser" in {f["kind"] for f in p.flags} for p in people)
    return first, second


@pytest.mark.django_db(transaction=True)
def test_two_crowd_ids_of_one_browser_asking_at_the_same_instant_never_share_an_image(
    researcher,
):
    """The race (PostgreSQL, real transactions): one person holds two Prolific ids in one
    browser and asks ``/next/`` with both at the same instant, then finishes what each was
    served. Each request checks exposure against what the browser met, so unless the
    browser's participants are served one at a time both read the same state and are handed
    two groups that share an image.

    Twelve images make the collision independent of how the groups were drawn: every group
    touches at least 8 of them (comparisons, check, distractor), so any two groups share
    one, and a browser may be served one group only. Each round is a new browser (what one
    browser may do is then used up); many workers per group keep every group open."""
    require_postgres()
    study = humanr_study(
        researcher, images=12, systems=("GIT",), workers_per_comparison=50, **OPEN_LIMITS
    )
    touched = Counter(ItemImage.objects.filter(item__study=study).values_list("item", flat=True))
    # A group's rows are its comparisons' images; each lease's check adds two drawn ones.
    assert 2 * (min(touched.values()) + 2) > 12, "any two groups share an image"
    url = reverse("participate_next", args=[study.public_id])
    for round_number in range(10):
        twins = twins_in_one_browser(
            study, f"twin{round_number}", f"10.0.9.{round_number}", seed=2 * round_number
        )
        pages, errors = run_together([lambda bot=bot: bot.client.get(url) for bot in twins])
        assert not errors, errors
        assert all(page.status_code == 200 for page in pages)
        playing = [(bot, page) for bot, page in zip(twins, pages, strict=True) if read_trial(page)]
        assert playing, "the study has room for this browser"
        _, errors = run_together([lambda pair=pair: finish_group(*pair) for pair in playing])
        assert not errors, errors

        people = [p.pk for p in Participant.objects.filter(external_id__in=[b.pid for b in twins])]
        groups = [g for gs in met_by(people).values() for g in gs]
        assert len(groups) == sum(bot.groups_finished for bot in twins)
        assert_never_twice(groups, f"round {round_number}: the browser's two ids")
        assert not any(bot.recognised for bot in twins)
