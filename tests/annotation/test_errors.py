"""Named refusals (issue 22): each kind of ServiceError carries its HTTP status and a
machine-readable code, the API's error body carries the code, and no raise site picks a
status (the class does).
"""

import ast
from pathlib import Path

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import errors
from annotation.errors import ServiceError
from tests.factories.core import vehicle_study

ROOT = Path(__file__).resolve().parents[2]

#: What each kind answers, written out by hand (the HTTP meaning of each refusal).
EXPECTED = {
    errors.InvalidInput: (400, "invalid"),
    errors.Forbidden: (403, "forbidden"),
    errors.NotFound: (404, "not_found"),
    errors.Conflict: (409, "conflict"),
    errors.Gone: (410, "gone"),
    errors.TooFast: (429, "too_fast"),
    errors.Unavailable: (503, "unavailable"),
    errors.DiskFull: (507, "disk_full"),
}


def test_each_kind_has_its_status_and_code_and_keeps_field_and_details():
    for kind, (status, code) in EXPECTED.items():
        refusal = kind("No.", field="f", details={"errors": ["line 1: bad"]})
        assert isinstance(refusal, ServiceError)
        assert (refusal.status, refusal.code) == (status, code)
        assert (refusal.message, refusal.field, refusal.report()) == (
            "No.",
            "f",
            "No.\nline 1: bad",
        )
    assert (ServiceError("x").status, ServiceError("x").code) == (400, "invalid")


def test_a_raise_site_cannot_choose_a_status():
    with pytest.raises(TypeError):
        ServiceError("x", status=409)  # type: ignore[call-arg]


def test_no_raise_site_passes_a_status():
    """The class says the status: no call of a refusal in the code passes ``status=``."""
    kinds = {"ServiceError", *(kind.__name__ for kind in EXPECTED)}
    found = []
    for path in sorted((ROOT / "annotation").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in kinds
                and any(k.arg == "status" for k in node.keywords)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


@pytest.mark.django_db
def test_the_api_error_body_carries_the_code(researcher, other_researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    empty = vehicle_study(researcher, captions=0, live=False)
    study = vehicle_study(researcher, captions=2)
    study.members.add(other_researcher)

    conflict = api.post(reverse("api_study_open", args=[empty.pk]))
    api.force_authenticate(other_researcher)
    forbidden = api.post(
        reverse("api_study_exports", args=[study.pk]),
        {"format": "csv", "table": "participants", "raw_ids": True},
        format="json",
    )

    assert conflict.status_code == 409
    assert conflict.json()["code"] == "conflict"
    assert "import captions first" in conflict.json()["detail"]
    assert forbidden.status_code == 403
    assert forbidden.json() == {
        "raw_ids": ["Only the study's owner may export raw Prolific/MTurk ids."],
        "code": "forbidden",
    }
