"""The whole study on an object store, through two web nodes and a worker (issue 41).

Two ``runserver`` nodes (A and B) and a Celery worker, each with its own media, var and
export folders, share only PostgreSQL, Redis and an S3 server on the loopback (s3rver;
``tests/factories/web_nodes.py``, ``workers.py``, ``object_store.py``). One test, because
starting a node costs 10-60 s on busy cores; each step starts on one node, runs in the
worker, and is read or downloaded through the other:

1. an import of two images and six captions posted to A, served by B;
2. the study opened on B; two annotators each lease an item on one node and submit it on
   the other, the page's image coming from the other node too;
3. a judge run (a loopback chat-completions server, ``tests/factories/judge_server.py``)
   set up on B, started on A, read through B's API: the worker sent each caption with its
   display rendition read from the store;
4. CLIP-S and RefCLIP-S with tiny ONNX encoders the operator stored under ``clip/`` in the
   bucket (``services/metrics_clip.py``): A offers and starts them, no node has the
   files, and the stored scores are what the same encoders give on the stored originals;
5. a report started on B, its figures drawn by A (SVG and PNG);
6. every export format (csv, jsonl, parquet, dataset) and every table, each queued on one
   node and downloaded through the other;
7. a presigned link B handed out at the start is refused by the store once expired.

At the end no node's or the worker's media or export folder holds a file, and the store
holds the originals, renditions, encoders and every export with its datasheet. PostgreSQL
only (the nodes are other processes); it skips without it, and fails in CI.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import onnx
import pyarrow.parquet as pq
import pytest
import requests
from onnx import TensorProto, helper, numpy_helper
from PIL import Image as PILImage

from annotation import storage
from annotation.judges import clip
from annotation.models import Caption, Image, Job, Judgment, Study
from annotation.services.metrics_clip import CLIP_S, REFCLIP_S
from tests.factories.core import skip_or_fail
from tests.factories.judge_server import KEY, fake_judge
from tests.factories.object_store import object_store, s3_storages
from tests.factories.thumb import make_annotator as make_annotator  # noqa: F401 (fixture)
from tests.factories.thumb import member
from tests.factories.web_nodes import (
    files_under,
    logged_in,
    own_folders,
    post_form,
    via_store,
    web_nodes,
)
from tests.factories.workers import (
    broker_fixture,  # noqa: F401 -- fixtures used by name
    require_postgres_url,
    start_worker_fixture,  # noqa: F401
    wait_for,
)

try:  # reads the encoders' tokenizer.json: the `clip` extra (crowd-kit brings it too)
    import tokenizers
except ImportError:  # the test says so below, and fails in CI
    tokenizers = None

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

#: image: [(system, caption)]; two Human captions each, so every caption has a reference.
CAPTIONS = {
    "red.png": [("Human", "a red square"), ("Human", "red box"), ("Bot", "a blue dog")],
    "blue.png": [("Human", "a blue square"), ("Human", "blue box"), ("Bot", "a red cat")],
}
COLOURS = {"red.png": (220, 10, 10), "blue.png": (10, 10, 220)}
#: THumB's judge reply, in the form its default prompt asks for.
REPLY = '```json\n{"precision": 4, "recall": 3}\n```'
#: Seconds node B's presigned links live: each is followed at once, and the first one is
#: tried again after the study, by when it has expired.
B_LINK_SECONDS = 20
SIZE, DIM = 8, 4  # the tiny CLIP's image side and embedding size
JOB_TIMEOUT_S = 180  # a hang guard: the worker shares two busy cores with the nodes


def png(colour) -> bytes:
    pixels = np.zeros((12, 10, 3), dtype=np.uint8)
    pixels[...] = colour
    pixels[::3, ::2] = (17, 200, 90)  # a pattern, so the two images differ in more than hue
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def captions_csv() -> bytes:
    rows = [f"{image},{system},{text}" for image, caps in CAPTIONS.items() for system, text in caps]
    return "\n".join(["image,system,caption", *rows]).encode() + b"\n"


def clip_encoders() -> dict[str, bytes]:
    """A tiny CLIP: a linear projection of the pixels, a mean of word embeddings, a
    word-level tokenizer (the three files ``annotation/judges/clip.py`` reads)."""
    rng = np.random.default_rng(5)
    words = {w for rows in CAPTIONS.values() for _, text in rows for w in text.split()}
    vocab = {"[PAD]": 0, "[UNK]": 1} | {
        w: i + 2 for i, w in enumerate(sorted(words | set(clip.PREFIX.split())))
    }

    def model(nodes, name, inputs, weights) -> bytes:
        output = helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["n", DIM])
        graph = helper.make_graph(nodes, name, inputs, [output], weights)
        made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.checker.check_model(made)
        return made.SerializeToString()

    image = model(
        [
            helper.make_node("Flatten", ["pixels"], ["flat"], axis=1),
            helper.make_node("MatMul", ["flat", "w"], ["embeds"]),
        ],
        "image",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 3, SIZE, SIZE])],
        [numpy_helper.from_array(rng.normal(size=(3 * SIZE * SIZE, DIM)).astype("f4"), "w")],
    )
    text = model(
        [
            helper.make_node("Gather", ["emb", "input_ids"], ["tokens"]),
            helper.make_node("ReduceMean", ["tokens"], ["embeds"], axes=[1], keepdims=0),
        ],
        "text",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", "length"])],
        [numpy_helper.from_array(rng.normal(size=(len(vocab), DIM)).astype("f4"), "emb")],
    )
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return {"image.onnx": image, "text.onnx": text, "tokenizer.json": tok.to_str().encode()}


@dataclass(frozen=True)
class Site:
    """The two nodes, the researcher's browser (good on both: the session is in the
    database) and the study."""

    a: str
    b: str
    browser: requests.Session
    study: Study

    def url(self, node: str, rest: str = "") -> str:
        return f"{node}/studies/{self.study.pk}/{rest}"

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a

    def queue(self, node: str, page: str, action: str, data: dict, kind: str, **extra) -> Job:
        """Post the form of the study's ``page`` to ``action`` on ``node``; once taken (a
        redirect), wait for the worker to finish the one job of ``kind`` it queued."""
        before = set(Job.objects.filter(study=self.study, kind=kind).values_list("pk", flat=True))
        posted = post_form(self.browser, self.url(node, page), self.url(node, action), data,
                           **extra)  # fmt: skip
        assert posted.status_code == 302, posted.text[-500:]
        [job] = Job.objects.filter(study=self.study, kind=kind).exclude(pk__in=before)
        wait_for(
            lambda: Job.objects.get(pk=job.pk).is_finished,
            JOB_TIMEOUT_S,
            lambda: f"{kind} job: {Job.objects.get(pk=job.pk).status}",
        )
        job.refresh_from_db()
        assert job.status == Job.Status.DONE, (kind, job.error, job.result)
        return job


def judge_item(session: requests.Session, leased_on: str, submitted_on: str, study) -> bytes:
    """Lease an item on one node and submit its scores on the other; return the item's
    image as the second node serves it."""
    page = session.get(f"{leased_on}/s/{study.public_id}/next/", timeout=30)
    assert page.status_code == 200, page.text[-500:]
    action = re.search(r'<form method="post" action="([^"]+)" id="thumb-form"', page.text)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    keys = set(re.findall(r'name="(c\d+)-precision"', page.text))
    assert action and token and keys, page.text[-500:]
    body = {"csrfmiddlewaretoken": token.group(1), "part": "0"}
    for key in keys:
        body |= {f"{key}-precision": "4", f"{key}-recall": "3"}
    posted = session.post(
        submitted_on + action.group(1),
        data=body,
        headers={"Referer": f"{leased_on}/s/{study.public_id}/next/"},
        allow_redirects=False,
        timeout=60,
    )
    assert posted.status_code == 302, posted.text[-500:]
    shown = re.search(r'<img[^>]+src="(/media/display/[^"]+)"', page.text)
    assert shown, "the item page shows no display rendition"
    return via_store(requests.Session(), submitted_on + shown.group(1)).content


def annotate(site: Site, make_annotator, displays: set[bytes]) -> None:
    """The study opened on B; each annotator leases an item on one node and submits it on
    the other, which serves the page's image."""
    opened = post_form(site.browser, site.url(site.b), site.url(site.b, "status/"),
                       {"action": "open"})  # fmt: skip
    assert opened.status_code == 302, opened.text[-500:]
    anna, ben = make_annotator("anna", native=True), make_annotator("ben")
    shown = set()
    for person, leased_on in ((anna, site.a), (ben, site.b)):
        member(site.study, person)
        shown.add(judge_item(logged_in(person), leased_on, site.other(leased_on), site.study))
    judged = Judgment.objects.filter(study=site.study)
    people = sorted(judged.values_list("participant__user__username", flat=True))
    assert people == ["anna", "ben"]
    assert len({judgment.item.image_id for judgment in judged}) == 2  # an image each
    assert shown == displays


