"""No file path of media, staging or exports outside the storage layer (issue 41).

A scan of ``annotation/``'s code. A media, upload or export file can only be reached as a
path in three ways, and each is allowed only where listed:

- the settings that name those folders (``MEDIA_ROOT``, ``CAPEVAL_EXPORT_DIR``,
  ``VAR_DIR``, where uploads used to wait): only ``annotation/storage.py``, the storage
  layer itself;
- ``storage.local_path``, the local backend's own path of a stored name: only where a
  node streams or writes a file of its local backend, listed in ``LOCAL_PATH_USERS``;
- a ``FileSystemStorage``'s ``.path()``: only the storage layer.

Everything else reads and writes through ``annotation/storage.py`` (names, never paths), so
it works the same with an object store shared by several nodes. Files the platform reads
that are not stored data (a command's input file, a mode's guidelines, the CLIP encoders'
folder, the job's own scratch folder from ``tempfile``) are not media paths and not
scanned for.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "annotation"
#: The storage layer: the only module that knows where files are.
STORAGE_LAYER = {"annotation/storage.py"}
#: The folders' settings.
FOLDER_SETTINGS = {"MEDIA_ROOT", "CAPEVAL_EXPORT_DIR", "VAR_DIR"}
#: Who may ask the local backend for a path, and why.
LOCAL_PATH_USERS = {
    # Streams a local media file with static.serve (Last-Modified, If-Modified-Since);
    # with an object store it redirects to a presigned link instead.
    "annotation/views/media.py": "serve the local media folder",
    # Writes an export in place in the local export folder (fsync, then rename: a full
    # disk is caught before the name appears) and removes killed workers' parts there;
    # with an object store it writes in its scratch folder and stores the file whole.
    "annotation/services/exports/files.py": "write into the local export folder",
}
#: Where the embedded demo keeps its broker folder and worker log (not stored data).
VAR_DIR_USERS = {"annotation/management/commands/demo_server.py": "the demo's broker and log"}


def findings(root: Path = CODE) -> list[str]:
    """Every use of a folder setting, ``local_path`` or ``.path()`` outside its list."""
    found: list[tuple[str, int, str]] = []
    for file in sorted(root.rglob("*.py")):
        relative = file.relative_to(root.parent).as_posix()
        if relative in STORAGE_LAYER or "/migrations/" in relative:
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=relative)
        for node in ast.walk(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Attribute) and node.attr in FOLDER_SETTINGS:
                if node.attr == "VAR_DIR" and relative in VAR_DIR_USERS:
                    continue
                found.append((relative, line, f"settings.{node.attr}"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = node.func.attr
                if name == "local_path" and relative not in LOCAL_PATH_USERS:
                    found.append((relative, line, "storage.local_path"))
                if name == "path" and _is_storage(node.func.value):
                    found.append((relative, line, "a storage's .path()"))
    return [f"{relative}:{line}: {what}" for relative, line, what in sorted(found)]


def _is_storage(node: ast.expr) -> bool:
    """``storage.media().path(...)``, ``default_storage.path(...)``, ``storages[...]...``."""
    text = ast.unparse(node)
    return "storage" in text.lower()


def test_no_media_staging_or_export_path_outside_the_storage_layer():
    assert findings() == []


def test_the_allow_lists_name_files_that_exist():
    for relative in {*LOCAL_PATH_USERS, *VAR_DIR_USERS, *STORAGE_LAYER}:
        assert (ROOT / relative).is_file(), relative


def test_the_scan_finds_each_way_in(tmp_path):
    # The scan itself can fail: a module of each kind it must catch.
    package = tmp_path / "annotation"
    (package / "services").mkdir(parents=True)
    (package / "services" / "bad.py").write_text(
        "from pathlib import Path\n"
        "from django.conf import settings\n"
        "from django.core.files.storage import default_storage\n"
        "from annotation import storage\n"
        "def a(name):\n"
        "    return (Path(settings.MEDIA_ROOT) / name).read_bytes()\n"
        "def b(name):\n"
        "    return open(storage.local_path(name), 'rb')\n"
        "def c(name):\n"
        "    return default_storage.path(name)\n"
        "def d():\n"
        "    return Path(settings.CAPEVAL_EXPORT_DIR) / 'x.csv'\n",
        encoding="utf-8",
    )
    found = findings(package)
    assert [line.split(": ", 1)[1] for line in found] == [
        "settings.MEDIA_ROOT",
        "storage.local_path",
        "a storage's .path()",
        "settings.CAPEVAL_EXPORT_DIR",
    ]
