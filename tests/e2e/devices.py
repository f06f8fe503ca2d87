"""Pages in a browser context of a given kind (a phone with a touch screen, a desktop with a
mouse), held to the same rules as the ``page`` fixture: a JavaScript error, a console error
or a request outside the live server fails the test.

``page`` has no touch screen and a fine pointer; a phone's media features (``hover: none``,
``pointer: coarse``) need their own context (issue 46, rows 9-10).
"""

from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import urlsplit

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}
DESKTOP = {"viewport": {"width": 1280, "height": 844}, "has_touch": False, "is_mobile": False}


@contextmanager
def device_page(browser, live_server, **options):
    """A strict page in a new context made with ``options`` (``PHONE``, ``DESKTOP``)."""
    context = browser.new_context(base_url=live_server.url, **options)
    context.set_default_timeout(10_000)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    problems: list[str] = []
    host = urlsplit(live_server.url).netloc

    def on_request(request):
        parts = urlsplit(request.url)
        if parts.scheme not in ("data", "blob", "about") and parts.netloc != host:
            problems.append(f"request outside the live server: {request.url}")

    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console error: {message.text}") if message.type == "error" else None
        ),
    )
    page.on("request", on_request)
    try:
        yield page
    finally:
        context.close()
    assert problems == [], "The browser reported problems:\n" + "\n".join(problems)
