"""`make test` beside a running `make demo` (issue 46, row 20).

A new user ran `make test` while the demo served: the test target reinstalled the editable
package (`pip install -e ".[test]"`), runserver's autoreloader saw the package's files
change and restarted the demo, which was down for about 30 s. Two things now keep it up,
each checked here without timing anything: the demo's runserver has no autoreloader, and
the test target installs only the test extras, never the package itself again.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from annotation.management.commands.demo_server import runserver_command

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_serves_without_the_autoreloader():
    assert "--noreload" in runserver_command("127.0.0.1:8000")
    assert "--noreload" not in runserver_command("127.0.0.1:8000", reload=True)


def test_installing_the_test_extras_leaves_the_installed_package_alone():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # What `make test` would run on a machine where `make demo` installed the package and
    # the test extras are missing (or pyproject.toml changed): a dry run, nothing executed.
    done = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "-W", "pyproject.toml", ".venv/.installed-test"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    installs = [line for line in done.stdout.splitlines() if "pip install" in line]
    assert installs, done.stdout
    # No editable or local install of the project: only named requirements.
    assert not [line for line in installs if re.search(r"(^|\s)-e\s|\s\.(\[|\s|$)", line)], installs
    assert all("-c constraints.txt" in line for line in installs), installs


def test_the_makefile_says_why():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"never\s+(#\s*)?reinstalls\s+(#\s*)?the package", makefile)
