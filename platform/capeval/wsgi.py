"""WSGI entry point (gunicorn capeval.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
application = get_wsgi_application()
# Import every view now: a gunicorn worker accepts connections only after this module has
# loaded, so its first request is not the one that pays for importing numpy and scipy.
URL_PATTERNS = get_resolver().url_patterns
