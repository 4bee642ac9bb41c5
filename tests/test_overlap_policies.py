"""Overlap policies, driven by an injected clock: what a schedule's fire does while a job of
its task is queued or running (SKIP, BUFFER_ONE, BUFFER_ALL and its cap, REPLACE, ALLOW),
that no job of a task starts while another runs (except under ALLOW), and the fire
records and metrics of each outcome. Claims and outcomes go through the same store and App
functions the worker stream calls; the REPLACE and ALLOW ends also run a real worker."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa

from scheduler_svc.records import FireRequest, JobRecord
from tests.databases import run_sql_async
from tests.inprocess import Harness, inprocess
from tests.queue_helpers import eventually, finish, inprocess_worker
from tickwork import FireOutcome, InvalidArgument, JobStatus, OverlapPolicy, SkipReason
from tickwork.v1 import schedule_pb2, schedule_pb2_grpc
from worker_svc import Worker, WorkerSettings

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)


def minute(n: int) -> dt.datetime:
    """The n-th minute's fire time after T0 (10:01, 10:02, ...), plus a little."""
    return dt.datetime(2026, 6, 1, 10, n, 0, 100_000, tzinfo=UTC)


async def setup(h: Harness, policy: str, **kw: object) -> None:
    await h.client.create_task("t", "shell", {"argv": ["true"]}, max_attempts=3)
    await h.client.create_schedule(
        "s",
        ["t"],
        cron="* * * * *",
        overlap_policy=policy,
        **kw,  # type: ignore[arg-type]
    )


async def claim(h: Harness, slot: int = 0) -> JobRecord | None:
    claimed = await h.service.app.store.claim_next_job(f"w{slot}", h.clock(), 30.0, slot=slot)
    return None if claimed is None else claimed[0]


async def last_fire(h: Harness) -> tuple[str, list[tuple[int, str]]]:
    """The newest fire's outcome and its (job id, skip reason) per task."""
    (fire,) = await h.client.list_fires("s", limit=1)
    return FireOutcome.Name(fire.outcome), [
        (r.job_id, SkipReason.Name(r.skip_reason)) for r in fire.runs
    ]


def fires_counted(h: Harness, outcome: str) -> float:
    value = h.service.app.metrics.registry.get_sample_value(
        "tickwork_fires_total", {"outcome": outcome}
    )
    return value or 0.0


