"""Shutdown: SIGTERM on a worker lets the running job finish within the grace period
(WORKER_SHUTDOWN_GRACE_SECONDS), then aborts it and reports; SIGTERM on the server stops
accepting work and loses no accepted job (a restart on the same database runs it)."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa

from scheduler_svc.db import Database
from scheduler_svc.schema import leases
from tests.harness import Server, WorkerProc, wait_for
from tests.queue_helpers import (
    DEADLINE_S,
    processes_with,
    unique_sleep,
    wait_logged,
    wait_status,
)
from tickwork import Client, Job, JobStatus, TickworkError

SERVER_ENV = {
    "WORKER_POLL_INTERVAL_SECONDS": "1",
    "TICKWORK_LEASE_TTL_SECONDS": "3",
    "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "0.5",
}


@pytest.fixture
def dedicated(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """A scheduler service without its embedded worker."""
    srv = Server(
        tmp_path,
        env={**SERVER_ENV, "WORKER_IS_ENABLED": "false"},
        database_url=database_url,
        name="api",
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def gated_task(client: Client, name: str, gate: Path) -> None:
    """A task that waits until ``gate`` exists, then prints "finished"."""
    script = 'while [ ! -e "$0" ]; do sleep 0.05; done; echo finished'
    client.create_task(name, "shell", {"argv": ["sh", "-c", script, str(gate)]})


def exit_code(proc: WorkerProc | Server, timeout_s: float = DEADLINE_S) -> int:
    return proc.popen.wait(timeout_s)


def test_sigterm_lets_the_running_job_finish_within_the_grace(
    tmp_path: Path, dedicated: Server
) -> None:
    gate = tmp_path / "gate"
    with Client(dedicated.address) as client:
        gated_task(client, "slow", gate)
        client.create_task("next", "shell", {"argv": ["true"]})
        worker = WorkerProc(
            tmp_path,
            dedicated.address,
            env={"WORKER_SHUTDOWN_GRACE_SECONDS": "20", "WORKER_POLL_INTERVAL_SECONDS": "1"},
        )
        try:
            (run,) = client.run("slow")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
            worker.kill(signal.SIGTERM)
            wait_logged(worker, "letting job")
            (queued,) = client.run("next")  # accepted, but a stopping worker takes no job
            assert client.get_job(run.job_id).status == JobStatus.JOB_STATUS_RUNNING
            gate.touch()
            job = wait_status(client, run.job_id, JobStatus.JOB_STATUS_SUCCEEDED)
            assert job.output_tail.strip() == "finished" and job.late_outcome == ""
            assert exit_code(worker) == 0
            assert client.get_job(queued.job_id).status == JobStatus.JOB_STATUS_QUEUED
        finally:
            worker.stop()


def test_sigterm_aborts_the_job_after_the_grace_and_reports_it(
    tmp_path: Path, dedicated: Server
) -> None:
    sleep_s = unique_sleep()
    grace_s = 1.0
    with Client(dedicated.address) as client:
        client.create_task("stuck", "shell", {"argv": ["sleep", sleep_s]}, max_attempts=3)
        worker = WorkerProc(
            tmp_path,
            dedicated.address,
            env={
                "WORKER_SHUTDOWN_GRACE_SECONDS": str(grace_s),
                "WORKER_ABORT_GRACE_SECONDS": "1",
                "WORKER_POLL_INTERVAL_SECONDS": "1",
            },
        )
        try:
            (run,) = client.run("stuck")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
            worker.kill(signal.SIGTERM)
            signalled = time.monotonic()
            job = wait_status(client, run.job_id, JobStatus.JOB_STATUS_ABORTED)
            elapsed = time.monotonic() - signalled
            assert grace_s <= elapsed < grace_s + 3.0, elapsed
            assert job.error == "worker shutting down" and job.late_outcome == ""
            assert exit_code(worker) == 0
            assert not processes_with(f"sleep {sleep_s}")
            # Aborted is an outcome, not a failure: no retry.
            assert len(client.list_jobs(task="stuck")) == 1
        finally:
            worker.stop()


def probe_until_refused(client: Client) -> list[int]:
    """Call RunTasks until the stopping server refuses it; return the job ids it accepted."""
    accepted: list[int] = []

    def refused() -> bool:
        try:
            (run,) = client.run("probe")
        except TickworkError as err:
            # A call racing the shutdown may be cancelled, or outlast its deadline on a busy
            # machine, instead: not acknowledged either (if it was committed, its job is
            # checked with every other one after restart).
            assert err.code in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.CANCELLED,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ), err
            return True
        accepted.append(run.job_id)
        return False

    wait_for(refused, timeout_s=5, interval_s=0.05, what="RunTasks to be refused")
    return sorted(set(accepted))


def test_sigterm_on_the_server_loses_no_accepted_job(tmp_path: Path, database_url: str) -> None:
    gate = tmp_path / "gate"
    # DEBUG: the server logs each assignment ("job assigned") only at that level.
    env = {**SERVER_ENV, "WORKER_IS_ENABLED": "false", "TICKWORK_LOG_LEVEL": "DEBUG"}
    srv = Server(tmp_path, env=env, database_url=database_url, name="api-1")
    worker: WorkerProc | None = None
    restarted: Server | None = None
    try:
        srv.wait_healthy()
        with Client(srv.address, timeout=10) as client:
            gated_task(client, "running", gate)
            client.create_task("queued", "shell", {"argv": ["echo", "ran after the restart"]})
            client.create_task("probe", "shell", {"argv": ["true"]})
            worker = WorkerProc(tmp_path, srv.address, env={"WORKER_POLL_INTERVAL_SECONDS": "1"})
            (running,) = client.run("running")
            wait_status(client, running.job_id, JobStatus.JOB_STATUS_RUNNING)
            (queued,) = client.run("queued")

            srv.kill(signal.SIGTERM)
            accepted = probe_until_refused(client)
            gate.touch()  # the running job ends within the server's grace: it is recorded
            assert exit_code(srv) == 0
        # Nothing was handed out while the server stopped.
        before, after = srv.output().split("shutting down", 1)
        assert "job assigned" in before
        assert "job assigned" not in after

        restarted = Server(
            tmp_path, env=env, database_url=database_url, name="api-2", port=srv.port
        ).wait_healthy()
        with Client(restarted.address, timeout=10) as client:
            done = wait_status(client, running.job_id, JobStatus.JOB_STATUS_SUCCEEDED)
            assert done.output_tail.strip() == "finished"
            # The worker reconnects; every job accepted before the SIGTERM runs now.
            for job_id in [queued.job_id, *accepted]:
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED, timeout_s=30)
            assert client.get_job(queued.job_id).output_tail.strip() == "ran after the restart"
            leftovers = client.list_jobs(
                statuses=["QUEUED", "RUNNING", "FAILED", "ABORTED", "CANCELLED"]
            )
            assert leftovers == []
    finally:
        if worker is not None:
            worker.stop()
        srv.stop()
        if restarted is not None:
            restarted.stop()


def test_sigterm_on_an_embedded_server_refuses_work_and_finishes_its_job(
    tmp_path: Path, database_url: str
) -> None:
    gate = tmp_path / "gate"
    env = {**SERVER_ENV, "WORKER_SHUTDOWN_GRACE_SECONDS": "20"}
    srv = Server(tmp_path, env=env, database_url=database_url, name="serve-1")
    restarted: Server | None = None
    try:
        srv.wait_healthy()
        with Client(srv.address, timeout=10) as client:
            gated_task(client, "running", gate)
            client.create_task("queued", "shell", {"argv": ["true"]})
            client.create_task("probe", "shell", {"argv": ["true"]})
            (running,) = client.run("running")
            wait_status(client, running.job_id, JobStatus.JOB_STATUS_RUNNING)
            (queued,) = client.run("queued")
            srv.kill(signal.SIGTERM)
            signalled = time.monotonic()
            accepted = probe_until_refused(client)
            # Refused at once, not after the embedded worker's 20 s grace.
            assert time.monotonic() - signalled < 3.0
            gate.touch()
            assert exit_code(srv) == 0
        restarted = Server(
            tmp_path, env=env, database_url=database_url, name="serve-2"
        ).wait_healthy()
        with Client(restarted.address, timeout=10) as client:
            assert client.get_job(running.job_id).status == JobStatus.JOB_STATUS_SUCCEEDED
            for job_id in [queued.job_id, *accepted]:
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED)
    except TickworkError as err:
        raise AssertionError(f"{err}\n{srv.output()}") from err
    finally:
        srv.stop()
        if restarted is not None:
            restarted.stop()


def worker_lease(database_url: str) -> tuple[str, dt.datetime]:
    """The ``worker`` lease row: (holder, expires_at in UTC)."""

    def select(conn: sa.Connection) -> tuple[str, dt.datetime]:
        query = sa.select(leases.c.holder, leases.c.expires_at).where(leases.c.name == "worker")
        row = conn.execute(query).one()
        return str(row.holder), row.expires_at

    async def read() -> tuple[str, dt.datetime]:
        db = Database(database_url)
        try:
            return await db.read(select)
        finally:
            await db.dispose()

    return asyncio.run(read())


def test_sigterm_on_the_server_releases_the_dedicated_workers_lease(
    tmp_path: Path, database_url: str
) -> None:
    """A dedicated worker's stream still open when the server's grace ends is closed by the
    server as any stream is: its session gives the worker lease up before the database is
    closed (no "cannot schedule new futures after shutdown" traceback), so the worker
    that reconnects to the restarted service is active at once, not a lease TTL later."""
    gate = tmp_path / "gate"
    env = {
        **SERVER_ENV,
        "WORKER_IS_ENABLED": "false",
        "TICKWORK_LEASE_TTL_SECONDS": "60",
        "WORKER_SHUTDOWN_GRACE_SECONDS": "1",
    }
    srv = Server(tmp_path, env=env, database_url=database_url, name="api")
    worker: WorkerProc | None = None
    try:
        srv.wait_healthy()
        with Client(srv.address, timeout=10) as client:
            gated_task(client, "running", gate)  # never finishes: the gate is never made
            worker = WorkerProc(tmp_path, srv.address, env={"WORKER_POLL_INTERVAL_SECONDS": "1"})
            (running,) = client.run("running")
            wait_status(client, running.job_id, JobStatus.JOB_STATUS_RUNNING)
            holder, _ = worker_lease(database_url)
            assert holder
        srv.kill(signal.SIGTERM)
        assert exit_code(srv) == 0
        stopped = dt.datetime.now(dt.UTC)
        assert "Traceback" not in srv.output(), srv.output()
        holder_after, expires_at = worker_lease(database_url)
        assert holder_after == holder
        assert expires_at <= stopped, (expires_at, stopped)  # released, not left to expire
    finally:
        if worker is not None:
            worker.stop()
        srv.stop()


def dedicated_server_stopped_mid_job(
    tmp_path: Path, database_url: str, argv: list[str], shutdown_grace_s: float
) -> Job:
    """Start a service without its worker and a dedicated worker, run a shell task of
    ``argv``, SIGTERM the service while the job runs (it must exit 0), restart the service
    on the same database without a worker and return the job as recorded. The job lease
    TTL is 60 s: a job left RUNNING would still be RUNNING."""
    env = {
        **SERVER_ENV,
        "WORKER_IS_ENABLED": "false",
        "TICKWORK_LEASE_TTL_SECONDS": "60",
        "WORKER_SHUTDOWN_GRACE_SECONDS": str(shutdown_grace_s),
    }
    srv = Server(tmp_path, env=env, database_url=database_url, name="api-1")
    worker: WorkerProc | None = None
    restarted: Server | None = None
    try:
        srv.wait_healthy()
        with Client(srv.address, timeout=10) as client:
            client.create_task("running", "shell", {"argv": argv})
            worker = WorkerProc(tmp_path, srv.address, env={"WORKER_POLL_INTERVAL_SECONDS": "1"})
            (run,) = client.run("running")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
        srv.kill(signal.SIGTERM)
        assert exit_code(srv) == 0, srv.output()
        worker.stop()
        restarted = Server(
            tmp_path, env=env, database_url=database_url, name="api-2", port=srv.port
        ).wait_healthy()
        with Client(restarted.address, timeout=10) as client:
            return client.get_job(run.job_id)
    finally:
        if worker is not None:
            worker.stop()
        srv.stop()
        if restarted is not None:
            restarted.stop()


def test_sigterm_on_the_server_lets_a_dedicated_workers_job_finish_within_the_grace(
    tmp_path: Path, database_url: str
) -> None:
    """The job outlives the gRPC default of 5 s: the service keeps its stream open for
    WORKER_SHUTDOWN_GRACE_SECONDS and records the outcome before it exits."""
    job = dedicated_server_stopped_mid_job(
        tmp_path, database_url, ["sh", "-c", "sleep 7; echo finished"], shutdown_grace_s=30
    )
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job
    assert job.output_tail.strip() == "finished"


def test_sigterm_on_the_server_aborts_a_dedicated_workers_job_after_the_grace(
    tmp_path: Path, database_url: str
) -> None:
    """Past the grace the job is told to abort and ends ABORTED, recorded before the
    service exits: not left RUNNING to fail "lease lost" later, which would count toward
    auto-disable."""
    job = dedicated_server_stopped_mid_job(
        tmp_path, database_url, ["sleep", "120"], shutdown_grace_s=1
    )
    assert job.status == JobStatus.JOB_STATUS_ABORTED, job
    assert job.error == "service stopping (its shutdown grace of 1 s ran out)"
