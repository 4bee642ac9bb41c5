"""Health reflects storage: a full disk makes the service NOT_SERVING, says so to clients,
and logs it once; a queue with ready jobs and no active worker shows as stalled.

The disk is full for real: the SQLite database lives on a 4 MiB tmpfs mounted for the test
(the sandbox runs as root; the test is skipped where ``mount`` is refused), and a filler
file takes the rest of it. PostgreSQL's outage is the other helper's (tests/pgproxy.py).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import REPO, Server, base_env, free_port, healthy, wait_for
from tickwork import Client
from tickwork.errors import DatabaseUnavailable
from tickwork.v1 import system_pb2, system_pb2_grpc

FAILS = "the service answers but its database fails: database or disk is full"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted at ``tmp_path / "disk"`` for the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with a file; return its path."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"x" * 65536)
    with open(filler, "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"x" * 512)
    return filler


def status(address: str) -> system_pb2.GetStatusResponse:
    with grpc.insecure_channel(address) as channel:
        stub = system_pb2_grpc.SystemServiceStub(channel)
        return stub.GetStatus(system_pb2.GetStatusRequest(), timeout=10)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=base_env(TICKWORK_SERVER=address),
        timeout=60,
        check=False,
    )


def test_a_full_disk_is_not_serving_and_says_so(tmp_path: Path, small_disk: Path) -> None:
    metrics_port = free_port()
    server = Server(
        tmp_path,
        env={"WORKER_IS_ENABLED": "false", "TICKWORK_METRICS_LISTEN": f"127.0.0.1:{metrics_port}"},
        database_url=f"sqlite:///{small_disk / 'tickwork.db'}",
    )
    try:
        server.wait_healthy()
        client = Client(server.address)
        client.create_task("first", "shell", {"argv": ["true"]})
        filler = fill(small_disk)

        # Writes fail; while they go on failing the health check says NOT_SERVING.
        failures: list[DatabaseUnavailable] = []
        not_serving_seen = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not_serving_seen < 5:
            try:
                client.create_task(
                    f"t{len(failures)}", "shell", {"argv": ["true"]}, description="d" * 3000
                )
            except DatabaseUnavailable as err:
                failures.append(err)
            if failures and not healthy(server.address):
                not_serving_seen += 1
        assert not_serving_seen >= 5, server.output()
        assert len(failures) >= 5
        assert all(str(err) == FAILS for err in failures), failures[0]
        assert failures[0].retry_delay is not None

        # The CLI tells a failing database from an unreachable service.
        run = cli(server.address, "tasks", "run", "first")
        assert run.returncode != 0 and FAILS in run.stderr, run.stderr
        assert "cannot reach" not in run.stderr

        # GetStatus (reads still work) and the metrics name it.
        found = status(server.address).database
        assert not found.writes_ok and "disk is full" in found.error, found
        assert found.failed_operations >= 1
        wait_for(lambda: scrape(metrics_port).get("tickwork_database_up") == 0, timeout_s=10)
        # The metrics follow the database's state every STORAGE_CHECK_S: the last failures
        # are counted at the next check.
        wait_for(
            lambda: scrape(metrics_port)["tickwork_database_errors_total"] >= len(failures),
            timeout_s=10,
        )

        # Logged once per change of state, not once per failed call; no traceback.
        log = server.output()
        assert 1 <= log.count("database failing") <= 3, log
        assert "Traceback" not in log, log

        filler.unlink()
        wait_for(lambda: healthy(server.address), timeout_s=20, what="SERVING again")
        client.create_task("after", "shell", {"argv": ["true"]})
        assert status(server.address).database.writes_ok
        assert "database recovered" in server.output()
        client.close()
    finally:
        server.stop()


def test_ready_jobs_with_no_worker_show_as_a_queue_stall(tmp_path: Path) -> None:
    """No worker at all (WORKER_IS_ENABLED=false, none connected): a run's job waits; past a
    lease TTL (2 s here) GetStatus reports the stall and the metric counts its seconds."""
    metrics_port = free_port()
    server = Server(
        tmp_path,
        env={
            "WORKER_IS_ENABLED": "false",
            "TICKWORK_LEASE_TTL_SECONDS": "2",
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "0.5",
            "TICKWORK_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
        },
    )
    try:
        server.wait_healthy()
        with Client(server.address) as client:
            client.create_task("t", "shell", {"argv": ["true"]})
            assert not status(server.address).HasField("queue_stall")
            client.run("t")
            stall = wait_for(
                lambda: (
                    status(server.address).queue_stall
                    if status(server.address).HasField("queue_stall")
                    else None
                ),
                timeout_s=20,
                what="a queue stall",
            )
            assert stall.since.seconds > 0
            # The gauge follows at the watcher's next pass (a third of the TTL).
            wait_for(
                lambda: scrape(metrics_port)["tickwork_queue_stalled_seconds"] > 2,
                timeout_s=10,
                what="the stalled-seconds gauge",
            )
            assert "queue wedged" in server.output()
    finally:
        server.stop()


async def test_a_postgresql_outage_is_logged_once_without_tracebacks(tmp_path: Path) -> None:
    """PostgreSQL dropping every connection for a few seconds (tests/pgproxy.py: each new
    connection is closed at its first query, the open ones cut): the embedded worker's
    stream, the scheduler loop and the reaper all fail meanwhile, and the log says so in a
    few lines, none a DBAPIError traceback; once PostgreSQL answers, health is SERVING."""
    import asyncio

    from tests.databases import create_database, drop_database
    from tests.pgproxy import PgProxy

    url = await asyncio.to_thread(create_database, "postgresql", tmp_path)
    try:
        async with PgProxy.to(url).running() as proxy:
            server = Server(tmp_path, env={"WORKER_POLL_INTERVAL_SECONDS": "1"},
                            database_url=proxy.url(url))  # fmt: skip
            try:
                await asyncio.to_thread(server.wait_healthy)
                proxy.drop = True
                for _ in range(20):  # about 4 s of outage
                    proxy.cut()
                    await asyncio.sleep(0.2)
                await asyncio.to_thread(wait_for, lambda: not healthy(server.address), timeout_s=10)
                proxy.drop = False
                await asyncio.to_thread(
                    wait_for, lambda: healthy(server.address), timeout_s=30, what="SERVING"
                )
                log = server.output()
                assert "database failing" in log and "database recovered" in log, log
                assert "Traceback" not in log, log
            finally:
                await asyncio.to_thread(server.stop)
    finally:
        await asyncio.to_thread(drop_database, url)
