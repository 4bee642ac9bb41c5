"""The scheduler loop driven by an injected clock: due fires, self-heal, catch-up after
downtime, jitter, intervals anchored to the finish, fire records, DST days. No sleeping."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import grpc
import pytest

from scheduler_svc import values
from scheduler_svc.fire_requests import fire_batches
from scheduler_svc.records import FireRequest, ScheduleRecord
from tests.databases import run_sql_async
from tests.inprocess import Harness, inprocess
from tests.queue_helpers import Request, raw_worker
from tickwork import FireOutcome, JobStatus, SkipReason

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


async def one_task_schedule(h: Harness, cron: str, **kw: object) -> int:
    await h.client.create_task("job-a", "shell", {"argv": ["true"]})
    schedule = await h.client.create_schedule("s", ["job-a"], cron=cron, **kw)  # type: ignore[arg-type]
    return schedule.id


async def fire_summary(h: Harness) -> list[tuple[str, str]]:
    fires = await h.client.list_fires("s", limit=5000)
    return sorted(
        (f.fire_time.ToDatetime(tzinfo=UTC).isoformat(), FireOutcome.Name(f.outcome)) for f in fires
    )


async def ran_once_and_moved_on(h: Harness, *, fired: dt.datetime, next_run: dt.datetime) -> None:
    """One job exists, for the window ``fired``; the schedule's next run is ``next_run``."""
    jobs = await h.client.list_jobs()
    assert [j.fire_time.ToDatetime(tzinfo=UTC) for j in jobs] == [fired]
    schedule = await h.client.get_schedule("s")
    assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == next_run


