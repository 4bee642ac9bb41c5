"""Retries: per-task policy, exponential backoff with full jitter (never immediate, capped,
never beyond max attempts), attempt numbers, and every attempt's error in the history.

Driven in process with an injected clock and an injected random source, through the same
``claim_next_job`` / ``App.finish_job`` the worker stream calls.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_svc.store import backoff_delay_s
from tests.inprocess import inprocess
from tests.queue_helpers import claim, create_flaky, finish
from tickwork import InvalidArgument, JobStatus, SkipReason, Trigger

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)


class PinnedJitter(random.Random):
    """A random source whose ``uniform(a, b)`` returns ``a + fraction * (b - a)`` and
    records the bounds it was asked for."""

    def __init__(self, fraction: float) -> None:
        super().__init__(0)
        self.fraction = fraction
        self.bounds: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.bounds.append((a, b))
        return a + self.fraction * (b - a)


def _s(delta: dt.timedelta) -> float:
    return delta.total_seconds()


async def test_backoff_is_exponential_capped_and_stops_at_max_attempts(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        jitter = PinnedJitter(1.0)  # always the top of the jitter range
        h.service.app.store.rng = jitter
        await create_flaky(h, 5, 2, 5)
        (run,) = await h.client.run("flaky")
        delays = []
        job = await claim(h)
        assert job.id == run.job_id
        for attempt in range(1, 6):
            assert job.attempt == attempt
            h.clock.advance(0.25)
            result = await finish(h, job, "FAILED", f"boom {attempt}")
            assert result.accepted and result.job is not None
            if attempt == 5:
                assert result.retry is None  # never beyond max attempts
                break
            retry = result.retry
            assert retry is not None and retry.status == "QUEUED"
            assert retry.attempt == attempt + 1 and retry.retry_of_job_id == job.id
            assert retry.trigger == "API" and retry.lane == job.lane
            assert retry.not_before is not None
            delays.append(_s(retry.not_before - h.clock()))
            # Not ready a moment before not_before; ready at it.
            h.clock.set(retry.not_before - dt.timedelta(milliseconds=1))
            store = h.service.app.store
            assert await store.claim_next_job("w", h.clock(), 30) is None
            assert await store.next_ready_time(h.clock()) == retry.not_before
            h.clock.set(retry.not_before)
            job = await claim(h)
            assert job.id == retry.id
        # Full jitter draws from [0, min(cap, base * 2^(n-1))]: 2, 4, then capped at 5.
        assert jitter.bounds == [(0.0, 2.0), (0.0, 4.0), (0.0, 5.0), (0.0, 5.0)]
        assert delays == [2.0, 4.0, 5.0, 5.0]
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None

        history = await h.client.list_jobs(task="flaky")
        assert [j.attempt for j in history] == [5, 4, 3, 2, 1]
        assert [j.error for j in history] == [f"boom {n}" for n in (5, 4, 3, 2, 1)]
        assert {j.status for j in history} == {JobStatus.JOB_STATUS_FAILED}
        assert [j.retry_of_job_id for j in history] == [j.id for j in history[1:]] + [0]
        assert all(j.trigger == Trigger.TRIGGER_API for j in history)
        assert all(j.HasField("not_before_time") for j in history[:-1])
        assert not history[-1].HasField("not_before_time")


async def test_a_retry_is_never_immediate(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        h.service.app.store.rng = PinnedJitter(0.0)  # the bottom of the jitter range
        await create_flaky(h, 3, 0.1, 0.2)
        await h.client.run("flaky")
        job = await claim(h)
        result = await finish(h, job, "FAILED", "boom")
        assert result.retry is not None and result.retry.not_before is not None
        assert _s(result.retry.not_before - h.clock()) == 1.0  # at least one second
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None


async def test_jittered_delays_stay_within_their_bounds(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        h.service.app.store.rng = random.Random(4)
        await create_flaky(h, 8, 3, 40)
        await h.client.run("flaky")
        job = await claim(h)
        delays = []
        while True:
            result = await finish(h, job, "FAILED", f"attempt {job.attempt}")
            if result.retry is None:
                break
            assert result.retry.not_before is not None
            delay = _s(result.retry.not_before - h.clock())
            ceiling = min(40.0, 3.0 * 2 ** (job.attempt - 1))
            assert 1.0 <= delay <= max(1.0, ceiling), (job.attempt, delay)
            delays.append(delay)
            h.clock.set(result.retry.not_before)
            job = await claim(h)
        assert job.attempt == 8 and len(delays) == 7
        assert len(set(delays)) >= 4  # jittered, not a fixed sequence (1 s is the floor)


@given(
    attempt=st.integers(1, 100),
    base=st.floats(0.001, 3600),
    cap=st.floats(0.001, 86400),
    seed=st.integers(0, 2**32),
)
def test_backoff_delay_is_within_full_jitter_bounds(
    attempt: int, base: float, cap: float, seed: int
) -> None:
    delay = backoff_delay_s(attempt, base, max(base, cap), random.Random(seed))
    ceiling = min(max(base, cap), base * 2 ** (attempt - 1))
    assert 1.0 <= delay <= max(1.0, ceiling)


async def test_success_and_abort_are_not_retried(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        for name in ("ok", "stopped"):
            await h.client.create_task(name, "shell", {"argv": ["true"]}, max_attempts=3)
        await h.client.run("ok")
        assert (await finish(h, await claim(h), "SUCCEEDED")).retry is None
        await h.client.run("stopped")
        assert (await finish(h, await claim(h), "ABORTED", "aborted by operator")).retry is None
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None


async def test_a_scheduler_job_retries_in_its_lane_with_its_schedule(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("flaky", "shell", {"argv": ["false"]}, max_attempts=2)
        schedule = await h.client.create_schedule("s", ["flaky"], cron="*/5 * * * *")
        await h.tick(T0 + dt.timedelta(minutes=5))
        first = await claim(h)
        result = await finish(h, first, "FAILED", "boom")
        retry = result.retry
        assert retry is not None
        assert (retry.trigger, retry.lane) == ("SCHEDULER", first.lane)
        assert (retry.schedule_id, retry.fire_time) == (schedule.id, first.fire_time)
        # The skip logic holds for retries: the queued retry is the task's one active job.
        (again,) = await h.client.run("flaky")
        assert again.job_id == retry.id and again.promoted


async def test_retry_policy_is_stored_and_validated(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        task = await h.client.create_task(
            "t",
            "shell",
            {"argv": ["true"]},
            max_attempts=4,
            backoff_base_seconds=2.5,
            backoff_cap_seconds=30,
        )
        policy = task.retry_policy
        assert (policy.max_attempts, policy.backoff_base_seconds, policy.backoff_cap_seconds) == (
            4,
            2.5,
            30,
        )
        default = (await h.client.create_task("d", "shell", {"argv": ["true"]})).retry_policy
        assert (default.max_attempts, default.backoff_base_seconds) == (1, 10)
        assert default.backoff_cap_seconds == 600
        bad = [
            ({"max_attempts": 101}, "max_attempts"),
            ({"max_attempts": -1}, "max_attempts"),
            ({"backoff_base_seconds": -1}, "backoff_base_seconds"),
            ({"backoff_base_seconds": 10, "backoff_cap_seconds": 5}, "backoff_cap_seconds"),
        ]
        for fields, named in bad:
            with pytest.raises(InvalidArgument) as err:
                await h.client.create_task("x", "shell", {"argv": ["true"]}, **fields)  # type: ignore[arg-type]
            assert named in err.value.details
        updated = await h.client.update_task("t", max_attempts=2)
        assert updated.retry_policy.max_attempts == 2
        assert updated.retry_policy.backoff_cap_seconds == 30


async def test_running_a_task_whose_scheduler_retry_waits_runs_it_now_and_it_still_counts(
    tmp_path: Path, database_url: str
) -> None:
    """A "run now" of a task whose scheduler-triggered retry waits out its backoff: the retry
    is promoted to the manual lane and ready at once (before a higher-priority scheduler
    job), and it keeps its scheduler trigger, so its final failure counts."""
    async with inprocess(tmp_path, database_url, T0) as h:
        h.service.app.store.rng = PinnedJitter(1.0)
        await create_flaky(h, 2, 600, 600)
        await h.client.create_task("urgent", "shell", {"argv": ["true"]}, task_priority=300)
        await h.client.create_schedule("s", ["flaky"], cron="*/5 * * * *")
        await h.client.create_schedule("u", ["urgent"], cron="*/5 * * * *")
        await h.tick(T0 + dt.timedelta(minutes=5))
        first = await claim(h)
        assert first.task_name == "urgent"  # priority 300 first, among scheduler jobs
        await finish(h, first, "SUCCEEDED")
        first = await claim(h)
        assert (first.task_name, first.trigger) == ("flaky", "SCHEDULER")
        retry = (await finish(h, first, "FAILED", "boom 1")).retry
        assert retry is not None and retry.not_before == h.clock() + dt.timedelta(seconds=600)
        await h.tick(T0 + dt.timedelta(minutes=10))  # queues urgent (priority 300) again

        (run,) = await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
        assert run.job_id == retry.id and run.promoted and not run.skipped
        made_ready = await h.client.get_job(retry.id)
        assert made_ready.trigger == Trigger.TRIGGER_SCHEDULER
        assert made_ready.not_before_time.ToDatetime(tzinfo=UTC) == h.clock()
        assert await h.service.app.store.next_ready_time(h.clock()) == h.clock()

        job = await claim(h)  # ready now, and in the manual lane: before urgent
        assert (job.id, job.attempt, job.trigger) == (retry.id, 2, "SCHEDULER")
        assert (await finish(h, job, "FAILED", "boom 2")).retry is None
        task = await h.client.get_task("flaky")
        assert task.consecutive_failure_count == 1  # the chain's final failure counts


async def test_running_a_task_whose_api_retry_waits_makes_that_retry_ready_now(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        h.service.app.store.rng = PinnedJitter(1.0)
        await create_flaky(h, 3, 60, 60)
        await h.client.run("flaky")
        retry = (await finish(h, await claim(h), "FAILED", "boom")).retry
        assert retry is not None and retry.not_before is not None
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None

        h.clock.advance(5)
        (run,) = await h.client.run("flaky")
        # No new job: the queued retry is the task's job, made ready now.
        assert run.job_id == retry.id and run.skipped and not run.promoted
        assert run.skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED
        job = await claim(h)
        assert (job.id, job.attempt, job.trigger) == (retry.id, 2, "API")
        assert job.not_before == h.clock()
        # Its own failure is retried with backoff as before: not ready at once.
        next_retry = (await finish(h, job, "FAILED", "boom")).retry
        assert next_retry is not None and next_retry.not_before is not None
        assert next_retry.not_before > h.clock()
        # A job already ready keeps its not_before when asked again.
        h.clock.set(next_retry.not_before + dt.timedelta(seconds=1))
        (again,) = await h.client.run("flaky")
        assert again.job_id == next_retry.id
        assert (await h.client.get_job(next_retry.id)).not_before_time.ToDatetime(
            tzinfo=UTC
        ) == next_retry.not_before
