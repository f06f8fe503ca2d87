"""Import one automatic judge's answers beside a study's human judgments.

    manage.py import_judge 12 fleur.jsonl --judge FLEUR --model llava-1.5-13b --prompt-version v1

JSON Lines, one answer a line, keyed by caption (or pair) ids or by image and system
(``docs/judges.md``). A file with any bad line imports nothing and lists every bad line.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import Judge, Study
from annotation.services.judges import judge_import


class Command(BaseCommand):
    help = "Import a judge's answers (JSON Lines) into a study, apart from human judgments."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("file", type=Path)
        parser.add_argument("--judge", required=True, help="The judge's name.")
        parser.add_argument("--model", default="", help="The model behind it.")
        parser.add_argument("--prompt-version", default="", help="The prompt version asked.")
        parser.add_argument("--kind", choices=Judge.Kind.values, default=Judge.Kind.IMPORTED)

    def handle(self, *args, study_id: int, file: Path, judge: str, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(
                f"{file}: not a readable UTF-8 file ({exc.__class__.__name__})."
            ) from None
        try:
            counts = judge_import(
                study=study,
                text=text,
                name=judge,
                model=options["model"],
                prompt_version=options["prompt_version"],
                kind=options["kind"],
            )
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Study {study.pk}: {counts['answers']} answers of judge {judge!r} imported "
                f"(judge id {counts['judge']})."
            )
        )
