"""Security headers (issue 12): a strict Content-Security-Policy and a Permissions-Policy.

The attack these tests stand for is injected markup: a caption, study name or system name
that slips past escaping must not run script or restyle the page. The policy forbids inline
script and style outright ('unsafe-inline' would let such markup run), so every page must
work without any: the tests walk the pages of every role and mode through the real views
and check both the headers and the HTML each page sends; a scan of the templates catches
inline code on pages the walk does not reach. Framing: MTurk shows its tasks inside its own
frame, so a MTurk worker's pages may be framed by MTurk's hosts and nothing else, in step
with X-Frame-Options (absent there, DENY everywhere else).

The browser side (no violation reported while the pages run, Swagger UI drawn from local
files) is ``tests/e2e/test_csp.py``.
"""

import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db.models import F
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, Participant
from annotation.services.judgments import judgment_submit
from annotation.services.participants import MTURK_HOSTS, crowd_link_token
from tests.factories.core import vehicle_study
from tests.factories.humanr import honest, humanr_study
from tests.factories.thumb import member, thumb_study
from tests.factories.vicr import vicr_study

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
#: The project's templates, each mode app's (annotation/modes/<mode>/templates) and the
#: tests' (the vehicle's in tests/factories/, a test-only mode app's).
TEMPLATE_DIRS = [
    ROOT / "templates",
    *sorted((ROOT / "annotation" / "modes").glob("*/templates")),
    *sorted((ROOT / "tests").glob("*/templates")),
]

MTURK_ORIGINS = {"https://www.mturk.com", "https://workersandbox.mturk.com"}
# The policy as specified (docs/architecture.md, "Security headers"), written out here
# rather than read from the settings, so a weakened setting fails the tests.
STRICT = {
    "default-src": {"'self'"},
    "script-src": {"'self'"},
    "style-src": {"'self'"},
    "img-src": {"'self'"},
    "connect-src": {"'self'"},
    "font-src": {"'self'"},
    "object-src": {"'none'"},
    "base-uri": {"'none'"},
    "form-action": {"'self'", *MTURK_ORIGINS},
    "frame-ancestors": {"'none'"},
}
DENIED_FEATURES = ("camera", "microphone", "geolocation", "payment", "usb")

PROLIFIC = {"PROLIFIC_PID": "5f1e0c", "STUDY_ID": "st-1", "SESSION_ID": "se-1"}
MTURK = {
    "workerId": "A1WORKER",
    "assignmentId": "3ASSIGN",
    "hitId": "3HIT",
    "turkSubmitTo": "https://workersandbox.mturk.com",
}


# ---------------------------------------------------------------------- helpers


