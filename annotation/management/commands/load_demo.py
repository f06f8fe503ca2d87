"""Load the demo: accounts, one study per mode to try, one finished study per mode with the
answers of a simulated crowd and its report, and the published releases when ``../shared``
holds them.

Idempotent: users and studies are looked up by name, and a study that exists is left as it
is, so a second run changes nothing. The passwords equal the user names: demo only.
"""

import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from annotation.errors import ServiceError
from annotation.models import Job, Study, User
from annotation.modes import get_mode
from annotation.registry import mode_names
from annotation.services.imports import study_import
from annotation.services.imports.releases import release_import
from annotation.services.reports import report_request
from annotation.services.simulation import crowd_simulate
from annotation.services.studies import study_close, study_create, study_open
from annotation.tasks import enqueue

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
#: The published datasets next to the repository (``../shared/datasets``), when present.
SHARED_DATASETS = Path(__file__).resolve().parents[4] / "shared" / "datasets"

DEMO_USERS: list[tuple[str, dict[str, bool]]] = [
    ("admin", {"is_staff": True, "is_superuser": True}),
    ("researcher", {"is_researcher": True}),
    ("annotator1", {}),
    ("annotator2", {}),
]
#: The registered annotators, ``annotator<number>``: each mode adds its own rows about them
#: (``Demo.annotator_rows``, e.g. THumB's native English speaker).
DEMO_ANNOTATORS = {"annotator1": 1, "annotator2": 2}


def _demo_modes():
    """Registered modes with demo studies (``Mode.demo``), in menu order."""
    modes = [get_mode(name) for name in mode_names()]
    return [mode for mode in modes if mode.demo is not None]


# What each mode's demo is lives with the mode (``Mode.demo``); these are read from there.
DEMO_STUDIES = [(mode.name, mode.demo.live) for mode in _demo_modes()]
DEMO_SETTINGS = {mode.name: mode.demo.settings for mode in _demo_modes()}
# Finished studies: the same photographs and captions answered by a seeded simulated crowd
# (annotation/services/simulation.py) through the real services, then closed with a report.
DEMO_FINISHED = [
    (mode.name, mode.demo.finished, mode.demo.finished_workers, mode.demo.finished_settings)
    for mode in _demo_modes()
    if mode.demo.finished
]
#: Seed of the simulated crowd (the same answers on every machine).
CROWD_SEED = 2024

# (file under ../shared/datasets, study name, loader)
PUBLISHED = [
    (
        "thumb-1.0/mscoco_THumB-1.0.jsonl",
        "Published: THumB 1.0 (MSCOCO)",
        lambda owner, path, name: (
            release_import(owner=owner, path=path, fmt="thumb-1.0", name=name).study
        ),
    ),
    (
        "vicr-sample/VICR_Sample250.csv",
        "Published: VICR sample of 250",
        lambda owner, path, name: (
            release_import(owner=owner, path=path, fmt="vicr-csv", name=name).study
        ),
    ),
]

# Shown to annotators on every intro: plain words, no repository path (issue 26, row 19);
# the sources and licences are in annotation/demo/LICENCES.md and each Image.source.
DESCRIPTION = (
    "Nine public-domain photographs from scikit-image's sample data, with human captions "
    "and three made-up systems (GoodBot, MidBot, BadBot)."
)


LOGINS = {
    "admin": "every study, and the Django admin at /admin/",
    "researcher": (
        "owns every demo study: the live ones to try, one finished study per mode with a simulated "
        "crowd's answers and their reports, and the published releases (when ../shared is there)"
    ),
    "annotator1": "the live studies on the start page, as a native English speaker",
    "annotator2": "the live studies on the start page, as a non-native speaker",
}


