"""Everything a mode knows lives in its package (issue 22), checked by machine.

- no module under ``annotation/modes/`` writes to the database (they return what to write);
- (no code outside the mode packages names a mode: ``test_mode_scan.py``);
- a mode registered at run time is a choice of ``Study.mode`` and opens a study through
  the real pages with no migration.
"""

import ast
import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Caption, Image, Item, Study
from annotation.modes.base import Mode, Outcome, register
from annotation.registry import MODES, mode_choices
from tests.factories.core import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
#: Methods that write rows: a mode calls none of them.
WRITES = {"save", "bulk_create", "bulk_update", "update", "delete", "create", "get_or_create"}


def python_files(folder: Path):
    return sorted(p for p in folder.rglob("*.py") if "migrations" not in p.parts)


def in_memory_names(function: ast.AST) -> set[str]:
    """Names the function binds to a set or dict it builds (their .update is no write)."""
    names = set()
    for node in ast.walk(function):
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        built = isinstance(value, ast.Dict | ast.Set | ast.DictComp | ast.SetComp) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in ("set", "dict")
        )
        if built:
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def writes_in(path: Path) -> list[str]:
    """``file:line .method(`` of every call of a write method, but ``.update`` of a set or
    dict the same function built."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] or [tree]
    seen = set()
    for scope in scopes:
        local = in_memory_names(scope)
        for node in ast.walk(scope):
            if id(node) in seen or not isinstance(node, ast.Call):
                continue
            seen.add(id(node))
            func = node.func
            if not isinstance(func, ast.Attribute) or func.attr not in WRITES:
                continue
            receiver = func.value
            if func.attr == "update" and isinstance(receiver, ast.Name) and receiver.id in local:
                continue
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{func.attr}(")
    return found


def test_no_module_under_annotation_modes_writes():
    found = [w for path in python_files(ROOT / "annotation" / "modes") for w in writes_in(path)]
    assert found == []


def test_the_write_check_finds_a_write_and_lets_a_set_update_pass(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(items, qs):\n"
        "    seen = set()\n"
        "    seen.update(items)\n"
        "    Item.objects.bulk_create(items)\n"
        "    qs.update(target=1)\n"
        "    items[0].save()\n"
    )
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        assert writes_in(sample) == [
            "sample.py:4 .bulk_create(",
            "sample.py:5 .update(",
            "sample.py:6 .save(",
        ]
    finally:
        ROOT = root


class ThrowawayMode(Mode):
    """A mode no migration has heard of: one item per caption, any non-empty answer."""

    name = "test-throwaway"
    label = "Throwaway (tests only)"

    def build_items(self, study):
        return [
            Item(study=study, kind="say", image_id=c.image_id, spec={"caption": c.pk}, target=1)
            for c in Caption.objects.filter(study=study).order_by("id")
        ]

    def validate(self, assignment, part, data):
        return {"text": str(data.get("text", ""))[:10]}

    def after_submit(self, participant, judgment):
        return Outcome()


@pytest.fixture
def throwaway():
    register(ThrowawayMode)
    try:
        yield MODES[ThrowawayMode.name]
    finally:
        del MODES[ThrowawayMode.name]


@pytest.mark.django_db
def test_a_mode_registered_at_run_time_opens_a_study_with_no_migration(
    client, researcher, throwaway
):
    assert (ThrowawayMode.name, ThrowawayMode.label) in mode_choices()
    api = APIClient()
    api.force_authenticate(researcher)
    created = api.post(
        reverse("api_studies"), {"name": "Throwaway", "mode": ThrowawayMode.name}, format="json"
    )
    assert created.status_code == 201, created.content
    study = Study.objects.get(pk=created.json()["id"])
    for number in range(2):
        image = Image.objects.create(
            study=study, name=f"t{number}.jpg", sha256=f"{number:064x}", width=1, height=1
        )
        Caption.objects.create(study=study, image=image, system="s", raw_text="a", text="a")
    client.force_login(researcher)

    opened = client.post(reverse("study_status", args=[study.pk]), {"action": "open"})
    page = client.get(reverse("study_detail", args=[study.pk]))

    assert opened.status_code in (200, 302), opened.content.decode()[:500]
    study.refresh_from_db()
    assert study.status == Study.Status.LIVE
    assert study.get_mode_display() == ThrowawayMode.label
    assert page.status_code == 200 and ThrowawayMode.label in page.content.decode()
    assert sorted(study.items.values_list("spec__caption", flat=True)) == sorted(
        study.captions.values_list("pk", flat=True)
    )
    out = io.StringIO()
    call_command("makemigrations", "annotation", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_the_import_contracts_hold():
    """``lint-imports`` (pyproject.toml's [tool.importlinter], also run by ``make test``)."""
    command = Path(sys.executable).with_name("lint-imports")
    if not command.exists():
        skip_or_fail("import-linter is missing: pip install -e '.[test]'")
    done = subprocess.run([str(command)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
