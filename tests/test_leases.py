"""Leases: a job whose worker stops heartbeating is recovered ("lease lost", retried per its
policy); a late outcome is recorded as late and changes nothing (fencing by lease token);
only one worker is active, a standby takes over, and two jobs never run at once."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_svc import values
from scheduler_svc.listening import PING_EVERY_S, PING_TIMEOUT_S
from scheduler_svc.records import JobRecord
from scheduler_svc.store import LEASE_LOST
from tests.databases import run_sql
from tests.harness import Server, WorkerProc, wait_for
from tests.inprocess import Harness, inprocess
from tests.pgproxy import PgProxy
from tests.queue_helpers import (
    Request,
    claim,
    processes_with,
    raw_worker,
    unique_sleep,
    wait_logged,
    wait_status,
)
from tickwork import Client, JobStatus, TaskAbort
from tickwork.v1 import job_pb2

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)

LEASE_TTL_S = 2.0
HEARTBEAT_S = 0.5
#: The server's reaper looks for expired leases this often at most (min(1, ttl / 3)).
REAP_INTERVAL_S = min(1.0, LEASE_TTL_S / 3)


async def test_a_late_outcome_is_recorded_as_late_and_changes_nothing(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, lease_ttl_s=10, heartbeat_interval_s=1) as h:
        await h.client.create_task(
            "t", "shell", {"argv": ["true"]}, max_attempts=2, backoff_base_seconds=1
        )
        (run,) = await h.client.run("t")
        async with raw_worker(h.service.address, "w-late") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            assign = (await w.expect("assign_job")).assign_job
            assert assign.job.id == run.job_id
            token = assign.lease_token

            # The worker goes quiet past its lease (a partition, a stalled process).
            h.clock.advance(10.5)
            (recovered,) = await h.service.app.reap_expired_leases()
            assert recovered.job is not None and recovered.job.status == "FAILED"
            assert recovered.job.error == LEASE_LOST
            assert recovered.retry is not None and recovered.retry.attempt == 2

            # Its next heartbeat is refused: the server tells it to stop.
            await w.send(heartbeat=Request.Heartbeat(job_id=run.job_id, lease_token=token))
            abort = (await w.expect("abort_job")).abort_job
            assert (abort.job_id, abort.reason) == (run.job_id, "lease lost")

            # Its outcome arrives late: recorded as late, not applied.
            await w.send(
                outcome=Request.Outcome(
                    job_id=run.job_id,
                    lease_token=token,
                    status=job_pb2.JOB_STATUS_SUCCEEDED,
                    output_tail="all done",
                )
            )
            ack = (await w.expect("outcome_ack")).outcome_ack
            assert ack.job_id == run.job_id and not ack.accepted
            job = await h.client.get_job(run.job_id)
            assert job.status == JobStatus.JOB_STATUS_FAILED and job.error == LEASE_LOST
            assert job.late_outcome.startswith("SUCCEEDED at ")
            assert job.output_tail != "all done"
            retry = await h.client.get_job(recovered.retry.id)
            assert retry.status == JobStatus.JOB_STATUS_QUEUED

            # The same stream goes on: it is given the retry once that is ready (its backoff,
            # and the lease's expiry plus the kill deadline: heartbeat interval + 1 s).
            assert recovered.retry.not_before is not None
            h.clock.set(recovered.retry.not_before)
            await w.send(poll_job=Request.PollJob())
            again = (await w.expect("assign_job")).assign_job
            assert (again.job.id, again.job.attempt) == (retry.id, 2)


async def test_an_outcome_with_a_stale_token_is_fenced(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.run("t")
        job = await claim(h)
        stale = await h.service.app.finish_job(
            job.id, "not-the-token", values.JobStatus.FAILED, "x", ""
        )
        assert not stale.accepted
        assert (await h.client.get_job(job.id)).status == JobStatus.JOB_STATUS_RUNNING
        ok = await h.service.app.finish_job(
            job.id, job.lease_token or "", values.JobStatus.SUCCEEDED, "", ""
        )
        assert ok.accepted and not ok.repeat
        # The same outcome again (a worker whose stream broke before the OutcomeAck):
        # accepted as the repeat it is, nothing changes.
        repeat = await h.service.app.finish_job(
            job.id, job.lease_token or "", values.JobStatus.SUCCEEDED, "", ""
        )
        assert repeat.accepted and repeat.repeat
        again = await h.service.app.finish_job(
            job.id, job.lease_token or "", values.JobStatus.FAILED, "x", ""
        )
        assert not again.accepted  # another outcome after the first: late
        done = await h.client.get_job(job.id)
        assert done.status == JobStatus.JOB_STATUS_SUCCEEDED and done.error == ""
        stored = await h.service.app.store.get_job(job.id)
        assert stored.late_outcome.startswith("FAILED at ")  # the repeat left no trace


async def _claimed_fire(h: Harness, *, max_attempts: int) -> JobRecord:
    """Task ``t`` (``max_attempts``, 1 s backoff) on schedule ``s``, fired at T0 + 1 min and
    its job claimed with a 10 s lease."""
    await h.client.create_task(
        "t", "shell", {"argv": ["true"]}, max_attempts=max_attempts, backoff_base_seconds=1
    )
    await h.client.create_schedule("s", ["t"], cron="* * * * *")
    await h.tick(T0 + dt.timedelta(minutes=1))
    return await claim(h, ttl_s=10)


async def test_a_lost_lease_is_retried_and_counts_toward_auto_disable(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=10, auto_disable_task_failure_count=1
    ) as h:
        first = await _claimed_fire(h, max_attempts=2)
        h.clock.advance(9.9)
        assert await h.service.app.reap_expired_leases() == []  # not expired yet
        assert await h.service.app.store.renew_job_lease(
            first.id, first.lease_token or "", h.clock(), 10
        )
        h.clock.advance(10.1)
        (lost,) = await h.service.app.reap_expired_leases()
        assert lost.retry is not None and lost.disabled_task is None
        assert lost.retry.not_before is not None  # backoff, and the kill deadline
        h.clock.set(lost.retry.not_before)
        second = await claim(h, ttl_s=10)
        assert second.id == lost.retry.id
        h.clock.advance(11)
        (final,) = await h.service.app.reap_expired_leases()
        assert final.retry is None and final.disabled_task is not None
        task = await h.client.get_task("t")
        assert not task.enabled and task.consecutive_failure_count == 1
        assert LEASE_LOST in task.disabled_reason
        assert await h.client.list_jobs(statuses=[JobStatus.JOB_STATUS_RUNNING]) == []


async def test_a_job_whose_abort_was_asked_for_and_whose_worker_is_gone_ends_aborted(
    tmp_path: Path, database_url: str
) -> None:
    """An abort asked for while the job's worker is already dead never reaches a worker:
    when the lease runs out the job ends ABORTED (the abort's reason, then the lease lost),
    not FAILED, so it is not retried and counts toward nothing."""
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=10, auto_disable_task_failure_count=1
    ) as h:
        job = await _claimed_fire(h, max_attempts=3)
        (aborted,) = await h.client.abort("t")
        assert aborted.action == TaskAbort.Action.ACTION_ABORT_REQUESTED
        h.clock.advance(10.1)
        (reaped,) = await h.service.app.reap_expired_leases()
        assert reaped.retry is None and reaped.disabled_task is None
        ended = await h.client.get_job(job.id)
        assert ended.status == JobStatus.JOB_STATUS_ABORTED
        assert ended.error == f"aborted by operator; {LEASE_LOST}"
        assert ended.stopped_by
        task = await h.client.get_task("t")
        assert task.enabled and task.consecutive_failure_count == 0
        queued = await h.client.list_jobs(statuses=[JobStatus.JOB_STATUS_QUEUED])
        assert [j.id for j in queued if j.task_name == "t"] == []


async def test_an_outcome_racing_the_reaper_is_applied_once(
    tmp_path: Path, database_url: str
) -> None:
    """The worker's outcome and the reaper (of this or another replica) reach the same
    expired job at the same moment: exactly one of them is applied."""
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=5, auto_disable_task_failure_count=0
    ) as h:
        await h.client.create_task(
            "t", "shell", {"argv": ["true"]}, max_attempts=2, backoff_base_seconds=1
        )
        await h.client.create_schedule("s", ["t"], cron="* * * * *")
        app, store = h.service.app, h.service.app.store
        for minute in range(1, 6):
            await h.tick(T0 + dt.timedelta(minutes=minute))
            job = await claim(h, ttl_s=5)
            h.clock.advance(6)
            outcome, reaped, reaped_again = await asyncio.gather(
                app.finish_job(job.id, job.lease_token or "", values.JobStatus.FAILED, "boom", ""),
                store.reap_expired_leases(h.clock(), auto_disable_count=0),
                store.reap_expired_leases(h.clock(), auto_disable_count=0),
            )
            applied = [outcome.accepted, bool(reaped), bool(reaped_again)]
            assert applied.count(True) == 1, applied
            retries = await h.client.list_jobs(task="t", statuses=[JobStatus.JOB_STATUS_QUEUED])
            assert len(retries) == 1 and retries[0].attempt == 2
            await h.client.cancel_job(retries[0].id)
            h.clock.set(T0 + dt.timedelta(minutes=minute, seconds=30))
        # Attempt 1 of 2 never counts; nothing was counted twice either.
        assert (await h.client.get_task("t")).consecutive_failure_count == 0


async def test_a_standby_stream_takes_over_when_the_active_one_closes(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, lease_ttl_s=10, worker_poll_interval_s=1) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        async with raw_worker(h.service.address, "w-active") as active:
            assert (await active.hello()).active
            async with raw_worker(h.service.address, "w-standby") as standby:
                assert not (await standby.hello()).active
                await standby.send(poll_job=Request.PollJob())
                (run,) = await h.client.run("t")
                # The standby is not given the job while the active worker is connected.
                answer = await standby.receive(1.5)
                assert answer is not None and answer.WhichOneof("message") == "no_job"
                assert (await h.client.get_job(run.job_id)).status == JobStatus.JOB_STATUS_QUEUED
                await standby.send(poll_job=Request.PollJob())
                await active.close()  # the active worker goes away: its lease is released
                closed_at = time.monotonic()
                assign = (await standby.expect("assign_job")).assign_job
                assert assign.job.id == run.job_id
                # Released, not expired: the standby does not wait out the lease.
                assert time.monotonic() - closed_at < 2.0


async def test_a_waiting_poll_does_not_spin_while_a_job_runs_elsewhere(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job still RUNNING (its worker died; the lease has not expired) blocks the queue:
    the active worker's poll waits for it without hammering the database, and is given the
    next job as soon as the running one is recovered."""
    async with inprocess(tmp_path, database_url, T0, lease_ttl_s=10, worker_poll_interval_s=5) as h:
        for name in ("a", "b"):
            await h.client.create_task(name, "shell", {"argv": ["true"]})
        await h.client.run("a")
        ghost = await claim(h, "dead-worker", ttl_s=10)
        await h.client.run("b")
        store = h.service.app.store
        calls = 0
        real_claim = store.claim_next_job

        async def counting_claim(*args: object, **kwargs: object) -> object:
            nonlocal calls
            calls += 1
            return await real_claim(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "claim_next_job", counting_claim)
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            assert await w.receive(1.0) is None  # waiting, not answered
            assert calls <= 3, calls
            h.clock.advance(11)
            (lost,) = await h.service.app.reap_expired_leases()
            assert lost.job is not None and lost.job.id == ghost.id
            started = time.monotonic()
            assign = (await w.expect("assign_job", timeout_s=3)).assign_job
            assert assign.job.task_name == "b"
            assert time.monotonic() - started < 1.0


async def test_a_poll_that_met_a_storage_error_still_answers_a_cancel_at_once(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim fails (database unreachable) and the poll would answer NoJob only at the
    end of its 30 s interval; a stopping worker's CancelPoll gets that NoJob now."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=30) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.run("t")

        async def failing_claim(*args: object, **kwargs: object) -> object:
            raise OSError("database unreachable")

        monkeypatch.setattr(h.service.app.store, "claim_next_job", failing_claim)
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            assert await w.receive(0.3) is None
            await w.send(cancel_poll=Request.CancelPoll())
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "no_job"


async def test_storage_errors_neither_hang_a_poll_nor_end_a_running_job(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing database call while answering a poll is answered with NoJob (the worker
    polls again, instead of waiting forever); one during a heartbeat leaves the stream and
    the running job alone."""
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=10, worker_poll_interval_s=0.5
    ) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        store = h.service.app.store
        real_claim, real_renew = store.claim_next_job, store.renew_job_lease
        failures = {"claim": 1, "renew": 1}

        async def flaky_claim(*args: object, **kwargs: object) -> object:
            if failures["claim"]:
                failures["claim"] -= 1
                raise OSError("database unreachable")
            return await real_claim(*args, **kwargs)  # type: ignore[arg-type]

        async def flaky_renew(*args: object, **kwargs: object) -> bool:
            if failures["renew"]:
                failures["renew"] -= 1
                raise OSError("database unreachable")
            return await real_renew(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "claim_next_job", flaky_claim)
        monkeypatch.setattr(store, "renew_job_lease", flaky_renew)
        (run,) = await h.client.run("t")
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            answer = await w.receive(3)
            assert answer is not None and answer.WhichOneof("message") == "no_job"
            await w.send(poll_job=Request.PollJob())
            assign = (await w.expect("assign_job")).assign_job
            assert assign.job.id == run.job_id
            heartbeat = Request.Heartbeat(job_id=run.job_id, lease_token=assign.lease_token)
            await w.send(heartbeat=heartbeat)  # fails in the store
            await w.send(heartbeat=heartbeat)  # renews
            assert await w.receive(0.3) is None  # no AbortJob, stream still open
            await w.send(
                outcome=Request.Outcome(
                    job_id=run.job_id,
                    lease_token=assign.lease_token,
                    status=job_pb2.JOB_STATUS_SUCCEEDED,
                )
            )
            assert (await w.expect("outcome_ack")).outcome_ack.accepted
        assert failures == {"claim": 0, "renew": 0}


# ----------------------------------------------------------------- real processes


def lease_test_server(tmp_path: Path, database_url: str, poll_s: float) -> Iterator[Server]:
    """A scheduler service without its worker, with a 2 s lease, 0.5 s heartbeats and a
    worker poll interval of ``poll_s`` seconds; stopped after the test."""
    srv = Server(
        tmp_path,
        env={
            "WORKER_IS_ENABLED": "false",
            "WORKER_POLL_INTERVAL_SECONDS": str(poll_s),
            "TICKWORK_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": str(HEARTBEAT_S),
        },
        database_url=database_url,
        name="api",
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


@pytest.fixture
def lease_server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """:func:`lease_test_server` polling every second."""
    yield from lease_test_server(tmp_path, database_url, 1)


def start_worker(tmp_path: Path, server: Server, name: str, poll_s: float = 1) -> WorkerProc:
    return WorkerProc(
        tmp_path,
        server.address,
        env={"WORKER_POLL_INTERVAL_SECONDS": str(poll_s), "WORKER_ABORT_GRACE_SECONDS": "1"},
        name=name,
    )


def recording_task(client: Client, name: str, record: Path, marker: Path, sleep_s: str) -> None:
    """A task that appends "start NAME" and "end NAME" to ``record``. Its first attempt
    (the one that creates ``marker``) is "NAME-killed" and sleeps ``sleep_s``; later
    attempts sleep 0.2 s."""
    script = (
        'n=$0; d=0.2; if [ "$n" = long ] && mkdir "$2" 2>/dev/null; then n=long-killed; '
        f"d={sleep_s}; fi; "
        'echo "start $n" >> "$1"; sleep $d; echo "end $n" >> "$1"'
    )
    client.create_task(
        name,
        "shell",
        {"argv": ["sh", "-c", script, name, str(record), str(marker)]},
        max_attempts=2,
        backoff_base_seconds=1,
        backoff_cap_seconds=1,
    )


def job_status(client: Client, job_id: int) -> int:
    return client.get_job(job_id).status


def test_a_killed_worker_s_job_fails_with_lease_lost_and_a_new_worker_goes_on(
    tmp_path: Path, lease_server: Server, database_url: str
) -> None:
    record, marker, sleep_s = tmp_path / "record", tmp_path / "marker", unique_sleep()
    with Client(lease_server.address) as client:
        recording_task(client, "long", record, marker, sleep_s)
        recording_task(client, "after", record, marker, sleep_s)
        first_worker = start_worker(tmp_path, lease_server, "worker-1")
        try:
            (run,) = client.run("long")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
            wait_for(lambda: processes_with(f"sleep {sleep_s}"), what="the job's process")
            wait_logged(first_worker, f"job {run.job_id}: started")  # registered with the guard
            (after,) = client.run("after")
            first_worker.kill(signal.SIGKILL)
            killed_at = time.monotonic()
            failed = wait_status(client, run.job_id, JobStatus.JOB_STATUS_FAILED)
            # Within the lease: the last heartbeat was at most one interval before the kill.
            assert time.monotonic() - killed_at < LEASE_TTL_S + REAP_INTERVAL_S + 1.5
            assert failed.error == LEASE_LOST
            # The job's processes went with their worker.
            wait_for(
                lambda: not processes_with(f"sleep {sleep_s}"),
                timeout_s=3,
                what="the killed worker's job processes to be gone",
            )
            (retry,) = client.list_jobs(task="long", statuses=[JobStatus.JOB_STATUS_QUEUED])
            assert retry.retry_of_job_id == run.job_id and retry.attempt == 2
            assert job_status(client, after.job_id) == JobStatus.JOB_STATUS_QUEUED
        finally:
            first_worker.stop()

        second_worker = start_worker(tmp_path, lease_server, "worker-2")
        try:
            for job_id in (after.job_id, retry.id):
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED)
            assert client.list_jobs(statuses=[JobStatus.JOB_STATUS_RUNNING]) == []
            ran_by = run_sql(
                database_url,
                "SELECT DISTINCT worker_id FROM jobs WHERE id IN (:a, :b)",
                a=after.job_id,
                b=retry.id,
            )
            assert len(ran_by) == 1 and f":{second_worker.pid}:" in ran_by[0][0]
        finally:
            second_worker.stop()
    assert record.read_text().splitlines() == [
        "start long-killed",
        "start after",
        "end after",
        "start long",
        "end long",
    ]


def test_a_standby_worker_takes_over_and_jobs_never_overlap(
    tmp_path: Path, lease_server: Server
) -> None:
    record, marker, sleep_s = tmp_path / "record", tmp_path / "marker", unique_sleep()
    with Client(lease_server.address) as client:
        names = ("long", "a", "b", "c")
        for name in names:
            recording_task(client, name, record, marker, sleep_s)
        active = start_worker(tmp_path, lease_server, "worker-active")
        standby: WorkerProc | None = None
        try:
            wait_logged(active, "as the active worker")
            standby = start_worker(tmp_path, lease_server, "worker-standby")
            wait_logged(standby, "as the standby worker")
            (long_run,) = client.run("long")
            wait_status(client, long_run.job_id, JobStatus.JOB_STATUS_RUNNING)
            # Kill once the script has made the marker and got to its sleep: killed before
            # then (a loaded machine may not schedule the new shell for a while after the
            # worker logged its start), the first attempt leaves no marker, and the retry
            # takes the long "long-killed" branch instead.
            wait_for(lambda: processes_with(f"sleep {sleep_s}"), what="the job's process")
            # And once the job's process group is registered with the worker's guard (the
            # log line follows the registration): a SIGKILL in the milliseconds between the
            # program's start and its registration leaves the program running (a known gap).
            wait_logged(active, f"job {long_run.job_id}: started")
            runs = client.run("a", "b", "c")
            active.kill(signal.SIGKILL)

            failed = wait_status(client, long_run.job_id, JobStatus.JOB_STATUS_FAILED)
            assert failed.error == LEASE_LOST
            wait_for(
                lambda: not processes_with(f"sleep {sleep_s}"),
                timeout_s=3,
                what="the killed worker's job processes to be gone",
            )
            (retry,) = client.list_jobs(task="long", statuses=[JobStatus.JOB_STATUS_QUEUED])
            for job_id in [r.job_id for r in runs] + [retry.id]:
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED)
            assert client.list_jobs(statuses=[JobStatus.JOB_STATUS_RUNNING]) == []
            assert "this worker is now the active one" in standby.output()
        finally:
            active.stop()
            if standby is not None:
                standby.stop()
    lines = record.read_text().splitlines()
    # The killed attempt started and never ended (its process died with its worker); every
    # other job ran from start to end before the next one started.
    assert lines[0] == "start long-killed" and "end long-killed" not in lines
    rest = lines[1:]
    ran = [line.removeprefix("start ") for line in rest[::2]]
    assert rest == [f"{what} {name}" for name in ran for what in ("start", "end")]
    assert sorted(ran) == sorted(names)


# ------------------------------------------- liveness: the worker's connection must answer


def record_task(client: Client, name: str, record: Path, seconds: float) -> None:
    """A task whose job (in its job process) appends ``start NAME`` to ``record``, sleeps
    ``seconds`` and appends ``end NAME`` (``aborted NAME`` if its process is stopped)."""
    client.create_task(
        name,
        "python",
        {
            "callable": "tests.handler_fixtures:record_sleep",
            "kwargs": {"record": str(record), "name": name, "seconds": seconds},
        },
    )


def job_spans(database_url: str) -> list[tuple[int, str, dt.datetime, dt.datetime]]:
    """(id, worker_id, started_at, finished_at) of every job that started, by start."""
    rows = run_sql(
        database_url,
        "SELECT id, worker_id, started_at, finished_at FROM jobs "
        "WHERE started_at IS NOT NULL ORDER BY started_at",
    )
    return [(int(r[0]), str(r[1]), _utc(r[2]), _utc(r[3])) for r in rows]


def _utc(value: object) -> dt.datetime:
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def test_a_stopped_worker_loses_the_lease_and_the_standby_runs_the_next_job(
    tmp_path: Path, lease_server: Server, database_url: str
) -> None:
    """SIGSTOP on the active worker (its stream stays open): the standby becomes active
    within the TTL and runs a new job while the first worker is still stopped, whose job's
    processes its guard killed; once continued, that worker comes back as a standby and
    runs nothing."""
    record = tmp_path / "record"
    with Client(lease_server.address) as client:
        record_task(client, "long", record, 60)
        record_task(client, "b", record, 0.2)
        record_task(client, "c", record, 0.2)
        first = start_worker(tmp_path, lease_server, "worker-first")
        standby: WorkerProc | None = None
        try:
            wait_logged(first, "as the active worker")
            standby = start_worker(tmp_path, lease_server, "worker-standby")
            wait_logged(standby, "as the standby worker")
            (long_run,) = client.run("long")
            wait_for(lambda: record.exists() and "start long" in record.read_text())
            os.kill(first.pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            try:
                (b_run,) = client.run("b")
                wait_status(client, b_run.job_id, JobStatus.JOB_STATUS_SUCCEEDED)
                # The lease was given up a TTL after the last heartbeat; the stopped job's own
                # lease expired then too, and the reaper recovered it.
                # The service's pings went unanswered: it closed the stream and the session
                # gave the lease up.
                assert time.monotonic() - stopped_at < PING_EVERY_S + PING_TIMEOUT_S + 2.0
                assert job_status(client, long_run.job_id) == JobStatus.JOB_STATUS_FAILED
                assert client.get_job(long_run.job_id).error == LEASE_LOST
                assert "worker disconnected" in lease_server.output()
                assert "this worker is now the active one" in standby.output()
            finally:
                os.kill(first.pid, signal.SIGCONT)
            # It finds its stream ended, stops its job and reconnects as a standby.
            wait_for(lambda: first.output().count("as the standby worker") == 1)
            (c_run,) = client.run("c")
            wait_status(client, c_run.job_id, JobStatus.JOB_STATUS_SUCCEEDED)
            assert client.list_jobs(statuses=[JobStatus.JOB_STATUS_RUNNING]) == []
        finally:
            first.stop()
            if standby is not None:
                standby.stop()
    spans = job_spans(database_url)
    assert [s[0] for s in spans] == [long_run.job_id, b_run.job_id, c_run.job_id]
    assert f":{first.pid}:" in spans[0][1]
    assert all(f":{standby.pid}:" in s[1] for s in spans[1:])
    for earlier, later in itertools.pairwise(spans):
        assert earlier[3] <= later[2], (earlier, later)  # never two RUNNING at once
    # The job's process did not sleep on while its worker was stopped: the worker's guard,
    # no longer fed by its heartbeats, SIGKILLed it before the lease expired (no "aborted").
    assert record.read_text().splitlines() == [
        "start long",
        "start b",
        "end b",
        "start c",
        "end c",
    ]


@pytest.fixture
def slow_poll_server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """:func:`lease_test_server` with a poll interval (10 s) longer than the lease TTL."""
    yield from lease_test_server(tmp_path, database_url, 10)


def start_slow_poll_worker(tmp_path: Path, server: Server, name: str) -> WorkerProc:
    return start_worker(tmp_path, server, name, poll_s=10)


@pytest.mark.parametrize("job_s", [0.0, 3.5 * LEASE_TTL_S], ids=["idle", "long-job"])
def test_a_live_worker_keeps_the_lease_for_many_ttls(
    tmp_path: Path, slow_poll_server: Server, database_url: str, job_s: float
) -> None:
    """A live active worker is never taken for a silent one: idle for several TTLs with a
    poll interval longer than the TTL (idle), or running a job several TTLs long (long-job).
    The standby stays a standby; the job runs on the active worker."""
    record = tmp_path / "record"
    with Client(slow_poll_server.address) as client:
        record_task(client, "job", record, job_s or 0.2)
        active = start_slow_poll_worker(tmp_path, slow_poll_server, "worker-active")
        standby: WorkerProc | None = None
        try:
            wait_logged(active, "as the active worker")
            standby = start_slow_poll_worker(tmp_path, slow_poll_server, "worker-standby")
            wait_logged(standby, "as the standby worker")
            if not job_s:
                time.sleep(3 * LEASE_TTL_S)  # an observation window, not a wait for a condition
            (run,) = client.run("job")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_SUCCEEDED, timeout_s=30)
        finally:
            active.stop()
            if standby is not None:
                standby.stop()
    assert "worker silent for" not in slow_poll_server.output()
    assert "this worker is now the active one" not in standby.output()
    assert "reconnecting" not in active.output()
    ((_, worker_id, _, _),) = job_spans(database_url)
    assert f":{active.pid}:" in worker_id
    assert record.read_text().splitlines() == ["start job", "end job"]


class BackgroundProxy:
    """A :class:`tests.pgproxy.PgProxy` (a plain TCP proxy here) on its own event loop in a
    thread, for tests whose processes talk through it while the test thread waits."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.proxy = PgProxy(target)
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._run(),))

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        async with self.proxy.running():
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> BackgroundProxy:
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"

    def hold(self) -> None:
        """From now on pass nothing either way on the open connections, and close none."""
        self._loop.call_soon_threadsafe(self.proxy.hold)


BLACK_HOLE_TTL_S = 6.0


def test_a_worker_cut_off_by_a_black_hole_stops_its_job_before_the_standby_starts(
    tmp_path: Path, database_url: str
) -> None:
    """The network between the active worker and the service drops everything and closes
    nothing. The worker's pings go unanswered: it stops its job within about five seconds,
    before the service, whose own pings go unanswered, closes the connection and lets the
    standby run the next job. Two jobs never run at once."""
    srv = Server(
        tmp_path,
        env={
            "WORKER_IS_ENABLED": "false",
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "TICKWORK_LEASE_TTL_SECONDS": str(BLACK_HOLE_TTL_S),
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "1",
        },
        database_url=database_url,
        name="api",
    ).wait_healthy()
    host, port = srv.address.rsplit(":", 1)
    record = tmp_path / "record"
    cut_off: WorkerProc | None = None
    standby: WorkerProc | None = None
    try:
        with BackgroundProxy((host, int(port))) as proxy, Client(srv.address) as client:
            record_task(client, "long", record, 60)
            record_task(client, "b", record, 0.2)
            cut_off = WorkerProc(
                tmp_path,
                proxy.address,
                env={"WORKER_POLL_INTERVAL_SECONDS": "1", "WORKER_ABORT_GRACE_SECONDS": "1"},
                name="worker-cut-off",
            )
            wait_logged(cut_off, "as the active worker")
            standby = start_worker(tmp_path, srv, "worker-standby")
            wait_logged(standby, "as the standby worker")
            (long_run,) = client.run("long")
            wait_for(lambda: record.exists() and "start long" in record.read_text())
            proxy.hold()
            held_at = time.monotonic()
            wait_for(
                lambda: "aborted long" in record.read_text(),
                timeout_s=PING_EVERY_S + PING_TIMEOUT_S,
            )
            noticed_s = time.monotonic() - held_at
            assert noticed_s < PING_EVERY_S + PING_TIMEOUT_S, noticed_s  # before the service
            (b_run,) = client.run("b")
            wait_status(client, b_run.job_id, JobStatus.JOB_STATUS_SUCCEEDED)
            assert "this worker is now the active one" in standby.output()
            wait_status(client, long_run.job_id, JobStatus.JOB_STATUS_FAILED)
    finally:
        for proc in (cut_off, standby):
            if proc is not None:
                proc.stop()
        srv.stop()
    assert record.read_text().splitlines() == ["start long", "aborted long", "start b", "end b"]


def test_a_job_that_blocks_its_worker_s_event_loop_keeps_the_lease_and_nothing_overlaps(
    tmp_path: Path, lease_server: Server
) -> None:
    """An async job that blocks its event loop (``time.sleep`` in ``async def``, a common
    mistake) for several lease TTLs blocks only its own job process: the worker goes on
    heartbeating and answering the service's pings, keeps the worker lease, and the standby
    runs nothing until the blocking job has returned. Two jobs never run at once."""
    record = tmp_path / "record"
    with Client(lease_server.address) as client:
        for name, seconds in (("block", 4 * LEASE_TTL_S), ("b", 0.2)):
            client.create_task(
                name,
                "python",
                {
                    "callable": "tests.handler_fixtures:blocking_async",
                    "kwargs": {"record": str(record), "name": name, "seconds": seconds},
                },
            )
        first = start_worker(tmp_path, lease_server, "worker-first")
        standby: WorkerProc | None = None
        try:
            wait_logged(first, "as the active worker")
            standby = start_worker(tmp_path, lease_server, "worker-standby")
            wait_logged(standby, "as the standby worker")
            client.run("block")
            wait_for(lambda: record.exists() and "start block" in record.read_text())
            (b_run,) = client.run("b")
            wait_status(client, b_run.job_id, JobStatus.JOB_STATUS_SUCCEEDED, timeout_s=30)
            assert "this worker is now the active one" not in standby.output()
        finally:
            first.stop()
            if standby is not None:
                standby.stop()
    lines = [line.split() for line in record.read_text().splitlines()]
    assert [(kind, name) for kind, name, _ in lines] == [
        ("start", "block"),
        ("end", "block"),
        ("start", "b"),
        ("end", "b"),
    ]


async def test_a_reconnecting_worker_waits_for_its_old_stream_to_end(
    tmp_path: Path, database_url: str
) -> None:
    """A worker that reconnects while its old stream's session lives on (the service has not
    noticed the break yet) is a new lease holder: a standby until the old session ends and
    gives the lease up. Before, both sessions counted as holding it, and the old session's
    end gave up the lease the new one was using, so another worker took over under it."""
    async with inprocess(
        tmp_path, database_url, T0, lease_ttl_s=10, heartbeat_interval_s=1, worker_poll_interval_s=1
    ) as h:
        for name in ("t", "u"):
            await h.client.create_task(name, "shell", {"argv": ["true"]})
        async with raw_worker(h.service.address, "w-A") as new:
            async with raw_worker(h.service.address, "w-A") as old:
                assert (await old.hello()).active
                assert not (await new.hello()).active  # the same worker, a new stream
                await old.send(poll_job=Request.PollJob())
                await new.send(poll_job=Request.PollJob())
                (run,) = await h.client.run("t")
                assign = (await old.expect("assign_job")).assign_job
                assert assign.job.id == run.job_id
                await old.send(
                    outcome=Request.Outcome(
                        job_id=run.job_id,
                        lease_token=assign.lease_token,
                        status=job_pb2.JOB_STATUS_SUCCEEDED,
                    )
                )
                assert (await old.expect("outcome_ack")).outcome_ack.accepted
            # The old stream ended: its session gave the lease up; the new one takes it.
            (second,) = await h.client.run("u")
            assert (await new.expect("assign_job")).assign_job.job.id == second.job_id
