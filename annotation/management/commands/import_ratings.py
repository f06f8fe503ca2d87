"""Load a published rating dataset as a closed VICR study, so its report can be computed.

    manage.py import_ratings --format flickr8k-expert flickr8k_expert.json [--owner rita]
    manage.py import_ratings --format vicr-csv VICR_Sample250.csv --name "VICR sample"
    manage.py import_ratings --format pascal-50s pascal_50s.json
    manage.py import_ratings --format nebula nebula_test.json

    manage.py import_ratings --format battles arena_battles.jsonl
    manage.py import_ratings --format iiw-sxs ../shared/datasets/imageinwords/DCI_Test.jsonl
    manage.py import_ratings --format mqm-tsv ../shared/datasets/wmt-mqm-ted/mqm_ted_ende.tsv
    manage.py import_ratings --format esa-csv 240315rc5ESA.scores.csv --batches batches.json

Battle logs (LMArena's JSON Lines) and ImageInWords' side-by-side files become closed
arena studies (``annotation.services.imports.battles``); the command says what the file
lacks (images, texts, an overall verdict).

MQM TSV files and ESA campaign CSVs become closed spans studies
(``annotation.services.imports.spans``); they have no images, so each item shows its
source text.

Pascal-50S (pairwise judgments with their references) becomes a closed study of pairs for
the metric lab (``annotation.services.imports.pascal50s.dataset_import_pascal50s``), and
Nebula (captions, references, released human scores) a closed study of scored captions
(``annotation.services.imports.nebula``).

The formats and what the study holds are described in ``annotation.services.datasets``.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import User
from annotation.services.datasets import RATING_FORMATS, dataset_import_ratings
from annotation.services.imports.battles import BATTLE_FORMATS, dataset_import_battles
from annotation.services.imports.nebula import NEBULA, dataset_import_nebula
from annotation.services.imports.pascal50s import dataset_import_pascal50s
from annotation.services.imports.spans import SPAN_FORMATS, dataset_import_spans

#: Pairwise judgments for the metric lab (a closed study of pairs, not of ratings).
PASCAL_50S = "pascal-50s"


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
            choices=sorted([*RATING_FORMATS, PASCAL_50S, NEBULA, *BATTLE_FORMATS, *SPAN_FORMATS]),
        )
        parser.add_argument(
            "--batches", type=Path, help="esa-csv: the campaign's batches JSON (the texts)."
        )
        parser.add_argument(
            "--owner", help="Researcher who owns the study (default: the first superuser)."
        )
        parser.add_argument("--name", default="", help="Study name (default: the file name).")

    def handle(
        self,
        *args,
        file: Path,
        format: str,
        owner: str | None,
        name: str,
        batches: Path | None = None,
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
        if format in SPAN_FORMATS:
            try:
                spans = dataset_import_spans(
                    owner=user, path=file, fmt=format, batches=batches, name=name
                )
            except ServiceError as exc:
                raise CommandError(exc.report()) from exc
            self.stdout.write(
                f"Study {spans.study.pk} ({spans.study.name}): {spans.judgments} judgments, "
                f"{spans.marks} marks, {spans.study.captions.count()} texts, closed. "
                "No images: each item shows its source text."
            )
            return
        if format in BATTLE_FORMATS:
            try:
                done = dataset_import_battles(owner=user, path=file, fmt=format, name=name)
            except ServiceError as exc:
                raise CommandError(exc.report()) from exc
            self.stdout.write(
                f"Study {done.study.pk} ({done.study.name}): {done.battles} battles, "
                f"{done.study.captions.count()} captions, closed."
            )
            for what in done.missing:
                self.stdout.write(f"Missing: {what}.")
            return
        if format == NEBULA:
            try:
                study = dataset_import_nebula(owner=user, path=file, name=name)
            except ServiceError as exc:
                raise CommandError(exc.report()) from exc
            self.stdout.write(
                f"Study {study.pk} ({study.name}): {study.captions.count()} captions, "
                f"{study.references.count()} references, {study.dataset_scores.count()} human "
                "scores, closed. Compute its metrics on the Metrics page or with compute_metrics."
            )
            return
        try:
            if format == PASCAL_50S:
                study = dataset_import_pascal50s(owner=user, path=file, name=name)
            else:
                study = dataset_import_ratings(owner=user, path=file, fmt=format, name=name)
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        if format == PASCAL_50S:
            pairs = study.pair_judgments.count()
            self.stdout.write(
                f"Study {study.pk} ({study.name}): {pairs} pairs, "
                f"{study.captions.count()} captions, {study.references.count()} references, "
                "closed. Compute its metrics on the Metrics page or with compute_metrics."
            )
            return
        captions = study.captions.count()
        ratings = study.judgments.count()
        self.stdout.write(
            f"Study {study.pk} ({study.name}): {captions} captions, {ratings} ratings, closed."
        )
