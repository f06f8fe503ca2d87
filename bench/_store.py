"""An S3-compatible object store on the loopback for the benchmarks (issue 41).

The same server as the tests' (``tests/factories/object_store.py``): s3rver from npm, pinned
in package.json and installed by ``make test``, keeping its objects in a folder of the run.
``object_store`` starts it on a free port with one bucket and yields the settings that put
the platform's files there (``CAPEVAL_S3_*`` and boto3's credentials, as a deployment sets
them: ``platform/capeval/settings/base.py``); it stops the server when the block ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import _harness as harness

S3RVER = harness.REPO / "node_modules" / "s3rver" / "bin" / "s3rver.js"
BUCKET = "capeval-bench"
#: s3rver's fixed credentials.
KEY = SECRET = "S3RVER"
START_TIMEOUT_S = 30


@contextmanager
def object_store(folder: Path) -> Iterator[dict[str, str]]:
    """A running s3rver with the bucket; yields the environment that points the platform at
    it."""
    node = shutil.which("node")
    if node is None or not S3RVER.is_file():
        raise SystemExit("needs Node.js and s3rver: run `make test` once (npm ci)")
    folder.mkdir(parents=True, exist_ok=True)
    port = harness.free_port()
    command = [node, str(S3RVER), "-d", str(folder), "-a", "127.0.0.1", "-p", str(port)]
    command += ["--silent", "--configure-bucket", BUCKET]
    process = subprocess.Popen(command, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "CAPEVAL_S3_BUCKET": BUCKET,
        "CAPEVAL_S3_ENDPOINT_URL": endpoint,
        "CAPEVAL_S3_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    try:
        _wait_for_bucket(endpoint, process)
        yield env
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _wait_for_bucket(endpoint: str, process: subprocess.Popen) -> None:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise SystemExit(f"s3rver exited with status {process.returncode}")
        try:
            client.list_objects_v2(Bucket=BUCKET)
            return
        except (BotoCoreError, ClientError):  # not serving the bucket yet
            if time.monotonic() > deadline:
                message = f"s3rver did not serve its bucket within {START_TIMEOUT_S} s"
                raise SystemExit(message) from None
            time.sleep(0.1)
