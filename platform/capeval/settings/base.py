"""Settings shared by every environment, read from the environment in this one place.

Environment variables:

- ``DATABASE_URL``: database (default: a SQLite file under ``var/``).
- ``REDIS_URL``: Celery broker; without it, ``CAPEVAL_BROKER_DIR`` or eager runs (production
  refuses to start with neither).
- ``CAPEVAL_BROKER_DIR``: without ``REDIS_URL``, a folder for Kombu's filesystem broker,
  which a worker beside the web server reads (``manage.py demo_server``, run by
  ``make demo``); with neither, Celery runs tasks eagerly in-process (tests, commands).
- ``SECRET_KEY``: required in production (``capeval.settings.production``).
- ``DEBUG``: ``1``/``true``/``yes`` or ``0``/``false``/``no``; anything else is an error.
- ``ALLOWED_HOSTS``: comma-separated host names.
- ``CAPEVAL_MEDIA_ROOT``, ``CAPEVAL_VAR_DIR``: where uploads, exports and the SQLite file live.
- ``CAPEVAL_S3_BUCKET``: files (originals, renditions, uploads; exports under
  ``exports/``) in this bucket of an S3-compatible object store instead of ``MEDIA_ROOT``
  and ``CAPEVAL_EXPORT_DIR`` (``annotation/storage.py``), so that several web and worker
  nodes share them; with ``CAPEVAL_S3_ENDPOINT_URL`` (MinIO, Ceph RGW, R2; empty:
  AWS), ``CAPEVAL_S3_REGION`` and boto3's own credentials (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, or an instance role).
- ``CAPEVAL_DB_CONN_MAX_AGE``: seconds a process keeps its database connection (default 0:
  one per request; the compose file sets 60). A kept connection also keeps the hot path's
  statements prepared (``annotation.models.rows.cursor``).
- ``CAPEVAL_DB_TRANSACTION_POOLING``: ``true`` when ``DATABASE_URL`` names PgBouncer in
  transaction mode (no server-side cursors, no prepared statements;
  ``tests/annotation/test_two_nodes.py``).
- ``CAPEVAL_DISPLAY_URL``: a base URL (ending in ``/``) where display renditions are public,
  e.g. a CDN in front of the object store; pages name their images there instead of the
  web nodes' ``/media/`` (default: empty, through the nodes).
- ``CAPEVAL_S3_TIMEOUT_SECONDS``: the longest wait to connect to the object store, and per
  read, before a request is tried once more and then refused (default 10).
- ``CAPEVAL_DOWNLOAD_SECONDS``: how long a presigned download link of the object store is
  valid (default 300).
- ``CAPEVAL_MAX_UPLOAD_MB``: largest request body accepted (default 100).
- ``CAPEVAL_MAX_IMAGE_PIXELS``: largest image accepted, in pixels (default 40 million).
- ``CAPEVAL_MAX_IMPORT_PIXELS``: pixels one import may decode in all (default 2 billion).
- ``CAPEVAL_MAX_IMPORT_ROWS``: caption rows (CSV) or entries (COCO) per import (default
  200,000).
- ``CAPEVAL_LINK_MAX_AGE_DAYS``: how long a signed crowd link stays valid (default 90).
- ``CAPEVAL_TRUSTED_PROXIES``: how many reverse proxies in front of the app append to
  X-Forwarded-For (default 0: the header is ignored, since any client can write it); in
  production, above 0 also makes X-Forwarded-Proto believed (``production.py``).
- ``CAPEVAL_COMPLETION_HOSTS``: hosts besides ``app.prolific.com`` a study's completion URL
  may name, comma-separated (default none).
- ``CAPEVAL_LAPSE_WAIT_SECONDS``, ``CAPEVAL_LAPSE_LIMIT``, ``CAPEVAL_LAPSE_WINDOW_SECONDS``,
  ``CAPEVAL_LAPSE_BAR_SECONDS``: after a crowd lease lapses its linked identity waits (default
  120 s) for a new one; that many lapses (3) within the window (1 hour) bar it for longer
  (30 minutes) from the latest (``annotation/services/assignments.py``).
- ``CAPEVAL_LOGIN_FAILURE_LIMIT``: failed logins (form or API Basic auth) of one account from
  one address before that pair is locked out (default 5).
- ``CAPEVAL_LOGIN_COOLOFF_MINUTES``: how long such a lockout lasts (default 15).
- ``CAPEVAL_IMPORT_TIME_LIMIT_MINUTES``, ``CAPEVAL_EXPORT_TIME_LIMIT_MINUTES``,
  ``CAPEVAL_REPORT_TIME_LIMIT_MINUTES``, ``CAPEVAL_METRICS_TIME_LIMIT_MINUTES``: a job of that
  kind is stopped and failed after this long on a worker (defaults 30, 60, 10, 30; the hard
  limit is 5 minutes later).
- ``CAPEVAL_JOB_MAX_ATTEMPTS``: runs of a job whose worker died before it is failed (default 3).
- ``CAPEVAL_JOB_HEARTBEAT_SECONDS``, ``CAPEVAL_JOB_STALE_SECONDS``: a running job shows a sign
  of life this often (default 30) and is failed when silent for longer (default 300).
- ``CAPEVAL_JOB_QUEUED_HOURS``: a job no worker started within this long is failed (default 24).
"""

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from botocore.config import Config as BotoConfig
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[3]


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean flag strictly: a typo must not silently turn DEBUG on."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc


