"""Simulated annotators in a real browser: they answer a study's pages as a person would and
record every answer they give, so a test or a bench can compare it with what was stored.

Shared by ``tests/e2e/test_server_restart.py`` and ``bench/client_faults.py`` (issue 42).
Playwright's async API, so that one Chromium holds several annotators (a context each: own
cookies and storage) and a 2-core machine runs twenty of them; it imports no Django.

What an annotator does, the same in every mode:

1. arrives through the study's signed crowd link as a Prolific worker and agrees;
2. on an item page (a form posting to ``/submit/<lease token>/``) it reads the lease token
   and part; if it answered that part before and the page does not show that answer again
   (no draft restored it), it types it again, which is counted (``typed_twice``); it then
   fills the form (every radio group left empty gets a seeded choice, the THumB review
   boxes are ticked, the spans page gets one or two marks and a score) and presses the
   form's submit button when it is enabled (the modes' minimum times);
3. waits for the outcome: the page moving on to anything but that form is the
   acknowledgement (``acked``, first send to there is the answer's waiting time); the
   browser's own error page (``chrome-error://``, the network failed) means the page lost
   it: the annotator waits a second and opens the study's address again (``/next/``), as a
   person with no other way back would; a page that stays on the form without loading a
   new one is a page still working on it (a script retrying), and the annotator waits,
   reading its status line (``role=status`` / ``aria-live``), up to ``ACK_WAIT_S``;
4. stops at the "Thank you" page (``finished``), at ``max_answers`` acknowledged, or at the deadline
   (an answer still unacknowledged then is waited for up to ``grace_s`` more).

The answer of a (token, part) is drawn from ``random.Random(f"{seed}:{token}:{part}")``:
typing it again gives the same answer. What the form would send (``FormData`` minus the
CSRF token) after filling is remembered to tell a restored draft from an empty form.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

#: As tests/e2e/conftest.py launches Chromium: headless, no sandbox, nothing dialling out.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]
#: How long an annotator waits on a page that has neither moved on nor failed.
ACK_WAIT_S = 120
#: A person's pause before opening the address again after the browser's error page.
RETRY_PAUSE_S = 1.0
#: The longest any single page action may take (a loaded machine, a delayed network).
ACTION_TIMEOUT_MS = 60_000
#: A submit button disabled longer than any mode's minimum time: the page is stuck.
STUCK_S = 90
#: An answer slower than this is noted with where its time went.
SLOW_S = 20
#: Presses of one answer's submit button before the annotator gives up on it.
MAX_SENDS = 20
WAIT_NAMED = re.compile(r"at least (\d+(?:\.\d+)?) seconds")
ITEM_FORM = 'form[action*="/submit/"]'
TOKEN = re.compile(r"/submit/([^/]+)/?$")

FORM_DATA = """form => [...new FormData(form)]
    .filter(([name]) => name !== "csrfmiddlewaretoken")
    .map(([name, value]) => name + "=" + value).sort()"""
RADIO_GROUPS = """form => {
    const groups = {};
    for (const radio of form.querySelectorAll('input[type=radio]')) {
        if (radio.name === 'mark-severity' || radio.disabled) continue;
        const group = groups[radio.name] ||= {values: [], checked: false};
        group.values.push(radio.value);
        group.checked ||= radio.checked;
    }
    return groups;
}"""
FORM_KEY = """selector => {
    const form = document.querySelector(selector);
    if (!form) return null;
    const part = form.querySelector('input[name="part"]');
    return [form.getAttribute("action"), part ? part.value : "0"];
}"""
STATUS_TEXT = """() => [...document.querySelectorAll(
        '[role=status], [role=alert], [aria-live]:not(output)')]
    .map(node => node.textContent.trim()).filter(Boolean).join(' | ')"""


def chromium_executable() -> str | None:
    """Debian's Chromium, as the e2e conftest finds it (``CAPEVAL_CHROMIUM`` first)."""
    import os

    configured = os.environ.get("CAPEVAL_CHROMIUM", "")
    if configured:
        return configured if Path(configured).is_file() else None
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


