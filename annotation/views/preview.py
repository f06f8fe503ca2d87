"""The researcher's preview of the worker's view (issue 26, row 21).

``/studies/<id>/preview/?n=K`` renders the study's K-th item with the mode's own item
template and context, as a crowd worker arriving now would see it, and records nothing: the
lease and the participant are unsaved stand-ins (``pk`` 0, which no row has), and the
form posts back here, where the answer is dropped and the next item shown. So a researcher
can read the intro, the rubric and a few items before paying anyone, without a judgment,
a lease or a participant appearing in the study.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from annotation import selectors
from annotation.models import Assignment, Item, Participant, Study
from annotation.modes import get_mode
from annotation.views.access import researcher_required

#: Nothing is recorded, so the number only stops a typo from reading past the last item.
PREVIEW_ITEMS = 1000


def _stand_ins(study: Study, item: Item) -> Assignment:
    """An unsaved lease of ``item`` to an unsaved new crowd worker: what the mode's pages
    read, with no row behind either (pk 0 matches nothing in a query)."""
    now = timezone.now()
    worker = Participant(pk=0, study=study, source=Participant.Source.PROLIFIC, state={})
    return Assignment(
        pk=0,
        item=item,
        participant=worker,
        token="preview",
        served_at=now,
        expires_at=now + timedelta(hours=1),
        status=Assignment.Status.OPEN,
    )


@require_http_methods(["GET", "POST"])
@researcher_required
def study_preview(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    try:
        n = min(max(int(request.GET.get("n", "0")), 0), PREVIEW_ITEMS)
    except ValueError:
        n = 0
    url = reverse("study_preview", args=[study.pk])
    if request.method == "POST":
        messages.info(request, "Preview: that answer was not recorded.")
        return redirect(f"{url}?n={n + 1}")
    items = Item.objects.filter(study=study).order_by("position", "id")
    item = items[n : n + 1].first()
    if item is None:
        if n == 0:
            raise Http404("This study has no items yet: open it to build them.")
        return redirect(url)
    mode = get_mode(study.mode)
    assignment = _stand_ins(study, item)
    context = {
        "study": study,
        "participant": assignment.participant,
        "assignment": assignment,
        "part": 0,
        "field_errors": [],
        "error_fields": [],
        "submit_url": f"{url}?n={n}",
        "preview": {"n": n, "next": f"{url}?n={n + 1}", "study_url": study_url(study)},
        "completion": None,
        "crowd_progress": mode.completion_progress(assignment.participant),
        # The same "Guidelines" dialog a worker has (templates/_base.html; issue 46).
        "guidelines": mode.guidelines(study),
        **mode.pages.item_context(assignment, 0),
    }
    return render(request, mode.pages.item_template, context)


def study_url(study: Study) -> str:
    return reverse("study_detail", args=[study.pk])
