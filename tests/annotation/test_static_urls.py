"""Static-file URLs are worked out once per name (``capeval.staticfiles``, issue 48)."""

from unittest import mock

from django.contrib.staticfiles.storage import StaticFilesStorage, staticfiles_storage
from django.templatetags.static import static

from capeval.staticfiles import Static

NAMES = ["capeval/capeval.css", "capeval/capeval.js", "modes/vicr/vicr.css", "a b/ü.js"]


def test_pages_use_the_remembering_storage_and_get_djangos_urls():
    django = StaticFilesStorage()
    # ``{% static %}`` goes through the site's storage, which is this one.
    assert [static(name) for name in NAMES] == [django.url(name) for name in NAMES]
    assert type(staticfiles_storage._wrapped) is Static
    assert [Static().url(name) for name in NAMES] == [django.url(name) for name in NAMES]


def test_each_name_is_worked_out_once():
    storage = Static()
    with mock.patch.object(StaticFilesStorage, "url", autospec=True, return_value="/s/x") as url:
        for _ in range(5):
            storage.url("capeval/capeval.css")
            storage.url("capeval/capeval.js")
    assert url.call_count == 2
