"""Prepared statements (scheduler_svc.store.driver.Prepared) give exactly what
Connection.execute gives, on both backends: every statement the store prepares, on the
same rows, compared value for value (types included); driver errors are SQLAlchemy's
DBAPIError as Connection.execute raises them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler_svc.db import Database
from scheduler_svc.schema import jobs, leases
from scheduler_svc.store import Store, hot
from scheduler_svc.store.driver import Prepared
from scheduler_svc.values import JobStatus, Trigger

UTC = dt.UTC
T0 = dt.datetime(2026, 3, 29, 0, 30, 0, 123456, tzinfo=UTC)


def _prepared_in_store() -> dict[str, Prepared]:
    return {name: value for name, value in vars(hot).items() if isinstance(value, Prepared)}


async def _seed(db: Database) -> tuple[Store, list[int]]:
    """Tasks of every column shape, two queued jobs (a retry held back by not_before
    comes later) and the worker lease; returns the store and the task ids."""
    s = Store(db)
    a = await s.create_task(
        {
            "name": "a",
            "handler": "python",
            "params": {"callable": "m:f", "kwargs": {"n": [1, 2.5, None, "é"]}},
            "description": "first\nline",
            "task_priority": 7,
            "backoff_base_seconds": 1.5,
            "backoff_cap_seconds": 90.25,
            "timeout_seconds": 12.5,
            "max_attempts": 3,
        },
        T0,
    )
    b = await s.create_task({"name": "b", "handler": "shell", "params": {"argv": ["true"]}}, T0)
    await s.create_task(
        {"name": "off", "handler": "shell", "params": {"argv": ["x"]}, "enabled": False}, T0
    )
    await s.acquire_lease("worker", "w", T0, 3600)
    await s.enqueue([a.id, b.id], Trigger.API, T0)
    return s, [a.id, b.id]


def _compare(
    conn: sa.Connection, cases: dict[str, Prepared], params: dict[str, dict[str, Any]]
) -> None:
    for name, statement in cases.items():
        savepoint = conn.begin_nested()
        rows = conn.execute(statement.statement, params[name]).mappings()  # type: ignore[call-overload]
        expected = [dict(row) for row in rows]
        savepoint.rollback()
        savepoint = conn.begin_nested()
        got = statement.rows(conn, params[name])
        savepoint.rollback()
        assert got, f"{name} returned nothing: the case does not exercise it"
        assert got == expected, name
        for key, value in expected[0].items():
            assert type(got[0][key]) is type(value), (name, key)


async def test_every_prepared_statement_gives_what_connection_execute_gives(
    database: Database,
) -> None:
    s, _ = await _seed(database)
    now = T0 + dt.timedelta(seconds=5)
    start = {
        "now": now,
        "b_slot": 0,
        "b_started_at": now,
        "b_worker_id": "w",
        "b_token": "t" * 32,
        "b_expires": now + dt.timedelta(seconds=30),
    }
    idle: dict[str, dict[str, Any]] = {  # nothing running: the claim's statements
        "LEASE_HOLDER": {"b_lease_name": "worker"},
        "LEASE_HOLDER_LOCKED": {"b_lease_name": "worker"},
        "START_NEXT_READY": start,
        "START_NEXT_READY_LOCKED": start,
    }
    claimed = await s.claim_next_job("w", now, 30, worker_lease_holder="w")
    assert claimed is not None
    running = claimed[0]
    busy: dict[str, dict[str, Any]] = {  # a job running: the finish's statement
        "FINISH_JOB": {
            "b_job_id": running.id,
            "b_token": running.lease_token,
            "b_status": "FAILED",
            "b_error": "boom: ü",
            "b_tail": "",
            "b_now": now + dt.timedelta(seconds=1),
        },
        "SUCCEED_AND_START_NEXT": {  # finishes the running job, starts the other
            **start,
            "b_job_id": running.id,
            "b_token": running.lease_token,
            "b_status": "SUCCEEDED",
            "b_error": "",
            "b_tail": "done: ü",
            "b_now": now + dt.timedelta(seconds=1),
            "b_next_token": "n" * 32,
            "b_lease_name": "worker",
            "b_lease_token": None,
        },
    }
    prepared = _prepared_in_store()
    assert set(prepared) == set(idle) | set(busy), "a new prepared statement needs its case here"
    if database.dialect.name == "sqlite":  # the locked variants and the CTE are PostgreSQL's
        postgresql_only = ("_LOCKED", "SUCCEED_AND_START_NEXT")
        prepared = {k: v for k, v in prepared.items() if not k.endswith(postgresql_only)}

    def compare(conn: sa.Connection) -> None:
        # Back to nothing running for the claim's statements, then the running job again.
        savepoint = conn.begin_nested()
        conn.execute(
            sa.update(jobs).where(jobs.c.id == running.id).values(status="QUEUED", lease_token=None)
        )
        _compare(conn, {k: v for k, v in prepared.items() if k in idle}, idle)
        savepoint.rollback()
        _compare(conn, {k: v for k, v in prepared.items() if k in busy}, busy)

    await database.write(compare)


async def test_a_statement_without_returned_columns_runs_and_returns_nothing(
    database: Database,
) -> None:
    await _seed(database)
    release = Prepared(
        leases.update().where(leases.c.holder == sa.bindparam("b_holder")).values(holder="")
    )

    def run(conn: sa.Connection) -> tuple[list[dict[str, Any]], str | None]:
        rows = release.rows(conn, {"b_holder": "w"})
        return rows, conn.scalar(sa.select(leases.c.holder).where(leases.c.name == "worker"))

    assert await database.write(run) == ([], "")


async def test_driver_errors_are_sqlalchemy_errors_and_roll_back(database: Database) -> None:
    await _seed(database)
    duplicate = Prepared(
        leases.insert().values(
            name=sa.bindparam("b_name"), holder="x", token=0, expires_at=sa.bindparam("b_at")
        )
    )

    def insert_twice(conn: sa.Connection) -> None:
        duplicate.rows(conn, {"b_name": "other", "b_at": T0})
        duplicate.rows(conn, {"b_name": "worker", "b_at": T0})  # the worker lease exists

    with pytest.raises(sa.exc.IntegrityError):
        await database.write(insert_twice)
    names = await database.read(lambda conn: list(conn.scalars(sa.select(leases.c.name))))
    assert "other" not in names and "worker" in names  # the first insert was rolled back
    with pytest.raises(KeyError):
        await database.write(lambda conn: duplicate.rows(conn, {"b_name": "y"}))


async def test_a_job_never_starts_before_it_was_enqueued(database: Database) -> None:
    """The claim's ``now`` is read before its transaction; an enqueue that committed
    meanwhile carries a later instant, and the job's started_at is that instant, never the
    earlier ``now`` (the claim statement computes it, on both backends)."""
    s, _ = await _seed(database)  # enqueued at T0
    claimed = await s.claim_next_job("w", T0 - dt.timedelta(seconds=3), 30, worker_lease_holder="w")
    assert claimed is not None
    assert claimed[0].started_at == claimed[0].enqueued_at == T0
    finished = await s.finish_job(
        claimed[0].id,
        claimed[0].lease_token or "",
        JobStatus.SUCCEEDED,
        "",
        "",
        T0 + dt.timedelta(seconds=1),
        auto_disable_count=0,
        claim_next_for="w",
        lease_ttl_s=30,
    )
    assert finished.next_job is not None
    later = T0 + dt.timedelta(seconds=1)
    assert finished.next_job[0].started_at == later  # now is after the enqueue: now