def judge_run(site: Site, judge, displays: set[bytes]) -> None:
    """The endpoint saved on B, the run started on A and run by the worker, its answers
    read through B's API."""
    form = {
        "name": "toy-vlm", "base_url": judge.url, "model": "judge-7b", "api_key": KEY,
        "concurrency": 4, "timeout": 30, "max_retries": 0, "temperature": 0, "repeats": 1,
        "price_prompt_per_1k": 0, "price_completion_per_1k": 0,
    }  # fmt: skip
    saved = post_form(site.browser, site.url(site.b, "judges/"),
                      site.url(site.b, "judges/settings/"), form)  # fmt: skip
    assert saved.status_code == 302, saved.text[-500:]
    job = site.queue(site.a, "judges/", "judges/run/", {}, Job.Kind.JUDGE)
    assert judge.total == job.result["answered"] == 6  # a question per caption
    sent = set()
    for body in judge.bodies:
        image = body["messages"][-1]["content"][1]["image_url"]["url"]
        sent.add(base64.b64decode(image.split(",", 1)[1]))
    assert sent == displays  # the worker read the renditions from the store
    report = site.browser.get(f"{site.b}/api/studies/{site.study.pk}/judges/?resamples=0")
    [vlm] = report.json()["judges"]
    assert (vlm["name"], vlm["kind"], vlm["answers"]) == ("toy-vlm", "vlm", 6)


