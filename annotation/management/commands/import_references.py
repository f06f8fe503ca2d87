"""Import reference captions for a study's images (the metric lab's references).

    manage.py import_references 12 refs.csv                 # header image,reference
    manage.py import_references 12 captions_val2014.json    # COCO captions JSON
    manage.py import_references 12 mscoco_references.json  # THumB 1.0 (JSON Lines by seg_id)

A file with any bad row imports nothing and lists every bad row with its line.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.imports.references import FORMATS, references_import


class Command(BaseCommand):
    help = "Import reference captions (CSV image,reference; COCO captions JSON; THumB JSONL)."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--format", choices=FORMATS, default="", help="Default: told from the file."
        )

    def handle(self, *args, study_id: int, file: Path, format: str, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        if not file.is_file():
            raise CommandError(f"No such file: {file}")
        try:
            counts = references_import(study=study, path=file, fmt=format)
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        again = counts["already_there"]
        self.stdout.write(
            self.style.SUCCESS(
                f"Study {study.pk}: {counts['imported']} references imported"
                + (f", {again} already there." if again else ".")
            )
        )
