"""Hardening (issue 12, first slice): each attack is performed through the real views.

- Login throttling: brute force through the login form and through the API's HTTP Basic
  authentication locks that account out from that address (django-axes).
- The admin keeps judgments as they were stored and refuses to delete what holds them.
- Removing an annotator takes effect on their next request; the People form does not tell
  which accounts exist or what their roles are.
- Bad input is refused naming the field (the API with 400, the form under the field):
  settings nested 50,000 deep, a seed beyond 64 bits; system names with ``$...$`` are
  drawn literally in report figures.
"""

import base64
import json
import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Judgment, Participant, Study
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_user
from tests.factories.thumb import thumb_study

pytestmark = pytest.mark.django_db

LIMIT = 5  # the default failure limit (CAPEVAL_LOGIN_FAILURE_LIMIT)


# ---------------------------------------------------------------------- helpers


def one_image_thumb_study(make_study, systems=("M1",), settings=None):
    """A live THumB study with one image, a Human caption and one caption per system."""
    rows = [("Human", "A red bus on a street."), *((s, f"A bus by {s}.") for s in systems)]
    return thumb_study(make_study, captions={"bus": rows}, settings=settings)


def scores_for(item):
    score = {"precision": 4, "recall": 3, "fluency_errors": {}, "conciseness": 0, "inclusive": 0}
    return {"captions": {group["key"]: score for group in item.spec["groups"]}}


def judged(study, user):
    """``user`` annotates the study's first item through the services; return the judgment."""
    study.annotators.add(user)
    participant = participant_for_user(study=study, user=user)
    lease = assignment_next(participant=participant)
    return judgment_submit(
        participant=participant, token=lease.token, data=scores_for(lease.item)
    ).judgment


def basic(username, password):
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return f"Basic {token}"


def alert(response, kind: str = "error") -> str:
    """The text of the page's error message (or, for ``success``, its flash message)."""
    pattern = {
        "error": r'<p class="error" role="alert">(.*?)</p>',
        "success": r'<li class="success">(.*?)</li>',
    }[kind]
    match = re.search(pattern, response.content.decode(), re.S)
    return match.group(1).strip()


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


# ---------------------------------------------------------------------- login throttling


