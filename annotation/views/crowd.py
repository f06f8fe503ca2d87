"""Paid-crowd pages: the researcher's credentials, Prolific's webhook, and the review page
(approve, reject, bonus with a confirmation showing the total; the ledger). Thin: every
decision and write is in ``annotation/services/crowd/``."""

import logging

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from annotation import selectors
from annotation.crowd import PlatformError
from annotation.errors import ServiceError
from annotation.models import Study
from annotation.services.crowd import holds, review
from annotation.services.crowd.credentials import (
    SECRET_FIELDS,
    credential_save,
    credential_status,
)
from annotation.services.crowd.sync import crowd_sync
from annotation.services.crowd.webhooks import WebhookRefused, prolific_webhook_receive
from annotation.views.access import researcher_required

logger = logging.getLogger(__name__)

LABELS = {
    "prolific_token": "Prolific API token",
    "prolific_webhook_secret": "Prolific webhook secret",
    "mturk_access_key_id": "MTurk (AWS) access key id",
    "mturk_secret_access_key": "MTurk (AWS) secret access key",
}


@csrf_exempt  # Prolific cannot send a CSRF token; the HMAC signature authenticates it.
@require_POST
def prolific_webhook(request: HttpRequest) -> HttpResponse:
    try:
        outcome = prolific_webhook_receive(
            body=request.body,
            timestamp=request.headers.get("X-Prolific-Request-Timestamp", ""),
            signature=request.headers.get("X-Prolific-Request-Signature", ""),
        )
    except WebhookRefused as exc:
        return JsonResponse({"error": str(exc)}, status=401)
    return JsonResponse({"outcome": outcome})


@require_http_methods(["GET", "POST"])
@researcher_required
def account_crowd(request: HttpRequest) -> HttpResponse:
    """The researcher's crowd credentials: write-only fields, shown back as set or not."""
    error = None
    if request.method == "POST":
        try:
            credential_save(
                user=request.user,
                values={name: request.POST.get(name, "") for name in SECRET_FIELDS},
                mturk_sandbox=request.POST.get("mturk_mode", "sandbox") != "live",
                clear=tuple(name for name in SECRET_FIELDS if request.POST.get(f"clear_{name}")),
            )
        except ServiceError as exc:
            error = exc
        else:
            # Not a Django message: the base template's message list fails axe (a <ul>
            # with role=status); this page says it itself.
            return redirect(reverse("account_crowd") + "?saved=1")
    status = credential_status(request.user)
    fields = [{"name": name, "label": LABELS[name], "set": status[name]} for name in SECRET_FIELDS]
    webhook_url = request.build_absolute_uri(reverse("prolific_webhook"))
    return render(
        request,
        "crowd/account.html",
        {
            "fields": fields,
            "sandbox": status["mturk_sandbox"],
            "error": error,
            "webhook_url": webhook_url,
            "saved": request.GET.get("saved") == "1" and not error,
        },
        status=error.status if error else 200,
    )


def _owned_study(request: HttpRequest, study_id: int) -> Study:
    """Review is for the study's owner (who pays) and staff; members get a 404."""
    study = selectors.study_for_researcher(request.user, study_id)
    if not (request.user.is_staff or request.user.pk == study.owner_id):
        raise Http404("No such page.")
    return study


@require_http_methods(["GET", "POST"])
@researcher_required
def study_crowd_review(request: HttpRequest, study_id: int) -> HttpResponse:
    """The review page; POST ``step=preview`` shows the confirmation, ``step=confirm`` acts."""
    study = _owned_study(request, study_id)
    data = request.POST if request.method == "POST" else request.GET
    chosen = data.get("filter") or "completed_clean"
    context: dict = {
        "study": study,
        "filter": chosen,
        "filters": review.FILTERS,
        "filter_label": review.FILTERS.get(chosen, ""),
    }
    status = 200
    try:
        shown = review.review_selection(study=study, filter=chosen)
        context["shown"] = shown
        if request.method == "POST":
            context.update(_act(request, study, data, shown))
    except ServiceError as exc:
        context["error"], status = exc.message, exc.status
        context.setdefault("shown", [])
    except PlatformError as exc:  # a client could not be built or a call failed outright
        context["error"], status = str(exc), 502
        context.setdefault("shown", [])
    context["form"] = {key: data.get(key, "") for key in _FORM_KEYS}
    context["checked"] = {int(pk) for pk in data.getlist("participants") if pk.isdigit()}
    context["ledger"] = review.ledger_rows(study)
    context["categories"] = review.REJECT_CATEGORIES
    context["holds"] = holds.held_participants(study)
    template = "crowd/_review.html" if request.htmx else "crowd/review.html"
    return render(request, template, context, status=status)


_FORM_KEYS = ("action", "amount", "per_judgment", "reason", "message", "category", "scope")


def _act(request: HttpRequest, study: Study, data, shown) -> dict:
    confirmed = {pk for pk in data.getlist("confirmed") if pk.isdigit()}
    if data.get("step") == "confirm" and confirmed:
        # Exactly the workers the confirmation listed, even if the filter has grown since.
        people = [person for person in shown if str(person.pk) in confirmed]
    elif data.get("scope") == "shown":
        people = shown
    else:
        wanted = {pk for pk in data.getlist("participants") if pk.isdigit()}
        people = [person for person in shown if str(person.pk) in wanted]
    arguments = {
        "study": study,
        "action": data.get("action", ""),
        "participants": people,
        "amount_cents": review.parse_money(data.get("amount", ""), field="amount"),
        "per_judgment_cents": review.parse_money(data.get("per_judgment", ""), field="amount"),
        "reason": data.get("reason", "")[:200],
        "message": data.get("message", "")[:2000],
    }
    if data.get("step") != "confirm":
        return {"plan": review.review_plan(**arguments)}
    done = review.crowd_review(
        **arguments, user=request.user, category=data.get("category") or "FAILED_CHECK"
    )
    return {"done": done}


@require_POST
@researcher_required
def study_crowd_sync(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _owned_study(request, study_id)
    try:
        counts = crowd_sync(study=study)
    except (ServiceError, PlatformError) as exc:
        messages.error(request, f"Sync failed: {exc}")
    else:
        messages.success(
            request,
            f"Synced: {counts['seen']} submission(s) read, {counts['matched']} matched, "
            f"{counts['reclaimed']} worker(s) who left, {counts['released']} lease(s) released.",
        )
    return redirect("study_crowd_review", study_id=study.pk)


@require_POST
@researcher_required
def study_crowd_resolve(request: HttpRequest, study_id: int, entry_id: int) -> HttpResponse:
    study = _owned_study(request, study_id)
    try:
        review.ledger_resolve(
            study=study,
            entry_id=entry_id,
            done=request.POST.get("paid") == "yes",
            confirmed=request.POST.get("confirm") == "yes",
            user=request.user,
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("study_crowd_review", study_id=study.pk)


@require_POST
@researcher_required
def study_crowd_hold(request: HttpRequest, study_id: int, participant_id: int) -> HttpResponse:
    """One click on a held completion code: ``decision`` release or return (issue 45)."""
    study = _owned_study(request, study_id)
    try:
        person = holds.participant_hold_decide(
            study=study,
            participant_id=participant_id,
            decision=request.POST.get("decision", ""),
            user=request.user,
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        if request.POST.get("decision") == holds.RELEASE:
            got = "gets the completion code" if person.completed_at else "may earn the code"
            messages.success(request, f"Released: {person.pseudonym} {got}.")
        else:
            messages.success(request, f"{person.pseudonym} is asked to return the submission.")
    return redirect("study_crowd_review", study_id=study.pk)
