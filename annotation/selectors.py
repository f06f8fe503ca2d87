"""Reads: who may see what. Anything a user may not see answers 404, never 403, so that
another researcher's study ids reveal nothing."""

from django.db.models import Q, QuerySet
from django.http import Http404

from annotation.models import Job, Study, User


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
    elif studies_for_researcher(user).filter(pk=job.study_id).exists():
        return job
    raise Http404("No such job.")


def study_counts(study: Study) -> dict[str, int]:
    """Headline numbers of a study's detail page."""
    from annotation.models import Caption, Image, Item, Judgment, Participant

    return {
        "images": Image.objects.filter(study=study).count(),
        "captions": Caption.objects.filter(study=study).count(),
        "systems": Caption.objects.filter(study=study).values("system").distinct().count(),
        "items": Item.objects.filter(study=study).count(),
        "participants": Participant.objects.filter(study=study).count(),
        "judgments": Judgment.objects.filter(study=study).count(),
    }


def crowd_link(request, study: Study) -> str:
    """The absolute crowd link of a live study (Prolific/MTurk append their parameters)."""
    from django.urls import reverse

    from annotation.services.participants import crowd_link_token

    if study.status != Study.Status.LIVE:
        return ""
    return request.build_absolute_uri(reverse("crowd_entry", args=[crowd_link_token(study)]))


def job_file_path(job: Job):
    """The job's result file, which must lie inside the export folder."""
    from pathlib import Path

    from django.conf import settings

    root = Path(settings.CAPEVAL_EXPORT_DIR).resolve()
    path = (root / job.result_file).resolve()
    if root not in path.parents or not path.is_file():
        raise Http404("The file is gone; run the export again.")
    return path
