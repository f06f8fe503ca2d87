"""No answer lost on a flaky network (issue 42): every mode's item page in Chromium against
the live server, with the network cut while submitting, a third of the submissions aborted,
a reload between the answer and the reply, two tabs of one worker, and the statuses read
out through the accessibility tree.

Each test counts: the answers the test gave equal the judgments stored, and no lease part
is stored twice. Nothing is timed; the page's own retries are waited for with ``expect``.
The drivers (tests/e2e/faults_modes.py) answer one item of a mode through the page.
"""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.faults_modes import (
    DRIVERS,
    MODES,
    SUBMIT_URL,
    draft_key,
    next_item,
    serve_images,
    stored,
)
from tests.e2e.layout import assert_fits_every_width
from tests.factories.machine import load_factor

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: Chromium logs every failed or refused request as a console error; in these tests they
#: are the fault under test. Any other console error still fails the test.
EXPECTED_ERRORS = ("Failed to load resource", "net::ERR_")


@pytest.fixture
def fault_context(browser, live_server):
    """``fault_context()``: a fresh browser context (own cookies and storage) whose pages
    fail the test on a JavaScript error or an unexpected console error."""
    contexts = []
    problems: list[str] = []

    def watch(page):
        page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
        page.on(
            "console",
            lambda m: (
                problems.append(f"console error: {m.text}")
                if m.type == "error" and not any(e in m.text for e in EXPECTED_ERRORS)
                else None
            ),
        )

    def make():
        context = browser.new_context(base_url=live_server.url)
        context.set_default_timeout(15_000 * load_factor())
        context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        context.on("page", watch)
        contexts.append(context)
        return context

    expect.set_options(timeout=15_000 * load_factor())
    yield make
    for context in contexts:
        context.close()
    assert problems == []


@pytest.fixture(params=MODES)
def mode(request, researcher, make_study, make_user):
    """(driver, study) for each mode."""
    driver = DRIVERS[request.param]
    return driver, driver.study(researcher, make_study, make_user, items=4)


def assert_announced(page, words: str) -> None:
    """The words are in a polite live region, as the accessibility tree has it: a screen
    reader says them without the annotator moving there."""
    region = page.get_by_role("status").filter(has_text=words)
    expect(region).to_have_count(1)
    expect(region).to_have_attribute("aria-live", "polite")
    assert words in region.aria_snapshot()


def test_the_network_cut_while_submitting_loses_nothing(fault_context, mode):
    driver, study = mode
    context = fault_context()
    page = context.new_page()
    participant = driver.start(page, study, "E2E-OFFLINE")
    key = draft_key(page)
    answer = driver.answer(page, participant)

    context.set_offline(True)
    driver.submit(page)
    # The page stays, says in words where the answer is, and keeps what was given.
    expect(page.locator("#draft-status")).to_contain_text("offline")
    driver.shows(page, answer)
    assert stored(participant) == (0, 0)

    context.set_offline(False)
    next_item(page, driver, key)
    assert stored(participant) == (1, 0), "one answer given, one stored"


def test_a_third_of_the_submissions_aborted_over_several_items(fault_context, mode):
    driver, study = mode
    context = fault_context()
    page = context.new_page()
    posts = {"n": 0, "aborted": 0}

    def flaky(route):
        # Deterministic: every third POST is lost; half of those after the server stored
        # the answer (the reply lost), half before (the request lost).
        posts["n"] += 1
        if posts["n"] % 3:
            route.continue_()
            return
        posts["aborted"] += 1
        if posts["aborted"] % 2:
            route.fetch()
        route.abort("connectionreset")

    page.route(SUBMIT_URL, flaky)
    participant = driver.start(page, study, "E2E-FLAKY")
    given = 0
    key = draft_key(page)
    while key is not None and given < 4:
        driver.answer(page, participant)
        given += 1
        driver.submit(page)
        key = next_item(page, driver, key)
    assert posts["aborted"] >= 1, "the route aborted some submissions"
    assert stored(participant) == (given, 0), f"{given} answers given, each stored once"


