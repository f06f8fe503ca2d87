"""Static-file storages that remember each file's URL (issue 48).

Every page names its stylesheets and scripts with ``{% static %}``, eight on a rating page,
and the storage works each URL out again on every render (joining, quoting, and in
production a manifest lookup): six percent of a rating page's CPU in the profile. A
static file's URL cannot change while the process runs (the manifest is read once at
start), so each storage keeps the answer per name.
"""

from __future__ import annotations

from django.contrib.staticfiles.storage import StaticFilesStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class RememberedUrls:
    """A storage mixin: ``url(name)`` worked out once per name."""

    def url(self, name, *args, **kwargs):
        if args or kwargs:  # a manifest's ``force``: not what pages ask
            return super().url(name, *args, **kwargs)
        remembered = self.__dict__.setdefault("_remembered_urls", {})
        found = remembered.get(name)
        if found is None:
            found = remembered[name] = super().url(name)
        return found


class Static(RememberedUrls, StaticFilesStorage):
    """The development and test storage (files served by Django's own view)."""


class CompressedManifestStatic(RememberedUrls, CompressedManifestStaticFilesStorage):
    """Production's storage (WhiteNoise: hashed, compressed names from the manifest)."""
