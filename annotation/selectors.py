"""Reads: who may see what. Anything a user may not see answers 404, never 403, so that
another researcher's study ids reveal nothing. The dashboard's reads are in
``annotation/dashboard.py``."""

from urllib.parse import urlencode

from django.db.models import (
    Count,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from annotation import storage
from annotation.models import (
    Assignment,
    Caption,
    CrowdRefusal,
    Image,
    Item,
    Job,
    Judgment,
    Participant,
    Study,
    StudyInvitation,
    User,
)
from annotation.modes import get_mode
from annotation.modes.base import Mode

#: Prolific's completion URL; ``?cc=CODE`` records the code for the worker.
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete"


def studies_for_researcher(user: User) -> QuerySet[Study]:
    """Studies the user owns or was added to; every study for staff."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    if not user.is_researcher:
        return Study.objects.none()
    return Study.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def study_for_researcher(user: User, study_id: int) -> Study:
    """The study if the user may manage it, else Http404."""
    study = studies_for_researcher(user).filter(pk=study_id).select_related("owner").first()
    if study is None:
        raise Http404("No such study.")
    return study


def studies_for_annotator(user: User) -> QuerySet[Study]:
    """Live studies open to this registered annotator."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(status=Study.Status.LIVE, annotators=user)


def invitations_for(user: User) -> QuerySet[StudyInvitation]:
    """The pending invitations to this account, oldest first, for its start page."""
    if not user.is_authenticated:
        return StudyInvitation.objects.none()
    return StudyInvitation.objects.filter(
        invitee=user, accepted_at__isnull=True, declined_at__isnull=True
    ).select_related("study", "invited_by")


def study_pending_invitations(study: Study) -> QuerySet[StudyInvitation]:
    """The study's unanswered invitations, by the name typed (the People page)."""
    return study.invitations.filter(
        accepted_at__isnull=True, declined_at__isnull=True
    ).select_related("invited_by")


def job_for_user(user: User, job_id: int) -> Job:
    """The job if the user may manage its study (or, for a job of no study, started it).

    Starting a study's job is not enough: a researcher removed from the study must not
    keep reading its exports. Anything else is Http404.
    """
    if not user.is_authenticated:
        raise Http404("No such job.")
    job = Job.objects.select_related("study").filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    if user.is_staff:
        return job
    if job.study_id is None:
        if job.created_by_id == user.pk:
            return job
    elif studies_for_researcher(user).filter(pk=job.study_id).exists() and not (
        # A raw-id export is the owner's alone: a member reaching it by URL is told no more
        # than a stranger would be (404, not 403, so ids cannot be probed).
        _raw_ids(job) and job.study.owner_id != user.pk
    ):
        return job
    raise Http404("No such job.")


def _raw_ids(job: Job) -> bool:
    return isinstance(job.params, dict) and bool(job.params.get("raw_ids"))


def study_jobs_for_user(user: User, study: Study) -> QuerySet[Job]:
    """The study's jobs this user may see: all for its owner and staff; for a member, all
    but the exports carrying raw Prolific/MTurk ids (only the owner may ask for those, so
    only the owner reads them)."""
    jobs = study.jobs.all()
    if user.is_staff or study.owner_id == user.pk:
        return jobs
    # Through a subquery: excluding on a JSON key directly would also drop jobs whose
    # params lack the key (NULL comparisons) on some databases.
    return jobs.exclude(pk__in=study.jobs.filter(params__raw_ids=True).values("pk"))


def study_counts(study: Study) -> dict[str, int]:
    """Headline numbers of a study's detail page."""
    return {
        "images": Image.objects.filter(study=study).count(),
        "captions": Caption.objects.filter(study=study).count(),
        # Systems of the captions under study: VICR's tutorial and probation captions are
        # training material (their "system" is a placeholder), not a system compared.
        "systems": Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
        .values("system")
        .distinct()
        .count(),
        "items": Item.objects.filter(study=study).count(),
        "participants": Participant.objects.filter(study=study).count(),
        "judgments": Judgment.objects.filter(study=study).count(),
    }


def studies_with_counts(studies: QuerySet[Study]) -> QuerySet[Study]:
    """``studies`` with ``n_judgments`` and ``n_participants``, in the one query of the list.

    Counted in correlated subqueries, not ``Count`` over two joins (which would multiply
    judgments by participants), so the home page costs one query however many studies.
    """

    def count_of(model) -> Coalesce:
        per_study = (
            model.objects.filter(study=OuterRef("pk"))
            .order_by()
            .values("study")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(per_study), 0)

    return studies.annotate(n_judgments=count_of(Judgment), n_participants=count_of(Participant))


OPEN_LEASES_SHOWN = 50


def open_leases(study: Study, *, now=None) -> dict:
    """The study's open leases for its page: the first ``OPEN_LEASES_SHOWN`` and the count.

    Lapsed ones are listed too (they hold capacity until the next claim or beat gives them
    back), marked as such.
    """
    now = now or timezone.now()
    leases = Assignment.objects.filter(
        item__study=study, status=Assignment.Status.OPEN
    ).select_related("participant", "item")
    rows = [
        {
            "id": lease.pk,
            "pseudonym": lease.participant.pseudonym,
            "source": lease.participant.get_source_display(),
            "item": f"{lease.item.kind} #{lease.item.position}",
            "served_at": lease.served_at,
            "expires_at": lease.expires_at,
            "lapsed": lease.expires_at <= now,
        }
        for lease in leases.order_by("served_at", "id")[:OPEN_LEASES_SHOWN]
    ]
    return {"rows": rows, "count": leases.count()}


def crowd_integrity(study: Study) -> dict:
    """Counts of refused arrivals by reason and of flagged participants, for the study page."""
    refusals = dict(
        CrowdRefusal.objects.filter(study=study)
        .values_list("reason")
        .annotate(n=Count("id"))
        .values_list("reason", "n")
    )
    flagged = (
        Participant.objects.filter(study=study)
        .exclude(flags=[])
        .order_by("pk")
        .values_list("pseudonym", "flags")[:OPEN_LEASES_SHOWN]
    )
    completed = Participant.objects.filter(study=study, completed_at__isnull=False).count()
    return {
        "refusals": sorted(refusals.items()),
        "flagged": [
            {"pseudonym": pseudonym, "kinds": sorted({flag["kind"] for flag in flags})}
            for pseudonym, flags in flagged
        ],
        "completed": completed,
    }


def completion_code(study: Study) -> str:
    """The code a crowd worker of ``study`` reports (see ``CrowdSettings.completion_code_for``)."""
    return get_mode(study.mode).settings(study).completion_code_for(study)


def crowd_setup(study: Study, mode: Mode) -> dict:
    """What the researcher enters on Prolific: the completion code and completion URL, and
    the other codes a worker may be given (screen-out, failed attention check), each with
    the Prolific URL that reports it ("" and None where the study has none). ``mode`` is the
    study's mode, as the page looked it up."""
    config = mode.settings(study)
    code = config.completion_code_for(study)
    screen_out = config.screen_out_code_for()
    failed = config.failed_check_code
    return {
        "completion_code": code,
        "prolific_completion_url": config.prolific_completion_url
        or PROLIFIC_COMPLETE + "?" + urlencode({"cc": code}),
        "screen_out_code": screen_out,
        "prolific_screen_out_url": config.prolific_screen_out_url
        or (PROLIFIC_COMPLETE + "?" + urlencode({"cc": screen_out}) if screen_out else None),
        "failed_check_code": failed,
        "failed_check_url": PROLIFIC_COMPLETE + "?" + urlencode({"cc": failed}) if failed else None,
    }


def report_latest(study: Study) -> Job | None:
    """The newest finished report job of the study, if any."""
    return study.jobs.filter(kind=Job.Kind.REPORT, status=Job.Status.DONE).first()


def report_pending(study: Study) -> Job | None:
    """A report job of the study that is queued or running, if any."""
    return study.jobs.filter(
        kind=Job.Kind.REPORT, status__in=[Job.Status.QUEUED, Job.Status.RUNNING]
    ).first()


def job_file_name(name: str) -> str:
    """``name`` (a job's result file or datasheet) if it is a file of the export storage
    (``annotation/storage.py``): a plain name, nothing relative or hidden, that exists;
    Http404 otherwise."""
    if not storage.is_plain_name(name) or not storage.exists(name, alias=storage.EXPORTS):
        raise Http404("The file is gone; run the export again.")
    return name


#: The folder of display renditions under MEDIA_ROOT (``services/imports/images.py``).
MEDIA_DISPLAY_FOLDER = "display"


def media_file_kind(user: User, path: str) -> str:
    """Which file of MEDIA_ROOT ``path`` is, if ``user`` may read it; Http404 otherwise.

    ``"display"``: a display rendition, for anyone. Crowd workers have no account and see
    them on every item, exports ship them; they carry no metadata and their names are
    content hashes. ``"original"``: an uploaded original (camera EXIF, GPS included), only
    for researchers of a study holding an image stored in that file (``Image.file``; one
    file may back images of several studies) and for staff. Everything else under
    MEDIA_ROOT (staging folders, stray files) is never served. A stranger gets the same 404
    for an existing original as for a missing one, before the file system is looked at.
    """
    parts = path.split("/")
    # No empty, relative or hidden segment (".staging"), no backslash or NUL: the path must
    # name a file inside MEDIA_ROOT as written; serve() confines it again with safe_join.
    if any(not part or part.startswith(".") or "\\" in part or "\x00" in part for part in parts):
        raise Http404("No such file.")
    if parts[0] == MEDIA_DISPLAY_FOLDER and len(parts) > 1:
        return "display"
    if Image.objects.filter(file=path, study__in=studies_for_researcher(user)).exists():
        return "original"
    raise Http404("No such file.")
