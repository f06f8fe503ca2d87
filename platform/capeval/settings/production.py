"""Production settings: refuse to start without a secret key or a task broker; secure
cookies and HSTS.

Behind a TLS-terminating reverse proxy set ``CAPEVAL_TRUSTED_PROXIES`` to the number of
proxies (see ``base.py``): only then is the proxy's ``X-Forwarded-Proto: https`` believed
(``SECURE_PROXY_SSL_HEADER``), as its X-Forwarded-For is. Without a proxy any client could
send that header and pass for HTTPS (secure-cookie and redirect decisions), so it is ignored.
gunicorn itself trusts the header from no address (``--forwarded-allow-ips=`` in
docker-compose.yml and the Dockerfile): this setting is the one place that decides.
"""

from django.core.exceptions import ImproperlyConfigured

from capeval.settings.base import *  # noqa: F403
from capeval.settings.base import (
    CAPEVAL_TRUSTED_PROXIES,
    CELERY_TASK_ALWAYS_EAGER,
    SECRET_KEY,
    env_bool,
    env_int,
)

if not SECRET_KEY or len(SECRET_KEY) < 50:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a random string of at least 50 characters in production."
    )

DEBUG = False
if not ALLOWED_HOSTS:  # noqa: F405
    raise ImproperlyConfigured("ALLOWED_HOSTS must name the host(s) this site is served on.")
# Without a broker Celery runs a job eagerly inside the web request that asked for it: a
# metrics job of 1,000 resamples then outlived gunicorn's timeout (a 500; issue 45, row 13),
# and no time limit applies there. Jobs run only on workers, which need a broker.
if CELERY_TASK_ALWAYS_EAGER:
    raise ImproperlyConfigured(
        "REDIS_URL must name the Celery broker in production (or CAPEVAL_BROKER_DIR a folder "
        "a worker beside the web server reads): without one, jobs would run inside web "
        "requests."
    )

# Static files are served by WhiteNoise right after the security middleware.
MIDDLEWARE = [MIDDLEWARE[0], "whitenoise.middleware.WhiteNoiseMiddleware", *MIDDLEWARE[1:]]  # noqa: F405
STORAGES = {
    "default": MEDIA_STORAGE,  # noqa: F405
    "exports": EXPORT_STORAGE,  # noqa: F405
    "staticfiles": {"BACKEND": "capeval.staticfiles.CompressedManifestStatic"},
}
if CAPEVAL_TRUSTED_PROXIES > 0:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# The container-local healthcheck speaks plain HTTP to gunicorn (annotation/views/health.py).
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