def env_base_url(name: str) -> str:
    """An absolute http(s) URL ending in "/" (a base other URLs are appended to), or ""."""
    raw = os.environ.get(name, "").strip()
    parts = urlsplit(raw)
    if raw and (parts.scheme not in ("http", "https") or not parts.netloc or raw[-1] != "/"):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an http(s) base URL ending in / "
            "(a CDN's or the bucket's address, with the scheme and a final slash)"
        )
    return raw


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


VAR_DIR = Path(os.environ.get("CAPEVAL_VAR_DIR") or BASE_DIR / "var")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI's files for /api/docs/, served from our static files instead of a CDN.
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "annotation",
    # The modes: each a package of annotation/modes/ and a Django app (its apps.py), with
    # its own templates and static files; adding or removing a mode is its package and
    # its line here.
    "annotation.modes.thumb",
    "annotation.modes.vicr",
    "annotation.modes.humanr",
    "annotation.modes.arena",
    "annotation.modes.spans",
    "annotation.modes.context",
]

# Django's database sessions, read by a fixed statement instead of a queryset on every
# request (capeval/sessions.py; issue 48).
SESSION_ENGINE = "capeval.sessions"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Security headers on every response, the answers of the middleware below included
    # (413, 503, lockouts): see "Security headers" further down.
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    # Before CommonMiddleware, which refuses the container-local probe's Host (127.0.0.1).
    "annotation.middleware.HealthCheckMiddleware",
    # A view failing on an unreachable database answers 503 + Retry-After, not 500 (its
    # process_exception sees views; middleware errors reach handler500, same answer).
    "annotation.middleware.DatabaseUnavailableMiddleware",
    "annotation.middleware.RequestSizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a lockout flagged during the login into its page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "capeval.urls"
