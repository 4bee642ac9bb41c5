"""Fault 2: a database outage longer than the lease TTL must not fail jobs that succeeded
(nor run them again).

PostgreSQL is cut off for longer than the lease TTL (through :class:`tests.pgproxy.PgProxy`:
every connection cut, new ones dropped) while a job runs and finishes. Nobody can heartbeat
or record the outcome meanwhile; once the database is back, the reaper first moves the
running leases later by the outage's length, so the worker's outcome, reported again on its
next stream, is recorded: the job SUCCEEDED, no retry, no late outcome, no failure counted.

On SQLite, where this machine cannot take the database away, the same rule is shown through
the outage seam of the service's database (``Database.outages``: what the service saw of
its own failed calls) and the injected clock.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler_svc.outages import StorageOutages
from scheduler_svc.values import JobStatus as Status
from tests.databases import run_sql
from tests.faults.audit import audit, recording_job, spans
from tests.harness import Server, wait_for
from tests.inprocess import inprocess
from tests.pgproxy import PgProxy
from tests.queue_helpers import claim, wait_logged, wait_status
from tickwork import Client, JobStatus

#: Longer than the embedded worker's reconnect backoff cap (10 s): a worker that found the
#: database down for a while reconnects within the lease's grace.
LEASE_TTL_S = 12.0
HEARTBEAT_S = 1.0
OUTAGE_S = LEASE_TTL_S + 3.0
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=dt.UTC)


class ThreadedProxy:
    """A :class:`PgProxy` served on an event loop of its own thread, so that a sync test
    can cut the database of a service running as another process."""

    def __init__(self, database_url: str) -> None:
        self.proxy = PgProxy.to(database_url)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._run(),))
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        async with self.proxy.running():
            self._ready.set()
            await self._stop.wait()

    def _call(self, fn: Callable[[], None]) -> None:
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()

        self._loop.call_soon_threadsafe(run)
        assert done.wait(10)

    def down(self) -> None:
        """The database goes away: open connections are cut, new ones are dropped."""

        def cut() -> None:
            self.proxy.drop = True
            self.proxy.cut()

        self._call(cut)

    def up(self) -> None:
        """The database is back: new connections are served."""

        def serve() -> None:
            self.proxy.drop = False

        self._call(serve)

    def close(self) -> None:
        stop = self._stop
        assert stop is not None
        self._loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def proxied(tmp_path: Path, database_url: str) -> Iterator[tuple[Server, ThreadedProxy]]:
    if not database_url.startswith("postgresql"):
        pytest.skip("a real outage needs PostgreSQL behind the proxy (SQLite: see below)")
    proxy = ThreadedProxy(database_url)
    srv = Server(
        tmp_path,
        env={
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "TICKWORK_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": str(HEARTBEAT_S),
            "TICKWORK_RETENTION_DAYS": "0",
        },
        database_url=proxy.proxy.url(database_url),
        name="service",
    )
    try:
        yield srv.wait_healthy(), proxy
    finally:
        proxy.up()
        srv.stop()
        proxy.close()


def test_an_outage_longer_than_the_lease_fails_no_job_that_succeeded(
    tmp_path: Path, proxied: tuple[Server, ThreadedProxy], database_url: str
) -> None:
    service, proxy = proxied
    record = tmp_path / "record"
    with Client(service.address) as client:
        client.create_task(
            "job", "shell", recording_job(record, 2), max_attempts=2, backoff_base_seconds=1
        )
        wait_logged(service, "as the active worker")
        (run,) = client.run("job")
        wait_for(lambda: spans(record), what="the job to start")
        proxy.down()
        down_at = time.monotonic()
        try:
            # The job ends during the outage; the outage outlasts the lease.
            wait_for(
                lambda: spans(record)[0].ended and time.monotonic() - down_at >= OUTAGE_S,
                timeout_s=OUTAGE_S + 20,
                interval_s=0.1,
                what="the job to end and the outage to outlast the lease",
            )
        finally:
            proxy.up()
        done = wait_status(client, run.job_id, JobStatus.JOB_STATUS_SUCCEEDED, timeout_s=30)
        assert done.error == ""
        assert [j.id for j in client.list_jobs(task="job")] == [run.job_id]  # no retry
        assert client.get_task("job").consecutive_failure_count == 0
    ((late,),) = run_sql(
        database_url, "SELECT late_outcome FROM jobs WHERE id = :id", id=run.job_id
    )
    assert not late
    # Whether the reaper's first pass after the outage still finds the job running (and
    # logs "leases extended") or the outcome reported again comes first varies with the
    # load; the extension itself is checked by the next test, through the outage seam.
    audit(database_url, record, [run.job_id]).assert_kept()


async def test_the_reaper_gives_running_leases_the_outage_s_length(
    tmp_path: Path, database_url: str
) -> None:
    """The rule on both databases, through the outage seam and the injected clock."""
    ttl_s = 10.0
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=ttl_s, heartbeat_interval_s=2
    ) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]}, max_attempts=2)
        await h.client.run("t")
        job = await claim(h, ttl_s=ttl_s)
        assert job.lease_token is not None
        outages = h.service.app.store.db.outages
        # The service's calls failed for 20 s (say from T0 + 1 s); the clock moved past the
        # lease meanwhile; the reaper's pass is the first call to succeed.
        outages.failed(time.monotonic() - 20.0)
        h.clock.advance(21.0)
        assert await h.service.app.reap_expired_leases() == []
        assert outages.grace_s() < 1.0  # given
        renewed = await h.service.app.store.get_job(job.id)
        assert renewed.status == Status.RUNNING
        assert renewed.lease_expires_at is not None
        assert renewed.lease_expires_at >= T0 + dt.timedelta(seconds=ttl_s + 20.0)
        # A second replica that saw the same outage adds no second outage's length: the
        # lease ends at most a TTL after the outage did (20 s more would be T0 + 50 s).
        second_replica = h.service.app.store.reap_expired_leases(
            h.clock(), auto_disable_count=0, grace_s=20.0, lease_ttl_s=ttl_s
        )
        assert await second_replica == []
        again = await h.service.app.store.get_job(job.id)
        assert again.lease_expires_at is not None
        assert again.lease_expires_at <= h.clock() + dt.timedelta(seconds=ttl_s)
        # The worker's outcome, reported once it can, is recorded.
        result = await h.service.app.finish_job(job.id, job.lease_token, Status.SUCCEEDED, "", "")
        assert result.accepted and result.retry is None
        # Without a further outage, a lease that runs out is recovered as before.
        await h.client.run("t")
        second = await claim(h, ttl_s=ttl_s)
        h.clock.advance(ttl_s + 1.0)
        (lost,) = await h.service.app.reap_expired_leases()
        assert lost.job is not None and lost.job.id == second.id


def test_calls_that_failed_together_count_their_outage_once() -> None:
    """Overlapping failed calls (several waiting on the same stalled database), and a call
    that began before the last outage closed, add only the time not counted yet."""
    outages = StorageOutages()
    now = time.monotonic()
    outages.failed(now - 20.0)  # waited 20 s, then failed
    outages.failed(now - 15.0)  # waited 15 s of the same 20
    outages.succeeded()
    assert 20.0 <= outages.grace_s() < 21.0
    outages.failed(now - 10.0)  # began during the outage just counted
    outages.succeeded()
    assert 20.0 <= outages.grace_s() < 21.0
    outages.granted(outages.grace_s())
    assert outages.grace_s() == 0.0
