"""The People form shows a refused name under its field and keeps what was typed (issue 11)."""

import re

from django.urls import reverse


def textarea(html: str, name: str) -> str:
    match = re.search(rf'<textarea[^>]*name="{name}"[^>]*>(.*?)</textarea>', html, re.S)
    assert match, f"no textarea {name}"
    return match.group(1).strip()


def error_under(html: str, field: str) -> str:
    match = re.search(rf'<div id="{field}_error">(.*?)</div>', html, re.S)
    assert match, f"no error under {field}"
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_an_unknown_name_is_shown_under_annotators_with_the_typed_names_kept(
    client, researcher, make_user, make_study
):
    study = make_study("vicr")
    make_user("anna2")
    client.force_login(researcher)
    typed = "anna2, ghost  bob/typo"
    response = client.post(reverse("study_people", args=[study.pk]), {"annotators": typed})

    html = response.content.decode()
    assert response.status_code == 400
    assert textarea(html, "annotators") == typed
    assert error_under(html, "annotators") == "Not a user name or e-mail address: bob/typo."
    assert 'aria-invalid="true"' in html
    assert not study.invitations.exists()


def test_with_htmx_the_form_itself_comes_back_with_the_error_and_the_names(
    client, researcher, make_user, make_study
):
    study = make_study("vicr")
    make_user("anna2")
    client.force_login(researcher)
    response = client.post(
        reverse("study_people", args=[study.pk]),
        {"annotators": "anna2", "members": "nobody (here)"},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200, "htmx swaps only 2xx answers"
    assert html.lstrip().startswith("<form") and "<html" not in html
    assert textarea(html, "annotators") == "anna2"
    assert textarea(html, "members") == "nobody (here)"
    assert error_under(html, "members") == "Not a user name or e-mail address: (here)."
    assert 'id="annotators_error"' not in html
    assert not study.invitations.exists()


def test_saving_with_htmx_answers_the_form_with_the_invited_names(
    client, researcher, make_user, make_study
):
    study = make_study("vicr")
    make_user("anna2")
    client.force_login(researcher)
    response = client.post(
        reverse("study_people", args=[study.pk]), {"annotators": "anna2"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and "People saved. Invited: anna2." in html
    assert textarea(html, "annotators") == "anna2"
    assert "anna2 as annotator" in html, "listed as invited"
    assert not study.annotators.exists()
