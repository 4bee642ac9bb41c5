"""Driver-level statements (scheduler_svc.store.driver.Bulk) write and read exactly what
SQLAlchemy's column types would, on both backends; and the other fast paths of recording fires agree
with the slow ones they replace."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from google.protobuf import timestamp_pb2

from scheduler_svc import db
from scheduler_svc.db import Database, UTCDateTime
from scheduler_svc.firing import next_cron_fire
from scheduler_svc.records import ScheduleRecord
from scheduler_svc.schema import fires, schedules
from scheduler_svc.store import hot, rows
from scheduler_svc.store.driver import Bulk
from tickwork.timestamps import to_timestamp as ts

UTC = dt.UTC
T0 = dt.datetime(2026, 3, 29, 0, 30, 0, 123456, tzinfo=UTC)


async def _one_schedule(db: Database) -> int:
    def make(conn: sa.Connection) -> int:
        conn.execute(
            schedules.insert().values(
                name="s", cron_expression="* * * * *", created_at=T0, updated_at=T0
            )
        )
        return int(conn.execute(sa.select(schedules.c.id)).scalar_one())

    return await db.write(make)


async def test_insert_returns_the_rows_and_skips_conflicts(database: Database) -> None:
    schedule_id = await _one_schedule(database)
    times = [T0 + dt.timedelta(minutes=i, microseconds=i) for i in range(3)]

    def insert(conn: sa.Connection, when: list[dt.datetime]) -> list[tuple[int, dt.datetime]]:
        bulk = Bulk(conn)
        rows = [(schedule_id, bulk.when(t), "ENQUEUED", bulk.json([]), bulk.when(T0)) for t in when]
        returned = bulk.insert(
            "fires",
            ["schedule_id", "fire_time", "outcome", "runs", "recorded_at"],
            rows,
            suffix="ON CONFLICT (schedule_id, fire_time) DO NOTHING",
            returning=["schedule_id", "fire_time"],
        )
        return sorted((sid, bulk.read_when(t)) for sid, t in returned)  # type: ignore[misc]

    assert await database.write(lambda c: insert(c, times[:2])) == [
        (schedule_id, times[0]),
        (schedule_id, times[1]),
    ]
    # The first two are recorded already: only the third is inserted and returned.
    assert await database.write(lambda c: insert(c, times)) == [(schedule_id, times[2])]
    # SQLAlchemy reads back what the driver-level insert wrote, value for value.
    rows = await database.read(
        lambda c: c.execute(sa.select(fires.c.fire_time, fires.c.runs, fires.c.recorded_at)).all()
    )
    assert sorted(r.fire_time for r in rows) == times
    assert all(r.runs == [] and r.recorded_at == T0 for r in rows)


async def test_inserts_fit_an_old_sqlite_s_limit_of_999_values(database: Database) -> None:
    """SQLite before 3.32 binds at most 999 values a statement: 600 rows of 5 columns go in
    chunks under the limit the connection reports."""
    if database.dialect.name != "sqlite":
        pytest.skip("a SQLite library limit")
    schedule_id = await _one_schedule(database)

    def insert(conn: sa.Connection) -> int:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        limit = sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER
        old = raw.setlimit(limit, 999)
        try:
            bulk = Bulk(conn)
            rows = [
                (
                    schedule_id,
                    bulk.when(T0 + dt.timedelta(seconds=i)),
                    "MISSED",
                    "[]",
                    bulk.when(T0),
                )
                for i in range(600)
            ]
            returned = bulk.insert(
                "fires",
                ["schedule_id", "fire_time", "outcome", "runs", "recorded_at"],
                rows,
                returning=["id"],
            )
            return len(returned)
        finally:
            raw.setlimit(limit, old)

    assert await database.write(insert) == 600


async def test_execute_many_updates_each_row(database: Database) -> None:
    schedule_id = await _one_schedule(database)
    later = T0 + dt.timedelta(hours=1)

    def move(conn: sa.Connection, expected: dt.datetime | None) -> None:
        bulk = Bulk(conn)
        bulk.execute_many(
            "UPDATE schedules SET next_run_at = {}, enabled = {} WHERE id = {} AND "
            "(next_run_at = {} OR next_run_at IS NULL)",
            [(bulk.when(later), bulk.flag(False), schedule_id, bulk.when(expected))],
        )

    await database.write(lambda c: move(c, T0))
    row = await database.read(
        lambda c: c.execute(sa.select(schedules.c.next_run_at, schedules.c.enabled)).one()
    )
    assert (row.next_run_at, row.enabled) == (later, False)


async def test_a_naive_datetime_is_refused(database: Database) -> None:
    def bad(conn: sa.Connection) -> None:
        Bulk(conn).when(dt.datetime(2026, 1, 1))

    with pytest.raises(ValueError, match="naive datetime"):
        await database.write(bad)


def test_utc_datetime_writes_sqlalchemy_s_own_sqlite_text() -> None:
    """UTCDateTime's SQLite text is the text SQLAlchemy's DATETIME wrote before it, so rows
    written by either compare and sort alike."""
    from sqlalchemy.dialects import sqlite

    dialect = sqlite.dialect()
    reference = sqlite.DATETIME().bind_processor(dialect)  # type: ignore[no-untyped-call]
    ours = UTCDateTime().bind_processor(dialect)
    assert reference is not None and ours is not None
    rng = random.Random(7)
    for _ in range(20_000):
        naive = dt.datetime(1, 1, 1) + dt.timedelta(microseconds=rng.randrange(3 * 10**17))
        if rng.random() < 0.2:
            naive = naive.replace(microsecond=0)
        assert ours(naive.replace(tzinfo=UTC)) == reference(naive)


def test_job_columns_are_the_columns_of_a_new_job_row() -> None:
    row = rows.job_row(rows.FiringTask(1, "t", True, 100), trigger="SCHEDULER", lane=1, now=T0)
    assert tuple(row) == hot.JOB_COLUMNS


def test_timestamps_convert_as_protobuf_does() -> None:
    rng = random.Random(3)
    hours = (0, 5.5, -8)
    zones = [dt.timezone(dt.timedelta(hours=h)) for h in hours]
    for _ in range(20_000):
        when = dt.datetime(1, 1, 2, tzinfo=UTC) + dt.timedelta(
            microseconds=rng.randrange(3 * 10**17)
        )
        when = when.astimezone(rng.choice(zones))
        expected = timestamp_pb2.Timestamp()
        expected.FromDatetime(when.astimezone(UTC))
        assert ts(when) == expected


def test_cached_next_fire_times_are_exact_for_every_zone_of_the_instant() -> None:
    """The next-fire cache is keyed by the UTC instant: the same instant given in another
    zone (or fold) gets the same answer as computing it afresh."""
    from zoneinfo import ZoneInfo

    from tickwork.cron import CronSchedule

    record = ScheduleRecord(
        id=1,
        name="s",
        description="",
        cron_expression="30 2 * * *",
        interval_seconds=0,
        timezone="Europe/Berlin",
        catch_up_policy="SKIP",
        enabled=True,
        next_run_at=None,
        last_run_at=None,
        created_at=T0,
        updated_at=T0,
        task_ids=(),
        task_names=(),
    )
    fresh = CronSchedule("30 2 * * *", "Europe/Berlin")
    instant = dt.datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
    for zone in (UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")):
        for step in range(48):
            after = (instant + dt.timedelta(minutes=30 * step)).astimezone(zone)
            expected = fresh.next_fire_time(after)
            assert expected is not None
            assert next_cron_fire(record, after) == expected.astimezone(UTC)


async def test_when_remembers_utc_instants_only_and_keeps_a_repeated_hour_apart(
    database: Database,
) -> None:
    """Bulk.when converts each UTC instant once; a zoned value is converted every time,
    since 01:30 twice on a fall-back night (fold 0 and 1) compare equal in Python."""
    berlin = ZoneInfo("Europe/Berlin")
    first = dt.datetime(2026, 10, 25, 2, 30, tzinfo=berlin)  # CEST, 00:30 UTC
    second = first.replace(fold=1)  # CET, 01:30 UTC
    assert first == second  # same zone: fold is ignored by comparison

    def convert(conn: sa.Connection) -> list[Any]:
        bulk = Bulk(conn)
        return [bulk.when(first), bulk.when(second), bulk.when(T0), bulk.when(T0), bulk.when(None)]

    got = await database.read(convert)
    sqlite = database.dialect.name == "sqlite"
    expected = [
        db.stored_datetime(first, sqlite=sqlite),
        db.stored_datetime(second, sqlite=sqlite),
        db.stored_datetime(T0, sqlite=sqlite),
        db.stored_datetime(T0, sqlite=sqlite),
        None,
    ]
    assert got == expected
    assert got[0] != got[1]  # an hour apart, not the first one remembered twice