class Command(BaseCommand):
    help = (
        "Create the demo accounts, one study per mode to try, one finished study per mode "
        "with its report, and the published releases (safe to run again)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/", help="Site address to print at the end."
        )
        parser.add_argument(
            "--no-finished",
            action="store_true",
            help="Skip the finished studies answered by a simulated crowd (faster).",
        )
        parser.add_argument(
            "--no-published",
            action="store_true",
            help="Skip the published releases of ../shared/datasets (THumB 1.0, VICR sample).",
        )

    def handle(self, *args, **options) -> None:
        started = time.monotonic()
        users = {name: self._user(name, flags) for name, flags in DEMO_USERS}
        owner = users["researcher"]
        annotators = [users[name] for name in DEMO_ANNOTATORS]
        for mode, name in DEMO_STUDIES:
            if self._registered(mode, name):
                study = self._study(mode, name, owner, annotators)
                self._opened(study)
        for mode, name, workers, settings in [] if options["no_finished"] else DEMO_FINISHED:
            if self._registered(mode, name):
                self._finished(mode, name, owner, workers, settings)
        if not options["no_published"]:
            self._published(owner)
        self.stdout.write("")
        self.stdout.write(f"Demo ready in {time.monotonic() - started:.0f} s.")
        self.stdout.write(f"Open {options['url']} and log in as (demo only, password = name):")
        for name, _ in DEMO_USERS:
            self.stdout.write(f"  {name} / {name}: {LOGINS[name]}")

    def _user(self, username: str, flags: dict[str, bool]) -> User:
        user = get_user_model().objects.filter(username=username).first()
        if user is not None:
            self.stdout.write(f"User {username}: exists, left unchanged.")
            return user
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=username, password=username, **flags
            )
            for mode in _demo_modes() if username in DEMO_ANNOTATORS else []:
                for row in mode.demo.annotator_rows(user, DEMO_ANNOTATORS[username]):
                    row.save()
        self.stdout.write(f"User {username}: created.")
        return user

    def _registered(self, mode: str, name: str) -> bool:
        try:
            get_mode(mode)
        except KeyError:
            self.stdout.write(
                self.style.WARNING(
                    f"{name}: the {mode} mode is not registered; study not created "
                    "(run load_demo again once it is)."
                )
            )
            return False
        return True

    def _study(
        self, mode: str, name: str, owner: User, annotators: list[User], settings=None
    ) -> Study:
        """The demo study ``name`` with the demo photographs and captions (made if missing)."""
        study = Study.objects.filter(owner=owner, name=name).first()
        if study is None:
            # A demo study exists whole or not at all, so that a rerun never skips half of one.
            with transaction.atomic():
                study = study_create(
                    owner=owner,
                    name=name,
                    mode=mode,
                    settings={**DEMO_SETTINGS.get(mode, {}), **(settings or {})},
                    description=DESCRIPTION,
                )
                demo = get_mode(mode).demo
                summary = study_import(
                    study=study,
                    image_sources=[DEMO_DIR / "images"],
                    captions=DEMO_DIR / demo.captions,
                )
                photos = summary.images_new + summary.images_existing
                self.stdout.write(
                    f"{name}: {photos} photographs and {summary.captions} captions imported "
                    f"(systems: {', '.join(summary.systems)})."
                )
                for filename, purpose in demo.extra_captions:
                    extra = study_import(study=study, captions=DEMO_DIR / filename, purpose=purpose)
                    self.stdout.write(
                        f"{name}: {extra.captions} {purpose} captions with expert ratings imported."
                    )
        else:
            self.stdout.write(f"{name}: exists (study {study.pk}), left unchanged.")
        study.annotators.add(*annotators)
        return study

    def _opened(self, study: Study) -> None:
        if study.status == Study.Status.DRAFT:
            try:
                built = study_open(study=study)
            except ServiceError as exc:
                self.stdout.write(self.style.WARNING(f"{study.name}: left as a draft: {exc}"))
            else:
                words = get_mode(study.mode).demo.item_words
                self.stdout.write(f"{study.name}: open, with {built} {words}.")
            study.refresh_from_db()
        self._where(study)

    def _finished(self, mode: str, name: str, owner: User, workers: int, settings) -> None:
        """A study answered by a simulated crowd, closed, with its report computed."""
        if not Study.objects.filter(owner=owner, name=name).exists():
            with transaction.atomic():
                study = self._study(mode, name, owner, [], settings)
                study_open(study=study)
                crowd = crowd_simulate(study=study, workers=workers, seed=CROWD_SEED)
                study_close(study=study)
            self.stdout.write(
                f"{name}: {crowd.workers} simulated crowd workers gave {crowd.judgments} "
                "answers; the study is closed."
            )
        study = Study.objects.get(owner=owner, name=name)
        self._report(study, owner)
        self._where(study)

    def _published(self, owner: User) -> None:
        """The published releases of ../shared/datasets as closed studies with reports."""
        for relative, name, load in PUBLISHED:
            path = SHARED_DATASETS / relative
            study = Study.objects.filter(owner=owner, name=name).first()
            if study is None:
                if not path.is_file():
                    self.stdout.write(f"{name}: {path} not found; skipped.")
                    continue
                study = load(owner, path, name)
                self.stdout.write(f"{name}: loaded from {path}.")
            else:
                self.stdout.write(f"{name}: exists (study {study.pk}), left unchanged.")
            self._report(study, owner)
            self._where(study)

    def _report(self, study: Study, owner: User) -> None:
        """Compute the study's report once (a rerun keeps the one there is)."""
        done = study.jobs.filter(kind=Job.Kind.REPORT, status=Job.Status.DONE).exists()
        if done:
            return
        try:
            job = enqueue(report_request(study=study, user=owner))
        except ServiceError as exc:
            self.stdout.write(self.style.WARNING(f"{study.name}: report not computed: {exc}"))
            return
        job.refresh_from_db()
        if job.status == Job.Status.DONE:
            self.stdout.write(f"{study.name}: report computed.")
        else:  # a real task queue: the worker computes it
            self.stdout.write(f"{study.name}: report {job.get_status_display().lower()}.")

    def _where(self, study: Study) -> None:
        self.stdout.write(
            f"  /studies/{study.pk}/ ({study.get_mode_display()}, {study.get_status_display()})"
        )
