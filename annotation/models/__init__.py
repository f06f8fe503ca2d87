"""The data model every mode shares.

A researcher's ``Study`` holds ``Image`` and ``Caption`` rows (imported), and ``Item`` rows
(the unit a mode serves: an image's caption set, a caption to rate, a group of comparisons).
A ``Participant`` (account or crowd worker) receives an ``Assignment`` (a lease on one item)
and submits one ``Judgment`` per part of it. Long work is tracked by ``Job`` rows.
Judgments are never deleted: exclusions are flags.
"""

import secrets
import uuid

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from annotation.registry import STUDY_PURPOSE, caption_purpose_choices, mode_choices


class User(AbstractUser):
    """A person with an account: admin (``is_staff``), researcher or registered annotator."""

    is_researcher = models.BooleanField(
        default=False, help_text="May create studies and see the studies they own or join."
    )


def new_completion_code() -> str:
    """A crowd completion code nobody can derive from anything public (the link included)."""
    return "C" + secrets.token_hex(5).upper()


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        LIVE = "live", "Live"
        CLOSED = "closed", "Closed"

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # Markdown shown to participants and built into the judge's default prompt; empty: the
    # mode's own default (``Mode.default_guidelines``, issue 46).
    guidelines = models.TextField(blank=True)
    # The registry is the list of modes (annotation/registry.py): a new mode needs no
    # migration.
    mode = models.CharField(max_length=16, choices=mode_choices)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    settings = models.JSONField(default=dict, blank=True)
    seed = models.BigIntegerField(
        default=0, help_text="Seed of every random choice the study makes."
    )
    owner = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_studies"
    )
    members = models.ManyToManyField(
        django_settings.AUTH_USER_MODEL,
        blank=True,
        related_name="member_studies",
        help_text="Researchers who may see and change this study.",
    )
    annotators = models.ManyToManyField(
        django_settings.AUTH_USER_MODEL,
        blank=True,
        related_name="annotator_studies",
        help_text="Registered annotators this study is open to.",
    )
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    completion_code = models.CharField(
        max_length=64,
        default=new_completion_code,
        help_text="Shown to crowd workers only after the work; a secret of the study.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return f"{self.name} ({self.get_mode_display()})"


class Image(models.Model):
    """An image of a study, stored once per content hash; ``name`` is what import files cite."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="images")
    name = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    file = models.CharField(max_length=255, help_text="Original, relative to MEDIA_ROOT.")
    display = models.CharField(max_length=255, help_text="Rendition, longest side <= 1024 px.")
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    format = models.CharField(max_length=8)
    alt_text = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=500, blank=True, help_text="Origin and licence.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="image_name_unique_in_study")
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class Caption(models.Model):
    """A caption of one image by one system (``Human`` for human-written captions)."""

    class Purpose(models.TextChoices):
        """The purpose shared by every mode; a mode adds its own (``caption_purposes``)."""

        STUDY = STUDY_PURPOSE

    HUMAN = "Human"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="captions")
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="captions")
    system = models.CharField(max_length=100)
    raw_text = models.TextField()
    text = models.TextField(help_text="THumB-normalised text, shown to annotators.")
    purpose = models.CharField(
        max_length=10, choices=caption_purpose_choices, default=Purpose.STUDY
    )
    metrics = models.JSONField(default=dict, blank=True)
    #: The mode's data of this caption (VICR: primed ratings, a gate pair's truth and
    #: explanation), written by its ``caption_columns`` from the import's own columns.
    spec = models.JSONField(default=dict, blank=True)
    line = models.PositiveIntegerField(default=0, help_text="Line of the import file.")

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["study", "purpose", "system"])]

    def __str__(self) -> str:
        return f"{self.system}: {self.text[:60]}"

    @property
    def is_human(self) -> bool:
        return self.system == self.HUMAN


class Item(models.Model):
    """The unit a mode serves; ``spec`` is the mode's description of it (caption ids, order...).

    ``judgment_count`` and ``open_lease_count`` are kept exact by the assignment service so
    that no item is leased beyond ``target``.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=32)
    image = models.ForeignKey(
        Image, on_delete=models.CASCADE, null=True, blank=True, related_name="items"
    )
    position = models.PositiveIntegerField(default=0)
    spec = models.JSONField(default=dict, blank=True)
    target = models.PositiveIntegerField(default=1)
    judgment_count = models.PositiveIntegerField(default=0)
    open_lease_count = models.PositiveIntegerField(default=0)
    # The study's sampling design (issue 40, ``services/people_design.py``): the chance this
    # item was drawn for people, fixed before the first judgment so that the estimate can
    # weight its answers by the inverse (null: no design, every item goes to people), and
    # which design drew it ("uniform", "uncertainty": by the judge's uncertainty).
    sampling_probability = models.FloatField(null=True, blank=True)
    sampling_design = models.CharField(max_length=16, blank=True, default="")

    class Meta:
        ordering = ["position", "id"]
        indexes = [
            # The assignment service's serving order (least taken first), so picking the
            # next item reads the index instead of sorting every candidate.
            models.Index(
                "study",
                "kind",
                F("judgment_count") + F("open_lease_count"),
                "position",
                "id",
                name="item_serving_order",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(judgment_count__lte=F("target")), name="item_not_over_target"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.position}"


class ItemImage(models.Model):
    """An image an item shows (or whose caption it shows): lets a mode keep a worker from
    seeing the same image twice with one relational query instead of reading every spec."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="item_images")
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="item_images")

    class Meta:
        # The unique constraint indexes (item, image); the foreign key indexes image.
        constraints = [
            models.UniqueConstraint(fields=["item", "image"], name="item_image_unique"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} shows image {self.image_id}"


def new_pseudonym() -> str:
    return "P-" + secrets.token_hex(4)


class Vision(models.TextChoices):
    """A participant's self-reported vision (``Participant.vision``)."""

    NOT_ASKED = "", "Not asked"
    BLIND = "blind", "Blind"
    LOW_VISION = "low_vision", "Low vision"
    SIGHTED = "sighted", "Sighted"


class LinkGroup(models.TextChoices):
    """The group a crowd link may require (``group=``), so a recruiter's screener can send
    blind and low-vision workers to a link of their own (``Participant.link_group``)."""

    ANY = "", "Any"
    BLV = "blv", "Blind or low vision"
    SIGHTED = "sighted", "Sighted"


class Participant(models.Model):
    """Someone taking part in one study: a registered user or a crowd worker (no account)."""

    class Source(models.TextChoices):
        ACCOUNT = "account", "Registered account"
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon MTurk"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="participations",
    )
    source = models.CharField(max_length=10, choices=Source.choices)
    external_id = models.CharField(max_length=128, blank=True)
    external_meta = models.JSONField(default=dict, blank=True)
    pseudonym = models.CharField(max_length=16, default=new_pseudonym, unique=True)
    status = models.CharField(max_length=16, default="active")
    state = models.JSONField(default=dict, blank=True, help_text="The mode's per-player state.")
    browser_id = models.CharField(
        max_length=32,
        blank=True,
        db_index=True,
        help_text="The browser a crowd worker first arrived with (signed, HttpOnly cookie).",
    )
    address = models.GenericIPAddressField(
        null=True, blank=True, help_text="Client address at first arrival (crowd workers)."
    )
    network = models.CharField(
        max_length=64,
        blank=True,
        db_index=True,
        help_text="The address's network (IPv4 address or IPv6 /64; annotation/identities.py).",
    )
    flags = models.JSONField(
        default=list,
        blank=True,
        help_text="Integrity events: [{kind, at, detail}], appended, never removed.",
    )
    completed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a crowd worker earned the completion code."
    )
    # Self-reported, asked once with consent and only by a mode that asks it
    # (``Mode.asks_vision``), so blind and low-vision raters are never shown images and
    # their ratings are reported apart. Sensitive: never shown per participant on a
    # researcher's page and never in a raw-id export (docs/participation.md).
    vision = models.CharField(
        max_length=16,
        choices=Vision.choices,
        default=Vision.NOT_ASKED,
        blank=True,
        help_text="Self-reported vision; empty when not asked.",
    )
    screen_reader = models.BooleanField(
        null=True, blank=True, help_text="Whether they use a screen reader; null when not asked."
    )
    link_group = models.CharField(
        max_length=16,
        choices=LinkGroup.choices,
        default=LinkGroup.ANY,
        blank=True,
        help_text="The group the crowd link required (its group= parameter); empty: any.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["study", "address", "created_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "user"],
                condition=Q(user__isnull=False),
                name="one_participant_per_user_and_study",
            ),
            models.UniqueConstraint(
                fields=["study", "source", "external_id"],
                condition=~Q(external_id=""),
                name="one_participant_per_external_id_and_study",
            ),
        ]

    def __str__(self) -> str:
        return self.pseudonym

    @property
    def vision_group(self) -> str:
        """ "blv" (blind or low vision), "sighted", or "" when not declared: the group whose
        items the participant is served and whose ratings theirs are reported with."""
        if self.vision in (Vision.BLIND, Vision.LOW_VISION):
            return LinkGroup.BLV
        if self.vision == Vision.SIGHTED:
            return LinkGroup.SIGHTED
        return ""


