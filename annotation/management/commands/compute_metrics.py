"""Compute the metric lab's caption metrics and meta-evaluation report of a study.

    manage.py compute_metrics 12
    manage.py compute_metrics 12 --metrics "CIDEr (pycocoevalcap)" "BLEU-4 (sacrebleu)"
    manage.py compute_metrics 12 --metrics "CIDEr (pycocoevalcap)" --cider-documents candidates
    manage.py compute_metrics 12 --report-only     # the imported columns (FLEUR ...) only
    manage.py compute_metrics 13 --report-only --labels FLEUR   # Pascal-50S: FLEUR's labels

The work is a metrics job like the one the Metrics page starts: it runs here when Celery is
eager (no REDIS_URL), on a worker otherwise; the command follows its progress until it ends.
"""

import time

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.models import Job, Study
from annotation.services.metrics import (
    CIDER_CONVENTIONS,
    CIDER_DEFAULT,
    RESAMPLES,
    metrics_request,
)
from annotation.services.metrics_clip import CLIP_NAMES
from annotation.services.metrics_labels import DATASET
from annotation.tasks import enqueue
from rubrics.metrics import METRICS


class Command(BaseCommand):
    help = "Compute BLEU, ROUGE-L, METEOR, CIDEr ... for a study's captions, and the report."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument(
            "--metrics",
            nargs="+",
            choices=[*METRICS, *CLIP_NAMES],
            metavar="NAME",
            help="Metric names (default: all this machine can compute): "
            f"{', '.join([*METRICS, *CLIP_NAMES])}.",
        )
        parser.add_argument(
            "--resamples",
            type=int,
            default=RESAMPLES,
            help=f"Bootstrap resamples per correlation (0 to {RESAMPLES}).",
        )
        parser.add_argument(
            "--cider-documents",
            choices=list(CIDER_CONVENTIONS),
            default=CIDER_DEFAULT,
            help="CIDEr's document frequencies: "
            + "; ".join(f"{k}: {v}" for k, v in CIDER_CONVENTIONS.items())
            + f" (default {CIDER_DEFAULT}).",
        )
        parser.add_argument(
            "--labels",
            default=DATASET,
            help="The imported pairs' human labels pairwise accuracy scores against: "
            f"{DATASET} (those imported with the pairs, the default) or the name of an "
            "imported column whose pair files carried labels (FLEUR).",
        )
        parser.add_argument(
            "--report-only",
            action="store_true",
            help="Compute no metric: report the imported columns (import_metric_scores).",
        )
        parser.add_argument(
            "--no-wait", action="store_true", help="Queue the job and return at once."
        )

    def handle(
        self,
        *args,
        study_id: int,
        metrics,
        resamples: int,
        no_wait: bool,
        cider_documents: str = CIDER_DEFAULT,
        report_only: bool = False,
        labels: str = DATASET,
        **options,
    ):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        if report_only and metrics:
            raise CommandError("--report-only computes no metric; leave out --metrics.")
        try:
            job = enqueue(
                metrics_request(
                    study=study,
                    user=None,
                    names=[] if report_only else metrics,
                    resamples=resamples,
                    cider_documents=cider_documents,
                    labels=labels,
                )
            )
        except ServiceError as exc:
            raise CommandError(exc.report()) from exc
        job.refresh_from_db()
        shown = ""
        while not no_wait and not job.is_finished:
            line = f"{job.progress}% {job.message}"
            if line != shown:
                self.stdout.write(line)
                shown = line
            time.sleep(1)
            job.refresh_from_db()
        if job.status == Job.Status.FAILED:
            raise CommandError(
                "\n".join([f"Job {job.pk} failed: {job.error}", *job.result.get("errors", [])])
            )
        if not job.is_finished:
            self.stdout.write(f"Job {job.pk} queued; follow it at /jobs/{job.pk}/.")
            return
        result = job.result
        if not result["computed"]:
            imported = ", ".join(result["metrics"]) or "none"
            self.stdout.write(
                self.style.SUCCESS(f"Job {job.pk}: reported the imported columns ({imported}).")
            )
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"Job {job.pk}: scored {result['captions_scored']} captions of study {study.pk} "
                f"with {len(result['computed'])} metrics (references: {result['references']}); "
                f"{result['captions_without_references']} captions had no reference."
            )
        )
