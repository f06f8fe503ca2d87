"""The code's structure: no import cycle, no function-level import of project code, every
module of ``annotation/`` in the layers contract, and every mode registered at start.

A function-level import of project code is how an import cycle hides (the cycle is still
there, only deferred to the first call), so the rule is checked on the source, and the
imports themselves are tried: every module of the project imported first in a fresh interpreter
(a fork of one that has only run ``django.setup()``, the mode apps left out), and all of them
in shuffled orders.
"""

import ast
import json
import os
import random
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from django.conf import settings

from tests.factories.machine import usable_cores

ROOT = Path(__file__).resolve().parents[2]
#: Where project code lives, and the package prefix each folder's modules carry.
PACKAGES = {
    ROOT / "annotation": "annotation",
    ROOT / "rubrics": "rubrics",
    ROOT / "platform" / "capeval": "capeval",
    # Test-only mode apps (tests/<package>/apps.py), whose modules are imported like a mode's.
    **{path.parent: f"tests.{path.parent.name}" for path in (ROOT / "tests").glob("*/apps.py")},
}
#: Third-party libraries a function may import (never project code: that is how a cycle
#: hides). Each is heavy and needed only by the statistics or figure that uses it, while
#: every web, worker and export process imports the module: loaded at module level they
#: cost the export path 254 MB RSS before its first row (issue 27's audit; the budget is
#: 200 MB) and every process about a second at start.
LAZY_LIBRARIES = {
    "scipy",  # statistics and optimisers of the report and planner functions
    "matplotlib",  # report figures, drawn only by a report job
    "choix",  # the arena's Bradley-Terry fit, only in a report job
    "pandas",  # crowd-kit's input frame, only for Dawid-Skene
    "sacrebleu",  # BLEU of the metric lab; the judges report reaches its module
    "crowdkit",  # about a second to import (pandas extras, nltk); only a report job fits it
    # The optional "clip" extra, needed only to read a real CLIP export's tokenizer.json;
    # the default install and the tests' tiny models do without it.
    "tokenizers",
}
#: Settings modules other than the one the tests run with (production refuses to load
#: without its secrets, by design).
NOT_IMPORTED = {"capeval.settings.production"}
#: The installed mode apps: annotation/modes/<mode>/, one INSTALLED_APPS line each.
MODE_APPS = [app for app in settings.INSTALLED_APPS if app.startswith("annotation.modes.")]


def project_files():
    for folder, prefix in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield path, ".".join([prefix, *parts])


def lazy_imports(path: Path):
    """(function, line, top-level package) of every import below module level in ``path``."""
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and scope:
                if isinstance(child, ast.Import):
                    tops = [alias.name.split(".")[0] for alias in child.names]
                else:  # a relative import (level > 0) is project code
                    tops = [(child.module or "").split(".")[0] if not child.level else "."]
                found.extend((scope, child.lineno, top) for top in tops)
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = child.name
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def test_no_function_level_import_but_the_documented_libraries():
    lazy = {
        (str(path.relative_to(ROOT)), scope, line, top)
        for path, _module in project_files()
        # A migration's RunPython is frozen history, run once by Django's migrate with the
        # models of its time: it is not part of the import graph the rule protects.
        if "migrations" not in path.relative_to(ROOT).parts
        for scope, line, top in lazy_imports(path)
    }
    refused = sorted(entry for entry in lazy if entry[3] not in LAZY_LIBRARIES)
    assert refused == [], refused


def test_the_check_finds_a_function_level_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\n\n\ndef f():\n    import json\n    from annotation import models\n"
        "    from . import sibling\n    return json\n"
    )
    assert lazy_imports(sample) == [("f", 5, "json"), ("f", 6, "annotation"), ("f", 7, ".")]


#: Shuffled orders of every module, besides each module imported first on its own: the
#: test's work is these counts of imports, whatever the machine's speed.
SHUFFLED_ORDERS = 3
#: How long one child may take before it counts as hung. Importing a module (with what it
#: pulls in) takes about a second of CPU, a shuffled order of them all about ten; ten minutes
#: is a stuck import (waiting on the network or a lock), not a slow or busy machine.
HANG_SECONDS = 600

