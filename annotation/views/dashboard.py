"""The live study dashboard and the crowd setup panel of the study page.

The dashboard (``templates/studies/_dashboard.html``) is a partial: the study page renders
it in place, and htmx asks ``study_dashboard`` for a fresh copy every ``POLL_SECONDS``
while the study is live (a draft or closed study does not change by itself, so its copy
carries no polling and the polling stops once the study closes). Sorting and paging are
links that work without JavaScript (the study page with ``?sort=``/``?page=``) and, with
htmx, swap only the dashboard.
"""

from urllib.parse import urlencode
from xml.sax.saxutils import escape

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from annotation import dashboard as dashboard_reads
from annotation import selectors
from annotation.models import LinkGroup, Study
from annotation.modes import get_mode
from annotation.modes.base import Mode
from annotation.services.participants import GROUP_WORDS, crowd_link_expires_at, crowd_link_token
from annotation.views.access import researcher_required

#: How often an open dashboard asks for fresh numbers while the study is live. Every poll
#: costs a fixed handful of aggregate queries (bench/pages.py), so 10 s is cheap.
POLL_SECONDS = 10

#: The per-worker table's sortable columns: ``?sort=`` key and heading. Numbers sort the
#: largest first on the first click, text alphabetically.
SORTABLE = (
    ("pseudonym", "Participant", ""),
    ("source", "Source", ""),
    ("judgments", "Judgments", "-"),
    ("median", "Median time per judgment", "-"),
    ("checks", "Check failures", "-"),
    ("catch", "Catch-trial failures", "-"),
    ("completed", "Completed", "-"),
    ("arrived", "Arrived", "-"),
)

#: MTurk's frame for an external question; FrameHeight 0 lets the frame fill the window.
MTURK_EXTERNAL_QUESTION = (
    '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/'
    'AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd">\n'
    "  <ExternalURL>{url}</ExternalURL>\n"
    "  <FrameHeight>0</FrameHeight>\n"
    "</ExternalQuestion>"
)


#: Prolific's URL parameters, placeholders it replaces with the worker's, study's and
#: session's ids (crowd_entry reads them).
PROLIFIC_PLACEHOLDERS = (
    "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)


@require_GET
@researcher_required
def study_dashboard(request: HttpRequest, study_id: int) -> HttpResponse:
    """The dashboard partial alone (what htmx polls and what sorting and paging swap in)."""
    study = selectors.study_for_researcher(request.user, study_id)
    context = dashboard_context(request, study, get_mode(study.mode))
    return render(request, "studies/_dashboard.html", context)


def dashboard_context(request: HttpRequest, study: Study, mode: Mode) -> dict:
    """The dashboard's context for ``request`` (its ``?sort=`` and ``?page=``); ``mode`` is
    the study's, looked up once by the view."""
    sort = dashboard_reads.worker_sort(request.GET.get("sort"))
    page = _page_number(request.GET.get("page"))
    # The raw crowd ids approve or reject a Prolific/MTurk submission: for the study's
    # owner (who pays the workers) and staff; members see pseudonyms only.
    raw_ids = request.user.is_staff or request.user.pk == study.owner_id
    dashboard = dashboard_reads.study_dashboard(
        study, sort=sort, page=page, raw_ids=raw_ids, mode=mode
    )
    workers = dashboard["workers"]
    page_url = reverse("study_detail", args=[study.pk])
    partial_url = reverse("study_dashboard", args=[study.pk])

    def links(**query) -> dict[str, str]:
        """The same view of the table as a full page (no JavaScript) and as the partial."""
        encoded = urlencode({key: value for key, value in query.items() if value})
        suffix = f"?{encoded}" if encoded else ""
        return {"page": f"{page_url}{suffix}#dashboard", "partial": f"{partial_url}{suffix}"}

    columns = []
    for key, label, first in SORTABLE:
        current = workers["sort"].lstrip("-") == key
        descending = workers["sort"].startswith("-")
        following = ("" if descending else "-") + key if current else first + key
        columns.append(
            {
                "key": key,
                "label": label,
                "links": links(sort=following),
                "aria_sort": ("descending" if descending else "ascending") if current else "",
            }
        )
    pages = {}
    if workers["page"] > 1:
        pages["previous"] = links(sort=workers["sort"], page=workers["page"] - 1)
    if workers["page"] < workers["pages"]:
        pages["next"] = links(sort=workers["sort"], page=workers["page"] + 1)
    refresh = links(sort=workers["sort"], page=workers["page"] if workers["page"] > 1 else "")
    return {
        "study": study,
        "dashboard": dashboard,
        "worker_columns": columns,
        "worker_pages": pages,
        "raw_ids": raw_ids,
        "refresh_url": refresh["partial"],
        "poll_seconds": POLL_SECONDS if study.status == Study.Status.LIVE else None,
    }


def _page_number(raw: str | None) -> int:
    """``?page=`` as a page number; anything that is not a small whole number is page 1."""
    text = (raw or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else 1


def crowd_panel_context(request: HttpRequest, study: Study, mode: Mode) -> dict:
    """What the crowd setup panel shows: the stable link, its expiry and platform settings
    (``mode``: the study's, as the view looked it up)."""
    config = mode.settings(study)
    context = {
        **selectors.crowd_setup(study, mode),
        "prolific_study_id": config.prolific_study_id,
        "crowd_link": "",
    }
    if study.status != Study.Status.LIVE:
        return context
    link = request.build_absolute_uri(reverse("crowd_entry", args=[crowd_link_token(study)]))
    expires = crowd_link_expires_at(study)
    context.update(
        crowd_link=link,
        # What Prolific's "study URL" field takes; Prolific fills the {{%...%}} placeholders.
        prolific_study_url=link + PROLIFIC_PLACEHOLDERS,
        crowd_link_expires=expires,
        crowd_link_expired=expires <= timezone.now(),
        # Escaped for XML: a link is ASCII, but "&" in a query would break the document.
        mturk_question=MTURK_EXTERNAL_QUESTION.format(url=escape(link)),
    )
    if mode.asks_vision:
        # A study whose raters' vision decides what they are served can give each group
        # its own Prolific study: a screener sends blind and low-vision workers to theirs,
        # and the link refuses the other group (participant_declare_vision).
        context["group_study_urls"] = [
            (GROUP_WORDS[group], f"{link}{PROLIFIC_PLACEHOLDERS}&group={group}")
            for group in (LinkGroup.BLV, LinkGroup.SIGHTED)
        ]
    return context
