"""Import ESA-AI suggestions: pre-filled error spans from a judge or metric, for annotators
of an error-span study to accept or reject (the study's ``suggestions`` setting shows them)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.imports.item_files import item_file_import


class Command(BaseCommand):
    help = (
        "Store suggested error spans for a study's captions from JSON Lines: one object per "
        'caption, {"caption_id": ID, "spans": [{"start", "end", "severity", "category"}]}.'
    )

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--source", required=True, help="Name of the judge or metric that made them."
        )

    def handle(self, *args, study_id: int, file: Path, source: str, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        try:
            done = item_file_import(study=study, path=file, name="span-suggestions", source=source)
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        for sentence in done.summary:
            self.stdout.write(sentence)
