"""BackfillSchedule, in process with an injected clock, on both databases: a schedule's
past windows are its cron's (DST included), each enqueued as a BACKFILL fire whose job
carries the window, in the lane below scheduled jobs; already-fired windows, dry runs,
request ids and the limits."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import grpc
import pytest

from scheduler_svc import backfill as backfill_module
from scheduler_svc.backfill import MAX_WINDOWS, Range, plan, reply_bytes_bound
from scheduler_svc.records import ScheduleRecord
from tests.inprocess import Harness, inprocess
from tests.queue_helpers import claim, finish
from tickwork import FailedPrecondition, InvalidArgument, JobStatus, SkipReason, Trigger
from tickwork._channel import auth_metadata
from tickwork._context import FIRE_TIME, TRIGGER
from tickwork.cli._main import main
from tickwork.cron import CronSchedule
from tickwork.v1 import (
    common_pb2,
    queue_pb2,
    queue_pb2_grpc,
    schedule_pb2,
    schedule_pb2_grpc,
    worker_pb2,
)
from tickwork.v1.schedule_pb2 import BackfillScheduleResponse, FireOutcome
from worker_svc._supervisor import job_window

UTC = dt.UTC
NOW = dt.datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def times(response: BackfillScheduleResponse) -> list[dt.datetime]:
    return [w.fire_time.ToDatetime(tzinfo=UTC) for w in response.windows]


async def nightly(h: Harness, *tasks: str, cron: str = "30 2 * * *") -> None:
    """Schedule ``s``: ``cron`` in Europe/Berlin, running ``tasks`` (created here)."""
    for name in tasks:
        await h.client.create_task(name, "shell", {"argv": ["true"]})
    await h.client.create_schedule("s", list(tasks), cron=cron, timezone="Europe/Berlin")


async def run_next(h: Harness) -> int:
    """Claim the next ready job and finish it SUCCEEDED; its id."""
    job = await claim(h)
    await finish(h, job, "SUCCEEDED")
    return job.id


async def test_the_windows_are_the_crons_across_dst_in_its_zone(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        spring = await h.client.backfill_schedule(
            "s", at("2026-03-27T00:00:00+00:00"), at("2026-03-31T00:00:00+00:00"), dry_run=True
        )
        # 02:30 does not exist on 29 March (spring forward): it fires at 03:00 CEST.
        assert times(spring) == [
            at("2026-03-27T01:30:00+00:00"),
            at("2026-03-28T01:30:00+00:00"),
            at("2026-03-29T01:00:00+00:00"),
            at("2026-03-30T00:30:00+00:00"),
        ]
        # 02:30 happens twice on 25 October (fall back): it fires once, at the first.
        autumn = await h.client.backfill_schedule(
            "s", at("2026-10-24T00:30:00+00:00"), at("2026-10-26T01:30:00+00:00")
        )
        assert times(autumn) == [at("2026-10-24T00:30:00+00:00"), at("2026-10-25T00:30:00+00:00")]
        # A whole year is the resolver's own windows, start inclusive, end exclusive.
        start, end = at("2025-11-01T00:30:00+00:00"), at("2026-11-01T00:00:00+00:00")
        year = await h.client.backfill_schedule("s", start, end, dry_run=True)
        cron = CronSchedule("30 2 * * *", "Europe/Berlin")
        expected = [
            p.fire_time.astimezone(UTC)
            for p in cron.next_fire_times(start - dt.timedelta(microseconds=1), 400)
            if p.fire_time < end
        ]
        assert times(year) == expected and len(expected) == 365


async def test_each_job_carries_its_window_as_fire_time_in_the_backfill_lane(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a", "b")
        start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-03T00:00:00+00:00")
        first = await h.client.backfill_schedule("s", start, end)
        w1, w2 = times(first)
        assert (w1, w2) == (at("2026-10-01T00:30:00+00:00"), at("2026-10-02T00:30:00+00:00"))
        # SKIP: the first window gives each task a job; the second finds them queued.
        one, two = first.windows
        assert [r.skipped for r in one.runs] == [False, False] and one.fire_id
        assert [r.skip_reason for r in two.runs] == [SkipReason.SKIP_REASON_ALREADY_QUEUED] * 2
        assert [r.job_id for r in two.runs] == [r.job_id for r in one.runs]
        for run in one.runs:
            job = await h.client.get_job(run.job_id)
            assert job.trigger == Trigger.TRIGGER_BACKFILL
            assert job.fire_time.ToDatetime(tzinfo=UTC) == w1
            assert job.schedule_id == (await h.client.get_schedule("s")).id
            # What the worker tells the job's process.
            window = job_window(worker_pb2.ConnectResponse.AssignJob(job=job, schedule_name="s"))
            env = window.to_env()
            assert (env[FIRE_TIME], env[TRIGGER]) == ("2026-10-01T00:30:00Z", "BACKFILL")
        stored = {f.fire_time.ToDatetime(tzinfo=UTC): f for f in await h.client.list_fires("s")}
        assert stored[w1].trigger == Trigger.TRIGGER_BACKFILL
        assert stored[w1].outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
        assert stored[w2].outcome == FireOutcome.FIRE_OUTCOME_SKIPPED
        assert stored[w1].id == one.fire_id
        # Once the jobs ran, the next window's jobs carry it; the skipped window was recorded
        # and is not run by a later backfill.
        await run_next(h)
        await run_next(h)
        repeat = await h.client.backfill_schedule("s", start, end)
        assert [w.already_fired for w in repeat.windows] == [True, True]
        later = await h.client.backfill_schedule("s", end, end + dt.timedelta(days=1))
        [w3] = later.windows
        fire_times = set()
        for run in w3.runs:
            job = await h.client.get_job(run.job_id)
            fire_times.add(job.fire_time.ToDatetime(tzinfo=UTC))
        assert fire_times == {at("2026-10-03T00:30:00+00:00")}
        counted = h.service.app.metrics.registry.get_sample_value
        assert counted("tickwork_backfill_windows_total", {"outcome": "enqueued"}) == 2
        assert counted("tickwork_backfill_windows_total", {"outcome": "skipped"}) == 1


async def test_a_window_already_fired_is_not_enqueued_again(
    tmp_path: Path, database_url: str
) -> None:
    start = at("2026-10-30T12:00:00+00:00")
    async with inprocess(tmp_path, database_url, start) as h:
        await nightly(h, "a")
        # The scheduler fires 31 October 02:30 CET (01:30Z) itself.
        await h.tick(at("2026-10-31T01:30:00.100+00:00"))
        scheduled = await run_next(h)
        h.clock.set(NOW)
        first = await h.client.backfill_schedule("s", start, NOW)
        assert [(t, w.already_fired) for t, w in zip(times(first), first.windows, strict=True)] == [
            (at("2026-10-31T01:30:00+00:00"), True),
            (at("2026-11-01T01:30:00+00:00"), False),
        ]
        assert (first.windows[0].fire_id, list(first.windows[0].runs)) == (0, [])
        await run_next(h)
        again = await h.client.backfill_schedule("s", start, NOW)
        assert [w.already_fired for w in again.windows] == [True, True]
        jobs = await h.client.list_jobs()
        assert len(jobs) == 2 and jobs[-1].id == scheduled
        assert [j.trigger for j in jobs] == [Trigger.TRIGGER_BACKFILL, Trigger.TRIGGER_SCHEDULER]
        counted = h.service.app.metrics.registry.get_sample_value
        assert counted("tickwork_backfill_windows_total", {"outcome": "already_fired"}) == 3


async def test_a_dry_run_writes_nothing(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-04T00:00:00+00:00")
        dry = await h.client.backfill_schedule("s", start, end, dry_run=True, request_id="r1")
        assert len(dry.windows) == 3
        assert all(not w.already_fired and not w.fire_id and not w.runs for w in dry.windows)
        assert await h.client.list_fires("s") == [] and await h.client.list_jobs() == []
        # Its request_id was not remembered: the same id then runs the backfill.
        real = await h.client.backfill_schedule("s", start, end, request_id="r1")
        assert not real.repeated_request and real.windows[0].runs[0].job_id


async def test_a_repeated_request_id_gets_the_first_answer(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-03T00:00:00+00:00")
        first = await h.client.backfill_schedule("s", start, end, request_id="once")
        await run_next(h)
        again = await h.client.backfill_schedule("s", start, end, request_id="once")
        assert again.repeated_request and not first.repeated_request
        assert list(again.windows) == list(first.windows)
        assert len(await h.client.list_jobs()) == 1
        with pytest.raises(InvalidArgument) as reused:
            await h.client.backfill_schedule(
                "s", start, end, dry_run=False, request_id="once", overlap_policy="SKIP"
            )
        assert reused.value.field == "request_id"


async def test_fresh_scheduled_work_runs_before_a_backfill(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, at("2026-10-31T23:59:00+00:00")) as h:
        await nightly(h, "old-a", "old-b")
        await h.client.create_task("fresh", "shell", {"argv": ["true"]})
        await h.client.create_schedule("every-minute", ["fresh"], cron="* * * * *")
        await h.client.create_task("by-hand", "shell", {"argv": ["true"]})
        backfill = await h.client.backfill_schedule(
            "s", at("2026-10-01T00:00:00+00:00"), at("2026-10-02T00:00:00+00:00")
        )
        backfilled = [r.job_id for r in backfill.windows[0].runs]
        # The scheduled job is queued after the backfill's, the manual one after both.
        await h.tick(at("2026-11-01T00:00:00.100+00:00"))
        [fresh] = await h.client.list_jobs(task="fresh")
        [by_hand] = await h.client.run("by-hand")
        order = [await run_next(h) for _ in range(4)]
        assert order == [by_hand.job_id, fresh.id, *backfilled]


async def test_bad_ranges_and_policies_are_refused_and_write_nothing(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a", cron="* * * * * *")  # every second
        start = at("2026-10-01T00:00:00+00:00")

        async def refused(end: dt.datetime, policy: str | None = None) -> str:
            with pytest.raises(InvalidArgument) as err:
                await h.client.backfill_schedule("s", start, end, overlap_policy=policy)
            return err.value.field

        over = start + dt.timedelta(seconds=MAX_WINDOWS + 1)
        assert await refused(over) == "end_time"
        exactly = await h.client.backfill_schedule(
            "s", start, start + dt.timedelta(seconds=MAX_WINDOWS), dry_run=True
        )
        assert len(exactly.windows) == MAX_WINDOWS
        assert await refused(start) == "end_time"  # not after start_time
        assert await refused(start - dt.timedelta(hours=1)) == "end_time"
        assert await refused(NOW + dt.timedelta(seconds=1)) == "end_time"  # the future
        window = start + dt.timedelta(minutes=1)
        with pytest.raises(InvalidArgument, match="overlap_policy"):
            await h.client.backfill_schedule("s", start, window, overlap_policy="SOMETIMES")
        stub = schedule_pb2_grpc.ScheduleServiceStub(h.client._channel)
        schedule_id = (await h.client.get_schedule("s")).id
        for request, field in (
            (schedule_pb2.BackfillScheduleRequest(id=schedule_id), "start_time"),
            (schedule_pb2.BackfillScheduleRequest(id=schedule_id, start_time=start), "end_time"),
            (schedule_pb2.BackfillScheduleRequest(start_time=start, end_time=window), "id"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as raw:
                await stub.BackfillSchedule(request)
            assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in (raw.value.details() or "")
        # The earliest instant a Timestamp holds: no room left to compute fire times from.
        earliest = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
        with pytest.raises(InvalidArgument, match="too early") as early:
            await h.client.backfill_schedule(
                "s", earliest, earliest + dt.timedelta(seconds=30), dry_run=True
            )
        assert early.value.field == "start_time"
        missing = schedule_pb2.BackfillScheduleRequest(
            id=schedule_id + 100, start_time=start, end_time=window
        )
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await stub.BackfillSchedule(missing)
        assert raw.value.code() == grpc.StatusCode.NOT_FOUND
        # An interval schedule has no fixed windows.
        await h.client.create_schedule("i", ["a"], interval_seconds=60)
        with pytest.raises(FailedPrecondition) as interval:
            await h.client.backfill_schedule("i", start, window)
        assert "interval schedule" in str(interval.value)
        assert await h.client.list_fires("s") == [] and await h.client.list_fires("i") == []
        assert await h.client.list_jobs() == []


async def test_a_disabled_task_is_skipped_and_its_backfill_jobs_cancelled(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a", "b")
        await h.client.disable_task("b")
        done = await h.client.backfill_schedule(
            "s", at("2026-10-01T00:00:00+00:00"), at("2026-10-02T00:00:00+00:00")
        )
        [a_run, b_run] = done.windows[0].runs
        assert not a_run.skipped
        assert b_run.skip_reason == SkipReason.SKIP_REASON_TASK_DISABLED
        await h.client.disable_task("a")
        job = await h.client.get_job(a_run.job_id)
        assert job.status == JobStatus.JOB_STATUS_CANCELLED


async def test_a_backfilled_job_is_a_queued_job_to_other_runs_of_its_task(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, at("2026-10-31T23:59:00+00:00")) as h:
        await nightly(h, "a")
        await h.client.create_schedule("minutely", ["a"], cron="* * * * *")
        [run] = (
            (
                await h.client.backfill_schedule(
                    "s", at("2026-10-01T00:00:00+00:00"), at("2026-10-02T00:00:00+00:00")
                )
            )
            .windows[0]
            .runs
        )
        await h.tick(at("2026-11-01T00:00:00.100+00:00"))
        [fire] = await h.client.list_fires("minutely")
        assert fire.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED
        assert (fire.runs[0].skip_reason, fire.runs[0].job_id) == (
            SkipReason.SKIP_REASON_ALREADY_QUEUED,
            run.job_id,
        )
        # A manual run promotes it to the manual lane: it runs before scheduled work.
        await h.client.create_task("b", "shell", {"argv": ["true"]})
        await h.client.create_schedule("b-minutely", ["b"], cron="* * * * *")
        await h.tick(at("2026-11-01T00:01:00.100+00:00"))
        [promoted] = await h.client.run("a")
        assert promoted.promoted and promoted.job_id == run.job_id
        assert await run_next(h) == run.job_id
        job = await h.client.get_job(run.job_id)
        assert job.trigger == Trigger.TRIGGER_BACKFILL  # it keeps its trigger and window
        assert job.fire_time.ToDatetime(tzinfo=UTC) == at("2026-10-01T00:30:00+00:00")


async def test_a_backfilled_failure_is_retried_but_not_counted_toward_auto_disable(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW, auto_disable_task_failure_count=1) as h:
        await h.client.create_task("a", "shell", {"argv": ["false"]}, max_attempts=2)
        await h.client.create_schedule("s", ["a"], cron="30 2 * * *", timezone="Europe/Berlin")
        await h.client.backfill_schedule(
            "s", at("2026-10-01T00:00:00+00:00"), at("2026-10-02T00:00:00+00:00")
        )
        first = await claim(h)
        failed = await finish(h, first, "FAILED", "boom")
        assert failed.retry is not None
        retry = failed.retry
        assert (retry.trigger, retry.lane, retry.fire_time) == (
            "BACKFILL",
            2,
            at("2026-10-01T00:30:00+00:00"),
        )
        h.clock.set(retry.not_before or NOW)
        last = await claim(h)
        assert last.id == retry.id
        await finish(h, last, "FAILED", "boom again")
        task = await h.client.get_task("a")
        assert task.enabled and task.consecutive_failure_count == 0


async def test_a_reply_that_could_pass_4_mib_is_refused(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        names = ["x" * 199 + c for c in "ab"]
        for name in names:
            await h.client.create_task(name, "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", names, cron="* * * * * *")
        start = at("2026-10-01T00:00:00+00:00")
        with pytest.raises(InvalidArgument) as err:
            await h.client.backfill_schedule("s", start, start + dt.timedelta(seconds=MAX_WINDOWS))
        assert err.value.field == "end_time"
        assert await h.client.list_fires("s") == []
        # The bound holds for a real answer: ids of every size, skips, long names.
        few = await h.client.backfill_schedule("s", start, start + dt.timedelta(seconds=50))
        schedule = await h.client.get_schedule("s")
        bound = reply_bytes_bound(tuple(schedule.task_names), len(few.windows))
        assert few.ByteSize() <= bound


async def test_the_command_line_prints_the_windows(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        base = ["schedules", "backfill", "s", "--server", h.service.address]
        span = ["--from", "2026-10-01T00:00:00Z", "--to", "2026-10-03T00:00:00+02:00"]
        assert await asyncio.to_thread(main, [*base, *span, "--dry-run"]) == 0
        dry = capsys.readouterr().out
        assert "2026-10-01T00:30:00Z  would run" in dry
        assert "2 windows: 2 would run" in dry
        assert await h.client.list_jobs() == []
        assert await asyncio.to_thread(main, [*base, *span]) == 0
        ran = capsys.readouterr().out
        [job] = await h.client.list_jobs()
        assert f"2026-10-01T00:30:00Z  enqueued  a: job {job.id}" in ran
        assert "2026-10-02T00:30:00Z  skipped   a: skipped (already queued" in ran
        assert await asyncio.to_thread(main, [*base, *span]) == 0
        assert "2 windows: 2 already fired" in capsys.readouterr().out
        assert await asyncio.to_thread(main, [*base, "--from", "2026-10-01", "--to", "x"]) == 2


async def test_windows_planned_before_a_schedule_change_are_planned_again(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        store, schedule_id = h.service.app.store, (await h.client.get_schedule("s")).id
        asked = Range(at("2026-10-01T00:00:00+00:00"), at("2026-10-03T00:00:00+00:00"), None, False)

        def windows(schedule: ScheduleRecord) -> list[dt.datetime]:
            return plan(schedule, asked)

        planned = await store.plan_backfill(schedule_id, windows)
        assert planned[1] == [at("2026-10-01T00:30:00+00:00"), at("2026-10-02T00:30:00+00:00")]
        await h.client.update_schedule("s", cron="0 12 * * *")  # changed meanwhile
        found = await store.backfill(schedule_id, windows, NOW, planned=planned)
        assert [w.fire_time for w in found] == [
            at("2026-10-01T10:00:00+00:00"),
            at("2026-10-02T10:00:00+00:00"),
        ]


async def test_the_queue_service_refuses_a_backfill_trigger(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        task = await h.client.create_task("a", "shell", {"argv": ["true"]})
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            queue = queue_pb2_grpc.QueueServiceStub(channel)
            request = queue_pb2.EnqueueRequest(
                task_ids=[task.id], trigger=common_pb2.TRIGGER_BACKFILL
            )
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await queue.Enqueue(request, metadata=auth_metadata(h.service.internal_token))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith("trigger")
        assert await h.client.list_jobs() == []


async def test_buffer_all_queues_every_window_of_one_task_oldest_first(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-04T00:00:00+00:00")
        skipped = await h.client.backfill_schedule("s", start, end, dry_run=True)
        assert len(skipped.windows) == 3
        done = await h.client.backfill_schedule("s", start, end, overlap_policy="BUFFER_ALL")
        jobs = [w.runs[0].job_id for w in done.windows]
        assert all(jobs) and not any(w.runs[0].skipped for w in done.windows), done
        # One at a time, in window order: each waits behind the one before it.
        ran = []
        for _ in jobs:
            job = await claim(h)
            assert await h.service.app.store.claim_next_job("w2", h.clock(), 30.0) is None
            await finish(h, job, "SUCCEEDED")
            ran.append(job.id)
        assert ran == jobs


async def test_aborting_a_backfilled_task_says_how_many_queued_jobs_it_cancelled(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-05T00:00:00+00:00")
        await h.client.backfill_schedule("s", start, end, overlap_policy="BUFFER_ALL")
        running = await claim(h)  # the first window runs, three wait behind it
        address = ["--server", h.service.address]
        assert await asyncio.to_thread(main, ["tasks", "abort", "a", *address]) == 0
        assert capsys.readouterr().out == (
            f"task a: running job {running.id} told to abort (it ends ABORTED once the "
            "worker has stopped it); 3 queued jobs cancelled\n"
        )
        statuses = sorted(j.status for j in await h.client.list_jobs())
        assert statuses == [JobStatus.JOB_STATUS_RUNNING] + [JobStatus.JOB_STATUS_CANCELLED] * 3
        # Two more windows wait behind the job still running: the next abort counts them.
        await h.client.backfill_schedule(
            "s",
            at("2026-10-05T00:00:00+00:00"),
            at("2026-10-07T00:00:00+00:00"),
            overlap_policy="BUFFER_ALL",
        )
        (abort,) = await h.client.abort("a")
        assert abort.action == abort.ACTION_ABORT_REQUESTED and abort.cancelled_job_count == 2


async def test_batches_write_every_window_and_the_whole_answer_is_remembered(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backfill_module, "BATCH_WINDOWS", 2)
    async with inprocess(tmp_path, database_url, NOW) as h:
        await nightly(h, "a")
        start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-06T00:00:00+00:00")
        await h.client.backfill_schedule(
            "s", at("2026-10-03T00:00:00+00:00"), at("2026-10-04T00:00:00+00:00")
        )
        first = await h.client.backfill_schedule(
            "s", start, end, overlap_policy="BUFFER_ALL", request_id="batched"
        )
        # Five windows in three transactions, the third written before by another backfill.
        assert [w.already_fired for w in first.windows] == [False, False, True, False, False]
        assert len(await h.client.list_fires("s")) == 5
        assert len({w.fire_id for w in first.windows if not w.already_fired}) == 4
        again = await h.client.backfill_schedule(
            "s", start, end, overlap_policy="BUFFER_ALL", request_id="batched"
        )
        assert again.repeated_request and list(again.windows) == list(first.windows)


def test_batches_cover_the_range_in_spans_of_the_batch_size() -> None:
    times = [at(f"2026-10-0{d}T00:30:00+00:00") for d in range(1, 6)]
    start, end = at("2026-10-01T00:00:00+00:00"), at("2026-10-06T00:00:00+00:00")
    assert backfill_module.batches(times, start, end, 2) == [
        (start, times[2]),
        (times[2], times[4]),
        (times[4], end),
    ]
    assert backfill_module.batches([], start, end, 2) == [(start, end)]