@dataclass
class Record:
    """What one annotator did: every answer it gave, when, and how it went."""

    worker: str
    mode: str
    #: (lease token, part) -> time.monotonic() of the first press of the submit button.
    given: dict[tuple[str, int], float] = field(default_factory=dict)
    #: (lease token, part) -> time.monotonic() when the page had moved on from it.
    acked: dict[tuple[str, int], float] = field(default_factory=dict)
    typed: Counter = field(default_factory=Counter)  # (token, part) -> times typed
    restored: int = 0  # item pages that showed an answer given before (a draft)
    sends: int = 0  # presses of a submit button
    sends_of: Counter = field(default_factory=Counter)  # (token, part) -> presses
    error_pages: int = 0  # the browser's own error page
    finished: bool = False  # reached the "Thank you" page
    statuses: Counter = field(default_factory=Counter)  # status lines seen while waiting
    notes: list[str] = field(default_factory=list)

    @property
    def typed_twice(self) -> int:
        return sum(count - 1 for count in self.typed.values() if count > 1)

    def waits(self) -> list[float]:
        return [self.acked[key] - sent for key, sent in self.given.items() if key in self.acked]


#: Called before each press of a submit button: (record, page, key, first press?).
BeforeSend = Callable[[Record, object, tuple[str, int], bool], Awaitable[None]]


