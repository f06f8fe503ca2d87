"""An S3-compatible object store on the loopback for the benchmarks (issue 41).

The tests' own store (``tests/factories/object_store.py``: s3rver from npm, pinned in
package.json and installed by ``make test``, its objects in a folder of the run; it imports
nothing of Django, so a bench starts it before ``django.setup()``), and the environment that
points the platform at it as a deployment's does (``CAPEVAL_S3_*`` and boto3's credentials:
``platform/capeval/settings/base.py``).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import _harness as harness

if str(harness.REPO) not in sys.path:  # where ``tests`` lives
    sys.path.insert(0, str(harness.REPO))

from tests.factories.object_store import (  # noqa: E402 -- after the path above
    BUCKET,
    KEY,
    S3RVER,
    SECRET,
    ObjectStore,
    object_store,
)


def missing() -> str | None:
    """Why no store can run here, or None (the factory itself would raise pytest's skip)."""
    if shutil.which("node") is None or not S3RVER.is_file():
        return "needs Node.js and s3rver: run `make test` once (npm ci)"
    return None


def settings_env(store: ObjectStore) -> dict[str, str]:
    """The environment of a node whose files are in ``store``."""
    return {
        "CAPEVAL_S3_BUCKET": BUCKET,
        "CAPEVAL_S3_ENDPOINT_URL": store.endpoint,
        "CAPEVAL_S3_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }


@contextmanager
def running_store(folder: Path) -> Iterator[dict[str, str]]:
    """A running s3rver with the bucket; yields the environment that points nodes at it."""
    problem = missing()
    if problem:
        raise SystemExit(problem)
    with object_store(folder) as store:
        yield settings_env(store)