async def test_due_schedule_fires_once_and_advances(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await one_task_schedule(h, "*/5 * * * *")
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:05:00+00:00")
        # Not due yet: nothing happens.
        await h.tick(at("2026-06-01T10:04:59+00:00"))
        assert await h.client.list_jobs() == []
        await h.tick(at("2026-06-01T10:05:00.200+00:00"))
        await h.tick(at("2026-06-01T10:05:01+00:00"))  # a second tick in the same window
        jobs = await h.client.list_jobs()
        assert len(jobs) == 1
        assert jobs[0].fire_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:05:00+00:00")
        assert await fire_summary(h) == [("2026-06-01T10:05:00+00:00", "FIRE_OUTCOME_ENQUEUED")]
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:10:00+00:00")


async def test_tick_returns_the_earliest_next_fire(tmp_path: Path, database_url: str) -> None:
    async with inprocess(
        tmp_path, database_url, T0, scheduler_poll_interval_s=60.0, scheduler_lease_ttl_s=300.0
    ) as h:
        assert await h.tick() == T0 + dt.timedelta(seconds=60)  # nothing scheduled: poll
        await one_task_schedule(h, "*/10 * * * * *")
        assert await h.tick() == at("2026-06-01T10:00:40+00:00")


async def test_null_next_run_is_healed_without_enqueueing(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await one_task_schedule(h, "0 * * * *")
        await run_sql_async(
            h.service.settings.database_url, "UPDATE schedules SET next_run_at = NULL"
        )
        assert not (await h.client.get_schedule("s")).HasField("next_run_time")
        await h.tick(at("2026-06-01T12:30:00+00:00"))
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T13:00:00+00:00")
        assert await h.client.list_jobs() == []
        assert await fire_summary(h) == []


async def test_a_schedule_that_never_fires_is_left_alone_by_the_healing(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A schedule whose first fire would come after the year 9999 has no next run; each
    tick finds it without one and leaves it so: no write, no log line per tick."""
    async with inprocess(tmp_path, database_url, T0) as h:
        await one_task_schedule(h, "0 * * * *", start_time=at("9999-12-31T23:59:59+00:00"))
        assert not (await h.client.get_schedule("s")).HasField("next_run_time")
        with caplog.at_level(logging.INFO, logger="scheduler_svc.scheduler"):
            for minute in range(3):
                await h.tick(T0 + dt.timedelta(minutes=minute))
        assert "next run computed" not in caplog.text
        assert not (await h.client.get_schedule("s")).HasField("next_run_time")
        assert await fire_summary(h) == []


async def test_downtime_with_skip_records_missed_windows_and_enqueues_nothing(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, at("2026-06-01T01:30:00+00:00")) as h:
        await one_task_schedule(h, "0 * * * *")
        await h.tick(at("2026-06-01T04:30:00+00:00"))  # down from 01:30 to 04:30
        assert await h.client.list_jobs() == []
        assert await fire_summary(h) == [
            ("2026-06-01T02:00:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T03:00:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T04:00:00+00:00", "FIRE_OUTCOME_MISSED"),
        ]
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T05:00:00+00:00")


async def test_downtime_with_run_once_enqueues_once(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, at("2026-06-01T01:30:00+00:00")) as h:
        await one_task_schedule(h, "0 * * * *", catch_up_policy="RUN_ONCE")
        await h.tick(at("2026-06-01T04:30:00+00:00"))
        jobs = await h.client.list_jobs()
        assert len(jobs) == 1
        assert await fire_summary(h) == [
            ("2026-06-01T02:00:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T03:00:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T04:00:00+00:00", "FIRE_OUTCOME_ENQUEUED"),
        ]
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T05:00:00+00:00")


async def test_a_window_that_passed_in_downtime_is_missed_and_the_current_one_fires(
    tmp_path: Path, database_url: str
) -> None:
    """Down from 10:00:30 to 10:01:01.96 on a 20 s schedule: 10:00:40 passed in the downtime
    (22 s old, and its successor has come) and is missed; 10:01:00 is 1.96 s old, tick
    jitter, and fires, carrying its own fire time (it used to be recorded as skipped behind
    a late run of 10:00:40)."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:30+00:00")) as h:
        await one_task_schedule(h, "*/20 * * * * *")
        await h.tick(at("2026-06-01T10:01:01.960+00:00"))
        assert await fire_summary(h) == [
            ("2026-06-01T10:00:40+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T10:01:00+00:00", "FIRE_OUTCOME_ENQUEUED"),
        ]
        await ran_once_and_moved_on(
            h, fired=at("2026-06-01T10:01:00+00:00"), next_run=at("2026-06-01T10:01:20+00:00")
        )


async def test_a_late_tick_within_the_window_still_fires_it(
    tmp_path: Path, database_url: str
) -> None:
    """30 s late on a minute schedule, before the following window: on time, not missed,
    whatever the catch-up policy."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T09:59:30+00:00")) as h:
        await one_task_schedule(h, "* * * * *")
        await h.tick(at("2026-06-01T10:00:30+00:00"))
        assert await fire_summary(h) == [("2026-06-01T10:00:00+00:00", "FIRE_OUTCOME_ENQUEUED")]


async def test_past_the_cap_of_recorded_misses_the_current_windows_still_fire(
    tmp_path: Path, database_url: str
) -> None:
    """20 min down on an every-second schedule: 1,199 windows passed. The first 1,000 are
    recorded missed; the windows at most 5 s old (10:19:56 to 10:20:00) are tick jitter and
    fire as usual, the first enqueued and the rest skipped behind it (they used to be
    dropped, unrecorded)."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00.500+00:00")) as h:
        await one_task_schedule(h, "* * * * * *")
        await h.tick(at("2026-06-01T10:20:00.500+00:00"))
        summary = await fire_summary(h)
        missed = [t for t, outcome in summary if outcome == "FIRE_OUTCOME_MISSED"]
        assert len(missed) == 1000
        assert (missed[0], missed[-1]) == ("2026-06-01T10:00:01+00:00", "2026-06-01T10:16:40+00:00")
        assert summary[1000:] == [
            ("2026-06-01T10:19:56+00:00", "FIRE_OUTCOME_ENQUEUED"),
            *(
                (f"2026-06-01T10:{s}+00:00", "FIRE_OUTCOME_SKIPPED")
                for s in ("19:57", "19:58", "19:59", "20:00")
            ),
        ]
        await ran_once_and_moved_on(
            h, fired=at("2026-06-01T10:19:56+00:00"), next_run=at("2026-06-01T10:20:01+00:00")
        )