class Annotator:
    def __init__(
        self,
        page,
        *,
        base: str,
        link: str,
        worker: str,
        mode: str,
        seed: int,
        deadline: float,
        grace_s: float = 60.0,
        max_answers: int | None = None,
        before_send: BeforeSend | None = None,
    ):
        self.page = page
        self.base, self.link = base, link
        self.seed = seed
        self.deadline = deadline
        self.grace_s = grace_s
        self.max_answers = max_answers
        self.before_send = before_send
        self.record = Record(worker=worker, mode=mode)
        self.answers: dict[tuple[str, int], list[str]] = {}
        self.next_url = ""
        self.loads = 0
        page.on("domcontentloaded", self._loaded)
        page.on("pageerror", lambda error: self.record.notes.append(f"JavaScript error: {error}"))

    def _loaded(self, _page) -> None:
        self.loads += 1

    # ---------------------------------------------------------------------------- driving

    async def run(self) -> Record:
        """Arrive, then work until the end, the deadline or ``max_answers``."""
        try:
            await self.arrive()
        except Exception as exc:
            self.record.notes.append(f"stopped: {exc!r}"[:500])
            return self.record
        return await self.work()

    async def work(self) -> Record:
        try:
            while time.monotonic() < self.deadline:
                if self.max_answers is not None and len(self.record.acked) >= self.max_answers:
                    break  # given and acknowledged; a refused one is answered again first
                state = await self._state()
                if state == "item":
                    await self._answer()
                elif state == "finished":
                    self.record.finished = True
                    break
                elif state == "error":
                    self.record.error_pages += 1
                    await asyncio.sleep(RETRY_PAUSE_S)
                    await self._open(self.next_url)
                else:  # feedback, a transition, a wait page: the study's address goes on
                    if state == "wait":
                        await asyncio.sleep(2)
                    await self._open(self.next_url)
            await self._settle()
        except Exception as exc:  # reported with the counts, never hidden
            self.record.notes.append(f"stopped: {exc!r}"[:500])
        return self.record

    async def arrive(self) -> None:
        """Through the crowd link to the first item (``work`` goes on from there)."""
        worker = self.record.worker
        query = f"?PROLIFIC_PID={worker}&STUDY_ID=client-faults&SESSION_ID=s-{worker}"
        while time.monotonic() < self.deadline:
            await self._open(self.base + self.link + query)
            agree = self.page.get_by_role("link", name="I agree, start")
            if await agree.count():
                href = await agree.get_attribute("href")
                self.next_url = self.base + href if href.startswith("/") else href
                await self._open(self.next_url)
                return
            self.record.error_pages += 1
            await asyncio.sleep(RETRY_PAUSE_S)
        raise RuntimeError("could not arrive before the deadline")

    async def _open(self, url: str) -> None:
        try:
            await self.page.goto(url, wait_until="domcontentloaded", timeout=ACTION_TIMEOUT_MS)
        except Exception as exc:  # the network failed: the page shows the browser's error
            if "ERR_" not in str(exc) and "Timeout" not in str(exc):
                raise

    async def _state(self) -> str:
        if self.page.url.startswith("chrome-error:"):
            return "error"
        try:
            if await self.page.locator(ITEM_FORM).count():
                return "item"
            heading = await self.page.locator("h1").first.text_content(timeout=5000)
        except Exception:
            return "error"
        if heading and heading.strip() == "Thank you":
            return "finished"
        if self.page.url.rstrip("/").endswith("/next"):
            return "wait"
        return "other"

    async def _key(self) -> tuple[str, int] | None:
        """The (lease token, part) of the page's item form, or None: read in one evaluation,
        so a page navigating meanwhile cannot leave a locator waiting for a form."""
        found = await self.page.evaluate(FORM_KEY, ITEM_FORM)
        return (TOKEN.search(found[0]).group(1), int(found[1] or 0)) if found else None

    async def _answer(self) -> None:
        record = self.record
        key = await self._key()
        if key is None:
            return  # the page changed meanwhile: look again
        self._acked_by_moving_on(key)
        form = self.page.locator(ITEM_FORM).first
        shown = await form.evaluate(FORM_DATA)
        if key in self.answers and shown == self.answers[key]:
            record.restored += 1
        else:
            if key in record.typed:
                # Given before, and the page came back without it: typed a second time.
                record.notes.append(f"typed again: {key[0][:8]}/{key[1]}")
            record.typed[key] += 1
            await self._fill(form, random.Random(f"{self.seed}:{key[0]}:{key[1]}"))
            self.answers[key] = await form.evaluate(FORM_DATA)
        button = form.locator('button[type="submit"]').last
        await button.wait_for(state="visible", timeout=ACTION_TIMEOUT_MS)
        stuck_after = time.monotonic() + STUCK_S
        while await button.is_disabled():  # the mode's minimum time (a countdown)
            if time.monotonic() > stuck_after:  # a script never came: reload, as a person
                record.notes.append(f"submit button disabled for {STUCK_S} s: reloaded")
                await self._open(self.next_url)
                return
            await asyncio.sleep(0.25)
        first = key not in record.given
        if record.sends_of[key] >= MAX_SENDS:
            record.notes.append(f"gave up after {MAX_SENDS} sends: {key[0][:8]}/{key[1]}")
            raise RuntimeError("the same answer refused again and again")
        record.sends_of[key] += 1
        if self.before_send is not None:
            await self.before_send(record, self.page, key, first)
        loads = self.loads
        record.given.setdefault(key, time.monotonic())
        record.sends += 1
        pressed = time.monotonic()
        await button.click(no_wait_after=True, timeout=ACTION_TIMEOUT_MS)
        clicked = time.monotonic()
        await self._outcome(key, loads)
        if time.monotonic() - pressed > SLOW_S:
            record.notes.append(
                f"slow: click {clicked - pressed:.1f} s, outcome {time.monotonic() - clicked:.1f} s"
                f" ({self.page.url[-40:]})"
            )

    async def _outcome(self, key: tuple[str, int], loads: int) -> None:
        """Wait until the page moved on from ``key`` (acknowledged), failed, or came back."""
        waited_until = time.monotonic() + ACK_WAIT_S
        while time.monotonic() < waited_until:
            await asyncio.sleep(0.1)
            if self.page.url.startswith("chrome-error:"):
                return  # the next _state() sees it
            try:
                if self.loads == loads and await self._same_form(key):
                    status = await self.page.evaluate(STATUS_TEXT)
                    if status:
                        self.record.statuses[status[:160]] += 1
                    continue  # still working on it
                await self.page.wait_for_load_state("domcontentloaded", timeout=ACTION_TIMEOUT_MS)
                if self.page.url.startswith("chrome-error:"):
                    return
                if not await self._same_form(key):
                    self.record.acked.setdefault(key, time.monotonic())
                    return
                # The server answered with the same form: refused. A person reads why and
                # waits the seconds it names (a minimum time) before pressing again.
                said = await self.page.evaluate(STATUS_TEXT)
                self.record.statuses[said[:160]] += 1
                named = WAIT_NAMED.search(said)
                await asyncio.sleep(float(named.group(1)) if named else RETRY_PAUSE_S)
                return
            except Exception:
                continue  # the page navigated meanwhile: look again
        self.record.notes.append(f"no outcome after {ACK_WAIT_S} s: {key[0][:8]}/{key[1]}")

    async def _same_form(self, key: tuple[str, int]) -> bool:
        return await self._key() == key

    def _acked_by_moving_on(self, key: tuple[str, int]) -> None:
        """A page serving another lease acknowledges what the error page had hidden: the
        server had stored it (the answer was lost on its way back)."""
        now = time.monotonic()
        for given in self.record.given:
            if given != key and given not in self.record.acked:
                self.record.acked[given] = now

    async def _settle(self) -> None:
        """After the deadline: wait for the last answer's fate, as a person would not close
        the tab while the page says it is still sending."""
        pending = [key for key in self.record.given if key not in self.record.acked]
        if not pending:
            return
        settle_until = time.monotonic() + self.grace_s
        while time.monotonic() < settle_until:
            state = await self._state()
            if state == "item":
                key = await self._key()
                if key is None:
                    continue
                if key in pending and key not in self.record.acked:
                    form = self.page.locator(ITEM_FORM).first
                    if await form.evaluate(FORM_DATA) != self.answers.get(key):
                        return  # the answer is gone from the page: lost (counted from the rows)
                    await asyncio.sleep(0.5)
                    continue
                self._acked_by_moving_on(key)
                return
            if state == "finished":
                self._acked_by_moving_on(("", -1))
                return
            await asyncio.sleep(RETRY_PAUSE_S)
            await self._open(self.next_url)

    # ---------------------------------------------------------------------------- answers

    async def _fill(self, form, rng: random.Random) -> None:
        """Answer the form as a person would, through its controls (so the page's scripts
        see every change): per mode only where the mode asks for more than choices."""
        classes = await form.get_attribute("class") or ""
        if "spans-form" in classes:
            await self._mark_spans(form, rng)
        groups = await form.evaluate(RADIO_GROUPS)
        for name in sorted(groups):
            group = groups[name]
            if group["checked"]:
                continue  # a review page's starting values, or a restored draft
            value = rng.choice(group["values"])
            radio = form.locator(f'input[type="radio"][name="{name}"][value="{value}"]')
            try:
                await radio.check(timeout=3000)
            except Exception:  # a styled scale: the label covers the radio, as for a person
                radio_id = await radio.get_attribute("id")
                await form.locator(f'label[for="{radio_id}"]').click(timeout=ACTION_TIMEOUT_MS)
        for box in await form.locator('input[type="checkbox"][name$="-confirm"]').all():
            await box.check(timeout=ACTION_TIMEOUT_MS)
        score = form.locator("#score")
        if await score.count() and await score.is_visible():
            await score.fill(str(rng.randint(0, 100)))

    async def _mark_spans(self, form, rng: random.Random) -> None:
        """One or two marks on words of the caption, each confirmed with "Add mark"."""
        words = form.locator("#spans-caption .w")
        count = await words.count()
        if count < 2 or not await form.locator("#spans-add").count():
            return
        halves = [(0, count // 2 - 1), (count // 2, count - 1)]
        for low, high in halves[: rng.randint(1, 2)]:
            if high < low:
                continue
            first = rng.randint(low, high)
            last = rng.randint(first, min(high, first + 3))
            await words.nth(first).click(timeout=ACTION_TIMEOUT_MS)
            await words.nth(last).click(timeout=ACTION_TIMEOUT_MS)
            await form.locator("#spans-add").click(timeout=ACTION_TIMEOUT_MS)


async def new_browser(playwright):
    executable = chromium_executable()
    if executable is None:
        raise RuntimeError("Chromium not found: install Debian's chromium or set CAPEVAL_CHROMIUM")
    return await playwright.chromium.launch(
        executable_path=executable, headless=True, args=CHROMIUM_ARGS
    )


async def new_annotator_page(browser):
    """A context of its own (cookies, storage) with one page; images kept, favicon quiet."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    await context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    return await context.new_page()
