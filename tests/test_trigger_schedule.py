"""TriggerSchedule: a schedule fired now, through its overlap policy, recorded as a fire
with trigger MANUAL or API, its next run unchanged; request ids make it safe to retry.
Driven by an injected clock."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import grpc
import pytest

from tests.inprocess import inprocess
from tickwork import FireOutcome, JobStatus, NotFound, Trigger
from tickwork.v1 import common_pb2, schedule_pb2, schedule_pb2_grpc

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)


async def test_trigger_fires_every_task_now_and_leaves_the_next_run(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        for name in ("b", "a"):
            await h.client.create_task(name, "shell", {"argv": ["true"]})
        schedule = await h.client.create_schedule("s", ["b", "a"], cron="0 3 * * *")
        fire = await h.client.trigger_schedule("s")
        assert fire.fire_time.ToDatetime(tzinfo=UTC) == T0
        assert fire.trigger == Trigger.TRIGGER_API
        assert fire.outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
        assert [r.task_name for r in fire.runs] == ["a", "b"]
        jobs = {j.id: j for j in await h.client.list_jobs()}
        assert sorted(jobs) == sorted(r.job_id for r in fire.runs)
        for job in jobs.values():
            assert job.trigger == Trigger.TRIGGER_API
            assert job.schedule_id == schedule.id
            assert job.fire_time.ToDatetime(tzinfo=UTC) == T0
        after = await h.client.get_schedule("s")
        assert after.next_run_time == schedule.next_run_time
        (listed,) = await h.client.list_fires("s")
        assert (listed.id, listed.trigger) == (fire.id, Trigger.TRIGGER_API)
        # The loop's fire at 03:00 is its own, with trigger SCHEDULER.
        await h.tick(dt.datetime(2026, 6, 2, 3, 0, 0, 100_000, tzinfo=UTC))
        newest = (await h.client.list_fires("s", limit=1))[0]
        assert newest.trigger == Trigger.TRIGGER_SCHEDULER
        assert newest.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED  # both still queued


async def test_trigger_goes_through_the_overlap_policy(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["t"], cron="0 3 * * *", overlap_policy="BUFFER_ONE")
        first = await h.client.trigger_schedule("s", trigger=Trigger.TRIGGER_MANUAL)
        assert first.trigger == Trigger.TRIGGER_MANUAL
        claimed = await h.service.app.store.claim_next_job("w", h.clock(), 30.0)
        assert claimed is not None and claimed[0].id == first.runs[0].job_id
        h.clock.advance(1)
        second = await h.client.trigger_schedule("s")
        assert second.outcome == FireOutcome.FIRE_OUTCOME_BUFFERED
        waiting = await h.client.get_job(second.runs[0].job_id)
        assert waiting.status == JobStatus.JOB_STATUS_QUEUED
        h.clock.advance(1)
        third = await h.client.trigger_schedule("s")
        assert third.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED
        assert third.runs[0].job_id == waiting.id


async def test_trigger_with_a_request_id_fires_once(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]}, max_attempts=1)
        await h.client.create_schedule("s", ["t"], cron="0 3 * * *", overlap_policy="ALLOW")
        first = await h.client.trigger_schedule("s", request_id="r1")
        h.clock.advance(5)
        again = await h.client.trigger_schedule("s", request_id="r1")
        assert again == first
        assert len(await h.client.list_fires("s")) == 1
        assert len(await h.client.list_jobs()) == 1
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            stub = schedule_pb2_grpc.ScheduleServiceStub(channel)
            request = schedule_pb2.TriggerScheduleRequest(
                id=first.schedule_id, request_id="r1", trigger=common_pb2.TRIGGER_API
            )
            repeat = await stub.TriggerSchedule(request)
            assert repeat.repeated_request and repeat.fire.id == first.id
            # Another request under the same id is refused, and fires nothing.
            other = schedule_pb2.TriggerScheduleRequest(
                id=first.schedule_id, request_id="r1", trigger=common_pb2.TRIGGER_MANUAL
            )
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.TriggerSchedule(other)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "request_id" in (err.value.details() or "")
            for bad, field in (
                (
                    schedule_pb2.TriggerScheduleRequest(
                        id=first.schedule_id, trigger=common_pb2.TRIGGER_SCHEDULER
                    ),
                    "trigger",
                ),
                (schedule_pb2.TriggerScheduleRequest(), "id"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.TriggerSchedule(bad)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert field in (err.value.details() or "")
        assert len(await h.client.list_jobs()) == 1
        with pytest.raises(NotFound):
            await h.client.trigger_schedule(first.schedule_id + 1)
