"""Browser-test harness: headless Chromium driven by Playwright against Django's live server.

Fixtures: ``browser`` (one Chromium for all e2e tests), ``page`` (a fresh browser context per
test, failing the test on JavaScript errors and on requests that leave the live server),
``login`` (log a user in through the login form), ``live_url`` (absolute URL of a path) and
``live_server_lock`` (held by the test's writes beside a page that polls).

Chromium comes from ``CAPEVAL_CHROMIUM`` or the ``chromium`` on the PATH (Debian's package);
Playwright's own browser download is never used. Without Chromium, the ``playwright`` package
or ``node_modules/axe-core`` the tests skip, and fail on CI (``CAPEVAL_REQUIRE_SERVICES=1``).
See docs/testing.md.
"""

import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from tests.e2e.axe import AXE_SCRIPT
from tests.factories.core import skip_or_fail
from tests.factories.machine import load_factor

# "localhost" may resolve to ::1 in Chromium while the live server listens on IPv4 only.
os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", "127.0.0.1")

E2E_DIR = Path(__file__).resolve().parent
DEFAULT_TIMEOUT_MS = 10_000
#: Playwright's own default for expect(), before the load scaling of the page fixture.
EXPECT_TIMEOUT_MS = 5_000
# Headless, no sandbox (containers and CI run as root), and none of the background services
# that would otherwise keep dialling Google from a closed network.
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
LOCAL_SCHEMES = {"data", "blob", "about"}
#: Where a failed browser test leaves a full-page screenshot of every page it had open
#: (gitignored with var/; docs/testing.md, "Debugging a browser test").
ARTIFACTS_DIR = E2E_DIR.parents[1] / "var" / "test-artifacts"


def pytest_collection_modifyitems(items):
    """Every test under tests/e2e is an e2e test, so ``-m "not e2e"`` leaves them all out."""
    for item in items:
        if E2E_DIR in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """When a browser test fails, screenshot every page still open in its browser.

    Taken at the failure, before the fixtures close their contexts; one PNG per page,
    ``var/test-artifacts/<test>-<n>.png``, named in the failure's report. Pages that the
    test already closed (e.g. in a ``finally``) are gone and cannot be shown.
    """
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    chromium = item.funcargs.get("browser")
    if chromium is None and item.funcargs.get("page") is not None:
        chromium = item.funcargs["page"].context.browser
    if chromium is None:
        return
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.nodeid.split("::", 1)[-1])
    saved = []
    try:
        ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
        open_pages = [p for context in chromium.contexts for p in context.pages]
        for number, open_page in enumerate(open_pages, start=1):
            path = ARTIFACTS_DIR / f"{name[:150]}-{number}.png"
            open_page.screenshot(path=str(path), full_page=True)
            saved.append(f"{path} ({open_page.url})")
    except Exception as exc:  # a screenshot must never hide the test's own failure
        saved.append(f"screenshot failed: {exc}")
    if saved:
        report.sections.append(("screenshots", "\n".join(saved)))


def chromium_executable() -> str | None:
    configured = os.environ.get("CAPEVAL_CHROMIUM", "")
    if configured:
        return configured if Path(configured).is_file() else None
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


