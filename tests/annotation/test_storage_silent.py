"""A store that takes the connection and never answers (issue 41).

A store that is down refuses connections (``test_storage_outage.py``); one behind a dead
route or hung in its own work accepts them and says nothing. botocore's defaults wait 60 s
per read and try 5 times, holding a web worker until gunicorn kills it. The settings give
the client ``S3_CLIENT``'s limits (``CAPEVAL_S3_TIMEOUT_SECONDS``, 2 attempts): the storage
layer then refuses with ``StorageUnavailable`` after exactly the configured attempts. The
test counts the connections the silent server took (not seconds), with the client as a
node's settings make it from its environment.
"""

from __future__ import annotations

import socket
import threading

import pytest
from botocore.config import Config

from annotation import storage
from annotation.errors import StorageUnavailable
from tests.factories.deployment import deployment_settings
from tests.factories.object_store import ObjectStore, s3_storages


class SilentServer:
    """Accepts TCP connections on the loopback and never sends a byte."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.sock.close()
        for connection in self.accepted:
            connection.close()


def connections_until_refused(settings, tmp_path, client: dict) -> int:
    """How many connections the storage layer opens to a silent store with ``client``
    before it refuses with ``StorageUnavailable`` (which it must)."""
    server = SilentServer()
    try:
        storages = s3_storages(ObjectStore(endpoint=server.endpoint, folder=tmp_path))
        for alias in ("default", "exports"):
            storages[alias]["OPTIONS"]["client_config"] = Config(**client)
        settings.STORAGES = storages
        with pytest.raises(StorageUnavailable) as refused:
            storage.exists("display/ab/anything.webp")
        assert refused.value.details["retry_after"] == storage.STORE_RETRY_AFTER_S
        return len(server.accepted)
    finally:
        server.close()


def test_a_silent_store_is_refused_after_the_configured_attempts(settings, tmp_path):
    node = deployment_settings({"CAPEVAL_S3_TIMEOUT_SECONDS": "0.5"}, "S3_CLIENT")
    client = node["S3_CLIENT"]
    assert client["read_timeout"] == client["connect_timeout"] == 0.5
    attempts = client["retries"]["max_attempts"]
    assert 1 < attempts < 5  # retried, and fewer tries than botocore's default of 5

    opened = connections_until_refused(settings, tmp_path, client)
    once = connections_until_refused(
        settings, tmp_path, {**client, "retries": {**client["retries"], "max_attempts": 1}}
    )
    # Each further attempt is one more connection (each timed-out read drops its own), so
    # the node stops after its configured attempts rather than botocore's.
    assert opened - once == attempts - 1