def clip_run(site: Site, encoders: dict[str, bytes], pngs: dict, folder) -> list[Caption]:
    """CLIP-S and RefCLIP-S, offered and started on A with the encoders only in the store;
    the scores, read through B, are what the same encoders give on the originals."""
    page = site.browser.get(site.url(site.a, "metrics/")).text
    assert f'value="{CLIP_S}"' in page and f'value="{CLIP_S}" disabled' not in page
    site.queue(site.a, "metrics/", "metrics/", {"metrics": [CLIP_S, REFCLIP_S]},
               Job.Kind.METRICS)  # fmt: skip
    folder.mkdir()  # the test's own copy of the encoders, to score the same way
    for name, data in encoders.items():
        (folder / name).write_bytes(data)
    scorer = clip.ClipScorer.from_folder(folder, image_size=SIZE)
    ordered = list(Caption.objects.filter(study=site.study).select_related("image").order_by("pk"))
    refs = [  # the other Human captions of the caption's image
        [c.raw_text for c in ordered
         if c.image_id == one.image_id and c.system == "Human" and c.pk != one.pk]
        for one in ordered
    ]  # fmt: skip
    plain, with_refs = scorer.refclip_s(
        [pngs[c.image.name] for c in ordered], [c.raw_text for c in ordered], refs
    )
    for caption, expected, expected_ref in zip(ordered, plain, with_refs, strict=True):
        assert caption.metrics[CLIP_S] == pytest.approx(expected, abs=1e-5)
        assert caption.metrics[REFCLIP_S] == pytest.approx(expected_ref, abs=1e-5)
    lab = site.browser.get(f"{site.b}/api/studies/{site.study.pk}/metrics/").json()["report"]
    assert lab["computed"] == [CLIP_S, REFCLIP_S] and lab["captions_scored"] == 6
    return ordered


