"""The dependency lock: every requirement of the default and test installs is pinned in
``constraints.txt`` at a version its specifier allows, and every install path uses it.

Without the lock, ``pyarrow>=16`` resolved to a new major release between two benchmark
runs and moved the export's peak memory (issue 27): a number measured today must be the
number measured next month.
"""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def pins() -> dict[str, Version]:
    found = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt: {line!r} is not pinned with =="
        found[canonicalize_name(name.split("[")[0])] = Version(version)
    return found


def requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]] + [
        Requirement(text) for text in project["optional-dependencies"]["test"]
    ]


def test_every_requirement_is_pinned_at_a_version_it_allows():
    pinned = pins()
    problems = []
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        if name not in pinned:
            problems.append(f"{requirement.name} is not in constraints.txt")
        elif not requirement.specifier.contains(pinned[name], prereleases=True):
            problems.append(f"{requirement.name}=={pinned[name]} does not satisfy {requirement}")
    assert not problems, "run `make lock`: " + "; ".join(problems)


def test_every_install_path_uses_the_lock():
    makefile = (REPO / "Makefile").read_text()
    installs = re.findall(r"\$\(BIN\)/pip install [^\n]*-e [^\n]*", makefile)
    assert installs and all("-c constraints.txt" in line for line in installs), installs
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY pyproject.toml README.md constraints.txt" in dockerfile
    assert re.search(r"pip install [^\n]*-c constraints\.txt \.", dockerfile)
