"""An annotator's browser shows the item's image when the files are on an object store
(issue 41), through the web node's redirect and from a public renditions URL.

On an object store the item page names ``/media/display/...``, which the node answers with
a redirect to a presigned link on the store's host; with ``CAPEVAL_DISPLAY_URL`` the page
names the store (or a CDN) directly. Either way the image comes from another origin, and the
Content-Security-Policy checks an image's URL after its redirects: with ``img-src 'self'``
alone Chromium refuses it and the annotator sees no image, which a test with ``requests``
(tests/annotation/test_two_nodes.py) cannot notice. The policy here is the one the settings
compute from a deployment's environment (``CAPEVAL_S3_*``, ``CAPEVAL_DISPLAY_URL``), read
from a fresh process as a node starts.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails on CI, and says why
    expect = None

from annotation.services.participants import crowd_link_token
from tests.factories.arena import arena_study
from tests.factories.deployment import deployment_settings
from tests.factories.images import real_files
from tests.factories.object_store import BUCKET, object_store, s3_storages

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("public_renditions", [False, True], ids=["redirect", "display-url"])
def test_the_item_image_shows_from_the_object_store(
    browser, live_server, settings, tmp_path, researcher, public_renditions
):
    with object_store(tmp_path / "s3") as store:
        settings.STORAGES = s3_storages(store)
        environment = {
            "CAPEVAL_S3_BUCKET": BUCKET,
            "CAPEVAL_S3_ENDPOINT_URL": store.endpoint,
            "CAPEVAL_S3_REGION": "us-east-1",
        }
        if public_renditions:
            # s3rver serves a bucket's objects without a signature, as a CDN or a bucket
            # with public read on display/ would.
            settings.CAPEVAL_DISPLAY_URL = f"{store.endpoint}/{BUCKET}/"
            environment["CAPEVAL_DISPLAY_URL"] = settings.CAPEVAL_DISPLAY_URL
        policy = deployment_settings(environment, "CONTENT_SECURITY_POLICY")
        settings.CONTENT_SECURITY_POLICY = policy["CONTENT_SECURITY_POLICY"]
        study = arena_study(researcher, images=2, catch_rate=0)
        real_files(study, width=640, height=480)

        context = browser.new_context(base_url=live_server.url)
        context.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        page = context.new_page()
        problems: list[str] = []
        hosts = {urlsplit(live_server.url).netloc, urlsplit(store.endpoint).netloc}
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.on(
            "request",
            lambda r: (
                None
                if urlsplit(r.url).netloc in hosts or r.url.startswith("data:")
                else problems.append(f"request outside the deployment: {r.url}")
            ),
        )
        try:
            page.goto(f"/p/{crowd_link_token(study)}/?PROLIFIC_PID=S3-VIEWER&STUDY_ID=S")
            page.locator("main a.button.primary").first.click()
            expect(page.locator("form.arena-form")).to_be_visible()
            image = page.locator("img.zoom-thumb").first
            source = image.get_attribute("src")
            if public_renditions:
                assert source.startswith(f"{store.endpoint}/{BUCKET}/display/"), source
            else:
                assert source.startswith("/media/display/"), source
            page.wait_for_function(
                "(img) => img.complete", arg=image.element_handle(), timeout=30_000
            )
            # Decoded at its size: the store's bytes reached the page, not a broken image.
            assert image.evaluate("(img) => img.naturalWidth") == 640
        finally:
            context.close()
        assert problems == [], problems