def report_run(site: Site) -> None:
    """The report started on B and run by the worker; A draws its figures."""
    site.queue(site.b, "report/", "report/", {}, Job.Kind.REPORT)
    figures = site.url(site.a, "report/figures")
    svg = site.browser.get(f"{figures}/precision-recall-histograms.svg", timeout=60)
    assert svg.headers["Content-Type"] == "image/svg+xml" and b"<svg" in svg.content
    png_figure = site.browser.get(f"{figures}/system-totals.png", timeout=60)
    assert png_figure.headers["Content-Type"] == "image/png"
    assert PILImage.open(io.BytesIO(png_figure.content)).format == "PNG"
    assert "system-totals" in site.browser.get(site.url(site.a, "report/")).text


#: Every export format and table, and the node each is queued on.
EXPORTS = [
    ("csv", "judgments", "a"),
    ("jsonl", "participants", "b"),
    ("parquet", "judges", "a"),
    ("csv", "caption_metrics", "b"),
    ("dataset", "judgments", "a"),
]


def exports_run(site: Site, pngs: dict, captions: list[Caption]) -> list[Job]:
    """Each export queued on one node, written by the worker, downloaded through the
    other; a datasheet through either."""
    files = {}
    for fmt, table, name in EXPORTS:
        node = getattr(site, name)
        form = {"format": fmt, "table": table, "images": "on" if fmt == "dataset" else ""}
        job = site.queue(node, "", "export/", form, Job.Kind.EXPORT)
        data = via_store(site.browser, f"{site.other(node)}/jobs/{job.pk}/download/").content
        files[(fmt, table)] = (job, data)
    rows = list(csv.DictReader(io.StringIO(files[("csv", "judgments")][1].decode())))
    # A row per caption group an annotator scored: the image's Human one and the Bot's.
    groups = sum(len(j.payload["captions"]) for j in Judgment.objects.filter(study=site.study))
    assert len(rows) == groups == 4 and {float(row["precision"]) for row in rows} == {4.0}
    lines = files[("jsonl", "participants")][1].decode().splitlines()
    assert sorted(json.loads(line)["judgments"] for line in lines) == [1, 1]
    answers = pq.read_table(io.BytesIO(files[("parquet", "judges")][1])).to_pylist()
    assert len(answers) == 6 and {answer["judge"] for answer in answers} == {"toy-vlm"}
    metrics = files[("csv", "caption_metrics")][1].decode()
    scored = {int(row["caption_id"]): row for row in csv.DictReader(io.StringIO(metrics))}
    for caption in captions:
        column = float(scored[caption.pk]["metric_clip_s_onnx"])
        assert column == pytest.approx(caption.metrics[CLIP_S], abs=1e-6)
    with zipfile.ZipFile(io.BytesIO(files[("dataset", "judgments")][1])) as archive:
        assert {"data/judgments.parquet", "data/judges.parquet"} <= set(archive.namelist())
        for name, data in pngs.items():  # the originals, read from the store
            assert archive.read(f"images/{name}") == data, name
    table = files[("csv", "judgments")][0]
    for node in (site.a, site.b):  # written beside its file by the worker
        sheet = via_store(site.browser, f"{node}/jobs/{table.pk}/datasheet/").json()
        assert sheet["study"]["id"] == site.study.pk
    return [job for job, _data in files.values()]