WSGI_APPLICATION = "capeval.wsgi.application"
AUTH_USER_MODEL = "annotation.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if not os.environ.get("DATABASE_URL"):
    # The embedded default keeps its SQLite file here; a fresh clone has no var/ yet.
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'capeval.sqlite3'}",
        conn_max_age=env_int("CAPEVAL_DB_CONN_MAX_AGE", 0),
        # A persistent connection cut by a PostgreSQL restart is replaced at the start of
        # the next request instead of failing it (a no-op on SQLite).
        conn_health_checks=True,
    )
}
# Behind PgBouncer in transaction mode (issue 41), consecutive transactions of one
# connection may reach different server connections, so a cursor may not outlive its
# transaction: QuerySet.iterator() reads in chunks from the client instead.
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = env_bool(
    "CAPEVAL_DB_TRANSACTION_POOLING", False
)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers (progress bars) proceed while an import or export writes.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Login throttling (django-axes) for the login form, the admin's login and the API's HTTP
# Basic auth. Failures are counted per (user name, address) pair: a rival guessing at a
# researcher's password from elsewhere locks out only their own pair, never the researcher at
# her desk, and one locked name does not block colleagues behind the same address. While
# locked, axes refuses before any password is hashed. The cool-off runs from the lockout
# (attempts during it are not recorded), so the message can say how long to wait.
CAPEVAL_LOGIN_FAILURE_LIMIT = env_int("CAPEVAL_LOGIN_FAILURE_LIMIT", 5)
CAPEVAL_LOGIN_COOLOFF_MINUTES = env_int("CAPEVAL_LOGIN_COOLOFF_MINUTES", 15)
AUTHENTICATION_BACKENDS = [
    "annotation.authentication.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = CAPEVAL_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=CAPEVAL_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
# The same address the crowd checks use: X-Forwarded-For only behind trusted proxies.
AXES_CLIENT_IP_CALLABLE = "annotation.addresses.client_address"
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"
AXES_COOLOFF_MESSAGE = (
    "Too many failed logins for this account from your address. "
    f"Try again in {CAPEVAL_LOGIN_COOLOFF_MINUTES} minutes."
)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("CAPEVAL_MEDIA_ROOT") or VAR_DIR / "media")
CAPEVAL_S3_BUCKET = os.environ.get("CAPEVAL_S3_BUCKET", "")
CAPEVAL_DOWNLOAD_SECONDS = env_int("CAPEVAL_DOWNLOAD_SECONDS", 300)
# How the nodes talk to the object store: a store that does not answer ends as a 503
# (annotation/storage.py) after 2 attempts of at most CAPEVAL_S3_TIMEOUT_SECONDS to connect
# and as long per read, 40 s at worst by default, inside gunicorn's 60 s; botocore's own
# defaults (60 s, 5 attempts) would hold a web worker until gunicorn killed it. A plain
# dict, so that tests can read it from a node's settings (tests/factories/deployment.py).
CAPEVAL_S3_TIMEOUT_SECONDS = env_float("CAPEVAL_S3_TIMEOUT_SECONDS", 10)
S3_CLIENT = {
    "connect_timeout": CAPEVAL_S3_TIMEOUT_SECONDS,
    "read_timeout": CAPEVAL_S3_TIMEOUT_SECONDS,
    "retries": {"mode": "standard", "max_attempts": 2},
    # Path-style addressing: a loopback or in-cluster endpoint has no bucket DNS.
    "s3": {"addressing_style": "path"},
    "signature_version": "s3v4",
}
# The media storage (annotation/storage.py): MEDIA_ROOT on this node, or an object store
# shared by every node. Private objects, handed out as presigned links that expire.
_S3 = {
    "BACKEND": "storages.backends.s3.S3Storage",
    "OPTIONS": {
        "bucket_name": CAPEVAL_S3_BUCKET,
        "endpoint_url": os.environ.get("CAPEVAL_S3_ENDPOINT_URL") or None,
        "region_name": os.environ.get("CAPEVAL_S3_REGION") or None,
        "default_acl": "private",
        "querystring_auth": True,
        "querystring_expire": CAPEVAL_DOWNLOAD_SECONDS,
        "file_overwrite": True,
        # django-storages takes the addressing style and signature from here when given.
        "client_config": BotoConfig(**S3_CLIENT),
    },
}
MEDIA_STORAGE = _S3 if CAPEVAL_S3_BUCKET else {"BACKEND": "annotation.storage.LocalMediaStorage"}
# Export files: CAPEVAL_EXPORT_DIR, or the same bucket under exports/.
EXPORT_STORAGE = (
    {**_S3, "OPTIONS": {**_S3["OPTIONS"], "location": "exports"}}
    if CAPEVAL_S3_BUCKET
    else {"BACKEND": "annotation.storage.LocalExportStorage"}
)

# Display renditions from elsewhere (issue 41): "" serves them through the web nodes'
# /media/ (whose access rule lets anyone read display/); else a base URL where the same
# names are public, e.g. a CDN in front of the store or the bucket's own URL with public
# read on display/ only. A rendition's name holds its original's content hash, so a CDN may
# keep it for good; originals and exports stay behind the nodes' access checks.
CAPEVAL_DISPLAY_URL = env_base_url("CAPEVAL_DISPLAY_URL")
# Where a page's images come from besides this site: the object store that a /media/ answer
# redirects to (a presigned link), and the public renditions' host. CSP checks an image's
# URL after its redirects, so without the store's origin no image of an S3 deployment shows.
if not CAPEVAL_S3_BUCKET:
    _STORE_ORIGINS = []
