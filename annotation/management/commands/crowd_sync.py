"""Sync a study with its Prolific study / MTurk HITs: record each worker's platform status and
give back the leases of workers who returned, timed out, were rejected or abandoned.

    manage.py crowd_sync 12

Celery beat runs the same for every live linked study (``crowd_sync_live``); docs/crowd.md.
"""

from django.core.management.base import BaseCommand, CommandError

from annotation.crowd import PlatformError
from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.crowd.sync import crowd_sync


class Command(BaseCommand):
    help = "Read a study's crowd submissions and reclaim the leases of workers who left."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int)

    def handle(self, *args, study_id: int, **options):
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study {study_id}.")
        try:
            counts = crowd_sync(study=study)
        except (ServiceError, PlatformError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{counts['seen']} submission(s) read, {counts['matched']} matched, "
            f"{counts['reclaimed']} worker(s) who left, {counts['released']} lease(s) released."
        )
