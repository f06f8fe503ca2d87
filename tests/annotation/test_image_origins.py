"""Where a deployment's images may come from (issue 41), as the settings make it from the
environment a node starts with.

CSP's ``img-src`` must name the object store a ``/media/`` answer redirects to (browsers
check the URL after redirects; ``tests/e2e/test_images_on_object_store.py`` shows an image
refused without it), and the public renditions' host of ``CAPEVAL_DISPLAY_URL``; nothing
else. A ``CAPEVAL_DISPLAY_URL`` that is not an http(s) base URL stops the node with a
message naming the variable, rather than pages with broken images.
"""

from __future__ import annotations

import pytest

from tests.factories.deployment import SettingsRefused, deployment_settings

NAMES = ("CONTENT_SECURITY_POLICY", "CAPEVAL_DISPLAY_URL")


def image_sources(environment: dict[str, str]) -> list[str]:
    found = deployment_settings(environment, *NAMES)
    return found["CONTENT_SECURITY_POLICY"]["DIRECTIVES"]["img-src"]


S3 = {"CAPEVAL_S3_BUCKET": "media", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, ["'self'"]),
        # A store of its own (MinIO, Ceph, R2): its origin, path and all dropped.
        (
            {**S3, "CAPEVAL_S3_ENDPOINT_URL": "https://files.example.org:9000/base"},
            ["'self'", "https://files.example.org:9000"],
        ),
        # AWS with path-style links: the region's host; us-east-1's has no region.
        (
            {**S3, "CAPEVAL_S3_REGION": "eu-west-3"},
            ["'self'", "https://s3.eu-west-3.amazonaws.com"],
        ),
        (S3, ["'self'", "https://s3.us-east-1.amazonaws.com", "https://s3.amazonaws.com"]),
        # A CDN for the renditions, local files otherwise.
        (
            {"CAPEVAL_DISPLAY_URL": "https://cdn.example.org/capeval/"},
            ["'self'", "https://cdn.example.org"],
        ),
    ],
    ids=["local", "endpoint", "aws-region", "aws-default", "cdn"],
)
def test_img_src_names_the_store_and_the_renditions_host(environment, expected):
    assert image_sources(environment) == expected


@pytest.mark.parametrize(
    "value", ["cdn.example.org/capeval/", "https://cdn.example.org/capeval", "ftp://cdn/x/"]
)
def test_a_display_url_that_is_no_base_url_stops_the_node_with_a_clear_message(value):
    with pytest.raises(SettingsRefused) as refused:
        deployment_settings({"CAPEVAL_DISPLAY_URL": value}, *NAMES)
    message = str(refused.value)
    assert message.startswith("django.core.exceptions.ImproperlyConfigured: CAPEVAL_DISPLAY_URL=")
    assert "base URL ending in /" in message
