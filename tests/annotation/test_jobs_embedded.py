"""Jobs never block a page on the embedded default (issue 26, row 3).

``make demo``'s configuration in a temporary folder: SQLite, Kombu's filesystem broker and
``manage.py demo_server`` (runserver plus a real Celery worker process). "Compute the
metrics" is pressed over HTTP on the demo's THumB study; the answer must come back while
the job is still queued or running (with eager Celery it came back only once the job was
done), and polling the job's fragment must reach done at 100%. Ctrl-C then stops the
server and the worker, leaving no process behind.

No timing is asserted here (a loaded machine would make it flaky); ``bench/jobs_embedded.py``
measures the POST's latency and the time to 100%. The harness is
``tests/factories/embedded.py`` (Linux: it reads /proc to find the demo's processes).
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories.embedded import (
    REPO,
    DemoServer,
    alive,
    embedded_env,
    job_state,
    login,
    manage,
    poll_job,
    post_metrics,
    study_id,
)

#: A metric that needs neither Java nor a model, so the job is short wherever it runs.
METRIC = "BLEU-4 (sacrebleu)"
JOB_TIMEOUT_S = 180


@pytest.fixture
def demo_var(tmp_path):
    """A fresh clone's var/: migrated, with the demo's live studies (no finished ones)."""
    var_dir = tmp_path / "var"
    manage(var_dir, "migrate", "--no-input")
    manage(var_dir, "load_demo", "--no-finished", "--no-published")
    return var_dir


def test_metrics_job_runs_on_the_worker_and_the_page_polls_it_to_done(demo_var):
    demo = DemoServer(demo_var)
    try:
        session = login(demo.url, "researcher", "researcher")
        study = study_id(session, demo.url, "Demo: THumB rubric")

        answer = post_metrics(session, demo.url, study, names=[METRIC])

        assert answer.status_code == 200, answer.text[:2000]
        job, status, percent, polls = job_state(answer.text)
        # The view enqueued the job and answered: the worker has not finished it, and the
        # fragment polls (eager Celery answered "Done", 100%, no polling).
        assert status in {"Queued", "Running"}, answer.text
        assert percent < 100
        assert polls
        seen = poll_job(session, demo.url, study, job, JOB_TIMEOUT_S)
        assert seen[-1] == ("Done", 100), f"{seen[-5:]}\n{demo.log()}"
        page = session.get(f"{demo.url}/studies/{study}/metrics/", timeout=10).text
        assert METRIC in page
        log = (demo_var / "worker.log").read_text()
        assert "Connected to filesystem://" in log
        assert "Task annotation.tasks.run_job[" in log and "succeeded" in log
    except BaseException:
        demo.kill()
        raise

    started = demo.interrupt()

    assert demo.process.returncode == 0, demo.log()
    assert len(started) >= 3, "runserver, the worker and its pool process were running"
    assert [pid for pid in started if alive(pid)] == [], "no process outlives the demo"
    assert "Job worker stopped." in demo.log()


SHOW_BROKER = (
    "import django; django.setup(); from capeval.celery_app import app; "
    "from django.conf import settings as s; o = s.CELERY_BROKER_TRANSPORT_OPTIONS; "
    "print(app.conf.broker_url, app.conf.task_always_eager, o.get('data_folder_in'), "
    "o.get('data_folder_out'))"
)


def settings_in_subprocess(tmp_path, **env) -> list[str]:
    """The broker URL, eagerness and filesystem folders the settings give under ``env``."""
    base = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    done = subprocess.run(
        [sys.executable, "-c", SHOW_BROKER],
        cwd=REPO,
        env={
            **base,
            "DJANGO_SETTINGS_MODULE": "capeval.settings",
            "PYTHONPATH": str(REPO / "platform"),
            "CAPEVAL_VAR_DIR": str(tmp_path / "var"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_broker_folder_makes_jobs_go_through_the_filesystem_transport(tmp_path):
    folder = tmp_path / "broker"

    url, eager, folder_in, folder_out = settings_in_subprocess(
        tmp_path, CAPEVAL_BROKER_DIR=str(folder)
    )

    assert (url, eager) == ("filesystem://", "False")
    assert folder_in == folder_out == str(folder / "queue"), "both sides use one queue folder"
    assert (folder / "queue").is_dir(), "Kombu wants the folder to exist"


def test_redis_wins_over_a_broker_folder_and_neither_means_eager(tmp_path):
    folder = tmp_path / "broker"
    redis_url = "redis://127.0.0.1:6379/9"

    with_redis = settings_in_subprocess(
        tmp_path, CAPEVAL_BROKER_DIR=str(folder), REDIS_URL=redis_url
    )
    neither = settings_in_subprocess(tmp_path)

    assert with_redis == [redis_url, "False", "None", "None"]
    assert not folder.exists()
    assert neither[:2] == ["memory://", "True"]


def test_demo_server_refuses_to_run_beside_redis(tmp_path):
    env = {**embedded_env(tmp_path / "var"), "REDIS_URL": "redis://127.0.0.1:6379/9"}

    done = subprocess.run(
        [sys.executable, "manage.py", "demo_server", "127.0.0.1:1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 1
    assert "REDIS_URL is set" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "var" / "worker.log").exists(), "no worker was started"


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in command and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_a_server_that_cannot_start_stops_the_worker_too(demo_var):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        done = subprocess.run(
            [sys.executable, "manage.py", "demo_server", f"127.0.0.1:{port}", "--noreload"],
            cwd=REPO,
            env=embedded_env(demo_var),
            capture_output=True,
            text=True,
            timeout=180,
        )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "runserver stopped" in done.stderr
    assert "That port is already in use" in done.stderr, "runserver said why"
    assert "Traceback" not in done.stderr
    assert "Job worker stopped." in done.stdout
    assert " ready." in (demo_var / "worker.log").read_text(), "the worker had started"
    assert processes_naming(str(demo_var / "worker.log")) == [], "no worker left behind"
