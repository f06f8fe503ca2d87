"""Issue 45, row 6 (HUMANr): what one identity sees of the attention checks predicts nothing
for another.

The attack: scout ids, each a browser at an address of its own (so the exposure rule, which
treats a browser as one worker, does not link them), play every group they are served and
write down which image each caption they were shown belongs to (a person reading the page
knows; the test reads it from the database, the strongest scout). A bot id, in another
browser at another address, then answers with the pooled notes: when a caption on its page
is noted as another image's, it answers strongly against it (which passes an attention
check) and answers everything else at random. Before the fix the check's two captions were
drawn from every human caption of the study, so the notes recognised the distractor in
many of the bot's checks; now a check shows only captions no comparison shows and no
earlier check showed, so nothing a scout saw appears in the bot's checks.

Everything goes through the real views: the signed crowd link, ``/next/`` and the form.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse

from annotation.models import Caption, Image, Judgment
from annotation.services.participants import crowd_link_token
from tests.factories.humanr import humanr_study

pytestmark = pytest.mark.django_db

OPEN_LIMITS = {
    "crowd_arrivals_per_address_per_hour": 10_000,
    "crowd_open_leases_per_address": 10_000,
}
TRIAL_PAGE = re.compile(
    r'<img src="(?P<src>[^"]+)".*?<p id="hr-left">(?P<left_text>.*?)</p>.*?'
    r'<p id="hr-right">(?P<right_text>.*?)</p>.*?<form method="post" action="(?P<action>[^"]+)"'
    r'.*?name="part" value="(?P<part>\d+)".*?name="left" value="(?P<left>\d+)"',
    re.DOTALL,
)


class Identity:
    """One crowd id in a browser of its own; ``notes`` maps a caption's text to its image's
    address, shared by the scouts and read by the bot."""

    def __init__(self, study, pid: str, address: str, notes: dict[str, str], *, seed: int):
        self.study, self.pid, self.notes = study, pid, notes
        self.client = Client(REMOTE_ADDR=address)
        self.rng = np.random.default_rng(seed)
        self.recognised: list[tuple[str, int]] = []  # (lease token, part)
        self.seen: list[tuple[str, str, str]] = []  # (image address, left text, right text)
        arrived = self.client.get(
            reverse("crowd_entry", args=[crowd_link_token(study)]),
            {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": pid},
        )
        assert arrived.status_code == 302, arrived.content[:300]
        images = dict(Image.objects.filter(study=study).values_list("pk", "display"))
        # What a person reading the page knows: which image a caption describes.
        self.truth = {
            text: django_settings.MEDIA_URL + images[image]
            for text, image in Caption.objects.filter(study=study).values_list("text", "image_id")
        }

    def play(self, *, scout: bool, limit: int = 400) -> None:
        url = reverse("participate_next", args=[self.study.public_id])
        for _ in range(limit):
            page = self.client.get(url)
            assert page.status_code == 200
            match = TRIAL_PAGE.search(page.content.decode())
            if match is None:
                return
            trial = {key: html.unescape(value) for key, value in match.groupdict().items()}
            src, left, right = trial["src"], trial["left_text"], trial["right_text"]
            self.seen.append((src, left, right))
            foreign = [text for text in (left, right) if self.notes.get(text, src) != src]
            if foreign and not scout:
                self.recognised.append((trial["action"], int(trial["part"])))
                raw = 9 if foreign[0] == left else 1  # "only the other caption matches"
            else:
                raw = int(self.rng.integers(1, 10))
            if scout:
                for text in (left, right):
                    self.notes[text] = self.truth[text]
            response = self.client.post(
                trial["action"], {"part": trial["part"], "raw": raw, "left": trial["left"]}
            )
            assert response.status_code in (200, 302), response.content[:300]
        raise AssertionError(f"{self.pid} was still served after {limit} trials")


def check_texts(pid: str) -> set[str]:
    """The caption texts shown in a participant's answered attention checks."""
    ids = set()
    for result in Judgment.objects.filter(
        participant__external_id=pid, result__kind="attention_check"
    ).values_list("result", flat=True):
        ids |= {result["reference_caption_id"], result["other_caption_id"]}
    return set(Caption.objects.filter(pk__in=ids).values_list("text", flat=True))


def test_a_bot_informed_by_scouts_recognises_nothing_in_its_attention_checks(researcher):
    # COCO-like data: five human captions per image, so captions are left that no
    # comparison shows; many workers per group, so the scouts leave groups for the bot.
    study = humanr_study(
        researcher,
        images=60,
        humans=5,
        systems=("GIT",),
        workers_per_comparison=10,
        **OPEN_LIMITS,
    )
    notes: dict[str, str] = {}
    for number in range(4):
        scout = Identity(study, f"scout-{number}", f"203.0.113.{number}", notes, seed=number)
        scout.play(scout=True)
    assert len(notes) > 100, "the scouts noted many captions"

    bot = Identity(study, "informed-bot", "198.51.100.7", notes, seed=99)
    bot.play(scout=False)

    shown = check_texts("informed-bot")
    assert shown, "the bot answered attention checks"
    known = shown & set(notes)
    passed_by_notes = Judgment.objects.filter(
        participant__external_id="informed-bot",
        result__kind="attention_check",
        result__check_failed=False,
    ).count()
    assert not bot.recognised, (
        f"the scouts' notes recognised a foreign caption in {len(bot.recognised)} of the bot's "
        f"trials ({passed_by_notes} checks passed)"
    )
    assert not known, f"{len(known)} of the bot's check captions were in the scouts' notes"


def test_no_caption_is_shown_in_two_workers_checks_or_in_a_comparison(researcher):
    """The rule behind it: a check's captions are shown once in the study, in that check."""
    study = humanr_study(
        researcher, images=60, humans=5, systems=("GIT",), workers_per_comparison=10, **OPEN_LIMITS
    )
    notes: dict[str, str] = {}
    for number in range(3):
        Identity(study, f"w-{number}", f"192.0.2.{number}", notes, seed=number).play(scout=True)

    comparison_captions: set[int] = set()
    for trials in study.items.values_list("spec__trials", flat=True):
        for trial in trials:
            if trial["kind"] == "comparison":
                comparison_captions |= {trial["reference_caption_id"], trial["other_caption_id"]}
    seen: dict[int, int] = {}
    for participant, result in Judgment.objects.filter(
        study=study, result__kind="attention_check"
    ).values_list("participant_id", "result"):
        for caption in (result["reference_caption_id"], result["other_caption_id"]):
            assert caption not in comparison_captions, "a check showed a comparison's caption"
            assert seen.setdefault(caption, participant) == participant, "shown in two checks"
    assert len(seen) >= 6, "several checks were answered"
