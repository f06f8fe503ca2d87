"""Load the demo: accounts, one study per mode, real photographs and captions.

Idempotent: users and studies are looked up by name, and a study that exists is left as it
is, so a second run changes nothing. The passwords equal the user names: demo only.
"""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from annotation.errors import ServiceError
from annotation.models import Caption, Study, User
from annotation.modes import get_mode
from annotation.services.imports import study_import
from annotation.services.studies import study_create, study_open

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"

DEMO_USERS: list[tuple[str, dict[str, bool]]] = [
    ("admin", {"is_staff": True, "is_superuser": True}),
    ("researcher", {"is_researcher": True}),
    ("annotator1", {"native_english": True}),
    ("annotator2", {}),
]

DEMO_STUDIES = [
    (Study.Mode.THUMB, "Demo: THumB rubric"),
    (Study.Mode.VICR, "Demo: VICR rating game"),
    (Study.Mode.HUMANR, "Demo: HUMANr head-to-head"),
]

# The demo's VICR pools hold 10 tutorial and 20 probation pairs, fewer than the protocol's
# blocks need once they are drawn per player (10, and 20 for each of 2 attempts): the demo
# plays half-size blocks with the pass marks scaled alike (10 of 20 -> 5 of 10, 25 of 40 ->
# 13 of 20), so each player still gets a draw of their own and a retry of unseen pairs.
DEMO_SETTINGS = {
    Study.Mode.VICR: {
        "tutorial_pairs": 5,
        "tutorial_pass": 5,
        "probation_pairs": 10,
        "probation_pass": 13,
    },
}

DESCRIPTION = (
    "Nine public-domain photographs with human captions and three made-up systems "
    "(GoodBot, MidBot, BadBot). Sources and licences: annotation/demo/LICENCES.md."
)


class Command(BaseCommand):
    help = "Create the demo accounts and one demo study per mode (safe to run again)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/", help="Site address to print at the end."
        )

    def handle(self, *args, **options) -> None:
        users = {name: self._user(name, flags) for name, flags in DEMO_USERS}
        annotators = [users["annotator1"], users["annotator2"]]
        for mode, name in DEMO_STUDIES:
            self._study(mode, name, users["researcher"], annotators)
        self.stdout.write("")
        self.stdout.write(f"Open {options['url']} and log in as (demo only, password = name):")
        for name, _ in DEMO_USERS:
            self.stdout.write(f"  {name} / {name}")

    def _user(self, username: str, flags: dict[str, bool]) -> User:
        user = get_user_model().objects.filter(username=username).first()
        if user is not None:
            self.stdout.write(f"User {username}: exists, left unchanged.")
            return user
        user = get_user_model().objects.create_user(username=username, password=username, **flags)
        self.stdout.write(f"User {username}: created.")
        return user

    def _study(self, mode: str, name: str, owner: User, annotators: list[User]) -> None:
        try:
            get_mode(mode)
        except KeyError:
            self.stdout.write(
                self.style.WARNING(
                    f"{name}: the {mode} mode is not registered; study not created "
                    "(run load_demo again once it is)."
                )
            )
            return
        study = Study.objects.filter(owner=owner, name=name).first()
        if study is None:
            # A demo study exists whole or not at all, so that a rerun never skips half of one.
            with transaction.atomic():
                study = study_create(
                    owner=owner,
                    name=name,
                    mode=mode,
                    settings=DEMO_SETTINGS.get(mode),
                    description=DESCRIPTION,
                )
                summary = study_import(
                    study=study,
                    image_sources=[DEMO_DIR / "images"],
                    captions=DEMO_DIR / "captions.csv",
                )
                self.stdout.write(f"{name}: {summary.as_text()}")
                if mode == Study.Mode.VICR:
                    for purpose in (Caption.Purpose.TUTORIAL, Caption.Purpose.PROBATION):
                        extra = study_import(
                            study=study,
                            captions=DEMO_DIR / f"vicr_{purpose}.csv",
                            purpose=purpose,
                        )
                        self.stdout.write(f"{name}: {extra.as_text()}")
        else:
            self.stdout.write(f"{name}: exists (study {study.pk}), left unchanged.")
        study.annotators.add(*annotators)
        if study.status == Study.Status.DRAFT:
            try:
                built = study_open(study=study)
            except ServiceError as exc:
                self.stdout.write(self.style.WARNING(f"{name}: left as a draft: {exc}"))
            else:
                self.stdout.write(f"{name}: opened with {built} items.")
            study.refresh_from_db()
        self.stdout.write(f"  /studies/{study.pk}/ ({study.get_mode_display()}, {study.status})")
