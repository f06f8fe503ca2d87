"""PgBouncer in transaction mode in front of the tests' PostgreSQL (issue 41).

``pgbouncer()`` starts Debian's ``pgbouncer`` (``.ci/run`` installs it) on a free
loopback port with ``pool_mode = transaction``, every database passed through to the
server ``DATABASE_URL`` names, and yields the port; it is stopped when the test ends. A
process that connects through it must say ``CAPEVAL_DB_TRANSACTION_POOLING`` (the
setting ``DISABLE_SERVER_SIDE_CURSORS``). Skips without the binary (fails in CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.factories.servers import free_port, loopback_server

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


@contextlib.contextmanager
def pgbouncer() -> Iterator[int]:
    if not Path(BINARY).is_file():
        message = "the PgBouncer test needs pgbouncer (.ci/run installs Debian's)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = urlsplit(os.environ["DATABASE_URL"])
    user = server.username or "postgres"
    # PgBouncer refuses to run as root: as root it is started as the postgres user, who
    # must be able to read its files, so they are in a folder of their own under /tmp
    # (the test's folder is the root user's alone).
    folder = Path(tempfile.mkdtemp(prefix="capeval-pgbouncer-"))
    folder.chmod(0o755)
    port = free_port()
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\nmax_client_conn = 200\ndefault_pool_size = 10\n"
    )
    for file in folder.iterdir():
        file.chmod(0o644)
    as_postgres = ["-u", "postgres"] if os.geteuid() == 0 else []
    try:
        with loopback_server(
            [BINARY, *as_postgres, str(folder / "pgbouncer.ini")], port, "pgbouncer"
        ):
            yield port
    finally:
        shutil.rmtree(folder, ignore_errors=True)