def test_a_reload_after_answering_and_before_the_reply_posts_once(fault_context, mode):
    driver, study = mode
    context = fault_context()
    page = context.new_page()
    held = []

    def hold_the_first(route):
        # The first submission never reaches the server (nor ever answers); later ones pass.
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route(SUBMIT_URL, hold_the_first)
    participant = driver.start(page, study, "E2E-RELOAD")
    key = draft_key(page)
    answer = driver.answer(page, participant)
    item_url = page.url
    with page.expect_request(SUBMIT_URL):
        driver.submit(page)
    # Reloaded (opened again at its address: a plain form post still pending would make
    # Playwright's reload() fail with ERR_ABORTED rather than show the page).
    page.goto(item_url)
    page.wait_for_load_state("load")

    # The same item, and nothing to type again.
    assert draft_key(page) == key
    driver.shows(page, answer)
    assert stored(participant) == (0, 0)
    driver.submit(page)
    next_item(page, driver, key)
    page.reload()
    assert stored(participant) == (1, 0), "one answer given, one stored"


def test_a_reload_after_the_server_stored_but_the_reply_was_lost(fault_context, mode):
    """The server stored the answer but the reply never came: a reload shows the next item,
    and the answer is not posted again."""
    driver, study = mode
    context = fault_context()
    page = context.new_page()

    held = []

    def store_then_hold(route):
        # The first submission is stored, and its reply never comes; later ones pass.
        if held:
            route.continue_()
        else:
            route.fetch()
            held.append(route)

    page.route(SUBMIT_URL, store_then_hold)
    participant = driver.start(page, study, "E2E-LOST-REPLY")
    key = draft_key(page)
    driver.answer(page, participant)
    with page.expect_request(SUBMIT_URL):
        driver.submit(page)
    for _ in range(200):  # the route's handler runs while Playwright waits
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the server stored it"
    assert stored(participant) == (1, 0)
    page.reload()
    page.wait_for_load_state("load")
    driver.go_on(page)
    assert draft_key(page) != key
    assert stored(participant) == (1, 0), "one answer given, one stored"


def test_two_tabs_of_one_worker_store_each_answer_once(fault_context, mode):
    driver, study = mode
    context = fault_context()
    first = context.new_page()
    participant = driver.start(first, study, "E2E-TWO-TABS")
    second = context.new_page()
    serve_images(second)
    second.goto(first.url)
    second.wait_for_load_state("load")
    key = draft_key(first)
    assert draft_key(second) == key, "both tabs show the worker's one open item"

    driver.answer(first, participant)
    driver.submit(first)
    next_item(first, driver, key)
    # The second tab answers the item the first already sent: stored once, and it goes on.
    driver.answer(second, participant)
    driver.submit(second)
    next_item(second, driver, key)
    assert stored(participant) == (1, 0), "the same item answered in two tabs is stored once"