class CrowdRefusal(models.Model):
    """A crowd arrival the study turned away (rate limit, wrong study id, foreign browser).

    Kept, never deleted, so a researcher can see who was refused and why.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="crowd_refusals")
    participant = models.ForeignKey(
        Participant,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="refusals",
        help_text="The participant the arrival claimed to be, when one exists.",
    )
    source = models.CharField(max_length=10, blank=True)
    external_id = models.CharField(max_length=128, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    reason = models.CharField(max_length=32)
    detail = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["study", "created_at"])]

    def __str__(self) -> str:
        return f"{self.reason}: {self.external_id or self.address}"


def new_token() -> str:
    return secrets.token_urlsafe(24)


class Assignment(models.Model):
    """A lease: ``participant`` may judge ``item`` until ``expires_at``, citing ``token``."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        SUBMITTED = "submitted", "Submitted"
        RELEASED = "released", "Released (expired)"

    participant = models.ForeignKey(
        Participant, on_delete=models.CASCADE, related_name="assignments"
    )
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    round = models.PositiveSmallIntegerField(
        default=0, help_text="Repeat number when a protocol serves an item again (probation)."
    )
    token = models.CharField(max_length=40, default=new_token, unique=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    served_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(
        max_length=150, blank=True, help_text="Who released the lease early (a user name)."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["participant", "item", "round"], name="one_assignment_per_item_and_round"
            )
        ]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.participant} -> {self.item}"

    def part_shown_at(self, part: int):
        """When ``part`` was shown, by the server's own record (minimum times count from it).

        The first part is shown when the lease starts; a later part when the previous one
        was answered. A reopened lease restarts the clock.
        """
        if part == 0:
            return self.served_at
        previous = (
            Judgment.objects.filter(assignment_id=self.pk, part=part - 1)
            .values_list("created_at", flat=True)
            .first()
        )
        return max(previous, self.served_at) if previous else self.served_at