elif os.environ.get("CAPEVAL_S3_ENDPOINT_URL"):
    _STORE_ORIGINS = [origin(os.environ["CAPEVAL_S3_ENDPOINT_URL"])]
else:  # AWS itself, with path-style links (us-east-1's host has no region in it)
    _region = os.environ.get("CAPEVAL_S3_REGION") or "us-east-1"
    _STORE_ORIGINS = [f"https://s3.{_region}.amazonaws.com"]
    _STORE_ORIGINS += ["https://s3.amazonaws.com"] if _region == "us-east-1" else []
IMAGE_ORIGINS = _STORE_ORIGINS + ([origin(CAPEVAL_DISPLAY_URL)] if CAPEVAL_DISPLAY_URL else [])
STORAGES = {
    "default": MEDIA_STORAGE,
    "exports": EXPORT_STORAGE,
    # Django's, remembering each file's URL (capeval/staticfiles.py).
    "staticfiles": {"BACKEND": "capeval.staticfiles.Static"},
}

# Uploads: the middleware answers 413 above this many bytes; Pillow refuses images above
# the pixel limit, well below Pillow's own decompression-bomb threshold (about 89 Mpx).
CAPEVAL_MAX_UPLOAD_BYTES = env_int("CAPEVAL_MAX_UPLOAD_MB", 100) * 1024 * 1024
CAPEVAL_MAX_IMAGE_PIXELS = env_int("CAPEVAL_MAX_IMAGE_PIXELS", 40_000_000)
CAPEVAL_DISPLAY_MAX_SIDE = 1024
# Longest caption an import accepts, in characters. Detailed captions run long: the longest
# of DOCCI, IIW-400 and DCI (../shared/datasets/imageinwords, measured for issue 46) has
# 3,152 characters (DCI's IIW description; DOCCI's own longest 2,840), and 40-60% of them
# pass 1,000. 10,000 leaves three times that; a caption is a TextField, so the limit bounds
# the pages and the judges' prompts, not storage.
CAPEVAL_MAX_CAPTION_CHARS = env_int("CAPEVAL_MAX_CAPTION_CHARS", 10_000)
CAPEVAL_MAX_IMAGE_BYTES = env_int("CAPEVAL_MAX_IMAGE_MB", 50) * 1024 * 1024
CAPEVAL_MAX_CAPTION_FILE_BYTES = env_int("CAPEVAL_MAX_CAPTION_FILE_MB", 100) * 1024 * 1024
# Zip bombs: refuse archives whose members or declared uncompressed size exceed these.
CAPEVAL_MAX_ZIP_MEMBERS = env_int("CAPEVAL_MAX_ZIP_MEMBERS", 20_000)
CAPEVAL_MAX_ZIP_BYTES = env_int("CAPEVAL_MAX_ZIP_MB", 4096) * 1024 * 1024
# Work per import: decoding costs about 8 ns of CPU per pixel and 1-bit PNGs compress 40 Mpx
# into 5 kB, so the upload size does not bound it; 2 gigapixels (about a minute of a
# worker) hold 6,000 COCO-sized images or 150 12-Mpx photos. Larger sets are imported in
# parts (imports add to a study). Rows: 200,000 captions are far more than a study judges.
CAPEVAL_MAX_IMPORT_PIXELS = env_int("CAPEVAL_MAX_IMPORT_PIXELS", 2_000_000_000)
CAPEVAL_MAX_IMPORT_ROWS = env_int("CAPEVAL_MAX_IMPORT_ROWS", 200_000)
# The metric lab's CLIP-S: a folder of exported ONNX encoders (docs/metrics.md); none: off.
CAPEVAL_CLIP_DIR = os.environ.get("CAPEVAL_CLIP_DIR", "")
CAPEVAL_CLIP_IMAGE_SIZE = env_int("CAPEVAL_CLIP_IMAGE_SIZE", 224)
CAPEVAL_EXPORT_DIR = VAR_DIR / "exports"
# The planner's money (issue 26): an ISO 4217 code printed beside every price and cost.
# GBP by default because Prolific, the crowd platform CapEval's crowd flow is built for,
# sets rewards in pounds by default (its researchers may pay in USD: set "USD").
CAPEVAL_CURRENCY = os.environ.get("CAPEVAL_CURRENCY", "").strip().upper() or "GBP"
CAPEVAL_LINK_MAX_AGE = env_int("CAPEVAL_LINK_MAX_AGE_DAYS", 90) * 24 * 3600
CAPEVAL_LEASE_SECONDS = env_int("CAPEVAL_LEASE_SECONDS", 30 * 60)
CAPEVAL_TRUSTED_PROXIES = env_int("CAPEVAL_TRUSTED_PROXIES", 0)
# Hosts besides app.prolific.com a study's completion URL may name (comma-separated).
CAPEVAL_COMPLETION_HOSTS = [
    host.strip().lower()
    for host in os.environ.get("CAPEVAL_COMPLETION_HOSTS", "").split(",")
    if host.strip()
]
# Lease squatting (docs/protocol-choices.md, "Crowd integrity, round two: platform"): after
# a crowd lease lapses, its linked identity waits CAPEVAL_LAPSE_WAIT_SECONDS for a new one;
# CAPEVAL_LAPSE_LIMIT lapses within CAPEVAL_LAPSE_WINDOW_SECONDS bar it for
# CAPEVAL_LAPSE_BAR_SECONDS from the latest.
CAPEVAL_LAPSE_WAIT_SECONDS = env_int("CAPEVAL_LAPSE_WAIT_SECONDS", 120)
CAPEVAL_LAPSE_LIMIT = env_int("CAPEVAL_LAPSE_LIMIT", 3)
CAPEVAL_LAPSE_WINDOW_SECONDS = env_int("CAPEVAL_LAPSE_WINDOW_SECONDS", 3600)
CAPEVAL_LAPSE_BAR_SECONDS = env_int("CAPEVAL_LAPSE_BAR_SECONDS", 1800)
FILE_UPLOAD_TEMP_DIR = None
DATA_UPLOAD_MAX_NUMBER_FIELDS = 5000