def test_the_waiting_offline_and_expired_states_are_announced(fault_context, mode):
    driver, study = mode
    context = fault_context()
    page = context.new_page()
    participant = driver.start(page, study, "E2E-STATUS")
    key = draft_key(page)
    driver.answer(page, participant)

    # The server behind a proxy that answers 503: the answer waits, in words.
    page.route(SUBMIT_URL, lambda route: route.fulfill(status=503, body="Service Unavailable"))
    driver.submit(page)
    region = page.locator("#draft-status")
    expect(region).to_contain_text("Not sent yet")
    expect(page.get_by_role("button", name="Send now")).to_be_visible()
    assert_announced(page, "Not sent yet")
    assert_no_serious_a11y_violations(page, context=f"{driver.name}: answer waiting")
    assert_fits_every_width(
        page, f"{driver.name}: answer waiting", shot=f"issue42-{driver.name}-waiting"
    )

    context.set_offline(True)
    expect(region).to_contain_text("You are offline")
    assert_announced(page, "You are offline")
    assert_no_serious_a11y_violations(page, context=f"{driver.name}: offline")
    assert_fits_every_width(page, f"{driver.name}: offline", shot=f"issue42-{driver.name}-offline")
    # The lease expired meanwhile (docs/participation.md): the server's words, a way on.
    page.unroute(SUBMIT_URL)
    page.route(
        SUBMIT_URL,
        lambda route: route.fulfill(
            status=409,
            content_type="application/json",
            body=(
                '{"status": "lease_expired", "message": "Your time for this item ran out;'
                ' your answer was not stored because the item is full.", "next_url": "'
                + f"/s/{study.public_id}/next/"
                + '", "ack": null, "fields": [], "retry_after": null, "work": "discarded"}'
            ),
        ),
    )
    # Back online, the page sends what waits at once.
    context.set_offline(False)
    expect(region).to_contain_text("your answer was not stored")
    assert_announced(page, "your answer was not stored")
    expect(region.get_by_role("link")).to_have_attribute("href", f"/s/{study.public_id}/next/")
    assert_no_serious_a11y_violations(page, context=f"{driver.name}: lease expired")
    assert_fits_every_width(page, f"{driver.name}: expired", shot=f"issue42-{driver.name}-expired")
    assert stored(participant) == (0, 0)
    assert key


def test_an_answer_sent_after_its_lease_expired_says_what_became_of_it(fault_context, mode):
    """The real server: the lease ran out while the worker answered (a phone asleep); the
    item still had room, so the answer is stored, and the page says so with a way on."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import Assignment

    driver, study = mode
    context = fault_context()
    page = context.new_page()
    participant = driver.start(page, study, "E2E-LATE")
    driver.answer(page, participant)
    Assignment.objects.filter(participant=participant, status=Assignment.Status.OPEN).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    driver.submit(page)
    region = page.locator("#draft-status")
    expect(region.get_by_role("link", name="Go on")).to_be_visible()
    expect(region).to_contain_text("your answer is saved")
    assert_announced(page, "your answer is saved")
    assert stored(participant) == (1, 0), "one answer given, one stored"
    drafts = page.evaluate("Object.keys(localStorage).filter(k => k.startsWith('capeval-draft:'))")
    assert drafts == [], "the lease is over: its draft is gone"
    assert_no_serious_a11y_violations(page, context=f"{driver.name}: stored late")
    assert_fits_every_width(page, f"{driver.name}: stored late", shot=f"issue42-{driver.name}-late")


def test_a_double_click_posts_once_and_too_fast_waits_its_turn(fault_context, mode):
    """Two clicks on submit send one request; the server's "too fast" (a made-up first
    reply, as a worker whose clock runs ahead would get) is waited out and sent once more."""
    driver, study = mode
    context = fault_context()
    page = context.new_page()
    posts = []

    def too_fast_first(route):
        posts.append(route.request.method)
        if len(posts) > 1:
            route.continue_()
            return
        route.fulfill(
            status=429,
            content_type="application/json",
            headers={"Retry-After": "1"},
            body='{"status": "too_fast", "message": "Please look a little longer.",'
            ' "next_url": null, "ack": null, "fields": [], "retry_after": 1, "work": null}',
        )

    page.route(SUBMIT_URL, too_fast_first)
    participant = driver.start(page, study, "E2E-DOUBLE")
    key = draft_key(page)
    driver.answer(page, participant)
    driver.submit(page)
    # The second click lands while the first request is out, or after the 429 while the
    # page waits: neither sends anything of its own.
    page.locator("#draft-status").evaluate("region => region.closest('form').requestSubmit()")
    next_item(page, driver, key)
    assert posts == ["POST", "POST"], "the 429, then the one resend"
    assert stored(participant) == (1, 0), "one answer given, one stored"
