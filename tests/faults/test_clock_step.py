"""A wall clock stepped back does not silence the schedules; a step forward keeps following
the catch-up policy.

The machine's clock cannot be stepped here, so the step goes through the scheduler's
clock seam: the in-process service (tests/inprocess.py: the real gRPC server, store and
QueueService) runs on a FakeClock the test sets, while the scheduler measures it against
the real monotonic clock, as it would a stepped wall clock. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

from tests.inprocess import Harness, inprocess
from tickwork.v1.schedule_pb2 import FireOutcome

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)
MIN = dt.timedelta(minutes=1)


async def fires_by_time(h: Harness) -> Counter[dt.datetime]:
    """How many fire rows each window of schedule "s" has (the audit: at most one)."""
    fires = await h.client.list_fires("s", limit=1000)
    return Counter(f.fire_time.ToDatetime(tzinfo=UTC) for f in fires)


async def next_run(h: Harness) -> dt.datetime:
    return (await h.client.get_schedule("s")).next_run_time.ToDatetime(tzinfo=UTC)


def steps(h: Harness, direction: str) -> float:
    value = h.service.app.metrics.registry.get_sample_value(
        "tickwork_clock_steps_total", {"direction": direction}
    )
    return value or 0.0


async def test_a_step_back_recomputes_next_runs_without_refiring(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["t"], cron="*/5 * * * *")
        await h.tick(T0 + 5 * MIN)
        await h.tick(T0 + 10 * MIN)
        recorded = await fires_by_time(h)
        assert sorted(recorded) == [T0 + 5 * MIN, T0 + 10 * MIN]
        assert await next_run(h) == T0 + 15 * MIN

        # The wall clock goes back one hour.
        back = T0 + 10 * MIN + 30 * dt.timedelta(seconds=1) - 60 * MIN
        await h.tick(back)
        assert steps(h, "back") == 1
        assert await next_run(h) == T0 - 45 * MIN  # from the new now, not 10:15

        # Every window of the repeated hour fires as it comes; the two recorded ones are
        # not fired again, and the schedule carries on past them.
        when = T0 - 45 * MIN
        while when <= T0 + 15 * MIN:
            await h.tick(when)
            when += 5 * MIN
        fires = await fires_by_time(h)
        assert max(fires.values()) == 1, fires  # no window recorded twice
        expected = {T0 - 45 * MIN + k * 5 * MIN for k in range(13)}
        assert set(fires) == expected, sorted(fires)
        listed = await h.client.list_fires("s", limit=1000)
        enqueued_or_skipped = [f for f in listed if f.outcome != FireOutcome.FIRE_OUTCOME_MISSED]
        assert len(enqueued_or_skipped) == len(expected)  # none of them lost as missed
        assert await next_run(h) == T0 + 20 * MIN
        assert steps(h, "back") == 1


async def test_a_step_forward_follows_the_catch_up_policy(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["t"], cron="*/5 * * * *", catch_up_policy="SKIP")
        await h.tick(T0 + 5 * MIN)
        await h.tick(T0 + 65 * MIN + dt.timedelta(seconds=10))  # an hour forward
        assert steps(h, "forward") == 1
        listed = await h.client.list_fires("s", limit=1000)
        outcomes = Counter(FireOutcome.Name(f.outcome) for f in listed)
        # 10:05 fired; 10:10 .. 11:05 (12 windows) recorded missed under SKIP.
        assert outcomes == {"FIRE_OUTCOME_ENQUEUED": 1, "FIRE_OUTCOME_MISSED": 12}, outcomes
        assert await next_run(h) == T0 + 70 * MIN
