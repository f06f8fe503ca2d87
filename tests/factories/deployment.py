"""Settings as a deployment's environment makes them (issue 41).

The settings read ``CAPEVAL_*`` variables once, at import, as a node starts; overriding
``settings`` in a test would skip that code. ``deployment_settings`` imports them in a fresh
process with the given environment and returns the named settings (JSON values), or the
process's error output when the settings refuse the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.factories.workers import REPO


def deployment_settings(environment: dict[str, str], *names: str) -> dict:
    """``{name: value}`` of ``names`` with ``environment``; raises ``SettingsRefused`` with
    the process's last line of error output when the settings refuse it."""
    code = (
        "import json, sys; from django.conf import settings; "
        "print(json.dumps({n: getattr(settings, n) for n in sys.argv[1:]}))"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "capeval.settings",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")]),
        **environment,
    }
    out = subprocess.run(
        [sys.executable, "-c", code, *names],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise SettingsRefused(out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


class SettingsRefused(Exception):
    pass
