"""Load a THumB 1.0-format judgments file into a new, closed thumb study."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.services.imports.releases import release_import, settings_from_pairs

#: The format the THumB mode's importer reads the release as.
THUMB_RELEASE = "thumb-1.0"


class Command(BaseCommand):
    help = (
        "Import THumB 1.0 judgments (JSON Lines: SYS, seg_id, hyp, image, P, R, Fl, Con, Inc; "
        "penalties <= 0) as a closed thumb study with one virtual annotator."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "jsonl", type=Path, help="The release file, e.g. mscoco_THumB-1.0.jsonl"
        )
        parser.add_argument(
            "--owner", help="Username of the owning researcher (default: the first superuser)."
        )
        parser.add_argument("--name", default="", help="Study name.")
        parser.add_argument(
            "--setting",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="A report setting of the study (repeatable), e.g. bootstrap_resamples=2000; "
            "the value is read as JSON, else as text.",
        )

    def handle(self, *args, jsonl: Path, owner: str | None, name: str, setting=None, **options):
        if not jsonl.is_file():
            raise CommandError(f"No such file: {jsonl}")
        users = get_user_model().objects
        user = (
            users.filter(username=owner).first()
            if owner
            else users.filter(is_superuser=True).order_by("id").first()
        )
        if user is None:
            raise CommandError(f"No user {owner!r}." if owner else "No superuser; pass --owner.")
        try:
            study = release_import(
                owner=user,
                path=jsonl,
                fmt=THUMB_RELEASE,
                name=name,
                settings=settings_from_pairs(setting or []),
            ).study
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        images = study.images.count()
        captions = study.captions.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported study {study.pk} ({study.name}): {images} images, {captions} captions, "
                f"closed. Compute its report on the report page."
            )
        )