async def test_run_once_after_a_long_downtime_runs_the_latest_window(
    tmp_path: Path, database_url: str
) -> None:
    """Two days down on a minute schedule with RUN_ONCE: the one run is for the latest
    window (10:00 on the third), not the last of the 1,000 recorded misses."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T09:59:30+00:00")) as h:
        await one_task_schedule(h, "* * * * *", catch_up_policy="RUN_ONCE")
        await h.tick(at("2026-06-03T10:00:30+00:00"))
        jobs = await h.client.list_jobs()
        assert [j.fire_time.ToDatetime(tzinfo=UTC) for j in jobs] == [
            at("2026-06-03T10:00:00+00:00")
        ]
        summary = await fire_summary(h)
        assert summary[-1] == ("2026-06-03T10:00:00+00:00", "FIRE_OUTCOME_ENQUEUED")
        assert [o for _, o in summary].count("FIRE_OUTCOME_MISSED") == 1000
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-03T10:01:00+00:00")


async def test_tick_jitter_is_not_a_missed_window(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00.500+00:00")) as h:
        await one_task_schedule(h, "* * * * * *")  # every second
        # The tick runs 3 s late: each window is processed, none is missed.
        await h.tick(at("2026-06-01T10:00:04+00:00"))
        summary = await fire_summary(h)
        assert [s[0][11:19] for s in summary] == ["10:00:01", "10:00:02", "10:00:03", "10:00:04"]
        assert "FIRE_OUTCOME_MISSED" not in {s[1] for s in summary}
        # The first enqueued; the others found that job still queued (no worker here).
        fires = await h.client.list_fires("s")
        skipped = [f for f in fires if f.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED]
        assert len(skipped) == 3
        assert all(f.runs[0].skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED for f in skipped)


async def test_tasks_of_one_tick_are_enqueued_in_name_order(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        ids = []
        for name in ("zeta", "alpha", "mike"):
            ids.append((await h.client.create_task(name, "shell", {"argv": ["true"]})).id)
        await h.client.create_schedule("s", ids, cron="*/5 * * * *")
        await h.tick(at("2026-06-01T10:05:00+00:00"))
        jobs = sorted(await h.client.list_jobs(), key=lambda j: j.id)
        assert [j.task_name for j in jobs] == ["alpha", "mike", "zeta"]


async def test_disabled_task_is_skipped_and_recorded(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await one_task_schedule(h, "*/5 * * * *")
        await h.client.disable_task("job-a")
        await h.tick(at("2026-06-01T10:05:00+00:00"))
        assert await h.client.list_jobs() == []
        (fire,) = await h.client.list_fires("s")
        assert fire.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED
        assert fire.runs[0].skip_reason == SkipReason.SKIP_REASON_TASK_DISABLED


async def test_cron_wins_over_interval(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("job-a", "shell", {"argv": ["true"]})
        schedule = await h.client.create_schedule(
            "s", ["job-a"], cron="0 12 * * *", interval_seconds=30
        )
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T12:00:00+00:00")


async def test_interval_is_anchored_to_the_finish_of_the_previous_run(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("job-a", "shell", {"argv": ["true"]})
        schedule = await h.client.create_schedule("s", ["job-a"], interval_seconds=60)
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == T0 + dt.timedelta(seconds=60)
        await h.tick(T0 + dt.timedelta(seconds=60))
        (job,) = await h.client.list_jobs()
        # The worker takes it and runs it for 100 s.
        store = h.service.app.store
        claimed = await store.claim_next_job("w", h.clock.advance(5), 30)
        assert claimed is not None and claimed[0].id == job.id
        h.clock.advance(100)
        await h.service.app.finish_job(
            job.id, claimed[0].lease_token or "", values.JobStatus.SUCCEEDED, "", ""
        )
        schedule = await h.client.get_schedule("s")
        finished = (await h.client.get_job(job.id)).finish_time.ToDatetime(tzinfo=UTC)
        assert finished == T0 + dt.timedelta(seconds=165)
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == finished + dt.timedelta(seconds=60)


async def test_re_enabling_a_due_schedule_does_not_catch_up(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await one_task_schedule(h, "*/5 * * * *")
        await h.client.update_schedule("s", enabled=False)
        h.clock.set(at("2026-06-01T10:05:01+00:00"))
        await h.client.update_schedule("s", enabled=True)
        await h.tick()
        assert await h.client.list_jobs() == []
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:10:00+00:00")


async def test_a_repeated_fire_enqueues_nothing(tmp_path: Path, database_url: str) -> None:
    """The (schedule, fire time) row makes a second Enqueue of one window a no-op, as after
    a crash between Enqueue and moving next_run, or a second scheduler."""
    async with inprocess(tmp_path, database_url, T0) as h:
        sid = await one_task_schedule(h, "*/5 * * * *")
        due = at("2026-06-01T10:05:00+00:00")
        await h.tick(due)
        first = await h.service.app.enqueue_fire(FireRequest(sid, due, (1,)))
        assert first.duplicate_fire
        assert len(await h.client.list_jobs()) == 1


async def test_fall_back_day_fires_fixed_time_once(tmp_path: Path, database_url: str) -> None:
    ny = ZoneInfo("America/New_York")
    start = dt.datetime(2026, 10, 31, 23, 0, tzinfo=ny)
    async with inprocess(tmp_path, database_url, start) as h:
        await one_task_schedule(h, "30 1 * * *", timezone="America/New_York")
        # Tick every 5 minutes through the repeated hour (01:00-02:00 happens twice).
        for _ in range(12 * 5):
            await h.tick(h.clock.advance(300))
            # Let the queued job go, as a worker would, so repeats would show as new jobs.
            for job in await h.client.list_jobs(statuses=[JobStatus.JOB_STATUS_QUEUED]):
                await h.client.cancel_job(job.id)
        fires = await fire_summary(h)
        assert fires == [("2026-11-01T05:30:00+00:00", "FIRE_OUTCOME_ENQUEUED")]  # 01:30 EDT


async def test_spring_forward_day_fires_skipped_time_at_gap_end(
    tmp_path: Path, database_url: str
) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    start = dt.datetime(2026, 3, 28, 23, 0, tzinfo=berlin)
    async with inprocess(tmp_path, database_url, start) as h:
        await one_task_schedule(h, "30 2 * * *", timezone="Europe/Berlin")
        for _ in range(12 * 6):
            await h.tick(h.clock.advance(300))
        fires = await fire_summary(h)
        assert fires == [("2026-03-29T01:00:00+00:00", "FIRE_OUTCOME_ENQUEUED")]  # 03:00 CEST


async def test_one_tick_records_many_fires_and_a_shared_task_runs_once(
    tmp_path: Path, database_url: str
) -> None:
    """A tick records all due schedules in one EnqueueFires call: a task named by two
    schedules due at the same instant gets one job; the second fire reports that job as
    already queued; a disabled task is skipped; each fire is recorded once."""
    async with inprocess(tmp_path, database_url, T0) as h:
        shared = await h.client.create_task("shared", "shell", {"argv": ["true"]})
        own = await h.client.create_task("own", "shell", {"argv": ["true"]})
        off = await h.client.create_task("off", "shell", {"argv": ["true"]}, enabled=False)
        await h.client.create_schedule("a", [shared.id, own.id], cron="*/5 * * * *")
        await h.client.create_schedule("b", [shared.id, off.id], cron="*/5 * * * *")
        await h.tick(at("2026-06-01T10:05:00+00:00"))
        jobs = sorted(await h.client.list_jobs(), key=lambda j: j.id)
        assert [j.task_name for j in jobs] == ["own", "shared"]
        (fire_a,) = await h.client.list_fires("a")
        (fire_b,) = await h.client.list_fires("b")
        assert fire_a.outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
        assert [(r.task_name, r.skipped) for r in fire_a.runs] == [
            ("own", False),
            ("shared", False),
        ]
        assert fire_b.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED
        runs_b = {r.task_name: r for r in fire_b.runs}
        assert runs_b["off"].skip_reason == SkipReason.SKIP_REASON_TASK_DISABLED
        assert runs_b["shared"].skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED
        assert runs_b["shared"].job_id == jobs[1].id


async def test_dispatch_waits_while_a_tick_records_fires(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a shared core, recording due fires comes first: while a tick records them, this
    process's worker streams hand out no job (a poll waits, an Outcome's poll_next does not
    claim); when the tick ends, the waiting poll is answered at once."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=30) as h:
        hub = h.service.app.hub
        manual = await h.client.create_task("manual", "shell", {"argv": ["true"]})
        await one_task_schedule(h, "*/5 * * * *")
        (run,) = await h.client.run(manual.id)
        store = h.service.app.store
        real_enqueue_fires = store.enqueue_fires
        seen: list[tuple[bool, object]] = []

        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active

            async def recording(*args: object, **kwargs: object) -> object:
                # The tick is recording fires: a poll sent now must not be answered.
                await w.send(poll_job=Request.PollJob())
                seen.append((hub.firing, await w.receive(0.3)))
                return await real_enqueue_fires(*args, **kwargs)  # type: ignore[arg-type]

            monkeypatch.setattr(store, "enqueue_fires", recording)
            await h.tick(at("2026-06-01T10:05:00.100+00:00"))
            assert seen == [(True, None)]
            assert not hub.firing
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "assign_job"
            assert answer.assign_job.job.id == run.job_id  # manual lane first


def _schedule(schedule_id: int, tasks: int) -> ScheduleRecord:
    return ScheduleRecord(
        id=schedule_id,
        name=f"s{schedule_id}",
        description="",
        cron_expression="* * * * *",
        interval_seconds=0,
        timezone="UTC",
        catch_up_policy="SKIP",
        enabled=True,
        next_run_at=T0,
        last_run_at=None,
        created_at=T0,
        updated_at=T0,
        task_ids=tuple(range(1, tasks + 1)),
    )


def test_fire_batches_are_cut_by_fires_and_by_task_runs() -> None:
    due = [_schedule(i, n) for i, n in enumerate([1, 1, 1, 3, 5, 1, 9, 1], start=1)]
    sizes = [[s.id for s in b] for b in fire_batches(due, 3, 6)]
    # at most 3 fires and 6 runs a batch; a schedule of 9 tasks makes a batch alone
    assert sizes == [[1, 2, 3], [4], [5, 6], [7], [8]]
    assert [[s.id for s in b] for b in fire_batches(due, 500, 4000)] == [list(range(1, 9))]
    assert list(fire_batches([], 3, 6)) == []


async def test_a_tick_of_wide_schedules_records_them_all(tmp_path: Path, database_url: str) -> None:
    # Six schedules of the same 1,000 tasks, with names of 196 four-byte characters: in one
    # EnqueueFires call the reply would be 4.9 MB, more than the scheduler reads; the fires
    # were recorded, the tick failed, and every later tick asked again for ever.
    async with inprocess(tmp_path, database_url, T0) as h:
        ids = [
            (await h.client.create_task(f"{i:04d}" + "😀" * 196, "shell", {"argv": ["true"]})).id
            for i in range(1000)
        ]
        for n in range(6):
            await h.client.create_schedule(f"wide{n}", ids, cron="* * * * *")
        await h.tick(at("2026-06-01T10:01:00.100+00:00"))
        for n in range(6):
            fires = await h.client.list_fires(f"wide{n}")
            assert len(fires) == 1 and len(fires[0].runs) == 1000
            schedule = await h.client.get_schedule(f"wide{n}")
            assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:02:00+00:00")
        assert len(await h.client.list_jobs(limit=2000)) == 1000  # one job per task


async def test_a_tick_racing_task_deletes_neither_fails_nor_deadlocks(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # PostgreSQL: the fire path read its tasks unlocked, then inserted fires (locking the
    # schedule) and jobs (locking the task), while DeleteTask locks the task then the
    # schedule: foreign-key failures of the whole tick, and deadlocks. Tasks are now
    # locked first everywhere.
    async with inprocess(tmp_path, database_url, T0) as h:
        doomed = []
        for i in range(40):
            a = await h.client.create_task(f"a{i:02d}", "shell", {"argv": ["true"]})
            b = await h.client.create_task(f"b{i:02d}", "shell", {"argv": ["true"]})
            await h.client.create_schedule(f"s{i:02d}", [a.id, b.id], cron="* * * * *")
            doomed.append(a.id)
        h.clock.set(at("2026-06-01T10:01:00.100+00:00"))
        results = await asyncio.gather(
            h.scheduler.tick(h.clock()),
            *(h.client.delete_task(t) for t in doomed),
            return_exceptions=True,
        )
        assert [r for r in results if isinstance(r, BaseException)] == []
        # Not by running a deadlock's victim again (Database's retry): by never deadlocking.
        assert "deadlock" not in caplog.text
        assert {t.name[0] for t in await h.client.list_tasks()} <= {"b", "t"}  # t: built-ins
        for i in range(40):
            (fire,) = await h.client.list_fires(f"s{i:02d}")
            assert {r.task_name for r in fire.runs} <= {f"a{i:02d}", f"b{i:02d}"}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_tick_racing_a_schedule_delete_fires_every_other_schedule(
    tmp_path: Path, database_url: str
) -> None:
    """A DeleteSchedule that has deleted its row but not committed when a tick records the
    fires: the tick found that schedule (read unlocked), so its fire's row failed the
    foreign key once the delete committed, and the whole EnqueueFires ended UNAVAILABLE:
    every other due schedule of the batch went unfired in that tick. Now the schedules
    are read FOR KEY SHARE: the tick waits for the delete and reports that schedule not
    found; the others fire."""
    async with inprocess(tmp_path, database_url, T0) as h:
        for name in ("doomed", "kept-1", "kept-2"):
            await h.client.create_task(name, "shell", {"argv": ["true"]})
            await h.client.create_schedule(name, [name], cron="* * * * *")
        doomed = (await h.client.get_schedule("doomed")).id
        dsn = database_url.replace("+asyncpg", "")
        deleter, admin = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
        try:
            delete = deleter.transaction()
            await delete.start()
            await deleter.execute("DELETE FROM schedules WHERE id = $1", doomed)
            tick = asyncio.create_task(h.tick(at("2026-06-01T10:01:00.100+00:00")))
            deadline = asyncio.get_running_loop().time() + 10
            waiting = (
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = $1 AND wait_event_type = 'Lock'"
            )
            while not await admin.fetchval(waiting, database_url.rsplit("/", 1)[1]):
                assert asyncio.get_running_loop().time() < deadline, "the tick never waited"
                assert not tick.done(), tick
                await asyncio.sleep(0.01)
            await delete.commit()
            await tick
        finally:
            await deleter.close()
            await admin.close()
        for name in ("kept-1", "kept-2"):
            (fire,) = await h.client.list_fires(name)
            assert fire.outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
            assert fire.fire_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:01:00+00:00")
            schedule = await h.client.get_schedule(name)
            assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == at("2026-06-01T10:02:00+00:00")
        assert sorted(j.task_name for j in await h.client.list_jobs()) == ["kept-1", "kept-2"]


async def test_a_fire_named_twice_in_one_batch_is_enqueued_once_and_then_a_duplicate(
    tmp_path: Path, database_url: str
) -> None:
    # EnqueueFires with the same (schedule, fire time) twice: the second request decided
    # the fire SKIPPED, "already queued" by the job the first had just enqueued, and its
    # outcome overwrote the first's: ListFires said SKIPPED, both results said skipped.
    async with inprocess(tmp_path, database_url, T0) as h:
        task = await h.client.create_task("t", "shell", {"argv": ["true"]})
        schedule = await h.client.create_schedule("s", [task.id], cron="* * * * *")
        fire = FireRequest(schedule.id, at("2026-06-01T10:01:00+00:00"), (task.id,), False, ())
        first, again = await h.service.app.enqueue_fires([fire, fire])
        ((run,),) = {first.runs}
        assert run.skip_reason is None and run.job_id and not first.duplicate_fire
        assert again.duplicate_fire and [r.job_id for r in again.runs] == [run.job_id]
        (recorded,) = await h.client.list_fires("s")
        assert recorded.outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
        assert [r.job_id for r in recorded.runs] == [run.job_id]
        assert not recorded.runs[0].skipped


async def test_concurrent_schedule_updates_never_store_a_schedule_without_timing(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # UpdateSchedule read the schedule, validated the merge, and wrote only its own fields
    # in another transaction. Update A (interval_seconds = 0; the cron still times it) and
    # update B (cron_expression = ""; the interval still times it) were each valid on what
    # they read, and together stored a schedule with neither: enabled, never firing.
    from google.protobuf.field_mask_pb2 import FieldMask

    from tickwork.v1 import schedule_pb2, schedule_pb2_grpc

    async with inprocess(tmp_path, database_url, T0) as h:
        task = await h.client.create_task("t", "shell", {"argv": ["true"]})
        created = await h.client.create_schedule("s", [task.id], cron="0 * * * *")
        await h.client.update_schedule("s", cron="0 * * * *", interval_seconds=60)
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            stub = schedule_pb2_grpc.ScheduleServiceStub(channel)

            def update(paths: list[str], **fields: object) -> Awaitable[object]:
                return stub.UpdateSchedule(
                    schedule_pb2.UpdateScheduleRequest(
                        schedule=schedule_pb2.Schedule(id=created.id, **fields),  # type: ignore[arg-type]
                        update_mask=FieldMask(paths=paths),
                    )
                )

            b_done: list[object] = []
            b_started: list[bool] = []

            async def update_b() -> None:
                try:
                    b_done.append(await update(["cron_expression"], cron_expression=""))
                except grpc.aio.AioRpcError as err:
                    b_done.append(err.code())

            store = h.service.app.store
            real_get = store.get_schedule

            async def get_then_b(schedule_id: int) -> object:
                found = await real_get(schedule_id)
                if not b_started:  # B commits between A's read and A's write
                    b_started.append(True)
                    await update_b()
                return found

            monkeypatch.setattr(store, "get_schedule", get_then_b)
            try:
                await update(["interval_seconds"], interval_seconds=0)
                a = "OK"
            except grpc.aio.AioRpcError as err:
                a = err.code().name
            monkeypatch.setattr(store, "get_schedule", real_get)
            if not b_started:
                await update_b()
        stored = await h.client.get_schedule("s")
        assert stored.cron_expression or stored.interval_seconds >= 1, (a, b_done, stored)
        # Exactly one of them was refused: the second, on what the first had stored.
        refused = [a != "OK", b_done[0] == grpc.StatusCode.INVALID_ARGUMENT]
        assert refused.count(True) == 1, (a, b_done)
