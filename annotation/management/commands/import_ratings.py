"""Load a published dataset or log as a closed study, so its report can be computed.

    manage.py import_ratings --format flickr8k-expert flickr8k_expert.json [--owner rita]
    manage.py import_ratings --format vicr-csv VICR_Sample250.csv --name "VICR sample"
    manage.py import_ratings --format pascal-50s pascal_50s.json
    manage.py import_ratings --format nebula nebula_test.json

    manage.py import_ratings --format battles arena_battles.jsonl
    manage.py import_ratings --format battles arena_battles.jsonl \
        --setting anchor_system=gpt-4-0613 --setting anchor_score=1200
    manage.py import_ratings --format iiw-sxs ../shared/datasets/imageinwords/DCI_Test.jsonl
    manage.py import_ratings --format mqm-tsv ../shared/datasets/wmt-mqm-ted/mqm_ted_ende.tsv
    manage.py import_ratings --format esa-csv 240315rc5ESA.scores.csv --batches batches.json

Each format is read by the importer of the mode it belongs to (``annotation/modes/<mode>/
importers.py``, which describes the format and what the study holds) and stored by
``annotation.services.imports.releases.release_import``: rating datasets become closed VICR
studies, battle logs (LMArena's JSON Lines) and ImageInWords' side-by-side files closed
arena studies (the command says what the file lacks: images, texts, an overall verdict),
MQM TSV files and ESA campaign CSVs closed spans studies (no images: each item shows its
source text), Pascal-50S (pairwise judgments with their references) and Nebula (captions,
references, released human scores) closed studies for the metric lab. ``--setting`` sets a
report setting of the study's mode (the arena's anchor, a campaign's error weights); every
report setting can be changed later on the study's settings page too.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import User
from annotation.services.imports.releases import (
    release_formats,
    release_import,
    settings_from_pairs,
)


class Command(BaseCommand):
    help = (
        "Load a published dataset as a closed study: ratings (Flickr8k-Expert, VICR CSV), "
        "Pascal-50S pairs, or arena battles (LMArena JSON Lines, ImageInWords SxS)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--format",
            required=True,
            choices=release_formats(),
        )
        parser.add_argument(
            "--batches", type=Path, help="esa-csv: the campaign's batches JSON (the texts)."
        )
        parser.add_argument(
            "--owner", help="Researcher who owns the study (default: the first superuser)."
        )
        parser.add_argument("--name", default="", help="Study name (default: the file name).")
        parser.add_argument(
            "--setting",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="A report setting of the study (repeatable), e.g. anchor_system=gpt-4; the "
            "value is read as JSON, else as text.",
        )

    def handle(
        self,
        *args,
        file: Path,
        format: str,
        owner: str | None,
        name: str,
        batches: Path | None = None,
        setting: list[str] | None = None,
        **options,
    ):
        if owner:
            user = User.objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user called {owner!r}")
        else:
            user = User.objects.filter(is_superuser=True).order_by("pk").first()
            if user is None:
                raise CommandError("no superuser exists; name the owner with --owner")
        try:
            done = release_import(
                owner=user,
                path=file,
                fmt=format,
                name=name,
                settings=settings_from_pairs(setting or []),
                batches=batches,
            )
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        first, *rest = done.summary
        self.stdout.write(f"Study {done.study.pk} ({done.study.name}): {first}")
        for line in rest:
            self.stdout.write(line)
