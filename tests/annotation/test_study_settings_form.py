"""Study settings as a form generated from each mode's typed declaration (issue 11).

Expected bounds and defaults are read from the dataclass fields here, independently of the
form code; the messages the form shows are compared with the API's for the same values.
"""

import dataclasses
import html as html_text
import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.errors import ServiceError
from annotation.forms import setting_specs
from annotation.models import Study
from annotation.modes import get_mode
from annotation.modes.catch import CatchSettings
from annotation.modes.settings import GROUPS, CrowdSettings
from annotation.registry import mode_names
from annotation.services.studies import study_update_settings

MODES = ["thumb", "vicr", "humanr"]


def declared(mode: str) -> list[dataclasses.Field]:
    return list(dataclasses.fields(get_mode(mode).settings_class))


def input_tag(html: str, name: str) -> str:
    """The whole <input ...> tag named ``name`` (fails the test when it is missing)."""
    match = re.search(rf'<input[^>]*name="{re.escape(name)}"[^>]*>', html)
    assert match, f"no input named {name}"
    return match.group(0)


def attr(tag: str, name: str) -> str | None:
    match = re.search(rf'\s{name}="([^"]*)"', tag)
    return match.group(1) if match else None


def error_under(html: str, field_id: str) -> str:
    """The error text in the block with id ``<field_id>_error``, right under the field."""
    match = re.search(rf'<div id="{re.escape(field_id)}_error">(.*?)</div>', html, re.S)
    assert match, f"no error under {field_id}"
    return re.sub(r"<[^>]+>", " ", match.group(1)).strip()


def base_post(mode: str, **settings) -> dict[str, str]:
    """A POST of the new-study page showing ``mode``'s fieldset with its defaults."""
    data = {"name": "Typed name", "mode": mode, "seed": "5", "settings": "{}"}
    data[f"{mode}-shown"] = "True"
    for spec in declared(mode):
        meta = spec.metadata
        if meta["kind"] == "flag":
            if spec.default:
                data[f"{mode}-{spec.name}"] = "on"
        else:
            data[f"{mode}-{spec.name}"] = "" if spec.default is None else str(spec.default)
    for key, value in settings.items():
        data[f"{mode}-{key}"] = value
    return data


def too_big(spec: dataclasses.Field):
    """A value just outside the declared bounds of a whole or number setting."""
    meta = spec.metadata
    if meta["kind"] == "whole":
        return meta["high"] + 1
    return meta["high"] if meta.get("open") else meta["high"] + 1


def bounded_settings():
    for mode in MODES:
        for spec in declared(mode):
            if spec.metadata["kind"] in ("whole", "number"):
                yield pytest.param(mode, spec, id=f"{mode}-{spec.name}")


@pytest.mark.parametrize("mode", MODES)
def test_every_setting_is_a_field_with_its_bounds_default_and_help(client, researcher, mode):
    client.force_login(researcher)
    html = client.get(reverse("study_new"), {"mode": mode}).content.decode()
    assert f"{mode}-shown" in html
    for spec in declared(mode):
        meta = spec.metadata
        tag = input_tag(html, f"{mode}-{spec.name}")
        if meta["kind"] == "flag":
            assert attr(tag, "type") == "checkbox"
            assert (" checked" in tag) == spec.default
            continue
        if meta["kind"] in ("whole", "number"):
            assert attr(tag, "type") == "number"
            assert float(attr(tag, "min")) == meta["low"]
            assert float(attr(tag, "max")) == meta["high"]
            if spec.default is None:
                assert attr(tag, "value") is None
            else:
                assert float(attr(tag, "value")) == spec.default
            # The bounds are written out for the person too.
            help_block = re.search(
                rf'id="id_{mode}-{spec.name}_helptext">(.*?)</p>', html, re.S
            ).group(1)
            assert f"{meta['low']:g}" in help_block and f"{meta['high']:g}" in help_block
        else:
            assert attr(tag, "value") in (None, spec.default)
    # No other mode's settings on the page (one fieldset, swapped when the mode changes).
    for other in MODES:
        if other != mode:
            assert f'name="{other}-shown"' not in html


