"""How a worker answers one item of each mode in the browser, for the client fault tests
(issue 42, tests/e2e/test_client_faults*.py): one driver per mode with the same methods, so
each fault is written once and run for THumB, VICR, HUMANr, arena and spans.

A driver fills the item's form through the page as a person does (radios, a marked span,
numbers), never submits by itself, and can tell whether the page still shows what it filled
in (after a reload, the browser's draft). Counts come from the database: every answer the
test gave is one ``Judgment`` row, and no lease part is stored twice.
"""

from __future__ import annotations

import base64
import re
from collections import Counter

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.models import Assignment, Judgment, Participant
from annotation.services.participants import crowd_link_token
from tests.factories.arena import arena_study
from tests.factories.humanr import humanr_study
from tests.factories.spans import spans_study
from tests.factories.vicr import truth_of, vicr_study

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
#: Every mode's submission URL (annotation/urls.py ``participate_submit``).
SUBMIT_URL = re.compile(r"/s/[0-9a-f-]+/submit/[^/]+/$")
MODES = ("thumb", "vicr", "humanr", "arena", "spans")


def serve_images(page_or_context) -> None:
    """Images are not on disk in tests: a 1-pixel PNG for every media file."""
    page_or_context.route(
        "**/media/**", lambda route: route.fulfill(status=200, body=PNG, content_type="image/png")
    )


def draft_key(page) -> str | None:
    """The lease (and part) the page shows, from the status region's draft key; None when
    the page is no item page (feedback, the end)."""
    region = page.locator("#draft-status")
    return region.get_attribute("data-draft-key") if region.count() else None


def stored(participant: Participant) -> tuple[int, int]:
    """(judgments stored for the participant, lease parts stored more than once)."""
    rows = Judgment.objects.filter(participant=participant).values_list("assignment_id", "part")
    counts = Counter(rows)
    return sum(counts.values()), sum(1 for n in counts.values() if n > 1)


class Driver:
    """One mode's worker. ``start`` returns the participant; ``answer`` fills the current
    item and returns what it chose; ``shows`` checks the page shows it; ``submit`` clicks
    the form's submit button; ``go_on`` leaves a feedback page for the next item."""

    name = ""
    submit_name: str | re.Pattern = ""

    def study(self, researcher, make_study, make_user, items: int):
        raise NotImplementedError

    def start(self, page, study, worker: str) -> Participant:
        serve_images(page)
        page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}&STUDY_ID=ST&SESSION_ID=SE")
        # The intro tells what happens to unsent work before the first item.
        expect(page.locator("#unsent-work")).to_contain_text("never saved twice")
        with page.expect_navigation():
            page.get_by_role("link", name="I agree, start").click()
        page.wait_for_load_state("load")
        return Participant.objects.get(study=study, external_id=worker)

    def answer(self, page, participant):
        raise NotImplementedError

    def shows(self, page, answer) -> None:
        raise NotImplementedError

    def submit(self, page) -> None:
        button = page.get_by_role("button", name=self.submit_name)
        expect(button).to_be_enabled()
        button.click(no_wait_after=True)

    def go_on(self, page) -> None:
        """On a feedback page, follow its link to the next item."""
        page.wait_for_load_state("load")
        for name in ("Next pair", "Next trial", "Do another group", "Continue"):
            link = page.get_by_role("link", name=name, exact=True)
            if link.count() and draft_key(page) is None:
                with page.expect_navigation():
                    link.first.click()
                page.wait_for_load_state("load")
                return


class Thumb(Driver):
    name = "thumb"
    submit_name = "Save and continue"

    def study(self, researcher, make_study, make_user, items):
        from tests.factories.thumb import thumb_study

        study = thumb_study(make_study, extra_images=max(0, items - 2))
        self.user = make_user("ann42", native_english=True)
        study.annotators.add(self.user)
        return study

    def start(self, page, study, worker):
        serve_images(page)
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(self.user.username)
        page.get_by_label("Password").fill(f"pw-{self.user.username}")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        page.goto(f"/s/{study.public_id}/next/")
        page.wait_for_load_state("load")
        return Participant.objects.get(study=study, user=self.user)

    def answer(self, page, participant):
        groups = page.eval_on_selector_all(
            "section[data-group]", "els => els.map(e => e.dataset.group)"
        )
        for n, key in enumerate(groups):
            page.locator(f'input[name="{key}-precision"][value="{4 + n % 2}"]').check()
            page.locator(f'input[name="{key}-recall"][value="3"]').check()
        return groups

    def shows(self, page, groups):
        for n, key in enumerate(groups):
            expect(
                page.locator(f'input[name="{key}-precision"][value="{4 + n % 2}"]')
            ).to_be_checked()
            expect(page.locator(f'input[name="{key}-recall"][value="3"]')).to_be_checked()
        # thumb.js redrew its totals from the restored fields.
        expect(page.locator(f"#{groups[0]}-total")).to_have_text("3.5")