# Jobs (docs/architecture.md, "Long work"). Soft and hard time limits per kind, in seconds:
# at the soft limit the job fails with its reason (an import stores nothing); the hard limit
# kills the process if it does not stop by then. Eager runs (no broker) have no limits,
# which is why production refuses to start without a broker (production.py).
CAPEVAL_JOB_HARD_LIMIT_GRACE_SECONDS = 5 * 60
CAPEVAL_JOB_TIME_LIMITS = {
    kind: (minutes * 60, minutes * 60 + CAPEVAL_JOB_HARD_LIMIT_GRACE_SECONDS)
    for kind, minutes in {
        "import": env_int("CAPEVAL_IMPORT_TIME_LIMIT_MINUTES", 30),
        "export": env_int("CAPEVAL_EXPORT_TIME_LIMIT_MINUTES", 60),
        "report": env_int("CAPEVAL_REPORT_TIME_LIMIT_MINUTES", 10),
        # METEOR scores about 100 captions a second: a 100,000-caption study takes ~17 min.
        "metrics": env_int("CAPEVAL_METRICS_TIME_LIMIT_MINUTES", 30),
        # A judge run of 10,000 questions at 16 concurrent requests and ~2 s a reply: ~21 min.
        "judge": env_int("CAPEVAL_JUDGE_TIME_LIMIT_MINUTES", 60),
    }.items()
}
# A job whose worker died (SIGKILL, out of memory) is delivered again; after this many
# started runs it is failed instead of being run again.
CAPEVAL_JOB_MAX_ATTEMPTS = env_int("CAPEVAL_JOB_MAX_ATTEMPTS", 3)
# A running job stamps a heartbeat this often (from a thread, so a long silent step still
# beats); the sweep fails a running job silent for longer than the stale limit. On SQLite
# a beat waits for another write transaction (an import storing its rows), hence the margin.
CAPEVAL_JOB_HEARTBEAT_SECONDS = env_int("CAPEVAL_JOB_HEARTBEAT_SECONDS", 30)
CAPEVAL_JOB_STALE_SECONDS = env_int("CAPEVAL_JOB_STALE_SECONDS", 300)
# A queued job no worker started within this long is failed (its message was lost, e.g. a
# Redis restart without persistence); it is never enqueued twice, which could run it twice.
CAPEVAL_JOB_QUEUED_HOURS = env_int("CAPEVAL_JOB_QUEUED_HOURS", 24)