def test_brute_force_on_the_login_form_locks_the_account_out_from_that_address(
    client, researcher, make_user
):
    url = reverse("login")
    for n in range(LIMIT - 1):
        # A new User-Agent and a forged X-Forwarded-For each time do not reset the count.
        response = client.post(
            url,
            {"username": "rita", "password": "guess"},
            HTTP_USER_AGENT=f"bot/{n}",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{n}",
        )
        assert response.status_code == 200 and not logged_in(client)

    locked = client.post(url, {"username": "rita", "password": "guess"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()

    # The right password is refused too while the lockout lasts.
    again = client.post(url, {"username": "rita", "password": "pw-rita"})
    assert again.status_code == 429
    assert "Too many failed logins" in again.content.decode()
    assert not logged_in(client)

    # Someone else at the same address is not affected...
    make_user("bea", researcher=True)
    assert client.post(url, {"username": "bea", "password": "pw-bea"}).status_code == 302
    assert logged_in(client)
    # ...and neither is the researcher from another address: a rival who guesses at
    # rita's password from elsewhere cannot lock her out of her own desk.
    elsewhere = type(client)(REMOTE_ADDR="10.9.8.7")
    response = elsewhere.post(url, {"username": "rita", "password": "pw-rita"})
    assert response.status_code == 302 and logged_in(elsewhere)


def test_brute_force_on_basic_auth_locks_the_account_out_with_a_json_message(researcher, make_user):
    url = reverse("api_studies")
    api = APIClient()
    for _ in range(LIMIT - 1):
        assert api.get(url, HTTP_AUTHORIZATION=basic("rita", "guess")).status_code in {401, 403}

    # Refused as credentials (401/403, what the schema documents and a client expects of
    # a login it cannot use), not 429 (issue 45, Schemathesis ST401), saying why and when.
    locked = api.get(url, HTTP_AUTHORIZATION=basic("rita", "guess"))
    assert locked.status_code in {401, 403}
    assert "Too many failed logins" in locked.json()["detail"]
    assert locked.json()["code"] == "locked_out"
    assert int(locked["Retry-After"]) > 0

    refused = api.get(url, HTTP_AUTHORIZATION=basic("rita", "pw-rita"))
    assert refused.status_code in {401, 403}
    assert "Too many failed logins" in refused.json()["detail"]

    make_user("bea", researcher=True)
    assert api.get(url, HTTP_AUTHORIZATION=basic("bea", "pw-bea")).status_code == 200
    elsewhere = APIClient(REMOTE_ADDR="10.9.8.7")
    assert elsewhere.get(url, HTTP_AUTHORIZATION=basic("rita", "pw-rita")).status_code == 200


def test_brute_force_on_the_admin_login_locks_out_too(client, make_user):
    make_user("root", staff=True)
    url = reverse("admin:login")
    for _ in range(LIMIT):
        response = client.post(url, {"username": "root", "password": "guess"})
    assert response.status_code == 429
    assert client.post(url, {"username": "root", "password": "pw-root"}).status_code == 429
    assert not logged_in(client)


def login_answers(client, url: str, username: str, tries: int) -> list[tuple[int, str]]:
    """Each wrong-password answer's status and page, the CSRF token and nonces blanked."""
    answers = []
    for _ in range(tries):
        response = client.post(url, {"username": username, "password": "guess"})
        page = re.sub(
            r'(token|nonce|value)="[^"]*"|"X-CSRFToken": "[^"]*"', "", response.content.decode()
        )
        answers.append((response.status_code, response.get("Retry-After"), page))
    return answers


@pytest.mark.parametrize("url_name", ["login", "admin:login"])
def test_a_locked_account_and_an_unknown_name_get_the_same_answers(
    client, researcher, make_user, url_name
):
    """Issue 45, row 11: the lockout must not tell a known account from a made-up name."""
    make_user("root", staff=True)
    url = reverse(url_name)
    answers = {}
    for n, name in enumerate(("rita", "root", "nobody-here")):
        # Each from its own address, so that no pair's failures count for another.
        answers[name] = login_answers(type(client)(REMOTE_ADDR=f"10.0.7.{n}"), url, name, LIMIT + 2)

    statuses = [status for status, _, _ in answers["rita"]]
    assert statuses[-1] == 429, statuses
    assert answers["rita"] == answers["nobody-here"] == answers["root"]


def test_failures_on_the_form_and_the_api_count_together(client, researcher):
    api = APIClient()
    for _ in range(LIMIT - 1):
        api.get(reverse("api_studies"), HTTP_AUTHORIZATION=basic("rita", "guess"))
    response = client.post(reverse("login"), {"username": "rita", "password": "guess"})
    assert response.status_code == 429


# ---------------------------------------------------------------------- admin


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("root", staff=True))
    return client


@pytest.fixture
def judgment(make_study, annotator):
    return judged(one_image_thumb_study(make_study), annotator)


def test_the_admin_cannot_change_a_judgment(admin_client, judgment):
    url = reverse("admin:annotation_judgment_change", args=[judgment.pk])
    stored = Judgment.objects.values().get(pk=judgment.pk)

    page = admin_client.get(url)
    assert page.status_code == 200
    assert 'name="payload"' not in page.content.decode(), "shown read-only"
    assert 'name="dwell_ms"' not in page.content.decode()

    forged = {
        "study": judgment.study_id,
        "item": judgment.item_id,
        "participant": judgment.participant_id,
        "assignment": judgment.assignment_id,
        "part": 0,
        "phase": "forged",
        "payload": json.dumps({"captions": {}}),
        "result": "{}",
        "dwell_ms": 999999,
        "exclusion_reason": "",
        "created_at_0": "2000-01-01",
        "created_at_1": "00:00:00",
    }
    response = admin_client.post(url, forged)
    assert response.status_code == 403
    assert Judgment.objects.values().get(pk=judgment.pk) == stored


def test_the_admin_cannot_add_or_delete_judgments(admin_client, judgment):
    assert admin_client.get(reverse("admin:annotation_judgment_add")).status_code == 403
    delete_url = reverse("admin:annotation_judgment_delete", args=[judgment.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    assert Judgment.objects.filter(pk=judgment.pk).exists()


def test_the_admin_refuses_to_delete_a_study_that_holds_judgments(admin_client, judgment):
    study = judgment.study
    url = reverse("admin:annotation_study_delete", args=[study.pk])

    response = admin_client.post(url, {"post": "yes"})

    assert response.status_code == 200
    assert "1 judgment depends on it" in response.content.decode()
    assert Study.objects.filter(pk=study.pk).exists()
    assert Judgment.objects.filter(pk=judgment.pk).exists()

    # The changelist's "delete selected" action is refused the same way.
    response = admin_client.post(
        reverse("admin:annotation_study_changelist"),
        {"action": "delete_selected", "_selected_action": [study.pk], "post": "yes"},
    )
    assert "1 judgment depends on it" in response.content.decode()
    assert Study.objects.filter(pk=study.pk).exists()


def test_the_admin_still_deletes_a_study_without_judgments(admin_client, make_study):
    study = make_study("vicr", name="A mistake")
    response = admin_client.post(
        reverse("admin:annotation_study_delete", args=[study.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Study.objects.filter(pk=study.pk).exists()


@pytest.mark.parametrize(
    ("model", "holder"),
    [
        ("participant", lambda j: j.participant),
        ("item", lambda j: j.item),
        ("user", lambda j: j.participant.user),
        ("image", lambda j: j.item.image),
        ("caption", lambda j: j.study.captions.first()),
    ],
)
def test_the_admin_refuses_to_delete_what_holds_judgments(admin_client, judgment, model, holder):
    target = holder(judgment)
    url = reverse(f"admin:annotation_{model}_delete", args=[target.pk])

    response = admin_client.post(url, {"post": "yes"})

    assert response.status_code == 200
    assert "judgments are never deleted" in response.content.decode()
    assert type(target).objects.filter(pk=target.pk).exists()
    assert Judgment.objects.filter(pk=judgment.pk).exists()


# ---------------------------------------------------------------------- people


def test_a_removed_annotator_loses_next_and_submit_at_once(
    client, researcher, annotator, make_study
):
    study = one_image_thumb_study(make_study)
    study.annotators.add(annotator)
    client.force_login(annotator)
    page = client.get(reverse("participate_next", args=[study.public_id]))
    assert page.status_code == 200
    lease = Participant.objects.get(study=study, user=annotator).assignments.get()

    owner = type(client)()
    owner.force_login(researcher)
    owner.post(reverse("study_people", args=[study.pk]), {"annotators": ""})
    assert not study.annotators.exists()

    # Same session, same browser, next request: no more items and no more submissions.
    assert client.get(reverse("participate_next", args=[study.public_id])).status_code == 404
    submit = reverse("participate_submit", args=[study.public_id, lease.token])
    body = {"part": "0"}
    for group in lease.item.spec["groups"]:
        body |= {f"{group['key']}-precision": "4", f"{group['key']}-recall": "3"}
    assert client.post(submit, body).status_code == 404
    assert not Judgment.objects.exists()
    assert client.get(reverse("participate_intro", args=[study.public_id])).status_code == 404


def test_the_people_form_does_not_tell_which_accounts_exist_or_their_roles(
    client, researcher, make_user, make_study
):
    study = make_study("vicr")
    make_user("anna2")
    gone = make_user("gone")
    gone.is_active = False
    gone.save()
    make_user("carla", researcher=True)
    client.force_login(researcher)
    url = reverse("study_people", args=[study.pk])

    answers = {}
    for name in ("ghost", "gone", "anna2", "carla"):
        response = client.post(url, {"annotators": name}, follow=True)
        answers[name] = alert(response, "success").replace(name, "NAME")
        client.post(url, {"annotators": ""}, follow=True)  # withdrawn again

    # One sentence whether the account is missing, disabled, an annotator or a researcher
    # (issue 45, row 11): every name is invited, and only an account that fits can answer.
    assert set(answers.values()) == {
        "People saved. Invited: NAME. Each joins when they accept the invitation on their "
        "start page."
    }
    assert not study.annotators.exists()


def test_members_named_wrongly_get_one_answer_whether_missing_or_not_researchers(
    client, researcher, make_user, make_study
):
    study = make_study("vicr")
    make_user("anna2")
    make_user("carla", researcher=True)
    client.force_login(researcher)
    url = reverse("study_people", args=[study.pk])

    answers = [
        alert(client.post(url, {"annotators": "", "members": name}, follow=True), "success")
        for name in ("ghost", "anna2", "carla")
    ]

    assert answers == [
        f"People saved. Invited: {name}. Each joins when they accept the invitation on their "
        "start page."
        for name in ("ghost", "anna2", "carla")
    ]
    assert not study.members.exists()


# ---------------------------------------------------------------------- bad input


def deep_json(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [50_000, 200])
def test_deeply_nested_settings_in_the_form_are_refused_under_settings(client, researcher, depth):
    # The form page shows its errors with 200, like every form page here (a 4xx page is a
    # console error in the browser tests); the API answers 400.
    client.force_login(researcher)
    response = client.post(
        reverse("study_new"),
        {"name": "Deep", "mode": "vicr", "seed": "0", "settings": deep_json(depth)},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="id_settings_error"' in html and "nested too deeply" in html
    assert not Study.objects.exists()


def test_a_bad_setting_value_in_the_form_is_shown_under_settings(client, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("study_new"),
        {"name": "Bad", "mode": "vicr", "seed": "0", "settings": '{"min_ratings": 0}'},
    )
    assert response.status_code == 200
    assert "min_ratings" in " ".join(response.context["form"].errors["settings"])
    assert not Study.objects.exists()


@pytest.mark.parametrize("depth", [50_000, 200])
def test_deeply_nested_settings_in_the_api_answer_400_naming_settings(researcher, depth):
    api = APIClient()
    api.force_authenticate(researcher)
    body = '{"name": "Deep", "mode": "vicr", "settings": ' + deep_json(depth) + "}"
    response = api.post(reverse("api_studies"), body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["settings"][0]
    assert not Study.objects.exists()


def test_a_seed_beyond_64_bits_is_refused_under_seed(client, researcher):
    client.force_login(researcher)
    response = client.post(
        reverse("study_new"), {"name": "Big", "mode": "vicr", "seed": str(2**63), "settings": "{}"}
    )
    assert response.status_code == 200, "the form shown again, with the error"
    assert 'id="id_seed_error"' in response.content.decode()

    api = APIClient()
    api.force_authenticate(researcher)
    response = api.post(
        reverse("api_studies"), {"name": "Big", "mode": "vicr", "seed": 2**63}, format="json"
    )
    assert response.status_code == 400 and "seed" in response.json()
    assert not Study.objects.exists()
    # The largest 64-bit seed is still a seed.
    ok = api.post(
        reverse("api_studies"), {"name": "Big", "mode": "vicr", "seed": 2**63 - 1}, format="json"
    )
    assert ok.status_code == 201 and Study.objects.get().seed == 2**63 - 1


@pytest.mark.parametrize("system", [r"$\frac{a}{b}$", r"$x_$", r"cost in $ and $\alpha"])
def test_system_names_with_dollars_are_drawn_literally_in_figures(
    client, researcher, annotator, make_study, django_capture_on_commit_callbacks, system
):
    # Stage 1 is final only without stage 2: the report leaves stage-1-only images out.
    study = one_image_thumb_study(make_study, systems=(system,), settings={"stage2": False})
    judged(study, annotator)
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_report", args=[study.pk]))
    assert study.jobs.get(kind="report").status == "done"

    svg = client.get(reverse("report_figure", args=[study.pk, "system-totals", "svg"]))
    png = client.get(reverse("report_figure", args=[study.pk, "system-totals", "png"]))

    assert svg.status_code == 200 and png.status_code == 200
    assert png.content.startswith(b"\x89PNG")
    # The SVG draws each text as glyphs after a comment holding the text. Drawn as written,
    # every character of the name, spaces too, is a glyph; as maths, "$\frac{a}{b}$" is two.
    content = svg.content.decode()
    start = content.index(f"<!-- {system} -->")
    drawn = content[start : content.index("</g>", start)]
    assert drawn.count("<use ") == len(system)
