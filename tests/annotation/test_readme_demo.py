"""What the README says of the demo is what the demo gives (issue 46, row 20).

A new user read "HUMANr: groups of 9 comparisons and 1 attention check" and met groups of
7 and a check in the demo: a check needs two images outside its group, and the demo has
nine. The README now says both numbers; this test reads them from the README and counts
the demo's groups.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.models import Item, Study

pytestmark = pytest.mark.django_db

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_gives_the_demo_s_humanr_group_size():
    text = re.sub(r"\s+", " ", README.read_text())
    said = re.search(
        r"the demo's (\d+) images give groups of (\d+) comparisons and (\d+) check", text
    )
    assert said, "the README no longer says what the demo's HUMANr groups hold"
    images, comparisons, checks = (int(n) for n in said.groups())

    call_command("load_demo", no_finished=True, no_published=True, stdout=io.StringIO())
    study = Study.objects.get(name="Demo: HUMANr head-to-head")
    groups = [item.spec["trials"] for item in Item.objects.filter(study=study, kind="group")]
    kinds = [[trial["kind"] for trial in trials] for trials in groups]

    assert study.images.count() == images
    assert max(k.count("comparison") for k in kinds) == comparisons
    assert {k.count("attention_check") for k in kinds} == {checks}