def test_the_htmx_swap_answers_only_the_fieldset_of_the_mode(client, researcher):
    client.force_login(researcher)
    response = client.get(reverse("study_new"), {"mode": "humanr"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert '<fieldset id="mode-settings"' in html and "<html" not in html
    assert 'name="humanr-report_permutations"' in html
    assert 'name="thumb-' not in html


def test_typed_settings_create_the_study_with_them(client, researcher):
    client.force_login(researcher)
    data = base_post("thumb", bootstrap_resamples="2000", confidence="0.95", n_images="", stage2="")
    data.pop("thumb-stage2")  # an unticked box is not posted
    response = client.post(reverse("study_new"), data)
    assert response.status_code == 302, response.context and response.context["form"].errors
    study = Study.objects.get()
    assert study.settings["bootstrap_resamples"] == 2000
    assert study.settings["confidence"] == 0.95
    assert study.settings["stage2"] is False
    assert study.settings["n_images"] is None
    assert (study.name, study.seed) == ("Typed name", 5)


def test_an_out_of_bounds_value_is_shown_under_its_field_and_every_value_is_kept(
    client, researcher
):
    client.force_login(researcher)
    data = base_post("vicr", min_ratings="0", max_ratings="9", leaderboard_size="4")
    data["description"] = "Kept description"
    response = client.post(reverse("study_new"), data)
    assert response.status_code == 200
    html = response.content.decode()
    assert "min_ratings must be a whole number from 1 to 1000" in error_under(
        html, "id_vicr-min_ratings"
    )
    assert 'id="id_vicr-max_ratings_error"' not in html
    # Everything typed is still there, typed values as typed.
    assert attr(input_tag(html, "vicr-min_ratings"), "value") == "0"
    assert attr(input_tag(html, "vicr-max_ratings"), "value") == "9"
    assert attr(input_tag(html, "vicr-leaderboard_size"), "value") == "4"
    assert attr(input_tag(html, "name"), "value") == "Typed name"
    assert "Kept description" in html
    assert not Study.objects.exists()


@pytest.mark.parametrize(("mode", "spec"), list(bounded_settings()))
def test_the_form_and_the_api_refuse_the_same_value_with_the_same_message(
    client, researcher, mode, spec
):
    value = too_big(spec)
    client.force_login(researcher)
    page = client.post(reverse("study_new"), base_post(mode, **{spec.name: str(value)}))
    assert page.status_code == 200
    shown = error_under(page.content.decode(), f"id_{mode}-{spec.name}")

    api = APIClient()
    api.force_authenticate(researcher)
    answer = api.post(
        reverse("api_studies"),
        {"name": "Api", "mode": mode, "settings": {spec.name: value}},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["settings"] == [shown]
    assert spec.name in shown
    assert not Study.objects.exists()


def test_a_bad_value_in_the_json_box_is_shown_under_the_json_box(client, researcher):
    client.force_login(researcher)
    data = base_post("vicr")
    data["settings"] = '{"min_ratings": 0}'
    html = client.post(reverse("study_new"), data).content.decode()
    assert "min_ratings" in error_under(html, "id_settings")
    assert 'id="id_vicr-min_ratings_error"' not in html
    assert not Study.objects.exists()


def test_without_javascript_the_mode_button_shows_that_modes_settings_keeping_input(
    client, researcher
):
    client.force_login(researcher)
    data = base_post("thumb", bootstrap_resamples="3000")
    data.update(mode="humanr", choose_mode="1", description="Still here")
    response = client.post(reverse("study_new"), data)
    html = response.content.decode()
    assert response.status_code == 200 and not Study.objects.exists()
    assert 'name="humanr-report_splits"' in html and 'name="thumb-' not in html
    assert attr(input_tag(html, "name"), "value") == "Typed name"
    assert "Still here" in html


def test_settings_typed_for_another_mode_are_not_silently_dropped(client, researcher):
    # The mode was switched without the settings following (no JavaScript): the page asks
    # to check the new mode's settings instead of creating the study with defaults.
    client.force_login(researcher)
    data = base_post("thumb", bootstrap_resamples="3000")
    data["mode"] = "vicr"
    response = client.post(reverse("study_new"), data)
    assert response.status_code == 200 and not Study.objects.exists()
    assert 'name="vicr-min_ratings"' in response.content.decode()


def test_a_drafts_settings_change_on_its_page_and_a_live_ones_crowd_settings_only(
    client, researcher, make_study
):
    study = make_study("vicr")
    client.force_login(researcher)
    url = reverse("study_settings", args=[study.pk])
    page = client.get(url).content.decode()
    assert attr(input_tag(page, "vicr-min_ratings"), "value") == "3"

    data = {k: v for k, v in base_post("vicr", min_ratings="4").items() if k.startswith("vicr-")}
    assert client.post(url, data).status_code == 302
    study.refresh_from_db()
    assert study.settings["min_ratings"] == 4

    bad = client.post(url, {**data, "vicr-max_ratings": "0"})
    assert "max_ratings must be a whole number from 1 to 1000" in error_under(
        bad.content.decode(), "id_vicr-max_ratings"
    )
    study.refresh_from_db()
    assert study.settings["max_ratings"] == 7

    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    study.refresh_from_db()
    live_page = client.get(url).content.decode()
    assert " disabled" in input_tag(live_page, "vicr-min_ratings")
    assert " disabled" not in input_tag(live_page, "vicr-completion_code")
    # A mode setting posted anyway is ignored; a crowd setting (Prolific's URL comes
    # after the study exists) still changes.
    changed = {**data, "vicr-min_ratings": "5", "vicr-completion_code": "LATE-CODE"}
    assert client.post(url, changed).status_code == 302
    study.refresh_from_db()
    assert (study.settings["min_ratings"], study.settings["completion_code"]) == (4, "LATE-CODE")
    with pytest.raises(ServiceError, match="min_ratings change only while the study is a draft"):
        study_update_settings(study=study, settings={**study.settings, "min_ratings": 5})
    study.refresh_from_db()
    assert study.settings["min_ratings"] == 4


def test_the_api_lists_every_modes_settings_with_bounds_and_defaults(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    body = api.get(reverse("api_modes")).json()
    # The registry is the list: the three protocols first, then modes the tests registered.
    assert [mode["name"] for mode in body] == mode_names()
    assert mode_names()[:3] == MODES
    for mode in body:
        listed = {s["name"]: s for s in mode["settings"]}
        for spec in declared(mode["name"]):
            row = listed.pop(spec.name)
            assert row["kind"] == spec.metadata["kind"]
            assert row["default"] == spec.default
            assert (row["label"], row["group"]) == (spec.metadata["label"], spec.metadata["group"])
            if spec.metadata["kind"] in ("whole", "number"):
                assert (row["low"], row["high"]) == (spec.metadata["low"], spec.metadata["high"])
        assert not listed, "a listed setting that is not declared"


@pytest.mark.parametrize(
    ("mode", "name", "value"),
    [("thumb", "confidence", "0.95"), ("vicr", "report_repetitions", "7")],
)
def test_a_live_studys_report_settings_still_change(
    client, researcher, make_study, mode, name, value
):
    """Issue 26, row 21: the report's own settings (confidence level, resamples) were locked
    once live, though no item was built with them; the mode's other settings stay locked."""
    study = make_study(mode)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LIVE)
    client.force_login(researcher)
    url = reverse("study_settings", args=[study.pk])
    page = client.get(url).content.decode()
    assert " disabled" not in input_tag(page, f"{mode}-{name}")
    built = next(f.name for f in declared(mode) if f.name in ("n_images", "min_ratings"))
    assert " disabled" in input_tag(page, f"{mode}-{built}")
    data = {k: v for k, v in base_post(mode).items() if k.startswith(f"{mode}-")}
    assert client.post(url, {**data, f"{mode}-{name}": value}).status_code == 302
    study.refresh_from_db()
    assert str(study.settings[name]) == value
    # The service is the rule, whatever the form shows.
    stored = study.settings
    changed = study_update_settings(study=study, settings={**stored, name: stored[name]})
    assert changed.settings[name] == stored[name]
    with pytest.raises(ServiceError, match=f"{built} change only while the study is a draft"):
        study_update_settings(study=study, settings={**stored, built: 2})


# Issue 26, row 14: the form read like code ("Stage2", "N images", "Catch min seen"), the
# catch-trial settings first, in one long column.
SHARED = {f.name for f in dataclasses.fields(CatchSettings)}  # the crowd's and catch trials'


def code_like(name: str) -> set[str]:
    """What a label made from the code name looks like (the form's old fallback)."""
    spaced = name.replace("_", " ")
    return {name, spaced, spaced.capitalize(), spaced.title()}


@pytest.mark.parametrize("mode", mode_names())
def test_every_setting_has_a_plain_label_that_is_not_its_code_name(mode):
    for spec in declared(mode):
        label = spec.metadata.get("label", "")
        assert label, f"{mode}.{spec.name} has no label"
        assert label not in code_like(spec.name), f"{mode}.{spec.name} is labelled {label!r}"
        assert "_" not in label, f"{mode}.{spec.name}'s label {label!r} reads like code"
        assert spec.metadata["group"] in GROUPS


@pytest.mark.parametrize("mode", mode_names())
def test_the_form_lists_the_modes_own_settings_first_grouped_in_order(client, researcher, mode):
    names = [spec["name"] for spec in setting_specs(mode)]
    assert sorted(names) == sorted(spec.name for spec in declared(mode))
    # The first setting is the mode's own, never a catch-trial or crowd one (unless the
    # mode has none of its own, as a mode a test registers may not).
    if set(names) - SHARED:
        assert names[0] not in SHARED
    groups = [spec["group"] for spec in setting_specs(mode)]
    assert groups == sorted(groups, key=GROUPS.index), "groups are not in GROUPS order"
    # The crowd's arrival settings come last, under their own group.
    crowd = {f.name for f in dataclasses.fields(CrowdSettings)}
    assert set(names[-len(crowd) :]) == crowd
    # The page shows the labels, not code names, in <label> and one fieldset per group.
    client.force_login(researcher)
    html = client.get(reverse("study_new"), {"mode": mode}).content.decode()
    labels = re.findall(r'<label for="id_[^"]+">(.*?)</label>', html, re.S)
    shown = {html_text.unescape(re.sub(r"<[^>]+>", "", label)).strip() for label in labels}
    for spec in declared(mode):
        assert spec.metadata["label"] in shown
        assert not shown & code_like(spec.name), f"{spec.name} shown as a label"
    legends = re.findall(r'<fieldset class="settings-group"[^>]*>\s*<legend>(.*?)</legend>', html)
    assert legends == list(dict.fromkeys(groups))
