"""SQLite's write-ahead log stays bounded, a database that lost its tables is refused, and a
mistyped folder in DATABASE_URL is not a new database.

Real ``tickwork serve`` processes on real SQLite files; the crash is a SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.harness import REPO, Server, base_env
from tickwork import Client

LIMIT = 2 * 1024 * 1024  # the WAL's bound here: 1 MiB after a reset, plus what one commit adds


def serve_once(database: Path) -> subprocess.CompletedProcess[str]:
    """``tickwork serve`` on ``database`` that is expected to refuse to start."""
    env = base_env(DATABASE_URL=f"sqlite:///{database}", WORKER_IS_ENABLED="false")
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "serve", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def test_the_write_ahead_log_stays_bounded(tmp_path: Path) -> None:
    database = tmp_path / "tickwork.db"
    wal = Path(f"{database}-wal")
    server = Server(
        tmp_path, env={"WORKER_IS_ENABLED": "false"}, database_url=f"sqlite:///{database}"
    )
    try:
        server.wait_healthy()
        # Checkpointed after the migrations: the schema is in the database file itself.
        assert database.stat().st_size > 64 * 1024
        largest = 0
        with Client(server.address) as client:
            for i in range(700):  # about 2.8 MB of rows
                client.create_task(f"t{i}", "shell", {"argv": ["true"]}, description="d" * 4000)
                if wal.exists():
                    largest = max(largest, wal.stat().st_size)
        assert largest <= LIMIT, f"the WAL reached {largest:,} bytes"
        assert database.stat().st_size > 2 * 1024 * 1024  # the rows reached the file
    finally:
        server.stop()


def test_a_database_that_lost_its_tables_is_refused(tmp_path: Path) -> None:
    database = tmp_path / "tickwork.db"
    url = f"sqlite:///{database}"
    server = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}, database_url=url)
    server.wait_healthy()
    with Client(server.address) as client:
        client.create_task("kept", "shell", {"argv": ["true"]})
    marker = Path(f"{database}-tickwork")
    assert marker.exists()

    # A crash, then the log deleted: the schema was checkpointed, the service starts.
    server.kill(signal.SIGKILL)
    server.stop()
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    again = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}, database_url=url, name="again")
    again.wait_healthy()
    again.stop()

    # The database file replaced by an empty one: refused, with the way out.
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    database.write_bytes(b"")
    refused = serve_once(database)
    assert refused.returncode == 2, refused
    assert "Traceback" not in refused.stderr, refused.stderr
    assert "has no tickwork tables" in refused.stderr and str(marker) in refused.stderr
    with sqlite3.connect(database) as conn:  # not migrated into a new, empty tickwork database
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []

    # Deleting the marker is the operator's way to start over.
    marker.unlink()
    fresh = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}, database_url=url, name="fresh")
    try:
        fresh.wait_healthy()
        assert marker.exists()
    finally:
        fresh.stop()


def test_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    database = tmp_path / "mistyped" / "tickwork.db"
    refused = serve_once(database)
    assert refused.returncode == 2, refused
    assert "Traceback" not in refused.stderr, refused.stderr
    assert "DATABASE_URL" in refused.stderr and "does not exist" in refused.stderr
    assert not os.path.exists(database.parent)