# The parent sets Django up once; each child is a fork that imports modules in its order.
# The children are independent, so as many run at once as the machine has cores: one at a
# time, this was the suite's slowest test (104 s of a 2-core machine's CI pass). The mode
# apps are left out of the parent's setup: their ready() imports every mode's modules, and
# a child must import its first module itself. A child past HANG_SECONDS is stopped by its
# own alarm and reported as hung; no limit bounds the run as a whole.
IMPORTER = textwrap.dedent(
    """
    import importlib, json, os, signal, sys, traceback
    import django
    from django.conf import settings
    settings.INSTALLED_APPS = [
        app for app in settings.INSTALLED_APPS if not app.startswith("annotation.modes.")
    ]
    django.setup()
    orders, hang, cores = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    failures = []
    running = {}
    while orders or running:
        if orders and len(running) < cores:
            order = orders.pop(0)
            pid = os.fork()
            if pid == 0:
                signal.alarm(hang)  # SIGALRM's default action ends the child
                try:
                    for name in order:
                        importlib.import_module(name)
                except BaseException:
                    print("importing", order[0], "first:", traceback.format_exc(), flush=True)
                    os._exit(1)
                os._exit(0)
            running[pid] = order[0]
            continue
        pid, status = os.waitpid(-1, 0)
        first = running.pop(pid)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            failures.append(f"{first} (hung: still importing after {hang} s)")
        elif status:
            failures.append(first)
    print(json.dumps({"failures": sorted(failures)}))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child per module")
def test_every_module_imports_first_and_in_any_order():
    modules = [name for _path, name in project_files() if name not in NOT_IMPORTED]
    assert "annotation.modes.base" in modules and "rubrics.vicr" in modules
    assert "annotation.modes.thumb.mode" in modules
    shuffled = [
        random.Random(seed).sample(modules, len(modules)) for seed in range(SHUFFLED_ORDERS)
    ]
    orders = [[name] for name in modules] + shuffled
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "capeval.settings"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "platform")])
    cores = usable_cores()
    done = subprocess.run(
        [sys.executable, "-c", IMPORTER, json.dumps(orders), str(HANG_SECONDS), str(cores)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert '{"failures": []}' in done.stdout, done.stdout[-5000:]


def test_every_installed_mode_is_a_choice_as_soon_as_django_starts(tmp_path):
    """``manage.py shell`` imports nothing of the modes, yet ``Study.mode`` lists them all:
    each mode is an installed app whose ``mode.py`` ``AnnotationConfig.ready()`` imports."""
    env = {**os.environ, "CAPEVAL_VAR_DIR": str(tmp_path)}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # manage.py's own default, as a shell starts
    program = (
        "import json; from annotation.models import Study; "
        "print(json.dumps(list(Study._meta.get_field('mode').choices)))"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", program],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    choices = json.loads(done.stdout.strip().splitlines()[-1])
    # Each mode's package is named for the mode.
    installed = {app.rsplit(".", 1)[-1] for app in MODE_APPS}
    assert len(installed) >= 5 and {name for name, _label in choices} == installed
    assert all(label for _name, label in choices)


def layered_modules() -> set[str]:
    """The modules named by the layers contract over ``annotation`` (pyproject.toml)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and c.get("containers") == ["annotation"]
    ]
    return {
        name.strip()
        for layer in contract["layers"]
        for name in layer.replace(":", "|").split("|")
        if name.strip()
    }


def test_the_layers_contract_names_every_module_of_annotation():
    """A module the contract leaves out may import anything and be imported by anything:
    each module and package at the top of ``annotation/`` has its layer."""
    folder = ROOT / "annotation"
    top = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} | {
        p.parent.name for p in folder.glob("*/__init__.py")
    }
    assert {"services", "models", "modes", "views"} <= top
    assert top - layered_modules() == set()
    assert layered_modules() - top == set(), "the contract names a module that is gone"