class Judgment(models.Model):
    """One validated submission for one part of an assignment. Never deleted."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judgments")
    item = models.ForeignKey(Item, on_delete=models.PROTECT, related_name="judgments")
    participant = models.ForeignKey(Participant, on_delete=models.PROTECT, related_name="judgments")
    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="judgments")
    part = models.PositiveSmallIntegerField(default=0)
    payload = models.JSONField(help_text="What the participant submitted, validated.")
    result = models.JSONField(default=dict, blank=True, help_text="What the server computed.")
    dwell_ms = models.PositiveIntegerField(help_text="Server-measured time since serving.")
    excluded = models.BooleanField(default=False)
    exclusion_reason = models.CharField(max_length=200, blank=True)
    # Which guidelines the page showed (a short SHA-256 of their text): the alignment report
    # compares it with the judge's (issue 46).
    guidelines_version = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(
        default=timezone.now, help_text="Set by the service from the same clock as dwell time."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "part"], name="one_judgment_per_part")
        ]
        indexes = [models.Index(fields=["study", "id"])]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"judgment {self.pk} (item {self.item_id}, part {self.part})"


class Job(models.Model):
    """A long task (import, export, report) with status and progress a page can poll.

    ``attempts`` counts the runs started (a worker killed mid-job has its message delivered
    again); ``heartbeat_at`` is the last sign of life of the process running it. Both are
    written by ``services/jobs.py``; docs/architecture.md ("Long work") has the lifecycle.
    """

    class Kind(models.TextChoices):
        IMPORT = "import", "Import"
        EXPORT = "export", "Export"
        REPORT = "report", "Report"
        METRICS = "metrics", "Metrics"
        JUDGE = "judge", "Judge run"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    study = models.ForeignKey(
        Study, on_delete=models.CASCADE, null=True, blank=True, related_name="jobs"
    )
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    # A researcher asked a judge run to stop (``judge_runs.judge_run_stop``); the run keeps
    # what was answered by then. Other kinds of job do not stop on request.
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_requested_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    progress = models.PositiveSmallIntegerField(default=0)
    message = models.CharField(max_length=500, blank=True)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    result_file = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Runs started; past CAPEVAL_JOB_MAX_ATTEMPTS the job is failed."
    )
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the process running the job."
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} job {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.DONE, self.Status.FAILED}


class PairJudgment(models.Model):
    """A published pairwise human judgment (Pascal-50S style): which of two captions of an
    image people preferred, for the metric lab's pairwise accuracy. Imported, never edited."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pair_judgments")
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="pair_judgments")
    caption_a = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")
    caption_b = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")
    choice = models.PositiveSmallIntegerField(
        help_text="The caption people preferred: 0 for caption_a, 1 for caption_b."
    )
    category = models.CharField(
        max_length=16,
        blank=True,
        help_text="The dataset's kind of pair (Pascal-50S: HC, HI, HM, MM).",
    )
    source = models.CharField(max_length=200, blank=True, help_text="File it was imported from.")
    line = models.PositiveIntegerField(default=0, help_text="Position in the import file.")
    # Another release's labels of the same pair (FLEUR's files differ from pascal_50s.json
    # in 35 of 4,000 pairs): kept beside ``choice`` rather than over it, so that the metric
    # lab can score against either (issue 47, services/metrics_labels.py).
    labels = models.JSONField(
        default=dict,
        blank=True,
        help_text="Other releases' labels of this pair (0 caption_a, 1 caption_b), by the "
        "name of the imported metric column whose pair files carried them (FLEUR).",
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(choice__in=[0, 1]), name="pair_choice_0_or_1")
        ]

    def __str__(self) -> str:
        return f"pair {self.pk} ({self.category})"


