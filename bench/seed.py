"""Build big tickwork databases fast: migrate, then insert rows directly with SQLAlchemy.

Used where the API would only be slow setup (the lateness and tick-cost metrics); the bulk
API metric measures the API path itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa

from scheduler_svc import migrate
from scheduler_svc.db import Database
from scheduler_svc.schema import schedule_tasks, schedules, tasks

CHUNK = 20_000


def _task_row(name: str, callable_: str, now: dt.datetime) -> dict[str, object]:
    return {
        "name": name,
        "description": "",
        "handler": "python",
        "params": {"callable": callable_},
        "task_priority": 100,
        "enabled": True,
        "timeout_seconds": 0.0,
        "consecutive_failure_count": 0,
        "max_attempts": 1,
        "backoff_base_seconds": 10.0,
        "backoff_cap_seconds": 600.0,
        "disabled_reason": "",
        "created_at": now,
        "updated_at": now,
    }


async def seed(
    database_url: str,
    *,
    task_count: int,
    cron: Sequence[tuple[str, str]],
    next_runs: Sequence[dt.datetime],
    callable_: str = "bench.noop:noop",
    one_task_each: bool = True,
) -> None:
    """Migrate ``database_url`` and insert ``task_count`` python tasks named ``t-000000``...
    and ``len(next_runs)`` enabled schedules ``s-000000``... with ``cron[i % len(cron)]``
    (expression, zone) and next_run_at ``next_runs[i]``. Schedule i runs task i when
    ``one_task_each`` (then task_count must be at least the schedule count), else task 0.
    """
    now = dt.datetime.now(dt.UTC)
    db = Database(database_url)
    try:
        await migrate.upgrade(db)

        def insert(conn: sa.Connection) -> None:
            for start in range(0, task_count, CHUNK):
                rows = [
                    _task_row(f"t-{i:07d}", callable_, now)
                    for i in range(start, min(task_count, start + CHUNK))
                ]
                conn.execute(tasks.insert(), rows)
            first_task = conn.scalar(sa.select(sa.func.min(tasks.c.id)))
            first_schedule = (conn.scalar(sa.select(sa.func.max(schedules.c.id)))) or 0
            assert first_task is not None
            count = len(next_runs)
            for start in range(0, count, CHUNK):
                stop = min(count, start + CHUNK)
                conn.execute(
                    schedules.insert(),
                    [
                        {
                            "id": first_schedule + 1 + i,
                            "name": f"s-{i:07d}",
                            "description": "",
                            "cron_expression": cron[i % len(cron)][0],
                            "interval_seconds": 0,
                            "timezone": cron[i % len(cron)][1],
                            "catch_up_policy": "SKIP",
                            "enabled": True,
                            "next_run_at": next_runs[i],
                            "last_run_at": None,
                            "created_at": now,
                            "updated_at": now,
                        }
                        for i in range(start, stop)
                    ],
                )
                conn.execute(
                    schedule_tasks.insert(),
                    [
                        {
                            "schedule_id": first_schedule + 1 + i,
                            "task_id": first_task + (i if one_task_each else 0),
                            "position": 0,
                        }
                        for i in range(start, stop)
                    ],
                )

        await db.write(insert)
    finally:
        await db.dispose()


async def set_next_run(database_url: str, when: dt.datetime) -> None:
    """Move every schedule's next_run_at to ``when`` (as an operator would, directly)."""
    db = Database(database_url)
    try:
        await db.write(lambda conn: conn.execute(schedules.update().values(next_run_at=when)))
    finally:
        await db.dispose()
