"""Development and test settings: the embedded default (SQLite, eager Celery) unless the
environment names real services. Production uses ``capeval.settings.production``."""

from capeval.settings.base import *  # noqa: F403
from capeval.settings.base import SECRET_KEY, env_bool

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = SECRET_KEY or "capeval-development-only-not-secret"
ALLOWED_HOSTS = ALLOWED_HOSTS or ["localhost", "127.0.0.1", "[::1]", "testserver"]  # noqa: F405
