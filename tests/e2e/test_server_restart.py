"""Issue 42: the server stopped and restarted mid-study, in every mode.

A real server process (``manage.py runserver --noreload``, the embedded default's web
server, as ``make demo`` runs it) on its own database (a SQLite file, or a scratch
PostgreSQL database when ``DATABASE_URL`` says PostgreSQL) with the demo's live study of
each mode. One simulated annotator per mode (``tests/factories/browser_crowd.py``: Chromium,
through the pages, as a Prolific worker) answers; its third answer is held in flight by a
loopback proxy (``tests/factories/flaky_proxy.py``, no other fault) while the server is
killed with SIGKILL, then the held request is cut (the browser sees its connection reset,
as when a server dies under a request) and the server is started again on the same port
and database. The annotator goes on to its fourth answer (or the study's end).

Counted, not timed: every answer given is stored exactly once (the stored (lease, part)
pairs of this worker equal those it gave; none twice), nothing was typed twice, and the
annotator reached the end. The annotator's behaviour when the page is lost (it opens the
study's address again) is documented in the factory.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter

import pytest

from tests.factories.browser_crowd import Annotator, new_annotator_page, new_browser
from tests.factories.core import skip_or_fail
from tests.factories.flaky_proxy import FlakyProxy
from tests.factories.machine import load_factor
from tests.factories.study_server import (
    RunServer,
    prepare_demo,
    scratch_postgres,
    server_env,
    stored_judgments,
)

pytestmark = pytest.mark.e2e

MODES = ("thumb", "vicr", "humanr", "arena", "spans")
#: Answers given before the one held in flight while the server dies.
BEFORE_CRASH = 2
ANSWERS = BEFORE_CRASH + 2
#: Wall-clock only as a bound (the spans demo asks for 20 s per caption): never asserted.
RUN_BOUND_S = 420


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    try:
        from playwright.async_api import async_playwright  # noqa: F401
    except ImportError:
        skip_or_fail("The playwright Python package is missing: pip install -e '.[test]'")
    var_dir = tmp_path_factory.mktemp("restart-var")
    url = os.environ.get("DATABASE_URL", "")
    with _database(url) as database_url:
        env = server_env(var_dir, database_url)
        studies = {study["mode"]: study for study in prepare_demo(env)}
        server = RunServer(env, var_dir / "server.log")
        server.start()
        proxy = FlakyProxy(server.port)
        try:
            yield env, server, proxy, studies
        finally:
            proxy.stop()
            server.stop()


def _database(url: str):
    if url.startswith("postgres"):
        return scratch_postgres(url, f"capeval_restart_{os.getpid()}")
    from contextlib import nullcontext

    return nullcontext("")


def crash_and_restart(server: RunServer, proxy: FlakyProxy, events: dict) -> None:
    """Once the proxy holds the submission: kill the server, cut the held request, start
    the server again on the same port and database."""
    if not proxy.held.wait(120 * load_factor()):
        events["error"] = "no submission was held"
        return
    server.kill()
    events["killed"] = True
    proxy.release()
    time.sleep(1)
    try:
        server.start()
        events["restarted"] = True
    except RuntimeError as exc:
        events["error"] = str(exc)


def annotate(base: str, link: str, mode: str, proxy: FlakyProxy, server: RunServer):
    """One annotator in its own Chromium (Playwright's async API in this thread's loop)."""
    events: dict = {}

    async def before_send(record, page, key, first):
        if first and len(record.given) == BEFORE_CRASH:
            proxy.hold_next_post(f"/submit/{key[0]}/")
            threading.Thread(
                target=crash_and_restart, args=(server, proxy, events), daemon=True
            ).start()

    async def main():
        from playwright.async_api import async_playwright

        async with async_playwright() as playwright:
            browser = await new_browser(playwright)
            try:
                page = await new_annotator_page(browser)
                annotator = Annotator(
                    page,
                    base=base,
                    link=link,
                    worker=f"RESTART-{mode.upper()}",
                    mode=mode,
                    seed=42,
                    deadline=time.monotonic() + RUN_BOUND_S * load_factor(),
                    max_answers=ANSWERS,
                    before_send=before_send,
                )
                return await annotator.run()
            finally:
                await browser.close()

    # Playwright's sync API may already run a loop in the main thread (the other e2e
    # tests' browser); this test's loop gets a thread of its own.
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(record=asyncio.run(main())))
    thread.start()
    thread.join()
    return box["record"], events


@pytest.mark.parametrize("mode", MODES)
def test_every_answer_is_stored_once_when_the_server_restarts_mid_study(demo_server, mode):
    env, server, proxy, studies = demo_server
    base = f"http://127.0.0.1:{proxy.port}"

    record, events = annotate(base, studies[mode]["link"], mode, proxy, server)

    assert events.get("killed") and events.get("restarted"), (events, record.notes)
    stored = [
        (token, part) for token, part, worker, _item, _mode in stored_judgments(env)
        if worker == record.worker
    ]  # fmt: skip
    twice = [key for key, count in Counter(stored).items() if count > 1]
    given = set(record.given)
    lost = given - set(stored)
    not_given = set(stored) - given
    summary = (
        f"{mode}: given {len(given)}, stored {len(stored)}, lost {len(lost)}, "
        f"typed twice {record.typed_twice}, browser error pages {record.error_pages}, "
        f"notes {record.notes}, status lines {sorted(record.statuses)}"
    )
    assert not [n for n in record.notes if n.startswith(("stopped", "JavaScript"))], summary
    assert record.finished or len(record.acked) == ANSWERS, summary
    assert twice == [], summary
    assert lost == set(), summary
    assert not_given == set(), summary
    assert record.typed_twice == 0, summary