class Reference(models.Model):
    """A reference caption of an image, for the metrics computed in the metric lab.

    Imported (``import_references``, Pascal-50S). A reference with a ``pair`` serves the two
    captions of that pair only (Pascal-50S gives each pair its own five). A study without
    imported references uses each image's other human captions instead (docs/protocol-choices.md).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="references")
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="references")
    pair = models.ForeignKey(
        PairJudgment, on_delete=models.CASCADE, null=True, blank=True, related_name="references"
    )
    text = models.TextField()
    source = models.CharField(max_length=200, blank=True, help_text="File it was imported from.")
    line = models.PositiveIntegerField(default=0, help_text="Line of the import file.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["study", "image"], name="reference_study_image")]

    def __str__(self) -> str:
        return self.text[:60]


from annotation.models.crowd import CrowdCredential, CrowdEvent, CrowdLedgerEntry  # noqa: E402, F401
from annotation.models.invitations import StudyInvitation  # noqa: E402, F401
from annotation.models.judge_runs import (  # noqa: E402, F401
    JudgeCacheEntry,
    JudgeEndpoint,
    JudgeFailure,
    JudgePrompt,
)
from annotation.models.judges import Judge, JudgeAnswer  # noqa: E402, F401
from annotation.models.metric_lab import DatasetScore  # noqa: E402, F401
