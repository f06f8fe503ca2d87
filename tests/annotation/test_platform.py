"""The project as a running program: the standard library is not shadowed, production
settings refuse unsafe configurations, flags are parsed strictly, bodies are capped."""

import os
import secrets
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from annotation.models import Job

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = "capeval.settings.production"


def run_python(args, **env):
    """Run the project's Python with a clean environment of our own (no SECRET_KEY etc.)."""
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**keep, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_env(**extra):
    return {"DJANGO_SETTINGS_MODULE": PRODUCTION, "PYTHONPATH": str(ROOT / "platform"), **extra}


def test_the_standard_library_platform_module_is_not_shadowed():
    import platform
    import uuid

    assert platform.system()
    assert uuid.uuid4().version == 4
    assert Path(platform.__file__).parent == Path(sysconfig.get_paths()["stdlib"])
    assert not (ROOT / "platform" / "__init__.py").exists(), "see DESIGN.md: never a package"


def test_platform_and_uuid_work_inside_the_running_project():
    script = (
        "import platform, uuid, capeval.celery_app; "
        "print(platform.system(), uuid.uuid4().version, platform.__file__)"
    )
    result = run_python(["manage.py", "shell", "-c", script])

    assert result.returncode == 0, result.stderr
    system, version, location = result.stdout.strip().splitlines()[-1].split()
    assert system and version == "4"
    assert not location.startswith(str(ROOT)), "the project's folder shadowed the stdlib"


@pytest.mark.parametrize("secret_key", [None, "", "too-short"])
def test_production_settings_refuse_to_start_without_a_real_secret_key(secret_key):
    env = production_env(ALLOWED_HOSTS="capeval.example.org")
    if secret_key is not None:
        env["SECRET_KEY"] = secret_key

    result = run_python(["-c", "import django; django.setup()"], **env)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY must be set" in result.stderr


def test_production_settings_refuse_to_start_without_allowed_hosts():
    result = run_python(
        ["-c", "import django; django.setup()"],
        **production_env(SECRET_KEY=secrets.token_urlsafe(64)),
    )

    assert result.returncode != 0
    assert "ALLOWED_HOSTS must name" in result.stderr


def test_production_settings_pass_the_deployment_checks():
    env = production_env(
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="capeval.example.org",
        REDIS_URL="redis://127.0.0.1:6379/0",  # named, never reached by the checks
    )

    result = run_python(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_a_debug_flag_that_is_not_a_boolean_stops_the_start():
    result = run_python(
        ["-c", "import django; django.setup()"],
        DJANGO_SETTINGS_MODULE="capeval.settings",
        PYTHONPATH=str(ROOT / "platform"),
        DEBUG="maybe",
    )

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DEBUG='maybe' is not a boolean" in result.stderr


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("off", False),
        ("", False),
        (None, False),
    ],
)
def test_boolean_flags_are_read_strictly(monkeypatch, raw, expected):
    from capeval.settings.base import env_bool

    if raw is None:
        monkeypatch.delenv("CAPEVAL_TEST_FLAG", raising=False)
    else:
        monkeypatch.setenv("CAPEVAL_TEST_FLAG", raw)
    assert env_bool("CAPEVAL_TEST_FLAG", False) is expected


@pytest.mark.parametrize("raw", ["maybe", "2", "tru", "enabled"])
def test_anything_else_is_an_error(monkeypatch, raw):
    from capeval.settings.base import env_bool

    monkeypatch.setenv("CAPEVAL_TEST_FLAG", raw)
    with pytest.raises(ImproperlyConfigured, match="is not a boolean"):
        env_bool("CAPEVAL_TEST_FLAG", False)


@pytest.mark.django_db
def test_a_request_body_over_the_limit_is_answered_413_before_the_view(
    client, settings, researcher, make_study
):
    settings.CAPEVAL_MAX_UPLOAD_BYTES = 1024 * 1024
    study = make_study("vicr")
    client.force_login(researcher)
    url = reverse("study_import", args=[study.pk])

    response = client.generic(
        "POST", url, b"x" * (1024 * 1024 + 1), content_type="application/octet-stream"
    )

    assert response.status_code == 413
    assert "the limit is 1 MB" in response.content.decode()
    assert not Job.objects.exists()
    within = client.generic("POST", url, b"x" * 1000, content_type="application/octet-stream")
    assert within.status_code != 413
