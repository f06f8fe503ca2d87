"""The API keeps the promises of its OpenAPI schema (issue 45, Schemathesis).

Schemathesis' own command line runs against the schema the live server serves, as a
researcher of its own (HTTP Basic auth) owning a study with images, captions, judgments,
a report and an export, with every check on and a bounded number of cases per operation:
any 500, any answer the schema does not document, any refusal of input the schema allows
and any credential probe not answered 401/403 fails the test, listing each finding.

Jobs asked for during the run are published to an in-memory Celery broker and stay
queued: an answer is checked, not the job behind it (the job tests run jobs).
"""

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Job
from annotation.services.assignments import assignment_next
from annotation.services.exports import export_request
from annotation.services.judgments import judgment_submit
from annotation.services.reports import report_request
from annotation.tasks import enqueue
from tests.factories.core import crowd_participant, vehicle_study
from tests.factories.workers import use_broker

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
#: The user name (and password) of Schemathesis' wrong-credentials probe.
INVALID_CREDENTIAL = "SCHEMATHESIS-INVALID-VALUE"
#: Cases per operation and phase: 29 operations in about a minute on two cores.
MAX_EXAMPLES = 10
RUN_TIMEOUT_S = 600


@pytest.fixture
def schema_user(make_user):
    """A researcher of this test's own: the credential probes lock out nobody else."""
    return make_user("schema-rita", researcher=True)


@pytest.fixture
def study_with_data(schema_user):
    """An open study with judgments, a finished report and a finished export."""
    study = vehicle_study(schema_user, captions=4, name="Schema study")
    for number in range(2):
        participant = crowd_participant(study, worker=f"worker-{number}")
        lease = assignment_next(participant=participant)
        judgment_submit(participant=participant, token=lease.token, data={"rating": 4})
    enqueue(report_request(study=study, user=schema_user))  # eager here: it runs
    enqueue(export_request(study=study, user=schema_user, export_format="csv", table="judgments"))
    assert set(study.jobs.values_list("status", flat=True)) == {Job.Status.DONE}
    return study


#: Every check is on (Schemathesis' default), but for these, each with its reason:
CONFIG = """
# Path ids point at the study and its export: a random id only ever answers 404.
[parameters]
"path.study_id" = {study}
"path.job_id" = {job}

# The boundary cases of every parameter, schema-valid ones only: malformed input is the
# fuzzing phase's (both kinds), which keeps the run near a minute on two cores.
[phases.coverage.generation]
mode = "positive"

# "Refuses input the schema says is wrong" (ST201): DRF reads the number 0 as the text
# "0" and a malformed page offset as 0, as lenient as Django's forms; the refusals that
# matter (every 400 below) are checked the other way round (ST202).
[checks.negative_data_rejection]
enabled = false

# Rules across fields that OpenAPI 3.0 cannot state, refused with 400 naming the field:
# the planner's CPU budget (sizes x judgments x simulations) and VICR's two shares.
[[operations]]
include-path = "/api/studies/{{study_id}}/plan/"
checks.positive_data_acceptance.enabled = false

# The body's settings are checked against the study's mode (GET /api/modes/ lists each
# mode's keys and bounds), with rules across settings (fewest <= most) a schema cannot state.
[[operations]]
include-path = "/api/studies/"
include-method = "POST"
checks.positive_data_acceptance.enabled = false

# A judge's answers are JSON Lines naming the study's captions, checked line by line.
[[operations]]
include-path = "/api/studies/{{study_id}}/judges/"
include-method = "POST"
checks.positive_data_acceptance.enabled = false

# Names must be those of registered researchers and annotators: data, not a schema.
[[operations]]
include-path = "/api/studies/{{study_id}}/people/"
include-method = "PUT"
checks.positive_data_acceptance.enabled = false
"""


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def findings(report: dict) -> list[str]:
    """One line per kind of failure in Schemathesis' JSON report: code, title, operations."""
    return [
        f"{failure['code']} {failure['title']} ({failure['count']}): "
        + ", ".join(failure["operations"])
        for failure in report["failures"]
    ]


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    live_server, settings, tmp_path, schema_user, study_with_data, make_user
):
    study = study_with_data
    job = study.jobs.filter(kind=Job.Kind.EXPORT).get()
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG.format(study=study.pk, job=job.pk))
    report_path = tmp_path / "report.json"
    command = [
        str(SCHEMATHESIS),
        "--config-file",
        str(config),
        "run",
        f"{live_server.url}/api/schema/",
        "--auth",
        f"{schema_user.username}:pw-{schema_user.username}",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--workers",
        "1",
        # A fresh connection per request. Under CI's load, once in many runs, the test
        # server (Django's runserver handler, not production's gunicorn) answered a request
        # on a kept-alive connection with an HTTP/0.9 error page ("Connection aborted.
        # <!DOCTYPE HTML>"): bytes left on the connection read as a request line. That is
        # the test server's transport, not the API under test.
        "--header",
        "Connection: close",
        "--seed",
        "45",
        "--generation-database",
        "none",
        "--suppress-health-check",
        "all",
        "--report",
        "json",
        "--report-json-path",
        str(report_path),
        "--no-color",
    ]
    with use_broker(settings, "memory://", "capeval-schemathesis"):
        run = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            cwd=tmp_path,
        )
    assert report_path.exists(), run.stdout[-5000:] + run.stderr[-5000:]
    report = json.loads(report_path.read_text())
    found = findings(report)
    assert not found, "Schemathesis found:\n" + "\n".join(found) + "\n" + run.stdout[-20000:]
    assert run.returncode == 0, run.stdout[-5000:]
    assert report["operations"]["tested"] == report["operations"]["total"] >= 29
    assert report["test_cases"]["generated"] >= 29 * MAX_EXAMPLES

    # The credential probes locked out only the name they made up, from this address: the
    # test's researcher and everyone else still log in (axes counts per name and address).
    assert AccessAttempt.objects.filter(username=INVALID_CREDENTIAL).get().failures_since_start
    assert not AccessAttempt.objects.exclude(username=INVALID_CREDENTIAL).exists()
    for user in (schema_user, make_user("rita", researcher=True)):
        login = APIClient().get(
            reverse("api_studies"), HTTP_AUTHORIZATION=basic(user.username, "pw-" + user.username)
        )
        assert login.status_code == 200
    # A report asked for during the run was queued and answered at once (202), not computed
    # inside the request (the tester's ST112 under eager Celery).
    assert study.jobs.filter(kind=Job.Kind.REPORT, status=Job.Status.QUEUED).exists()
