"""Removing the test-rating mode: one line outside its package installs it, and without it
the mode-agnostic tests, the mode contract and the structure still hold (issue 44).

``CAPEVAL_TESTS_WITHOUT_RATINGMODE=1`` leaves the app out (``tests/conftest.py``), as
deleting its ``INSTALLED_APPS`` line would. The mode-agnostic tests build their studies with
the vehicle of ``tests/factories/vehicle.py``, not with this mode; ``DEPENDENTS`` lists each
file outside the package that names it and why, and a new one fails here.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from annotation.registry import MODES
from tests.ratingmode import NAME

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "tests/ratingmode/"
SWITCH = "CAPEVAL_TESTS_WITHOUT_RATINGMODE"
#: How code names the package or the mode (a docstring's "test-rating study" is words).
NAMES_IT = re.compile(r"""ratingmode|["']test-rating["']""")
#: Files outside the package that name it, each with the reason.
DEPENDENTS = {
    "tests/conftest.py": "the one line that installs the app (INSTALLED_APPS, for tests only)",
    # The browser fixtures are tests/e2e/'s (its conftest.py), so the test is there.
    "tests/e2e/test_ratingmode.py": "its own script and stylesheet in Chromium",
    "README.md": "the layout of the repository",
    "docs/architecture.md": "the layout, and 'How to add a mode' cites it as the example",
    "docs/testing.md": "the shared fixtures of the tests",
}
#: Run without the app, these must pass: the mode contract, the guidelines of every mode,
#: the layers of the code, and a sample of the mode-agnostic tests on the vehicle (leases
#: and submissions, every served mode's answer checks), which the whole suite run with the
#: switch repeats at length.
WITHOUT_IT = [
    "tests/annotation/test_mode_contract.py",
    "tests/annotation/test_guidelines.py",
    "tests/annotation/test_structure.py::test_the_layers_contract_names_every_module_of_annotation",
    "tests/annotation/test_submissions.py",
    "tests/annotation/test_answer_checks.py::test_every_registered_mode_has_a_builder_here",
    "tests/ratingmode/test_removal.py::test_the_switch_installs_or_leaves_out_the_mode",
]


def test_the_switch_installs_or_leaves_out_the_mode():
    left_out = bool(os.environ.get(SWITCH))
    assert ("tests.ratingmode" in settings.INSTALLED_APPS) is not left_out
    assert (NAME in MODES) is not left_out


def test_nothing_outside_the_package_names_it_but_the_listed_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.splitlines()
    naming = set()
    for name in listed:
        path = ROOT / name
        if name.startswith(PACKAGE) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # images, fonts: no code names anything there
            continue
        if NAMES_IT.search(text):
            naming.add(name)

    assert "tests/conftest.py" in naming
    assert naming - set(DEPENDENTS) == set(), "a new file names the test-only mode"
    # The registration is one line of code (comments aside).
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8").splitlines()
    code = [line for line in conftest if NAMES_IT.search(line.split("#")[0])]
    assert len(code) == 1 and "INSTALLED_APPS" in code[0], code


def test_without_it_the_other_tests_pass_and_django_checks(tmp_path):
    env = {**os.environ, SWITCH: "1", "CAPEVAL_VAR_DIR": str(tmp_path)}
    # The embedded SQLite test database, in memory: a PostgreSQL run's test database is the
    # parent's, which the child must not create or drop.
    env.pop("DATABASE_URL", None)
    # On SQLite the child skips what needs PostgreSQL or Redis, as the embedded default's
    # pass does; CI's PostgreSQL pass (CAPEVAL_REQUIRE_SERVICES=1) would fail them instead.
    for service in ("REDIS_URL", "CAPEVAL_REQUIRE_SERVICES"):
        env.pop(service, None)
    pytest = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider"]
    # The two run side by side: this test takes the longer of them, not their sum.
    with subprocess.Popen(
        [*pytest, *WITHOUT_IT], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    ) as tests:
        check = subprocess.run(
            [sys.executable, "manage.py", "check"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        try:
            output, _ = tests.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            tests.kill()
            raise

    assert tests.returncode == 0, output[-3000:]
    assert " passed" in output and "failed" not in output
    assert check.returncode == 0, check.stderr[-3000:]
