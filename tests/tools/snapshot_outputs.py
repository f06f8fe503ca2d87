"""Write every demo study's report JSON and exports to a folder, to compare two versions.

Issue 44 moves code without changing what users get. Run this on one copy of a demo
database with the old code and on another copy with the new code, then compare the two
folders (``diff -r``): every byte must match. Both runs read the same rows, so timestamps
and ids are the same on both sides.

    CAPEVAL_VAR_DIR=/tmp/snap/old python manage.py migrate
    CAPEVAL_VAR_DIR=/tmp/snap/old python manage.py load_demo
    cp -r /tmp/snap/old /tmp/snap/new
    CAPEVAL_VAR_DIR=/tmp/snap/old python -m tests.tools.snapshot_outputs /tmp/snap/out-old
    (check out the new code)
    CAPEVAL_VAR_DIR=/tmp/snap/new python manage.py migrate
    CAPEVAL_VAR_DIR=/tmp/snap/new python -m tests.tools.snapshot_outputs /tmp/snap/out-new
    diff -r /tmp/snap/out-old /tmp/snap/out-new

Datasheets have their ``exported_at`` blanked, the one value that differs between two runs
of the same code. Exports are CSV and JSONL of every table the study has, with their
datasheets; Parquet and the dataset zip carry the same rows in containers that stamp their
own write time.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(out: Path) -> None:
    sys.path.insert(0, str(REPO / "platform"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    import django

    django.setup()
    from annotation.errors import ServiceError
    from annotation.models import Study
    from annotation.modes import get_mode
    from annotation.services.exports import export_file
    from annotation.services.exports.files import study_tables

    out.mkdir(parents=True, exist_ok=True)
    for study in Study.objects.order_by("pk"):
        mode = get_mode(study.mode)
        try:
            report = mode.report.run(study, lambda *args, **kwargs: None)
        except ServiceError as exc:  # a live study with no answers yet: its refusal
            report = {"refused": exc.report()}
        (out / f"study-{study.pk}-report.json").write_text(
            json.dumps(report, indent=1, sort_keys=True, default=str)
        )
        for table in study_tables(study):
            for export_format in ("csv", "jsonl"):
                path = out / f"study-{study.pk}-{table}.{export_format}"
                export_file(study=study, path=path, export_format=export_format, table=table)
                _unstamp(path.with_name(path.name.rsplit(".", 1)[0] + ".datasheet.json"))
        print(f"study {study.pk} ({study.mode}): report and {len(study_tables(study))} tables")


def _unstamp(datasheet: Path) -> None:
    """Blank the datasheet's ``exported_at``: the one value that differs between two runs."""
    if datasheet.is_file():
        sheet = json.loads(datasheet.read_text())
        sheet["exported_at"] = "(blanked by snapshot_outputs)"
        datasheet.write_text(json.dumps(sheet, indent=2, sort_keys=True))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