# Judge endpoints (docs/judges.md, "Where a judge may be"). A judge run connects only to
# public addresses, unless the host is listed here: comma-separated host names, addresses
# or networks, e.g. "127.0.0.1,localhost" for a vLLM server beside the platform, or
# "vllm" in a compose network. Anything listed can be reached by every researcher.
CAPEVAL_JUDGE_ALLOWED_HOSTS = [
    host.strip() for host in os.environ.get("CAPEVAL_JUDGE_ALLOWED_HOSTS", "").split(",")
    if host.strip()
]  # fmt: skip
# The most of one judge reply read: a reply is a few kilobytes.
CAPEVAL_JUDGE_MAX_REPLY_BYTES = env_int("CAPEVAL_JUDGE_MAX_REPLY_BYTES", 1024 * 1024)

# Where jobs run (docs/architecture.md, "Where jobs run"): on Redis when REDIS_URL names
# one; else on Kombu's filesystem transport when CAPEVAL_BROKER_DIR names a folder (the
# embedded default of `make demo`: a worker beside runserver, no server to install); else
# eagerly inside the request or command that asked (the tests, one-off commands).
REDIS_URL = os.environ.get("REDIS_URL", "")
CAPEVAL_BROKER_DIR = "" if REDIS_URL else os.environ.get("CAPEVAL_BROKER_DIR", "")
if CAPEVAL_BROKER_DIR:
    # The one queue folder both sides use: publishers write into it, workers read from it.
    # Kombu wants it to exist; the control folder it makes itself.
    _broker_dir = Path(CAPEVAL_BROKER_DIR).resolve()
    (_broker_dir / "queue").mkdir(parents=True, exist_ok=True)
CELERY_BROKER_URL = REDIS_URL or ("filesystem://" if CAPEVAL_BROKER_DIR else "memory://")
CELERY_TASK_ALWAYS_EAGER = not (REDIS_URL or CAPEVAL_BROKER_DIR)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A job stopped by its hard time limit is acknowledged, not delivered again.
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Publishing a job from a web request must not hang when Redis is down or unresponsive:
# give up after a few seconds (the request answers 503, see services/jobs.py) instead of
# the default of retrying and, on a silent socket, waiting forever.
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Redis hands an unacknowledged message to another worker after this long. It must
    # exceed the longest hard limit, or a job still running would be started a second time.
    "visibility_timeout": max(hard for _soft, hard in CAPEVAL_JOB_TIME_LIMITS.values()) + 600,
    "socket_connect_timeout": 3,
    "socket_timeout": 3,
}
if CAPEVAL_BROKER_DIR:
    # A message is a file; the worker looks for new ones every polling interval (Kombu's
    # default of 1 s would add up to a second before a job starts).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "control_folder": str(_broker_dir / "control"),
        "polling_interval": 0.2,
    }
CELERY_BEAT_SCHEDULE = {
    "sweep-stale-jobs": {
        "task": "annotation.tasks.sweep_stale_jobs",
        "schedule": 60.0,
    },
    "release-expired-leases": {
        "task": "annotation.tasks.release_expired_leases",
        "schedule": 60.0,
    },
    # A live adaptive study's design reads its latest report: refresh those that are due
    # (Report.refresh_due; docs/architecture.md, "Long work").
    "refresh-reports": {
        "task": "annotation.tasks.refresh_reports",
        "schedule": 60.0,
    },
    # Crowd reclaim for studies without webhooks (docs/crowd.md).
    "crowd-sync": {
        "task": "annotation.tasks.crowd_sync_live",
        "schedule": 300.0,
    },
    "delete-old-exports": {
        "task": "annotation.tasks.delete_old_exports",
        "schedule": 24 * 3600.0,
    },
}

