"""Add a published metric's or judge's per-caption scores to a study as a metric column.

    manage.py import_metric_scores 12 fleur_flickr8k_expert.txt --name FLEUR --format fleur
    manage.py import_metric_scores 13 fleur_pascal_HC.txt fleur_pascal_HI.txt ... --name FLEUR
    manage.py import_metric_scores 12 scores.csv --name "CLIP-S (paper)" --format csv

The column sits beside the metrics the lab computes; ``compute_metrics 12 --report-only``
(or any metrics job) puts it in the meta-evaluation report. Formats and matching are in
``annotation.services.imports.metric_scores``.
"""

import shlex
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.imports.metric_scores import FORMATS, metric_scores_import


class Command(BaseCommand):
    help = "Import per-caption scores (FLEUR's files, or CSV image,caption,score) as a column."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("files", nargs="+", type=Path)
        parser.add_argument("--name", required=True, help="Column name, e.g. FLEUR.")
        parser.add_argument("--format", choices=FORMATS, default="fleur")

    def handle(self, *args, study_id: int, files, name: str, format: str, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        try:
            done = metric_scores_import(study=study, paths=files, name=name, fmt=format)
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        line = (
            f"Study {study.pk}: {done.name} stored for {done.scored} captions "
            f"({done.unscored} captions without a score)."
        )
        if done.pairs:
            line += (
                f" {done.pairs} pairs; the file's label differs from the study's in "
                f"{done.label_differs}. Both are kept: reports score against the study's "
                f"unless asked for the file's (compute_metrics --labels {shlex.quote(done.name)})."
            )
        self.stdout.write(line)