def policy(response) -> dict[str, set[str]]:
    """The response's Content-Security-Policy as {directive: {sources}}."""
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.request['PATH_INFO']}"
    directives: dict[str, set[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            assert words[0] not in directives, f"{words[0]} given twice: {header}"
            directives[words[0]] = set(words[1:])
    return directives


class InlineCode(HTMLParser):
    """Collects what a strict CSP refuses to run: inline scripts and styles, event-handler
    attributes and javascript: URLs. A <script type="application/json"> is data (the
    browser never executes it), so it is allowed."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if tag == "style":
            self.found.append("<style> element")
        is_data = (values.get("type") or "").lower() == "application/json"
        if tag == "script" and not values.get("src") and not is_data:
            self.found.append(f"inline <script {values}>")
        for name, value in attrs:
            if name == "style":
                self.found.append(f'style="{value}" on <{tag}>')
            if name.startswith("on"):
                self.found.append(f"{name}= handler on <{tag}>")
            if (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f'{name}="{value}" on <{tag}>')


def inline_code(html: str) -> list[str]:
    parser = InlineCode()
    parser.feed(html)
    parser.close()
    return parser.found


def assert_strict(response, *, framed_by_mturk=False, data_images=False):
    """The page carries the strict policy, a Permissions-Policy, and no inline code.

    ``framed_by_mturk``: a MTurk worker's page, which MTurk's hosts (only) may frame.
    ``data_images``: the API docs, whose Swagger UI draws its icons as data: images.
    """
    path = response.request["PATH_INFO"]
    expected = dict(STRICT)
    if framed_by_mturk:
        expected["frame-ancestors"] = MTURK_ORIGINS
    if data_images:
        expected["img-src"] = {"'self'", "data:"}
    found = policy(response)
    assert found == expected, f"{path}: {response.headers['Content-Security-Policy']}"
    header = response.headers["Content-Security-Policy"]
    assert "unsafe-" not in header and "nonce-" not in header
    permissions = response.headers.get("Permissions-Policy", "")
    for feature in DENIED_FEATURES:
        assert f"{feature}=()" in permissions, f"{path}: {feature} not denied: {permissions!r}"
    if response.headers.get("Content-Type", "").startswith("text/html"):
        assert inline_code(response.content.decode()) == [], path
    if framed_by_mturk:
        assert "X-Frame-Options" not in response.headers, path
    else:
        # Answers given before XFrameOptionsMiddleware runs (the 413 of the upload guard)
        # carry none; frame-ancestors 'none' refuses framing for them all the same.
        assert response.headers.get("X-Frame-Options", "DENY") == "DENY", path


def crowd_client(study, params) -> tuple[Client, list]:
    """A browser joining through the study's crowd link; returns it and the responses."""
    client = Client()
    entry = client.get(reverse("crowd_entry", args=[crowd_link_token(study)]), params)
    assert entry.status_code == 302, entry.content.decode()
    intro = client.get(reverse("participate_intro", args=[study.public_id]))
    item = client.get(reverse("participate_next", args=[study.public_id]))
    assert intro.status_code == item.status_code == 200
    return client, [entry, intro, item]


def submit(client, study, item_response, data):
    token = item_response.context["assignment"].token
    url = reverse("participate_submit", args=[study.public_id, token])
    return client.post(url, data)


# ---------------------------------------------------------------------- pages


def test_pages_without_an_account_carry_the_strict_policy(client, settings, researcher):
    docs = [client.get(reverse("api_docs")), client.get(reverse("api_docs") + "?script=")]
    responses = [
        client.get(reverse("login")),
        client.get(reverse("admin:login")),
        client.get("/no/such/page/"),
        client.get(reverse("schema")),
        client.get(reverse("api_studies")),
    ]
    # The answers that never reach a view: an oversized body (the upload guard) and a
    # locked-out login (django-axes) are pages too.
    settings.CAPEVAL_MAX_UPLOAD_BYTES = 10
    responses.append(client.post(reverse("login"), {"username": "x" * 50, "password": "y"}))
    settings.CAPEVAL_MAX_UPLOAD_BYTES = 100 * 1024 * 1024
    for _ in range(settings.AXES_FAILURE_LIMIT):
        responses.append(client.post(reverse("login"), {"username": "rita", "password": "no"}))

    assert [r.status_code for r in responses[:5]] == [200, 200, 404, 200, 403]
    assert responses[5].status_code == 413
    assert responses[-1].status_code == 429
    for response in responses:
        assert_strict(response)
    # The API docs: Swagger UI and its start-up script are files, served from here.
    assert [r.status_code for r in docs] == [200, 200]
    assert docs[1].headers["Content-Type"].startswith("application/javascript")
    assert f"{django_settings.STATIC_URL}drf_spectacular_sidecar/" in docs[0].content.decode()
    for response in docs:
        assert_strict(response, data_images=True)


def test_researcher_and_admin_pages_carry_the_strict_policy(client, researcher, make_user):
    study = vehicle_study(researcher)
    client.force_login(researcher)
    urls = [
        reverse("home"),
        reverse("study_new"),
        reverse("study_detail", args=[study.pk]),
        reverse("study_report", args=[study.pk]),
        reverse("study_dashboard", args=[study.pk]),
        reverse("study_settings", args=[study.pk]),
        reverse("study_close_confirm", args=[study.pk]),
        reverse("study_metrics", args=[study.pk]),
        reverse("api_studies"),  # DRF's browsable API, as a browser asks for it
    ]
    responses = [client.get(url, HTTP_ACCEPT="text/html") for url in urls]
    admin = Client()
    admin.force_login(make_user("root", staff=True))
    responses += [admin.get(reverse("admin:index")), admin.get("/admin/annotation/judgment/")]

    for response in responses:
        assert response.status_code == 200, response.request["PATH_INFO"]
        assert_strict(response)


def test_every_modes_participant_pages_carry_the_strict_policy(researcher, make_study, make_user):
    pages = []

    # The vehicle mode: intro, item and, after the only item, the finished page.
    rating = vehicle_study(researcher, captions=1, completion_after=1)
    client, seen = crowd_client(rating, PROLIFIC)
    pages += seen
    pages.append(submit(client, rating, seen[-1], {"part": "0", "rating": "3"}))
    pages.append(client.get(reverse("participate_next", args=[rating.public_id])))
    assert "Thank you" in pages[-1].content.decode()

    # VICR: a tutorial pair and its feedback (the pair was served a minute ago).
    vicr = vicr_study(researcher)
    client, seen = crowd_client(vicr, PROLIFIC)
    pages += seen
    Assignment.objects.filter(token=seen[-1].context["assignment"].token).update(
        served_at=F("served_at") - timedelta(minutes=1)
    )
    # The feedback is a page of its own, after a redirect (issue 42): both carry it.
    saved = submit(client, vicr, seen[-1], {"rating": "3"})
    feedback = client.get(saved["Location"])
    assert feedback.status_code == 200 and "point" in feedback.content.decode()
    pages += [saved, feedback]

    # HUMANr: a trial, and the feedback after the group's last trial.
    humanr = humanr_study(researcher)
    client, seen = crowd_client(humanr, {**PROLIFIC, "PROLIFIC_PID": "hr-1"})
    pages += seen
    lease = seen[-1].context["assignment"]
    participant = Participant.objects.get(pk=lease.participant_id)
    trials = lease.item.spec["trials"]
    for part in range(len(trials) - 1):
        judgment_submit(
            participant=participant,
            token=lease.token,
            part=part,
            data={"raw": honest(trials[part], True)},
        )
    last = client.get(reverse("participate_next", args=[humanr.public_id]))
    saved = submit(client, humanr, last, {"part": str(len(trials) - 1), "raw": "5"})
    done = client.get(saved["Location"])
    assert done.status_code == 200 and "Group complete" in done.content.decode()
    pages += [last, saved, done]

    # THumB: a registered annotator's intro and item page (the rubric dialog included).
    thumb = thumb_study(make_study)
    annotator = make_user("tom", native_english=True)
    member(thumb, annotator)
    client = Client()
    client.force_login(annotator)
    pages.append(client.get(reverse("participate_intro", args=[thumb.public_id])))
    pages.append(client.get(reverse("participate_next", args=[thumb.public_id])))
    assert 'id="rubric"' in pages[-1].content.decode()

    for response in pages:
        assert response.status_code in {200, 302}, response.request["PATH_INFO"]
        assert_strict(response)


def test_mturk_pages_keep_the_strict_policy_and_may_be_framed_by_mturk_only(researcher):
    study = vehicle_study(researcher, captions=1, completion_after=1)
    client, pages = crowd_client(study, MTURK)
    preview = Client().get(
        reverse("crowd_entry", args=[crowd_link_token(study)]),
        {**MTURK, "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"},
    )
    pages.append(preview)
    saved = submit(client, study, pages[2], {"part": "0", "rating": "4"})
    finished = client.get(reverse("participate_next", args=[study.public_id]))
    pages.append(finished)

    for response in pages:
        assert_strict(response, framed_by_mturk=True)
    # The redirect after a submission is not a page (the frame shows where it leads): it
    # keeps X-Frame-Options DENY, and frame-ancestors agrees.
    assert saved.status_code == 302
    assert_strict(saved)
    # The completion form posts to MTurk, and the policy lets it.
    action = re.search(
        r'<form method="post" action="([^"]+)" id="completion-mturk"', finished.content.decode()
    )
    assert action and action.group(1) == "https://workersandbox.mturk.com/mturk/externalSubmit"
    assert "https://workersandbox.mturk.com" in policy(finished)["form-action"]

    # The same study's pages for a Prolific worker: never framed.
    _, prolific_pages = crowd_client(study, PROLIFIC)
    for response in prolific_pages:
        assert_strict(response)


def test_form_action_allows_exactly_the_crowd_hosts_the_completion_forms_post_to():
    """The MTurk submit form is built only for MTURK_HOSTS; Prolific is a link, not a form."""
    sources = set(django_settings.CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"])
    assert sources == {"'self'", *(f"https://{host}" for host in MTURK_HOSTS)}


# ---------------------------------------------------------------------- templates

INLINE_IN_TEMPLATE = [
    (re.compile(r"<style", re.I), "<style>"),
    (re.compile(r"\sstyle\s*=", re.I), "style= attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "on*= handler"),
    (re.compile(r"javascript:", re.I), "javascript: URL"),
    # A <script> without src, unless it is a JSON data block.
    (
        re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=[\"']application/json)[^>]*>", re.I),
        "inline <script>",
    ),
]


# Django comments never reach the browser (and may name what they replaced).
DJANGO_COMMENT = re.compile(r"\{#.*?#\}|\{% comment %\}.*?\{% endcomment %\}", re.S)


def template_files() -> list[Path]:
    return sorted(p for d in TEMPLATE_DIRS for p in d.rglob("*.html"))


def without_comments(text: str) -> str:
    """The template with its Django comments blanked, lines kept in place."""
    return DJANGO_COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)


def test_no_template_holds_inline_script_or_style():
    files = template_files()
    assert len(files) > 30, "the scan must see the templates"
    problems = []
    for path in files:
        text = without_comments(path.read_text())
        for pattern, what in INLINE_IN_TEMPLATE:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert problems == []


def test_the_template_scan_and_the_page_check_find_what_they_look_for():
    """The checks above are only worth something if they catch each kind of inline code."""
    samples = [
        "<style>p{}</style>",
        '<p style="color:red">',
        '<img src="x" onerror="alert(1)">',
        '<a href="javascript:alert(1)">',
        "<script>alert(1)</script>",
    ]
    for sample in samples:
        assert inline_code(sample), sample
        assert any(p.search(sample) for p, _ in INLINE_IN_TEMPLATE), sample
    data = '<script type="application/json" id="d">{}</script><script src="/s.js"></script>'
    assert inline_code(data) == []
    assert not any(p.search(data) for p, _ in INLINE_IN_TEMPLATE)
