"""The site's session store reads sessions as Django's database store does (issue 48).

``capeval.sessions.SessionStore`` replaces one queryset with a fixed statement. Each case
runs both stores on the same rows: a live session gives the same row and data, an expired
or unknown one gives none and drops its key, and the store is what the settings use.
"""

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from capeval.sessions import SessionStore

pytestmark = pytest.mark.django_db


def _columns(row) -> dict:
    return {f.attname: getattr(row, f.attname) for f in Session._meta.concrete_fields}


def _saved(data: dict) -> str:
    store = SessionStore()
    store.update(data)
    store.save()
    return store.session_key


def test_the_site_uses_this_store(client):
    assert settings.SESSION_ENGINE == "capeval.sessions"
    assert client.session.__class__ is SessionStore


def test_a_live_session_reads_as_djangos_store_reads_it():
    key = _saved({"participant:1": 7, "text": "naïve ✓"})
    ours, theirs = SessionStore(key), db.SessionStore(key)
    assert _columns(ours._get_session_from_db()) == _columns(theirs._get_session_from_db())
    assert dict(SessionStore(key).items()) == {"participant:1": 7, "text": "naïve ✓"}


def test_an_expired_or_unknown_session_is_none_and_its_key_dropped():
    key = _saved({"a": 1})
    Session.objects.filter(pk=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    for missing in (key, "x" * 32):
        ours, theirs = SessionStore(missing), db.SessionStore(missing)
        assert ours._get_session_from_db() is None and theirs._get_session_from_db() is None
        assert ours.session_key is None and theirs.session_key is None
        assert dict(SessionStore(missing).items()) == {}
