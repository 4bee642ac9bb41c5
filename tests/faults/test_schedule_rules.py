"""One rule for cron with an interval (cron wins), and updates that leave a schedule's
timing alone do not move its next run (a schedule updated many times a second still fires).

In-process service on an injected clock (tests/inprocess.py), SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import grpc
from google.protobuf import field_mask_pb2

from tests.inprocess import inprocess
from tickwork.v1 import schedule_pb2, schedule_pb2_grpc

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)
MIN = dt.timedelta(minutes=1)


async def test_cron_wins_over_an_interval_everywhere(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        created = await h.client.create_schedule("s", ["t"], cron="*/5 * * * *", interval_seconds=7)
        assert (created.cron_expression, created.interval_seconds) == ("*/5 * * * *", 0)
        assert created.next_run_time.ToDatetime(tzinfo=UTC) == T0 + 5 * MIN
        # The API: an update setting an interval beside the stored cron keeps the cron and
        # stores no interval.
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            stub = schedule_pb2_grpc.ScheduleServiceStub(channel)
            answer = await stub.UpdateSchedule(
                schedule_pb2.UpdateScheduleRequest(
                    schedule=schedule_pb2.Schedule(id=created.id, interval_seconds=60),
                    update_mask=field_mask_pb2.FieldMask(paths=["interval_seconds"]),
                )
            )
        updated = answer.schedule
        assert (updated.cron_expression, updated.interval_seconds) == ("*/5 * * * *", 0)
        assert updated.next_run_time.ToDatetime(tzinfo=UTC) == T0 + 5 * MIN


async def test_updates_that_keep_the_timing_do_not_move_the_next_run(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["t"], cron="*/5 * * * *")
        for i in range(100):  # a controller reconciling the schedule over and over
            h.clock.advance(0.01)
            await h.client.update_schedule(
                "s",
                description=f"pass {i}",
                cron="*/5 * * * *",
                timezone="UTC",
                enabled=True,
                catch_up_policy="SKIP",
            )
        schedule = await h.client.get_schedule("s")
        assert schedule.next_run_time.ToDatetime(tzinfo=UTC) == T0 + 5 * MIN
        await h.tick(T0 + 5 * MIN)
        fires = await h.client.list_fires("s")
        assert [f.fire_time.ToDatetime(tzinfo=UTC) for f in fires] == [T0 + 5 * MIN]
        # A real timing change does move it, from now.
        h.clock.set(T0 + 6 * MIN)
        changed = await h.client.update_schedule("s", cron="*/10 * * * *")
        assert changed.next_run_time.ToDatetime(tzinfo=UTC) == T0 + 10 * MIN
