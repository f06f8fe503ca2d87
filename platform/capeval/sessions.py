"""Django's database sessions, read by one fixed statement (issue 48).

Every request of a crowd worker loads their session, and the stock backend reads it with
``Session.objects.get(session_key=..., expire_date__gt=now)``: building and compiling that
queryset cost the web worker about a fourteenth of a rating page's CPU, for a lookup by
primary key. This store reads the same row with a statement written once and turns it into
the same instance (``annotation.models.rows``); everything else, writing included, is
Django's ``db`` backend unchanged (``SESSION_ENGINE = "capeval.sessions"``).
"""

from __future__ import annotations

from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.db import connection
from django.utils import timezone

from annotation.models.rows import columns, cursor, instance

FIELDS = ("session_key", "session_data", "expire_date")

#: The live session of a key: params the key, then now (as the database stores times).
LIVE_SESSION = (
    f'SELECT {columns("s", Session, FIELDS)} FROM "{Session._meta.db_table}" s '
    'WHERE s."session_key" = %s AND s."expire_date" > %s'
)


class SessionStore(db.SessionStore):
    def _get_session_from_db(self) -> Session | None:
        """The session's row if it is there and not expired; else None, and the key is
        dropped, as Django's own store does."""
        if self.get_model_class() is not Session:
            return super()._get_session_from_db()
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        with cursor() as reading:
            reading.execute(LIVE_SESSION, [self.session_key, now])
            row = reading.fetchone()
        if row is None:
            self._session_key = None
            return None
        return instance(Session, FIELDS, row)
