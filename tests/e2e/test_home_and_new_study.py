"""The start page and the new-study form as a new researcher sees them (issue 46, row 19).

A new user found no study ids on the start page (the API names studies by id), no way to
the API's documentation or to the crowd credentials, and the URL fields of the new-study
form drawn smaller than the other fields. Measured in Chromium: the URL field's box must be
the text field's, at a phone's and a laptop's width.
"""

import pytest
from playwright.sync_api import expect

from tests.e2e.axe import assert_no_serious_a11y_violations
from tests.e2e.layout import WIDTHS, assert_fits_every_width
from tests.factories.core import vehicle_study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, "the field is not drawn"
    return found


def test_the_start_page_shows_study_ids_and_links_to_the_api_docs_and_credentials(
    page, login, researcher
):
    first = vehicle_study(researcher, captions=1, name="First study")
    second = vehicle_study(researcher, captions=1, live=False, name="Second study")
    login(page, researcher)
    page.goto("/")
    table = page.get_by_role("table", name="Studies you own or were added to")
    expect(table.get_by_role("columnheader", name="Id")).to_be_visible()
    for study in (first, second):
        row = table.get_by_role("row").filter(has_text=study.name)
        expect(row.get_by_role("cell", name=str(study.pk), exact=True)).to_be_visible()
    docs = page.get_by_role("link", name="API documentation")
    expect(docs).to_have_attribute("href", "/api/docs/")
    credentials = page.get_by_role("link", name="Crowd credentials")
    expect(credentials).to_have_attribute("href", "/account/crowd/")
    assert_no_serious_a11y_violations(page, context="start page")
    assert_fits_every_width(page, "start page", shot="issue46-row19-home")
    credentials.click()
    expect(page.get_by_label("Prolific API token")).to_be_visible()
    page.goto("/")
    page.get_by_role("link", name="API documentation").click()
    expect(page).to_have_url(page.url.split("/api/")[0] + "/api/docs/")


def test_a_researcher_without_studies_finds_the_links_too(page, login, researcher):
    login(page, researcher)
    page.goto("/")
    expect(page.get_by_role("link", name="API documentation")).to_be_visible()
    expect(page.get_by_role("link", name="Crowd credentials")).to_be_visible()


def test_url_fields_are_drawn_like_the_text_fields_on_the_new_study_form(page, login, researcher):
    login(page, researcher)
    page.goto("/studies/new/")
    text = page.get_by_label("Code a finished worker reports")
    url = page.get_by_label("Prolific completion link")
    assert text.get_attribute("type") == "text" and url.get_attribute("type") == "url"
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        text_box, url_box = box(text), box(url)
        assert (url_box["width"], url_box["height"]) == (text_box["width"], text_box["height"]), (
            f"at {width} px the URL field is {url_box['width']}x{url_box['height']}, "
            f"the text field {text_box['width']}x{text_box['height']}"
        )
        style = "el => [getComputedStyle(el).borderTopWidth, getComputedStyle(el).paddingLeft]"
        assert url.evaluate(style) == text.evaluate(style)
    url.scroll_into_view_if_needed()
    assert_no_serious_a11y_violations(page, context="new study form")
    assert_fits_every_width(page, "new study form", shot="issue46-row19-new-study")
