"""A client generated from the served OpenAPI schema runs a study to its export (issue 45).

The test asks the live server for its schema, generates pydantic models from it with
datamodel-code-generator into the test's folder (nothing generated is committed), imports
them and drives the API with httpx: every request body is built from the model the schema
names for it, and every answer is parsed with the model the schema names for its status.
A schema that drifts from what the API sends or takes fails here.

(openapi-python-client, which generates whole operation functions, needs typer<0.28, which
the transformers pin rules out; its models and httpx are what a client is made of.)
"""

import csv
import importlib.util
import io
import sys

import httpx
import pytest
from datamodel_code_generator import (
    DataModelType,
    Formatter,
    InputFileType,
    PythonVersion,
    generate,
)
from PIL import Image as PILImage

from annotation.models import Item, Judgment, Study
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from tests.factories.core import crowd_participant
from tests.factories.vehicle import NAME as VEHICLE

pytestmark = pytest.mark.django_db(transaction=True)

CAPTIONS = (
    "image,system,caption\n"
    "a.png,base,A red square.\n"
    "a.png,ours,A small red picture.\n"
    "b.png,base,A green square.\n"
    "b.png,ours,A small green picture.\n"
)


def png(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 6), color).save(buffer, "PNG")
    return buffer.getvalue()


class GeneratedClient:
    """httpx plus the generated models: each answer parsed by the model its schema names."""

    def __init__(self, http: httpx.Client, schema: dict, models):
        self.http, self.schema, self.models = http, schema, models

    def model(self, template: str, method: str, status: int):
        """The generated class of ``template``'s answer with ``status`` (an HTTP method)."""
        response = self.schema["paths"][template][method]["responses"][str(status)]
        ref = response["content"]["application/json"]["schema"]["$ref"]
        return getattr(self.models, ref.rsplit("/", 1)[1])

    def call(self, method: str, template: str, status: int, **kwargs):
        path = template.format(**kwargs.pop("ids", {}))
        answer = self.http.request(method, path, **kwargs)
        assert answer.status_code == status, (method, path, answer.text)
        return self.model(template, method.lower(), status).model_validate(answer.json())


def generated_models(schema_text: str, folder):
    """Generate the schema's models into ``folder`` and import them as a module."""
    target = folder / "capeval_models.py"
    generate(
        schema_text,
        input_file_type=InputFileType.OpenAPI,
        output=target,
        output_model_type=DataModelType.PydanticV2BaseModel,
        target_python_version=PythonVersion.PY_311,
        # OpenAPI 3.0's nullable: a required field may be null (a job's download_url).
        strict_nullable=True,
        disable_timestamp=True,
        formatters=[Formatter.BUILTIN],  # no black or ruff run on code nobody reads
    )
    spec = importlib.util.spec_from_file_location("capeval_models", target)
    module = importlib.util.module_from_spec(spec)
    sys.modules["capeval_models"] = module  # pydantic resolves forward references here
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["capeval_models"]
    return module


def test_a_generated_client_runs_a_study_from_creation_to_its_export(
    live_server, tmp_path, make_user
):
    user = make_user("client-rita", researcher=True)
    auth = (user.username, "pw-" + user.username)
    with httpx.Client(base_url=live_server.url, auth=auth, timeout=60) as http:
        served = http.get("/api/schema/", params={"format": "json"})
        assert served.status_code == 200
        m = generated_models(served.text, tmp_path)
        api = GeneratedClient(http, served.json(), m)

        # Create: the body is the request model, the answer the study model.
        body = m.StudyCreateRequest(name="Client study", mode=m.ModeEnum(VEHICLE))
        study = api.call(
            "POST", "/api/studies/", 201, json=body.model_dump(mode="json", exclude_none=True)
        )
        assert (study.name, study.status.value) == ("Client study", "draft")
        ids = {"study_id": study.id}
        listing = api.call("GET", "/api/studies/", 200)
        assert [s.id for s in listing.results] == [study.id] and listing.next is None

        # Import images and captions: parts the schema's ImportRequest names, as files.
        parts = api.schema["components"]["schemas"]["ImportRequest"]["properties"]
        assert parts["captions"]["format"] == parts["image_files"]["items"]["format"] == "binary"
        files = [
            ("image_files", ("a.png", png((200, 0, 0)), "image/png")),
            ("image_files", ("b.png", png((0, 200, 0)), "image/png")),
            ("captions", ("captions.csv", CAPTIONS.encode(), "text/csv")),
        ]
        queued = api.call("POST", "/api/studies/{study_id}/imports/", 202, ids=ids, files=files)
        job = api.call("GET", "/api/jobs/{job_id}/", 200, ids={"job_id": queued.id})
        assert (job.kind.value, job.status.value) == ("import", "done"), job.error

        api.call("GET", "/api/studies/{study_id}/people/", 200, ids=ids)
        opened = api.call("POST", "/api/studies/{study_id}/open/", 200, ids=ids)
        assert opened.status.value == "live"
        items = Item.objects.filter(study_id=study.id).count()
        assert items == 4  # one item per caption in the test mode: 2 images x 2 systems

        # Participants answer through the participant pages, which the API does not cover:
        # two crowd workers rate every item through the same services those pages call.
        stored = Study.objects.get(pk=study.id)
        for worker in ("w1", "w2"):
            participant = crowd_participant(stored, worker=worker)
            for rating in range(items):
                lease = assignment_next(participant=participant)
                judgment_submit(participant=participant, token=lease.token, data={"rating": 5})
                assert rating < items
        judged = api.call("GET", "/api/studies/{study_id}/judgments/", 200, ids=ids)
        assert judged.count == 2 * items

        closed = api.call("POST", "/api/studies/{study_id}/close/", 200, ids=ids)
        assert closed.status.value == "closed"

        # Report: queued (202), then read.
        api.call("POST", "/api/studies/{study_id}/report/", 202, ids=ids)
        report = api.call("GET", "/api/studies/{study_id}/report/", 200, ids=ids)
        assert (report.study, report.mode) == (study.id, VEHICLE)

        # Export: the request model's defaults, then the job until its file downloads.
        request = m.ExportRequest(format=m.ExportFormatEnum("csv"), table=m.TableEnum("judgments"))
        export = api.call(
            "POST",
            "/api/studies/{study_id}/exports/",
            202,
            ids=ids,
            json=request.model_dump(mode="json", exclude_none=True),
        )
        done = api.call("GET", "/api/jobs/{job_id}/", 200, ids={"job_id": export.id})
        assert done.status.value == "done" and done.download_url is not None, done.error
        download = http.get(str(done.download_url))
        assert download.status_code == 200
        rows = list(csv.DictReader(io.StringIO(download.text)))
        expected = Judgment.objects.filter(study_id=study.id).values_list("pk", flat=True)
        assert sorted(int(row["judgment_id"]) for row in rows) == sorted(expected)
