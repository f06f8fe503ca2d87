"""Import images and captions into a study from the shell, synchronously (no Celery)."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.errors import ServiceError
from annotation.models import Caption, Study
from annotation.registry import caption_purpose_choices, mode_names
from annotation.services.imports import COCO_FORMAT, CSV_FORMAT, ImportSummary, study_import
from annotation.services.studies import study_create


class Command(BaseCommand):
    help = (
        "Import images (folder, zip or files) and a captions file (CSV or COCO results JSON) "
        "into a draft study, all or nothing; every problem is printed with its line number."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_argument_group("study")
        target.add_argument("--study", type=int, help="Id of an existing draft study.")
        target.add_argument("--create", action="store_true", help="Create a new study.")
        target.add_argument("--name", help="Name of the study to create.")
        target.add_argument("--mode", choices=mode_names(), help="Mode of the new study.")
        target.add_argument("--owner", help="Username of the new study's owner (a researcher).")
        parser.add_argument(
            "--images",
            action="append",
            default=[],
            type=Path,
            help="Folder, zip archive or image file; repeat for several.",
        )
        parser.add_argument("--captions", type=Path, help="Captions file (CSV or COCO JSON).")
        parser.add_argument(
            "--format",
            choices=[CSV_FORMAT, COCO_FORMAT],
            help="Captions format (default: coco for .json files, csv otherwise).",
        )
        parser.add_argument(
            "--system",
            default="",
            help="System name: required for COCO (default: the captions file name without "
            "extension); for CSV only when the file has no system column.",
        )
        parser.add_argument(
            "--coco-images",
            type=Path,
            help="COCO JSON whose images list maps image_id to file_name.",
        )
        parser.add_argument(
            "--purpose",
            choices=[value for value, _ in caption_purpose_choices()],
            default=Caption.Purpose.STUDY,
            help="study (default), or one of the study's mode's own sets of captions.",
        )

    def handle(self, *args, **options) -> None:
        # A study created here is rolled back with a failed import: all or nothing.
        with transaction.atomic():
            study, summary = self._import(options)
        self.stdout.write(
            self.style.SUCCESS(f"Study {study.pk} ({study.name}): {summary.as_text()}")
        )

    def _import(self, options) -> tuple[Study, ImportSummary]:
        study = self._study(options)
        captions: Path | None = options["captions"]
        caption_format = options["format"] or ""
        system = options["system"]
        if captions is not None:
            if not captions.is_file():
                raise CommandError(f"No such captions file: {captions}")
            if not caption_format:
                caption_format = COCO_FORMAT if captions.suffix.lower() == ".json" else CSV_FORMAT
            if caption_format == COCO_FORMAT and not system:
                system = captions.stem
        for source in options["images"]:
            if not source.exists():
                raise CommandError(f"No such images folder or file: {source}")
        try:
            summary = study_import(
                study=study,
                image_sources=options["images"],
                captions=captions,
                caption_format=caption_format or CSV_FORMAT,
                system=system,
                purpose=options["purpose"],
                coco_images=options["coco_images"],
                progress=None,
            )
        except ServiceError as exc:
            # Every problem with its line in the error itself, as import_ratings says them,
            # so a caller of call_command reads them too (not only a terminal's stderr).
            raise CommandError(exc.report()) from exc
        return study, summary

    def _study(self, options) -> Study:
        if options["create"]:
            if options["study"]:
                raise CommandError("Give either --study or --create, not both.")
            missing = [f"--{k}" for k in ("name", "mode", "owner") if not options[k]]
            if missing:
                raise CommandError(f"--create needs {', '.join(missing)}.")
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"No user named {options['owner']!r}.")
            try:
                study = study_create(owner=owner, name=options["name"], mode=options["mode"])
            except ServiceError as exc:
                raise CommandError(exc.message) from exc
            return study
        if not options["study"]:
            raise CommandError("Give --study <id>, or --create --name ... --mode ... --owner ...")
        study = Study.objects.filter(pk=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with id {options['study']}.")
        return study
