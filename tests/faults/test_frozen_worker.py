"""Fault 1: a frozen worker (SIGSTOP; a VM pause, ``docker pause``, a cgroup freeze or a
debugger do the same) must not let its job overlap the job's retry.

Two dedicated workers, a task with two attempts whose first runs far longer than the lease;
the active worker is stopped while the job runs. The worker's guard process, no longer fed
by the worker's heartbeats, SIGKILLs the job's process group itself; the service recovers
the job ("lease lost") and holds its retry back until the old run's processes are known to
be dead (the lease's expiry plus the kill deadline); the standby runs the retry. Audited
from the database and from the jobs' own records.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_svc.store import LEASE_LOST
from tests.faults.audit import audit, recording_job, spans
from tests.harness import Server, WorkerProc, wait_for
from tests.inprocess import inprocess
from tests.queue_helpers import claim, wait_logged, wait_status
from tickwork import Client, JobStatus

LEASE_TTL_S = 2.0
HEARTBEAT_S = 0.5
#: The worker's watchdog: TTL - heartbeat.
WATCHDOG_S = LEASE_TTL_S - HEARTBEAT_S
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def service(tmp_path: Path, database_url: str) -> Iterator[Server]:
    srv = Server(
        tmp_path,
        env={
            "WORKER_IS_ENABLED": "false",
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "TICKWORK_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": str(HEARTBEAT_S),
        },
        database_url=database_url,
        name="service",
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def worker(tmp_path: Path, service: Server, name: str) -> WorkerProc:
    return WorkerProc(
        tmp_path,
        service.address,
        env={"WORKER_POLL_INTERVAL_SECONDS": "1", "WORKER_ABORT_GRACE_SECONDS": "1"},
        name=name,
    )


def test_a_frozen_worker_s_job_dies_before_its_retry_starts(
    tmp_path: Path, service: Server, database_url: str
) -> None:
    record = tmp_path / "record"
    with Client(service.address) as client:
        client.create_task(
            "long",
            "shell",
            recording_job(record, 40, retry_seconds=1),
            max_attempts=2,
            backoff_base_seconds=1,
            backoff_cap_seconds=1,
        )
        active = worker(tmp_path, service, "worker-active")
        standby: WorkerProc | None = None
        try:
            wait_logged(active, "as the active worker")
            standby = worker(tmp_path, service, "worker-standby")
            wait_logged(standby, "as the standby worker")
            (run,) = client.run("long")
            wait_for(lambda: spans(record) and spans(record)[0].last > spans(record)[0].start)
            os.kill(active.pid, signal.SIGSTOP)
            stopped_at = time.time()
            try:
                failed = wait_status(client, run.job_id, JobStatus.JOB_STATUS_FAILED)
                assert failed.error == LEASE_LOST
                (retry,) = [j for j in client.list_jobs(task="long") if j.id != run.job_id]
                wait_status(client, retry.id, JobStatus.JOB_STATUS_SUCCEEDED, timeout_s=40)
                continued_at = time.time()
            finally:
                os.kill(active.pid, signal.SIGCONT)
            # Woken, it finds its stream gone and comes back as a standby.
            wait_for(lambda: active.output().count("as the standby worker") == 1, timeout_s=30)
            assert client.list_jobs(statuses=[JobStatus.JOB_STATUS_RUNNING]) == []
        finally:
            active.stop()
            if standby is not None:
                standby.stop()

    first, second = spans(record)
    assert (first.job_id, second.job_id) == (run.job_id, retry.id)
    # The frozen worker's job was killed by its guard while the worker was still stopped,
    # within the watchdog of the last heartbeat (a loaded machine: generous bounds).
    assert not first.ended
    assert first.last < continued_at
    assert first.last - stopped_at < WATCHDOG_S + 3.0, (first, stopped_at)
    assert second.ended and second.start > first.last
    audit(database_url, record, [run.job_id]).assert_kept()


async def test_a_lease_lost_job_s_retry_waits_for_the_kill_deadline(
    tmp_path: Path, database_url: str
) -> None:
    """The service's half, on the injected clock: a backoff shorter than the kill deadline
    does not make the retry ready before the lease's expiry plus that deadline."""
    ttl_s, heartbeat_s = 10.0, 3.0
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=ttl_s, heartbeat_interval_s=heartbeat_s
    ) as h:
        await h.client.create_task(
            "t",
            "shell",
            {"argv": ["true"]},
            max_attempts=2,
            backoff_base_seconds=1,
            backoff_cap_seconds=1,
        )
        await h.client.run("t")
        job = await claim(h, ttl_s=ttl_s)
        assert job.lease_expires_at == T0 + dt.timedelta(seconds=ttl_s)
        h.clock.advance(ttl_s + 0.5)
        (recovered,) = await h.service.app.reap_expired_leases()
        assert recovered.retry is not None and recovered.retry.not_before is not None
        kill_deadline_s = heartbeat_s + 1.0
        assert recovered.retry.not_before >= job.lease_expires_at + dt.timedelta(
            seconds=kill_deadline_s
        )
        # Not claimable before then, claimable after.
        h.clock.set(job.lease_expires_at + dt.timedelta(seconds=kill_deadline_s - 0.1))
        assert await h.service.app.store.claim_next_job("w", h.clock(), ttl_s) is None
        h.clock.set(recovered.retry.not_before)
        assert await h.service.app.store.claim_next_job("w", h.clock(), ttl_s) is not None
