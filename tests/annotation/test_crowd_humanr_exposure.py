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

from collections import Counter

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Caption, Item, ItemImage, Judgment, Participant
from annotation.services.participants import crowd_link_token
from tests.factories.core import require_postgres, run_together
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

    On a trial where a caption was seen before with another image, the caption is foreign:
    the bot answers strongly against it (which passes an attention check). Everything else
    gets a random answer.
    """

    def __init__(self, study, pid: str, *, address: str, seed: int):
        self.study = study
        self.pid = pid
        self.client = Client(REMOTE_ADDR=address)
        self.rng = np.random.default_rng(seed)
        self.memory: dict[int, int] = {}  # caption id -> image it was first shown with
        self.trials: list[dict] = []  # what each page showed: lease, image, caption ids
        self.recognised: list[tuple[int, int]] = []  # (lease, part) of each recognition
        self.groups_finished = 0
        self.finished_page = None

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
            assert page.status_code == 200
            lease = page.context.get("assignment")
            if lease is None:
                self.finished_page = page
                return
            self.answer(page, lease)
        raise AssertionError(f"{self.pid} was still being served after {max_trials} trials")

    def answer(self, page, lease) -> None:
        image = page.context["image"].pk
        left, right = page.context["left_caption"].pk, page.context["right_caption"].pk
        self.trials.append({"lease": lease.pk, "image": image, "captions": (left, right)})
        foreign = [c for c in (left, right) if self.memory.get(c, image) != image]
        if foreign:
            self.recognised.append((lease.pk, page.context["part"]))
            raw = 9 if foreign[0] == left else 1  # "only the other caption matches"
        else:
            raw = int(self.rng.integers(1, 10))
        for caption in (left, right):
            self.memory.setdefault(caption, image)
        response = self.client.post(
            reverse("participate_submit", args=[self.study.public_id, lease.token]),
            {"part": page.context["part"], "raw": raw, "left": left},
        )
        assert response.status_code in (200, 302), response.content[:300]
        if response.status_code == 200 and "Group complete" in response.content.decode():
            self.groups_finished += 1


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
        (assignment, part): result["check_failed"]
        for assignment, part, result in Judgment.objects.filter(
            participant__external_id="memory-bot", result__kind="attention_check"
        ).values_list("assignment_id", "part", "result")
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
        shown = {t["image_id"] for t in item.spec["trials"]}
        shown |= {
            caption_images[t[key]]
            for t in item.spec["trials"]
            for key in ("reference_caption_id", "other_caption_id")
        }
        assert stored[item.pk] == shown
        images = [t["image_id"] for t in item.spec["trials"]]
        assert len(shown) == len(images) + 1, "within a group no image appears twice"


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
        leases = {page.context["assignment"].pk for page in pages}
        assert len(leases) == 1, "every tab shows the worker's one open group"
        for _part in range(10):  # finish the group in one tab
            page = bot.client.get(url)
            bot.answer(page, page.context["assignment"])

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
        page = bot.client.get(url)
        bot.answer(page, page.context["assignment"])
    first = Assignment.objects.get(participant__external_id="leaver")
    Assignment.objects.filter(pk=first.pk).update(expires_at=first.served_at)  # it lapses

    page = bot.client.get(url)

    assert page.context["assignment"].pk == first.pk, "the same lease is reopened"
    assert page.context["part"] == 4, "it resumes at the first unanswered trial"
    first.refresh_from_db()
    assert first.status == Assignment.Status.OPEN