def test_a_whole_study_on_the_object_store_through_two_nodes(
    tmp_path, settings, broker, start_worker, researcher, make_study, make_annotator
):
    require_postgres_url()
    if tokenizers is None:
        skip_or_fail("CLIP-S needs the tokenizers package: pip install -e '.[clip]'")
    url, queue = broker
    pngs = {name: png(colour) for name, colour in COLOURS.items()}
    with object_store(tmp_path / "s3") as store, fake_judge(lambda prompt, n: REPLY) as judge:
        storages = s3_storages(store)
        settings.STORAGES = storages
        # The operator copies the encoders to the bucket once; no node has them on disk.
        encoders = clip_encoders()
        for name, data in encoders.items():
            storage.write_bytes(f"clip/{name}", data)
        common = {
            "STORAGES": storages,
            # The fake judge listens on the loopback, which a deployment must list.
            "CAPEVAL_JUDGE_ALLOWED_HOSTS": ["127.0.0.1"],
            "CAPEVAL_CLIP_DIR": "",
            "CAPEVAL_CLIP_IMAGE_SIZE": SIZE,
        }
        study = make_study("thumb", settings={
            "seconds_per_caption": 0, "stage2": False, "require_native_fluency": False,
            "bootstrap_resamples": 100,
        })  # fmt: skip
        # The worker and both nodes start at once: a start is 10-60 s of imports and checks
        # on busy cores, and this test runs in CI's PostgreSQL pass.
        with ThreadPoolExecutor(max_workers=1) as pool:
            worker = pool.submit(start_worker, **common, **own_folders(tmp_path / "worker"))
            nodes = web_nodes(
                (tmp_path / "a", {**common, **own_folders(tmp_path / "a")}),
                (tmp_path / "b", {**common, **own_folders(tmp_path / "b"),
                                  "CAPEVAL_DOWNLOAD_SECONDS": B_LINK_SECONDS}),
                url=url, queue=queue,
            )  # fmt: skip
            with nodes as (node_a, node_b):
                worker.result()
                site = Site(node_a, node_b, logged_in(researcher), study)
                # The import, posted to A and run by the worker; B serves the original.
                files = [("image_files", (name, data, "image/png")) for name, data in pngs.items()]
                files.append(("captions", ("captions.csv", captions_csv(), "text/csv")))
                site.queue(node_a, "import/", "import/", {"purpose": "study"}, Job.Kind.IMPORT,
                           files=files)  # fmt: skip
                images = {image.name: image for image in Image.objects.filter(study=study)}
                assert set(images) == set(pngs)
                answer = site.browser.get(f"{node_b}/media/{images['red.png'].file}",
                                          allow_redirects=False)  # fmt: skip
                assert answer.status_code == 302, answer.text[-300:]
                expiring = answer.headers["Location"]  # tried again at the end
                assert requests.get(expiring, timeout=30).content == pngs["red.png"]
                issued = time.monotonic()

                displays = {storage.read_bytes(image.display) for image in images.values()}
                annotate(site, make_annotator, displays)
                judge_run(site, judge, displays)
                captions = clip_run(site, encoders, pngs, tmp_path / "clip")
                report_run(site)
                exports = exports_run(site, pngs, captions)

                # B's first link has expired: the store, not a node, refuses it now.
                time.sleep(max(0.0, issued + B_LINK_SECONDS + 1 - time.monotonic()))
                refused = requests.get(expiring, timeout=30)
                assert refused.status_code == 403 and b"Request has expired" in refused.content

        # Nothing on any node's disk; the store holds what the study made.
        for process in ("a", "b", "worker"):
            for folder in ("media", "exports"):
                found = files_under(tmp_path / process / folder)
                assert found == [], (process, folder, found)
        held = store.objects()
        for image in images.values():
            assert {image.file, image.display} <= held
        assert {f"clip/{name}" for name in encoders} <= held
        for job in exports:
            assert f"exports/{job.result_file}" in held
            if job.params["format"] != "dataset":  # a dataset holds its datasheet inside
                assert f"exports/{job.result['datasheet']}" in held
        assert not any(name.startswith("uploads/") for name in held)