@pytest.fixture(scope="package", autouse=True)
def allow_orm_beside_playwright():
    """Let test code use the ORM while Playwright's event loop runs in the same thread.

    Playwright's sync API keeps an asyncio loop running in the main thread while the browser
    is open, and Django then refuses ORM calls from the test ("you cannot call this from an
    async context"). The test code is plain synchronous code and the live server runs in its
    own thread, so the check is a false alarm here; it is restored after the e2e tests.
    """
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def browser():
    """One headless Chromium for all e2e tests; each test gets its own context.

    Package scope, not session: Playwright's event loop stops when the e2e tests end, so
    tests collected after them (asyncio, ``async_to_sync``) see no running loop.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("The playwright Python package is missing: pip install -e '.[test]'")
    executable = chromium_executable()
    if executable is None:
        skip_or_fail(
            "Chromium not found: install Debian's chromium package or set CAPEVAL_CHROMIUM"
        )
    if not AXE_SCRIPT.is_file():
        skip_or_fail(f"axe-core is missing ({AXE_SCRIPT}): run `npm ci` in the repository root")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def live_url(live_server):
    """Absolute URL of a path on the live server: ``live_url("/studies/new/")``."""

    def url(path: str) -> str:
        return live_server.url + path

    return url


@pytest.fixture
def page(browser, live_server):
    """A page in a fresh context (own cookies) whose relative URLs go to the live server.

    The test fails if the page throws an uncaught JavaScript error, logs a console error (htmx
    logs failed requests there) or requests anything outside the live server: every script,
    style and image is served by the application itself.
    """
    context = browser.new_context(base_url=live_server.url, accept_downloads=True)
    # Waits are wall-clock: on a loaded machine (a load average of 8 on 2 cores, issue 46)
    # a page takes longer to answer, so every default wait scales with the load. A test's
    # own short timeout does the same with load_factor() (tests/factories/machine.py).
    factor = load_factor()
    context.set_default_timeout(DEFAULT_TIMEOUT_MS * factor)
    expect.set_options(timeout=EXPECT_TIMEOUT_MS * factor)
    # Chromium asks for /favicon.ico on every site; the application has none and the 404 would
    # show up as a console error.
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    problems: list[str] = []
    server_host = urlsplit(live_server.url).netloc

    def on_request(request):
        parts = urlsplit(request.url)
        if parts.scheme not in LOCAL_SCHEMES and parts.netloc != server_host:
            problems.append(f"request outside the live server: {request.url}")

    def on_console(message):
        if message.type == "error":
            location = message.location.get("url", "")
            problems.append(f"console error: {message.text} ({location})")

    browser_page = context.new_page()
    browser_page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
    browser_page.on("console", on_console)
    browser_page.on("request", on_request)
    yield browser_page
    context.close()
    if problems:
        pytest.fail("The browser reported problems:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def login():
    """Log a user in through the login form: ``login(page, user)``.

    Users made by ``make_user`` have the password ``pw-<username>``; pass ``password`` for
    others. Fails unless the page ends on a logged-in page.
    """

    def log_in(page, user, *, password: str | None = None) -> None:
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(password or f"pw-{user.username}")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        logout = page.get_by_role("button", name=f"Log out {user.username}")
        expect(logout, f"login as {user.username} failed").to_be_visible()

    return log_in


#: Held by every live-server request on SQLite (``_one_request_at_a_time``), and by a test's
#: writes beside an open page (``live_server_lock``).
_REQUESTS = threading.Lock()


@pytest.fixture(autouse=True)
def _one_request_at_a_time(request, monkeypatch):
    """On SQLite, the live server's requests are handled one at a time.

    The live server's threads and the test share one in-memory SQLite connection. Two
    requests at once on it can deadlock the process: one inside ``sqlite3_step`` running a
    Python SQL function (Django's, or the dashboard's median) waits for the GIL while
    holding the connection's mutex, and the other, holding the GIL, fetches a row and waits
    for that mutex. A CI run hung so, the dashboard polling while a worker's answer was
    stored. PostgreSQL gives each thread its own connection and is left alone.
    """
    if "live_server" not in request.fixturenames:
        return
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection

    if connection.vendor != "sqlite":
        return
    handle = WSGIHandler.__call__

    def one_at_a_time(self, environ, start_response):
        with _REQUESTS:
            return handle(self, environ, start_response)

    monkeypatch.setattr(WSGIHandler, "__call__", one_at_a_time)


@pytest.fixture(scope="session", autouse=True)
def _flush_between_requests():
    """The database is emptied after each live-server test (pytest-django's flush) while the
    browser may still have a request in flight: a CI run's flush failed on "database table
    is locked" and the next test found the last one's users. The flush waits for that
    request and holds the lock, so no request starts while the tables are emptied.

    For the whole session: pytest-django's own fixtures flush after a function-scoped
    fixture of ours has been torn down."""
    from django.test import TransactionTestCase

    flush = TransactionTestCase._fixture_teardown

    def flush_alone(self):
        with _REQUESTS:
            return flush(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransactionTestCase, "_fixture_teardown", flush_alone)
        yield


@pytest.fixture
def live_server_lock(monkeypatch) -> threading.Lock:
    """A lock that every request to the live server takes while it is handled.

    The live server and the test share one in-memory SQLite database, whose tables lock
    while the other thread uses them ("database table is locked", no waiting): a page that
    polls (the dashboard, a job's progress) during the test's own writes would answer 500,
    or the write would fail. A test that writes beside an open page holds this lock while it
    writes (never while it drives the browser); a request meanwhile waits, then shows what
    was written. On SQLite every request already takes it (``_one_request_at_a_time``).
    """
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection

    if connection.vendor != "sqlite":
        handle = WSGIHandler.__call__

        def one_at_a_time(self, environ, start_response):
            with _REQUESTS:
                return handle(self, environ, start_response)

        monkeypatch.setattr(WSGIHandler, "__call__", one_at_a_time)
    return _REQUESTS