class Vicr(Driver):
    name = "vicr"
    submit_name = "Submit rating"

    def study(self, researcher, make_study, make_user, items):
        return vicr_study(researcher, game=4, primes=(4, 4), seconds_before_submit=0)

    def answer(self, page, participant):
        lease = Assignment.objects.get(participant=participant, status=Assignment.Status.OPEN)
        rating = truth_of(lease.item)
        page.locator(f'input[name="rating"][value="{rating}"]').check()
        return rating

    def shows(self, page, rating):
        expect(page.locator(f'input[name="rating"][value="{rating}"]')).to_be_checked()


class Humanr(Driver):
    name = "humanr"
    submit_name = re.compile("Next trial|Finish the group")

    def study(self, researcher, make_study, make_user, items):
        return humanr_study(researcher, images=18, systems=("GIT",), min_seconds_per_trial=0)

    def answer(self, page, participant):
        value = 2 + len(Judgment.objects.filter(participant=participant)) % 7
        # The scale's radios overlap their labels: a digit key, as the page offers.
        page.locator("body").focus()
        page.keyboard.press(str(value))
        expect(page.locator(f"#raw-{value}")).to_be_checked()
        return value

    def shows(self, page, value):
        expect(page.locator(f"#raw-{value}")).to_be_checked()
        # humanr.js redrew the chosen value from the restored field.
        expect(page.locator("#hr-choice-value")).to_have_text(re.compile(rf"^{value}: "))


class Arena(Driver):
    name = "arena"
    submit_name = "Submit verdict"

    def study(self, researcher, make_study, make_user, items):
        return arena_study(
            researcher, images=max(4, items), words=lambda s, i: 40, catch_rate=0, min_seconds=0
        )

    def answer(self, page, participant):
        outcome = ("a", "b", "tie")[Judgment.objects.filter(participant=participant).count() % 3]
        page.locator(f'input[name="outcome"][value="{outcome}"]').check()
        return outcome

    def shows(self, page, outcome):
        expect(page.locator(f'input[name="outcome"][value="{outcome}"]')).to_be_checked()


class Spans(Driver):
    name = "spans"
    submit_name = "Submit"

    def study(self, researcher, make_study, make_user, items):
        return spans_study(researcher, systems=("alpha",), images=max(3, items), min_seconds=0)

    def answer(self, page, participant):
        word = page.locator("#spans-caption .w").nth(1)
        word.click()
        page.locator("#mark-category").select_option(index=1)
        page.locator("#spans-add").click()
        expect(page.locator("#spans-list li")).to_have_count(1)
        text = page.locator("#spans-list li").inner_text().split("\u201d")[0].lstrip("\u201c")
        page.locator("#score").fill("70")
        return text

    def shows(self, page, text):
        # spans.js listed the restored mark again from its hidden field.
        expect(page.locator("#spans-list li")).to_have_count(1)
        expect(page.locator("#spans-list li")).to_contain_text(f"\u201c{text}\u201d")
        expect(page.locator("#score")).to_have_value("70")

    def submit(self, page):
        button = page.locator("#spans-submit")
        expect(button).to_be_enabled()
        button.click(no_wait_after=True)


DRIVERS = {driver.name: driver for driver in (Thumb(), Vicr(), Humanr(), Arena(), Spans())}


def next_item(page, driver: Driver, before: str | None) -> str | None:
    """Wait until the page has left the item ``before`` (the answer was acknowledged), pass
    a feedback page, and return the new item's draft key (None at the end)."""
    page.wait_for_function(
        "(before) => { const r = document.getElementById('draft-status');"
        " return document.readyState === 'complete' && (!r || r.dataset.draftKey !== before); }",
        arg=before,
    )
    driver.go_on(page)
    return draft_key(page)
