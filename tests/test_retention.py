"""Retention: the built-in task and schedule, editable like any other, purge old job and fire
history when the clock has moved on. In process with an injected clock; a real worker runs
the retention job through the service (the worker never touches the database)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import grpc
import pytest

from scheduler_svc import values
from tests.databases import run_sql_async
from tests.inprocess import Harness, inprocess
from tickwork import CatchUpPolicy, InvalidArgument, JobStatus
from tickwork.v1 import worker_pb2, worker_pb2_grpc
from worker_svc import Worker, WorkerSettings

UTC = dt.UTC
T0 = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
DAY = dt.timedelta(days=1)


async def scheduled_history(h: Harness, when: dt.datetime) -> tuple[int, dt.datetime]:
    """At ``when``, schedule "s" fires once and its job runs and ends: a fire and a job."""
    h.clock.set(when)
    schedule = await h.client.update_schedule("s", enabled=True)
    fire_time = schedule.next_run_time.ToDatetime(tzinfo=UTC)
    await h.tick(fire_time)
    claimed = await h.service.app.store.claim_next_job("test", h.clock(), 60)
    assert claimed is not None
    job, _ = claimed
    await h.service.app.finish_job(
        job.id, job.lease_token or "", values.JobStatus.SUCCEEDED, "", ""
    )
    await h.client.update_schedule("s", enabled=False)
    return job.id, fire_time


async def run_worker_until(h: Harness, job_id: int) -> int:
    worker = Worker(WorkerSettings(server=h.service.address, poll_interval_s=1))
    running = asyncio.create_task(worker.run())
    try:
        job = await h.client.wait(job_id, timeout=20)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 15)
    assert not job.error, job.error
    return int(job.status)


async def test_old_history_is_purged_by_the_builtin_task(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0, retention_days=30) as h:
        c = h.client
        task = await c.get_task("tickwork-retention")
        assert task.handler == "tickwork.retention"
        assert dict(task.params) == {"keep_days": 30}
        schedule = await c.get_schedule("tickwork-retention")
        assert (schedule.cron_expression, schedule.timezone) == ("17 3 * * *", "UTC")
        assert schedule.catch_up_policy == CatchUpPolicy.CATCH_UP_POLICY_RUN_ONCE
        assert schedule.enabled and list(schedule.task_names) == ["tickwork-retention"]
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == T0.replace(
            hour=3, minute=17, second=0
        )

        # Editable like any other: paused while history is made, and keep 15 days instead.
        await c.update_schedule("tickwork-retention", enabled=False)
        with pytest.raises(InvalidArgument, match="keep_days"):
            await c.update_task("tickwork-retention", params={"keep_days": 0})
        await c.update_task("tickwork-retention", params={"keep_days": 15})

        await c.create_task("t", "shell", {"argv": ["true"]})
        await c.create_schedule("s", ["t"], cron="0 * * * *", enabled=False)
        await c.create_task("by-id", "shell", {"argv": ["true"]})
        # Request-id answers: one stored 40 days before the purge, one 1 hour before it;
        # their jobs are cancelled at once (the old one is history the purge deletes).
        [call] = await c.run("by-id", request_id="old-call")
        await c.cancel_job(call.job_id)
        old = await scheduled_history(h, T0)
        middle = await scheduled_history(h, T0 + 20 * DAY)  # older than 15 days at the end
        recent = await scheduled_history(h, T0 + 30 * DAY)

        h.clock.set(T0 + 40 * DAY - dt.timedelta(hours=1))
        [call] = await c.run("by-id", request_id="recent-call")
        await c.cancel_job(call.job_id)
        h.clock.set(T0 + 40 * DAY)
        schedule = await c.update_schedule("tickwork-retention", enabled=True)
        fire_time = schedule.next_run_time.ToDatetime(tzinfo=UTC)
        assert fire_time == (T0 + 40 * DAY).replace(hour=3, minute=17, second=0)
        await h.tick(fire_time)
        [job] = await c.list_jobs(task="tickwork-retention")
        assert await run_worker_until(h, job.id) == JobStatus.JOB_STATUS_SUCCEEDED

        done = await c.get_job(job.id)
        assert "kept 15 days: deleted 3 jobs and 2 fire records before" in done.output_tail
        assert "and 1 request-id answers over 24 hours old" in done.output_tail
        kept = await run_sql_async(database_url, "SELECT request_id FROM requests")
        assert kept == [("recent-call",)]
        assert {j.id for j in await c.list_jobs(task="t")} == {recent[0]}
        fires = await c.list_fires("s")
        assert [f.fire_time.ToDatetime(tzinfo=UTC) for f in fires] == [recent[1]]
        assert old[0] != middle[0]
        # The retention run is history too, kept like any other.
        assert [f.outcome for f in await c.list_fires("tickwork-retention")]


async def test_purge_history_needs_a_running_retention_job(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        [run] = await h.client.run("t")
        claimed = await h.service.app.store.claim_next_job("test", h.clock(), 60)
        assert claimed is not None and claimed[0].id == run.job_id
        token = claimed[0].lease_token or ""
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            stub = worker_pb2_grpc.WorkerServiceStub(channel)
            for request, text in (
                (worker_pb2.PurgeHistoryRequest(job_id=run.job_id, lease_token="stale"), "lease"),
                (
                    worker_pb2.PurgeHistoryRequest(job_id=run.job_id, lease_token=token),
                    "not 'tickwork.retention'",
                ),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.PurgeHistory(request)
                assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert text in (caught.value.details() or "")
        # Without TICKWORK_RETENTION_DAYS (0 here) nothing built in is created.
        assert [t.name for t in await h.client.list_tasks()] == ["t"]