REST_FRAMEWORK = {
    # The services' ServiceError becomes a 4xx JSON answer (annotation/apis.py).
    "EXCEPTION_HANDLER": "annotation.apis.exception_handler",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "annotation.authentication.ThrottledBasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON nested deeper than Python's recursion limit answers 400, not 500.
    "DEFAULT_PARSER_CLASSES": [
        "annotation.parsers.DepthSafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # drf-spectacular's, plus the refusals each operation can answer (400, 401, 403, 404).
    "DEFAULT_SCHEMA_CLASS": "annotation.api_schema.ApiSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CapEval API",
    "DESCRIPTION": "Studies, imports, jobs and exports of the CapEval human-evaluation platform.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request bodies get components of their own, as generated clients need: uploads are
    # binary strings (not the URLs a file field reads back as), and a text field that
    # refuses blanks says minLength 1 (Schemathesis sends whatever the schema allows).
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from drf-spectacular-sidecar's static files, never a CDN; the docs view
    # (SpectacularSwaggerSplitView) loads its start-up script as a file too.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Security headers (docs/architecture.md). Content-Security-Policy (django-csp): scripts,
# styles, images, fonts and requests from this site only, and no inline script or style
# at all, so markup that slipped past escaping can neither run nor restyle a page. Pages
# hold no <style>, style= or on*= (tests/annotation/test_csp.py scans the templates); CSS
# and JavaScript are files under static/. Forms post here, or to MTurk's externalSubmit
# (the crowd completion form; Prolific's is a link). Framing: none (as X-Frame-Options
# DENY), except a MTurk worker's pages, which MTurk shows in its own frame: those views
# replace frame-ancestors with CAPEVAL_MTURK_ORIGINS and drop X-Frame-Options.
CAPEVAL_MTURK_ORIGINS = ["https://www.mturk.com", "https://workersandbox.mturk.com"]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, *IMAGE_ORIGINS],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF, *CAPEVAL_MTURK_ORIGINS],
        "frame-ancestors": [NONE],
    },
}
# Permissions-Policy (django-permissions-policy): no page needs a camera, a microphone, the
# location, payments or devices, so no page (nor anything framed in it) may ask for them.
PERMISSIONS_POLICY = {
    feature: []
    for feature in (
        "accelerometer",
        "autoplay",
        "browsing-topics",
        "camera",
        "display-capture",
        "encrypted-media",
        "fullscreen",
        "geolocation",
        "gyroscope",
        "hid",
        "idle-detection",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "picture-in-picture",
        "publickey-credentials-get",
        "screen-wake-lock",
        "serial",
        "usb",
        "xr-spatial-tracking",
    )
}

# Crowd platforms (docs/crowd.md): API base URLs (tests point them at a local server),
# the oldest webhook timestamp accepted, and how long a platform call may take.
CAPEVAL_PROLIFIC_API_URL = os.environ.get("CAPEVAL_PROLIFIC_API_URL", "https://api.prolific.com")
CAPEVAL_MTURK_ENDPOINT = os.environ.get(
    "CAPEVAL_MTURK_ENDPOINT", "https://mturk-requester.us-east-1.amazonaws.com"
)
CAPEVAL_MTURK_SANDBOX_ENDPOINT = os.environ.get(
    "CAPEVAL_MTURK_SANDBOX_ENDPOINT", "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
)
CAPEVAL_CROWD_WEBHOOK_MAX_AGE = env_int("CAPEVAL_CROWD_WEBHOOK_MAX_AGE", 300)
CAPEVAL_CROWD_TIMEOUT = env_int("CAPEVAL_CROWD_TIMEOUT", 10)
# What a bonus costs on top of what the workers get, in percent of it, shown on the crowd
# review's confirmation (issue 46). Prolific's researcher help centre ("How to resolve an
# underpaying study with bonus payments"): "we charge a ~33.33% service charge on each bonus
# payment + VAT where applicable"; its "Bonus payments" article: bonuses are charged "at the
# same commission rate (+ VAT if applicable) as standard participant rewards". The rate is
# the account's (plans and VAT differ), so it is a setting. MTurk's pricing: a 20% fee on
# the reward and any bonus. Prolific pays in CAPEVAL_CURRENCY, MTurk in US dollars.
CAPEVAL_PROLIFIC_FEE_PERCENT = env_float("CAPEVAL_PROLIFIC_FEE_PERCENT", 33.33)
CAPEVAL_MTURK_FEE_PERCENT = env_float("CAPEVAL_MTURK_FEE_PERCENT", 20.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # httpx logs every request at INFO: a judge run would write one line per question
    # (10,000 a run). Its warnings stay; the judge client logs each failure itself.
    # httpcore's DEBUG lines quote the response headers, where an endpoint may echo the key.
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "INFO"}},
}
