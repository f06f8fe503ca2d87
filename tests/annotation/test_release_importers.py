"""A mode owns its importers (issue 44): each declares the formats it reads, one service
writes what they return (that the services name no mode: ``test_mode_scan.py``)."""

import pytest
from django.urls import reverse

from annotation.errors import Forbidden, InvalidInput
from annotation.models import Study
from annotation.modes import get_mode
from annotation.modes.importing import Importer, import_notes, importers
from annotation.registry import mode_names
from annotation.services.imports.releases import release_formats, release_import


def test_each_format_is_read_by_one_importer_of_one_mode():
    declared = [
        (fmt, mode)
        for mode in mode_names()
        for importer in importers(get_mode(mode))
        for fmt in importer.formats
    ]
    formats = [fmt for fmt, _ in declared]
    assert sorted(formats) == release_formats()
    assert len(set(formats)) == len(formats)
    for mode in mode_names():
        for importer in importers(get_mode(mode)):
            assert isinstance(importer, Importer) and importer.mode is get_mode(mode)


def test_the_import_page_says_what_the_mode_says_of_its_files(client, researcher, make_study):
    client.force_login(researcher)
    for mode in mode_names():
        study = make_study(mode, name=f"Import {mode}")
        html = client.get(reverse("study_import", args=[study.pk])).content.decode()
        notes = import_notes(get_mode(mode))
        for note in notes:
            assert f"<li>{note}</li>" in html
    # Only a mode that has something to say adds to the page's list.
    assert any(import_notes(get_mode(mode)) for mode in mode_names())
    assert not all(import_notes(get_mode(mode)) for mode in mode_names())


@pytest.mark.django_db
def test_an_unknown_format_or_an_owner_who_is_no_researcher_writes_nothing(
    tmp_path, researcher, make_user
):
    path = tmp_path / "battles.jsonl"
    path.write_text('{"model_a": "x", "model_b": "y", "winner": "tie"}\n')
    with pytest.raises(InvalidInput) as refused:
        release_import(owner=researcher, path=path, fmt="no-such-format")
    assert "choose one of" in refused.value.message
    with pytest.raises(Forbidden):
        release_import(owner=make_user("ann"), path=path, fmt="battles")
    assert not Study.objects.exists()
    done = release_import(owner=researcher, path=path, fmt="battles")
    assert done.study.status == Study.Status.CLOSED
    assert done.study.judgments.count() == done.details["battles"]
