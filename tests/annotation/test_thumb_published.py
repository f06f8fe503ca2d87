"""The THumB 1.0 release imported with ``import_thumb`` reproduces the paper on the report page.

Kasai et al. 2022, Table 2 (P, R, Total per system) and the "# best" row of Table 3, read
from the rendered report page, not from the stored result. Needs ``../shared/datasets``;
skips cleanly when a fresh clone lacks it.
"""

import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Study
from annotation.modes import get_mode

SHARED_DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
RELEASE = SHARED_DATASETS / "thumb-1.0" / "mscoco_THumB-1.0.jsonl"

TABLE_2 = {  # system: (P, R, Total)
    "Human": ("4.82", "4.35", "4.56"),
    "VinVL-large": ("4.54", "3.97", "4.25"),
    "VinVL-base": ("4.47", "3.95", "4.21"),
    "Unified-VLP": ("4.35", "3.77", "4.06"),
    "Up-Down": ("4.29", "3.50", "3.88"),
}
TABLE_3_BEST = {
    "Human": 327,
    "VinVL-large": 180,
    "VinVL-base": 161,
    "Unified-VLP": 112,
    "Up-Down": 74,
}

pytestmark = pytest.mark.django_db


@pytest.fixture
def release() -> Path:
    if not RELEASE.is_file():
        pytest.skip(f"THumB 1.0 release not found at {RELEASE} (../shared is absent)")
    return RELEASE


def table_rows(html: str, table_id: str) -> dict[str, list[str]]:
    """System -> the leading number of each cell of one table of the report page."""
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S).group(1)
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        head = re.search(r'<th scope="row">(.*?)</th>', row)
        if head:
            cells = re.findall(r"<td[^>]*>(?:<strong>)?([-\d.]+)", row)
            rows[head.group(1)] = cells
    return rows


def test_imported_release_reproduces_tables_2_and_3_on_the_report_page(
    client, researcher, release, django_capture_on_commit_callbacks
):
    call_command(
        "import_thumb", str(release), "--owner", researcher.username, "--name", "THumB 1.0"
    )
    study = Study.objects.get(name="THumB 1.0")
    assert study.status == Study.Status.CLOSED
    client.force_login(researcher)
    url = reverse("study_report", args=[study.pk])

    with django_capture_on_commit_callbacks(execute=True):
        client.post(url)
    html = client.get(url).content.decode()
    figures = [
        client.get(reverse("report_figure", args=[study.pk, name, "svg"]))
        for name in get_mode("thumb").report.figure_names
    ]

    table_2 = table_rows(html, "table-2")
    # Cells: images, P, R, Flu., Con., Inc., Total (the bracketed intervals are not captured).
    shown = {system: (cells[1], cells[2], cells[6]) for system, cells in table_2.items()}
    assert shown == TABLE_2
    assert list(table_2) == list(TABLE_2), "ordered Human first, then by Total"
    assert all(cells[0] == "500" for cells in table_2.values())
    best = {system: int(cells[0]) for system, cells in table_rows(html, "table-3").items()}
    assert best == TABLE_3_BEST
    assert all(f.status_code == 200 and f.content.startswith(b"<?xml") for f in figures)
