"""Shared fixtures: real tickwork processes on 127.0.0.1 with free ports, real SQLite files."""

from __future__ import annotations

import compileall
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from scheduler_svc import migrate
from scheduler_svc.db import Database
from tests.databases import BACKENDS, create_database, drop_database
from tests.harness import REPO, Server, WorkerProc
from tickwork import Client


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database for this test, once per backend (SQLite file, PostgreSQL)."""
    url = create_database(request.param, tmp_path)
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """The test's database (:func:`database_url`), migrated, as the service opens it;
    after the test, no connection may be left checked out of its pool."""
    db = Database(database_url)
    await migrate.upgrade(db)
    try:
        yield db
        assert db.connections_in_use() == 0, "a connection was left checked out"
    finally:
        await db.dispose()


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """The embedded service (API + scheduler loop + worker) on a fresh database."""
    srv = Server(tmp_path, env={"WORKER_POLL_INTERVAL_SECONDS": "1"}, database_url=database_url)
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


@pytest.fixture
def api_server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """A scheduler service without its embedded worker (WORKER_IS_ENABLED=false)."""
    srv = Server(
        tmp_path, env={"WORKER_IS_ENABLED": "false"}, name="api", database_url=database_url
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


@pytest.fixture
def worker(tmp_path: Path, api_server: Server) -> Iterator[WorkerProc]:
    """A dedicated ``tickwork worker`` process connected to ``api_server``."""
    proc = WorkerProc(tmp_path, api_server.address, env={"WORKER_ABORT_GRACE_SECONDS": "2"})
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    """A sync SDK client of ``server``."""
    with Client(server.address) as c:
        yield c


@pytest.fixture
def api_client(api_server: Server) -> Iterator[Client]:
    """A sync SDK client of ``api_server``."""
    with Client(api_server.address) as c:
        yield c


#: Modules whose tests take longest (tens of seconds each): collected first, so that the
#: workers start them at once instead of one of them ending the run alone.
SLOW_FIRST = (
    "tests/test_cron_exhaustive_dst.py",
    "tests/test_soak.py",
    "tests/test_cron_differential.py",
    "tests/faults/",
    "tests/test_bench_smoke.py",
    "tests/test_shutdown.py",
    "tests/test_leases.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the :data:`SLOW_FIRST` modules' tests first, in their listed order (stable, so
    every xdist worker collects the same order)."""

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        for i, prefix in enumerate(SLOW_FIRST):
            if path.startswith(prefix):
                return i
        return len(SLOW_FIRST)

    items.sort(key=rank)


#: The source trees whose modules the tests' processes import.
COMPILED = ("client", "scheduler_svc", "worker_svc", "bench", "tests")


def pytest_configure(config: pytest.Config) -> None:
    """Write the bytecode of tickwork's modules once, before any test (in the controller,
    not in each xdist worker). The tests start hundreds of interpreters (servers, workers,
    job process servers, CLI runs); where bytecode is not written on import
    (PYTHONDONTWRITEBYTECODE, as on CI machines), each of them would compile every module
    it imports from source, about 0.3 s of CPU a process."""
    if hasattr(config, "workerinput"):
        return
    for tree in COMPILED:
        compileall.compile_dir(REPO / tree, quiet=1)