async def test_skip_is_the_default_and_skips_while_the_task_runs(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        schedule = await h.client.create_schedule("s", ["t"], cron="* * * * *")
        assert schedule.overlap_policy == OverlapPolicy.OVERLAP_POLICY_SKIP
        await h.tick(minute(1))
        first = await claim(h)
        assert first is not None
        await h.tick(minute(2))
        assert await last_fire(h) == (
            "FIRE_OUTCOME_SKIPPED",
            [(first.id, "SKIP_REASON_ALREADY_RUNNING")],
        )
        assert len(await h.client.list_jobs()) == 1


async def test_buffer_one_keeps_one_fire_waiting_behind_the_running_job(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, max_running_jobs=2) as h:
        await setup(h, "BUFFER_ONE")
        await h.tick(minute(1))
        first = await claim(h)
        assert first is not None
        await h.tick(minute(2))
        outcome, runs = await last_fire(h)
        assert (outcome, runs[0][1]) == ("FIRE_OUTCOME_BUFFERED", "SKIP_REASON_UNSPECIFIED")
        waiting = runs[0][0]
        # Another slot is free, but the buffered job waits for the task's running one.
        assert await claim(h, slot=1) is None
        # A job of another task queued behind it is not held up by it.
        await h.client.create_task("u", "shell", {"argv": ["true"]})
        other = await h.client.create_schedule("s2", ["u"], cron="0 0 1 1 *")
        await h.service.app.enqueue_fires([FireRequest(other.id, h.clock(), tuple(other.task_ids))])
        behind = await claim(h, slot=1)
        assert behind is not None and behind.task_name == "u"
        await finish(h, behind, "SUCCEEDED")
        assert await claim(h, slot=1) is None
        await h.tick(minute(3))
        assert await last_fire(h) == (
            "FIRE_OUTCOME_SKIPPED",
            [(waiting, "SKIP_REASON_ALREADY_QUEUED")],
        )
        await finish(h, first, "SUCCEEDED")
        second = await claim(h, slot=1)
        assert second is not None and second.id == waiting
        assert second.fire_time == minute(2).replace(microsecond=0)
        assert await claim(h) is None
        assert fires_counted(h, "buffered") == 1
        assert fires_counted(h, "skipped") == 1


async def test_buffer_all_queues_fires_in_order_up_to_max_buffered(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, max_running_jobs=2) as h:
        await setup(h, "BUFFER_ALL", max_buffered=2)
        await h.tick(minute(1))
        running = await claim(h)
        assert running is not None
        buffered = []
        for n in (2, 3):
            await h.tick(minute(n))
            outcome, runs = await last_fire(h)
            assert (outcome, runs[0][1]) == ("FIRE_OUTCOME_BUFFERED", "SKIP_REASON_UNSPECIFIED")
            buffered.append(runs[0][0])
        await h.tick(minute(4))
        assert await last_fire(h) == (
            "FIRE_OUTCOME_SKIPPED",
            [(buffered[-1], "SKIP_REASON_BUFFER_FULL")],
        )
        # They start one at a time, in fire-time order, never beside the running job.
        for expected in buffered:
            assert await claim(h, slot=1) is None
            await finish(h, running, "SUCCEEDED")
            started = await claim(h, slot=1)
            assert started is not None and started.id == expected
            assert await claim(h) is None
            running = started
        assert fires_counted(h, "buffered") == 2


async def test_buffer_all_default_cap_is_100(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await setup(h, "BUFFER_ALL")
        schedule = await h.client.get_schedule("s")
        assert schedule.max_buffered == 0  # 0 means 100
        await h.tick(minute(1))
        assert await claim(h) is not None
        start = minute(1).replace(second=0, microsecond=0)
        # 101 windows at once: the first 100 wait, the 101st finds the buffer full.
        fire_ids = [start + dt.timedelta(seconds=s) for s in range(1, 102)]
        sid = schedule.id
        tid = schedule.task_ids[0]
        results = await h.service.app.enqueue_fires([FireRequest(sid, t, (tid,)) for t in fire_ids])
        outcomes = [r.outcome for r in results]
        assert outcomes == ["BUFFERED"] * 100 + ["SKIPPED"]
        assert results[-1].runs[0].skip_reason == "BUFFER_FULL"


async def test_replace_aborts_the_running_job_which_is_not_retried(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, max_running_jobs=2) as h:
        await setup(h, "REPLACE")
        await h.tick(minute(1))
        first = await claim(h)
        assert first is not None
        await h.tick(minute(2))
        outcome, runs = await last_fire(h)
        assert (outcome, runs[0][1]) == ("FIRE_OUTCOME_REPLACED", "SKIP_REASON_UNSPECIFIED")
        replacement = runs[0][0]
        reason = "replaced by the fire of 2026-06-01T10:02:00+00:00"
        asked = await h.service.app.store.get_job(first.id)
        assert asked.abort_requested and asked.status == "RUNNING"
        assert await claim(h, slot=1) is None  # the replacement waits for the abort
        await h.tick(minute(3))  # a job is queued already: this fire is skipped
        assert await last_fire(h) == (
            "FIRE_OUTCOME_SKIPPED",
            [(replacement, "SKIP_REASON_ALREADY_QUEUED")],
        )
        # The worker stops it and reports ABORTED with the reason it was told.
        result = await finish(h, first, "ABORTED", reason)
        assert result.retry is None
        ended = await h.client.get_job(first.id)
        assert (ended.status, ended.error) == (JobStatus.JOB_STATUS_ABORTED, reason)
        started = await claim(h, slot=1)
        assert started is not None and started.id == replacement
        ids = sorted(j.id for j in await h.client.list_jobs())
        assert ids == sorted([first.id, replacement])  # no retry of the replaced job
        assert fires_counted(h, "replaced") == 1


async def test_replace_reaches_a_real_worker(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=0.5) as h:
        await h.client.create_task("t", "shell", {"argv": ["sleep", "30"]}, max_attempts=3)
        await h.client.create_schedule("s", ["t"], cron="* * * * *", overlap_policy="REPLACE")
        await h.tick(minute(1))
        (first,) = await h.client.list_jobs()
        async with inprocess_worker(h.service.address):

            async def running(job_id: int) -> bool:
                job = await h.client.get_job(job_id)
                return job.status == JobStatus.JOB_STATUS_RUNNING

            await eventually(lambda: running(first.id), what="the first job to start")
            await h.tick(minute(2))
            _, runs = await last_fire(h)
            replaced = await h.client.wait(first.id, timeout=10)
            assert replaced.status == JobStatus.JOB_STATUS_ABORTED
            assert replaced.error == "replaced by the fire of 2026-06-01T10:02:00+00:00"
            await eventually(lambda: running(runs[0][0]), what="the replacement to start")
        jobs = await h.client.list_jobs()
        assert [j.retry_of_job_id for j in jobs] == [0, 0]


async def test_allow_runs_two_jobs_of_one_task_at_once_in_two_slots(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, max_running_jobs=2) as h:
        await setup(h, "ALLOW")
        await h.tick(minute(1))
        await h.tick(minute(2))
        assert (await last_fire(h))[0] == "FIRE_OUTCOME_ENQUEUED"
        a, b = await claim(h, slot=0), await claim(h, slot=1)
        assert a is not None and b is not None and a.id != b.id
        statuses = {j.id: j.status for j in await h.client.list_jobs()}
        assert statuses == {a.id: JobStatus.JOB_STATUS_RUNNING, b.id: JobStatus.JOB_STATUS_RUNNING}
        # Every fire gets its own job, even with two running.
        await h.tick(minute(3))
        assert (await last_fire(h))[0] == "FIRE_OUTCOME_ENQUEUED"
        assert len(await h.client.list_jobs()) == 3


async def test_allow_queues_at_most_max_buffered_jobs(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await setup(h, "ALLOW", max_buffered=2)
        queued = []
        for n in (1, 2):
            await h.tick(minute(n))
            outcome, runs = await last_fire(h)
            assert (outcome, runs[0][1]) == ("FIRE_OUTCOME_ENQUEUED", "SKIP_REASON_UNSPECIFIED")
            queued.append(runs[0][0])
        # Two queued, none started (one slot, a slow task): the third fire is not queued.
        await h.tick(minute(3))
        assert await last_fire(h) == (
            "FIRE_OUTCOME_SKIPPED",
            [(queued[-1], "SKIP_REASON_BUFFER_FULL")],
        )
        # A running ALLOW job no longer counts toward the cap.
        started = await claim(h)
        assert started is not None and started.id == queued[0]
        await h.tick(minute(4))
        outcome, runs = await last_fire(h)
        assert outcome == "FIRE_OUTCOME_ENQUEUED" and runs[0][0] not in queued
        assert len(await h.client.list_jobs()) == 3


async def test_allow_with_a_two_slot_worker(tmp_path: Path, database_url: str) -> None:
    async with inprocess(
        tmp_path, database_url, T0, max_running_jobs=2, worker_poll_interval_s=0.5
    ) as h:
        await h.client.create_task("t", "shell", {"argv": ["sleep", "30"]})
        await h.client.create_schedule("s", ["t"], cron="* * * * *", overlap_policy="ALLOW")
        await h.tick(minute(1))
        await h.tick(minute(2))
        worker = Worker(
            WorkerSettings(
                server=h.service.address, poll_interval_s=0.5, abort_grace_s=1.0, slots=2
            )
        )
        task = asyncio.create_task(worker.run())
        try:

            async def both_running() -> bool:
                jobs = await h.client.list_jobs()
                return [j.status for j in jobs] == [JobStatus.JOB_STATUS_RUNNING] * 2

            await eventually(both_running, what="two jobs of the task running at once")
        finally:
            worker.stop(abort_running=True)
            await asyncio.wait_for(task, 15)


async def test_bad_overlap_values_are_refused_naming_the_field(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        task = await h.client.create_task("t", "shell", {"argv": ["true"]})
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            stub = schedule_pb2_grpc.ScheduleServiceStub(channel)
            bad = schedule_pb2.Schedule(
                name="s",
                cron_expression="* * * * *",
                task_ids=[task.id],
                overlap_policy=42,  # type: ignore[arg-type]
            )
            with pytest.raises(grpc.aio.AioRpcError) as raw:
                await stub.CreateSchedule(schedule_pb2.CreateScheduleRequest(schedule=bad))
            assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "schedule.overlap_policy" in (raw.value.details() or "")
        for kw, field in (
            ({"max_buffered": -1}, "schedule.max_buffered"),
            ({"max_buffered": 10_001}, "schedule.max_buffered"),
        ):
            with pytest.raises(InvalidArgument) as err:
                await h.client.create_schedule("s", ["t"], cron="* * * * *", **kw)  # type: ignore[arg-type]
            assert field in str(err.value)
        assert await h.client.list_schedules() == []
        await h.client.create_schedule("s", ["t"], cron="* * * * *")
        with pytest.raises(InvalidArgument, match=r"schedule\.max_buffered"):
            await h.client.update_schedule("s", max_buffered=20_000)
        stored = await h.client.update_schedule("s", overlap_policy="BUFFER_ALL", max_buffered=7)
        assert (stored.overlap_policy, stored.max_buffered) == (
            OverlapPolicy.OVERLAP_POLICY_BUFFER_ALL,
            7,
        )


async def test_a_buffered_fire_runs_after_the_running_job_on_a_real_worker(
    tmp_path: Path, database_url: str
) -> None:
    # The worker asks for its next job with each outcome (on PostgreSQL one statement
    # records a success and starts the next job): the buffered job is that next job.
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=0.5) as h:
        await h.client.create_task("t", "shell", {"argv": ["sleep", "1"]})
        await h.client.create_schedule("s", ["t"], cron="* * * * *", overlap_policy="BUFFER_ONE")
        await h.tick(minute(1))
        (first,) = await h.client.list_jobs()
        async with inprocess_worker(h.service.address):

            async def running(job_id: int) -> bool:
                job = await h.client.get_job(job_id)
                return job.status == JobStatus.JOB_STATUS_RUNNING

            await eventually(lambda: running(first.id), what="the first job to start")
            await h.tick(minute(2))
            outcome, runs = await last_fire(h)
            assert outcome == "FIRE_OUTCOME_BUFFERED"
            second = await h.client.wait(runs[0][0], timeout=15)
        assert second.status == JobStatus.JOB_STATUS_SUCCEEDED
        assert (await h.client.get_job(first.id)).status == JobStatus.JOB_STATUS_SUCCEEDED


async def test_aborting_the_task_stops_the_buffered_jobs_too(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await setup(h, "BUFFER_ALL")
        await h.tick(minute(1))
        running = await claim(h)
        assert running is not None
        for n in (2, 3):
            await h.tick(minute(n))
        (abort,) = await h.client.abort("t")
        assert abort.job_id == running.id and abort.cancelled_job_count == 2
        jobs = {j.id: j for j in await h.client.list_jobs()}
        waiting = sorted(set(jobs) - {running.id})
        assert [jobs[j].status for j in waiting] == [JobStatus.JOB_STATUS_CANCELLED] * 2
        assert (await h.service.app.store.get_job(running.id)).abort_requested


async def test_the_database_refuses_a_second_running_job_of_a_task(
    tmp_path: Path, database_url: str
) -> None:
    # Whatever a claim believes, two jobs of one task that are not ALLOW never run at once.
    async with inprocess(tmp_path, database_url, T0) as h:
        await setup(h, "BUFFER_ONE")
        await h.tick(minute(1))
        assert await claim(h) is not None
        await h.tick(minute(2))
        waiting = (await last_fire(h))[1][0][0]
        url = h.service.settings.database_url
        start = "UPDATE jobs SET status = 'RUNNING', slot = 1 WHERE id = :id"
        with pytest.raises(sa.exc.IntegrityError):
            await run_sql_async(url, start, id=waiting)
        await run_sql_async(url, "UPDATE jobs SET overlap = 'ALLOW' WHERE id = :id", id=waiting)
        await run_sql_async(url, start, id=waiting)  # an ALLOW job may run alongside
