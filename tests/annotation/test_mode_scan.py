"""Nothing outside a mode's package knows the mode (issue 44), checked by machine.

Outside the mode packages (``annotation/modes/<mode>/``, each a Django app) and the
migrations, no Python string constant, template or script of the project names:

- a mode: the name of an installed mode app's mode;
- a mode's own setting key: a field its settings class declares and no shared class does
  (``CrowdSettings``, the catch-trial settings...), unless a shared model has a column of
  that name (``target`` is every item's);
- a mode's own column: a field of a model defined in a mode package (but a name a shared
  model's field has too).

The few exceptions are listed with their reason. The names come from the installed modes,
so a new mode is covered without touching this file; test-only modes are left out (their
names are the tests' own).
"""

import ast
import dataclasses
import re
from pathlib import Path

from django.apps import apps

from annotation.registry import MODES

ROOT = Path(__file__).resolve().parents[2]
#: Application code scanned: everything but the mode packages and the migrations.
PYTHON = ("annotation", "platform")
MARKUP = ("templates", "static", "annotation")
#: (file, word) that spell a mode's name or key for another reason, each with that reason.
ALLOWED = {
    # THumB's JSON Lines references: a file format of the references importer.
    ("annotation/services/imports/references.py", "thumb"),
    # The crowd review page's list of rejection reasons, not spans' error categories.
    ("annotation/views/crowd.py", "categories"),
    # The confusion-matrix figure's labels (a judge's agreement), not spans' categories.
    ("annotation/views/judges.py", "categories"),
    # The planner's own form fields (images, confidence), not a study's settings.
    ("annotation/views/plan.py", "n_images"),
    ("annotation/views/plan.py", "confidence"),
    ("templates/plan/study.html", "n_images"),
    ("templates/plan/study.html", "confidence"),
    # The judges' report's bootstrap setting, a judge-alignment option of every mode.
    ("annotation/services/judges_export.py", "bootstrap_resamples"),
    # The dashboard's generic ``panel.context`` (a mode panel's template context), not the
    # context mode's name.
    ("templates/studies/_dashboard.html", "context"),
}


def mode_apps() -> dict[str, str]:
    """``{mode name: package}`` of every installed mode app (test-only modes left out)."""
    found = {}
    for name, mode in MODES.items():
        module = type(mode).__module__
        if module.startswith("annotation.modes."):
            found[name] = ".".join(module.split(".")[:3])
    return found


def shared_names() -> set[str]:
    """Columns of the models outside the mode packages."""
    return {
        field.name
        for model in apps.get_models()
        if not model.__module__.startswith("annotation.modes.")
        for field in model._meta.get_fields()
    }


def own_setting_keys(packages: dict[str, str]) -> set[str]:
    """Settings fields declared in a mode's package and in no shared class."""
    inside = set(packages.values())
    declared_by: dict[str, set[str]] = {}
    for name in packages:
        settings_class = MODES[name].settings_class
        for field in dataclasses.fields(settings_class):
            owners = {
                klass.__module__
                for klass in settings_class.__mro__
                if field.name in klass.__dict__.get("__annotations__", {})
            }
            declared_by.setdefault(field.name, set()).update(owners)
    return {
        key
        for key, owners in declared_by.items()
        if all(".".join(owner.split(".")[:3]) in inside for owner in owners)
    } - shared_names()


def own_columns() -> set[str]:
    """Fields of the models the mode packages define, but names every model has (``id``)
    or a shared model has too (``user``)."""
    return {
        field.name
        for model in apps.get_models()
        if model.__module__.startswith("annotation.modes.")
        for field in model._meta.get_fields()
    } - shared_names()


def outside_the_modes(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    in_a_mode = parts[:2] == ("annotation", "modes") and (ROOT / Path(*parts[:3])).is_dir()
    return not in_a_mode and "migrations" not in parts and "__pycache__" not in parts


def python_constants(words: set[str]) -> list[tuple[str, int, str]]:
    found = []
    for folder in PYTHON:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not outside_the_modes(path):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in words:
                    found.append((str(path.relative_to(ROOT)), node.lineno, node.value))
    return found


def markup_words(words: set[str]) -> list[tuple[str, int, str]]:
    """Quoted words and ``.word`` lookups in templates, stylesheets and scripts."""
    alternatives = "|".join(sorted(map(re.escape, words)))
    pattern = re.compile(rf"[\"']({alternatives})[\"']|\.({alternatives})\b")
    found = []
    for folder in MARKUP:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".html", ".js", ".css") or not outside_the_modes(path):
                continue
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, 1):
                for match in pattern.finditer(line):
                    found.append((str(path.relative_to(ROOT)), number, match[1] or match[2]))
    return found


def test_the_scan_knows_every_installed_mode_and_their_own_keys():
    packages = mode_apps()
    assert len(packages) >= 5 and all(p.startswith("annotation.modes.") for p in packages.values())
    keys = own_setting_keys(packages)
    # A key every crowd study has is shared; a key of one mode's protocol is its own.
    assert "completion_code" not in keys and "target" not in keys
    assert keys, "no mode declares a setting of its own: the scan would find nothing"


def test_nothing_outside_the_modes_names_a_mode_or_its_own_keys():
    packages = mode_apps()
    words = set(packages) | own_setting_keys(packages) | own_columns()
    found = [
        f"{file}:{line} {word!r}"
        for file, line, word in python_constants(words) + markup_words(words)
        if (file, word) not in ALLOWED
    ]
    assert found == []


def test_nothing_outside_the_modes_keys_anything_by_the_mode():
    for folder in PYTHON:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not outside_the_modes(path):
                continue
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"\[\s*(study|self|locked)\.mode\s*\]", text), path
            assert not re.search(r"\.get\(\s*(study|self)\.mode\b", text), path
            assert not re.search(r"\.mode\s*(==|!=|in)\s", text), path


def test_the_scan_finds_a_name_in_code_and_in_a_template(tmp_path, monkeypatch):
    module = tmp_path / "annotation" / "views" / "sample.py"
    template = tmp_path / "templates" / "sample.html"
    module.parent.mkdir(parents=True)
    template.parent.mkdir(parents=True)
    module.write_text('if study.mode_name == "vicr":\n    pass\n')
    template.write_text('<p>{{ study.settings.probation_pairs }}</p>\n{% if x == "arena" %}')
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    words = {"vicr", "arena", "probation_pairs"}
    assert python_constants(words) == [("annotation/views/sample.py", 1, "vicr")]
    assert markup_words(words) == [
        ("templates/sample.html", 1, "probation_pairs"),
        ("templates/sample.html", 2, "arena"),
    ]
