"""The Content-Security-Policy in Chromium: pages run under it without a single violation.

The headers themselves are checked in ``tests/annotation/test_csp.py``; here the browser
enforces them. Each mode's item page, the API docs (Swagger UI, from our own static files),
DRF's browsable API and the admin are loaded with a listener for ``securitypolicyviolation``
events installed before any page script runs; every violation, every console message about
the policy and every request that leaves the live server fails the test. The pages must also
still look as designed (their CSS now comes from files), and THumB's rubric, which shows
below the form when JavaScript is off, must still do so without the inline <style> it used.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.participants import crowd_link_token
from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.factories.core import vehicle_study
from tests.factories.humanr import humanr_study
from tests.factories.thumb import thumb_study
from tests.factories.vicr import vicr_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC"
)
# Runs in every document before its own scripts: records what the policy blocked.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(
    `${event.effectiveDirective} blocked ${event.blockedURI || "(inline)"} ` +
    `in ${event.sourceFile || event.documentURI}:${event.lineNumber}`
  );
});
"""


class Watch:
    """What the browser reports while a test runs: policy violations (events and console
    messages), requests to any host but the live server, and pages served without the
    strict policy (a run without violations proves nothing if no policy was in force)."""

    def __init__(self, page, server_url: str):
        self.page = page
        self.host = urlsplit(server_url).netloc
        self.console: list[str] = []
        self.outside: list[str] = []
        self.violations: list[str] = []
        self.unguarded: list[str] = []
        self.documents = 0
        page.add_init_script(RECORD_VIOLATIONS)
        page.on("console", self._on_console)
        page.on("request", self._on_request)
        page.on("response", self._on_response)
        # Images are not on disk in these tests: the server's /media/ answers are stood in for.
        page.route(
            "**/media/**",
            lambda route: route.fulfill(status=200, body=PNG, content_type="image/png"),
        )

    def _on_console(self, message):
        if "Content Security Policy" in message.text or "Permissions-Policy" in message.text:
            self.console.append(message.text)

    def _on_request(self, request):
        parts = urlsplit(request.url)
        if parts.scheme in {"http", "https", "ws", "wss"} and parts.netloc != self.host:
            self.outside.append(request.url)

    def _on_response(self, response):
        if response.request.resource_type != "document" or response.status in {301, 302}:
            return
        self.documents += 1
        header = response.headers.get("content-security-policy", "")
        if "script-src 'self'" not in header or "unsafe-" in header:
            self.unguarded.append(f"{response.url}: {header!r}")

    def check(self, what: str) -> None:
        """Collect the current document's violations and fail on anything seen so far."""
        self.page.wait_for_load_state("load")
        self.violations += self.page.evaluate("() => window.__cspViolations || []")
        assert self.violations == [], f"{what}: the policy blocked {self.violations}"
        assert self.console == [], f"{what}: {self.console}"
        assert self.outside == [], f"{what}: requests left the server: {self.outside}"
        assert self.documents and self.unguarded == [], (
            f"{what}: pages without the policy: {self.unguarded}"
        )


def enter_as_crowd_worker(page, study, worker: str) -> None:
    page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID={worker}&STUDY_ID=S&SESSION_ID=X")
    with page.expect_navigation():
        page.get_by_role("link", name="I agree, start").click()


def display_of(page, selector: str) -> str:
    return page.locator(selector).first.evaluate("element => getComputedStyle(element).display")


def test_each_modes_item_page_runs_under_the_policy(
    page, live_server, login, researcher, make_study, make_user
):
    watch = Watch(page, live_server.url)

    enter_as_crowd_worker(page, vehicle_study(researcher), "csp-rating")
    expect(page.get_by_role("heading", name="Rate a caption")).to_be_visible()
    watch.check("vehicle item page")

    enter_as_crowd_worker(page, vicr_study(researcher), "csp-vicr")
    expect(page.locator("form.vicr-form")).to_be_visible()
    assert display_of(page, ".vicr-pair") == "grid", "vicr.css applies"
    # The page's script runs (a file, allowed): it counts down to the Submit button.
    expect(page.locator("#vicr-countdown")).to_contain_text("submit")
    watch.check("VICR item page")
    assert_no_serious_a11y_violations(page, context="VICR item page under the CSP")

    enter_as_crowd_worker(page, humanr_study(researcher), "csp-humanr")
    expect(page.locator("#hr-progress")).to_have_text("Trial 1 of 10")
    assert display_of(page, ".hr-points") == "grid", "humanr.css applies"
    watch.check("HUMANr item page")

    thumb = thumb_study(make_study)
    annotator = make_user("tess", native_english=True)
    thumb.annotators.add(annotator)
    login(page, annotator)
    page.goto(f"/s/{thumb.public_id}/next/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Stage 1")
    assert display_of(page, ".thumb-layout") == "grid", "thumb.css applies"
    # With JavaScript the rubric is a dialog, closed until asked for.
    assert page.evaluate("() => document.documentElement.className") == ""
    expect(page.locator("#rubric")).to_be_hidden()
    page.get_by_role("button", name="Rubric").click()
    expect(page.locator("#rubric")).to_be_visible()
    watch.check("THumB item page")


def test_thumb_rubric_shows_below_the_form_without_javascript(browser, live_server, make_study):
    """The no-JavaScript fallback once came from a <noscript><style>; now a no-js class that
    only a script can remove keys the same rules in thumb.css."""
    thumb = thumb_study(make_study)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.route(
            "**/media/**",
            lambda route: route.fulfill(status=200, body=PNG, content_type="image/png"),
        )
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill(thumb.owner.username)
        page.get_by_label("Password").fill(f"pw-{thumb.owner.username}")
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()
        thumb.annotators.add(thumb.owner)
        page.goto(f"/s/{thumb.public_id}/next/")
        expect(page.locator("#rubric")).to_be_visible()
        expect(page.locator("#rubric")).to_contain_text("Rules of THumB")
        expect(page.locator("#rubric-close")).to_be_hidden()
        assert display_of(page, ".thumb-layout") == "grid"
    finally:
        context.close()


def test_swagger_ui_renders_from_local_files_under_the_policy(page, live_server):
    watch = Watch(page, live_server.url)
    scripts: list[str] = []
    page.on("request", lambda request: scripts.append(request.url))

    page.goto("/api/docs/")

    expect(page.locator("#swagger-ui .info .title")).to_contain_text("CapEval API")
    expect(page.locator("#swagger-ui .opblock").first).to_be_visible()
    # An operation opens (Swagger UI's React code runs fully under the policy).
    page.locator("#swagger-ui .opblock-summary").first.click()
    expect(page.locator("#swagger-ui .opblock-body").first).to_be_visible()
    assert any("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in u for u in scripts)
    watch.check("Swagger UI")


def test_browsable_api_and_admin_run_under_the_policy(page, live_server, login, make_user):
    watch = Watch(page, live_server.url)
    admin = make_user("root", staff=True)
    login(page, admin)

    page.goto("/api/studies/")
    expect(page.locator(".response-info")).to_be_visible()
    watch.check("DRF browsable API")

    page.goto("/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    watch.check("admin index")
    page.goto("/admin/annotation/judgment/")
    expect(page.locator("#changelist")).to_be_visible()
    watch.check("admin judgment list")
