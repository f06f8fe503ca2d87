"""Export a study to a file: the same service as the export page and the API."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.exports import EXPORT_FORMATS, EXPORT_TABLES, export_file


class Command(BaseCommand):
    help = (
        "Export a study's judgments (or participants) as CSV, JSONL, Parquet or a dataset "
        "folder (zip); CSV, JSONL and Parquet get a <name>.datasheet.json beside them."
    )

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("--format", choices=EXPORT_FORMATS, default="csv")
        parser.add_argument("--output", type=Path, required=True, help="File to write.")
        # No choices: a mode may add tables (Export.extra_tables); the service checks them.
        parser.add_argument(
            "--table",
            default="judgments",
            help=f"{', '.join(EXPORT_TABLES)} or a table the study's mode adds.",
        )
        parser.add_argument(
            "--raw-ids",
            action="store_true",
            help="Add Prolific/MTurk worker and submission ids to the participants table.",
        )
        parser.add_argument(
            "--images", action="store_true", help="Dataset folder: add the display images."
        )

    def handle(self, *args, study_id: int, output: Path, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        if not output.parent.is_dir():
            raise CommandError(f"No folder {output.parent}.")
        try:
            summary = export_file(
                study=study,
                path=output,
                export_format=options["format"],
                table=options["table"],
                raw_ids=options["raw_ids"],
                images=options["images"],
            )
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        sheet = f" and {summary.datasheet}" if summary.datasheet else ""
        self.stdout.write(f"Wrote {summary.rows:,} rows to {summary.path}{sheet}")
