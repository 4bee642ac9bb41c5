"""Recording a job's outcome and starting the next job (``Store.finish_job`` with
``claim_next_for``), as the worker stream does after every job.

On PostgreSQL a success with nothing to follow it is one statement, its own transaction
(``_succeed_and_start_next``); everything else is the general transaction. Each case here
runs on both backends and states what must hold whichever way it went; the PostgreSQL
cases also check which way it went, and that concurrent outcomes never start two jobs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools

import asyncpg
import pytest
import sqlalchemy as sa

from scheduler_svc.db import Database
from scheduler_svc.records import FinishResult, JobRecord
from scheduler_svc.schema import jobs, tasks
from scheduler_svc.store import Store, finish, hot
from scheduler_svc.store.driver import Prepared
from scheduler_svc.values import JobStatus, Trigger

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, 250000, tzinfo=UTC)
T1 = T0 + dt.timedelta(seconds=3)
TTL = 30.0


async def _store_with_queue(db: Database, *names: str, priority: int = 100) -> Store:
    """Tasks ``names`` (queued in this order), the worker lease held by ``w``."""
    s = Store(db)
    ids = []
    for name in names:
        task = await s.create_task(
            {
                "name": name,
                "handler": "shell",
                "params": {"argv": ["true"]},
                "task_priority": priority,
            },
            T0,
        )
        ids.append(task.id)
    await s.acquire_lease("worker", "w", T0, 3600)
    await s.enqueue(ids, Trigger.API, T0)
    return s


async def _start(s: Store) -> JobRecord:
    claimed = await s.claim_next_job("w", T0, TTL, worker_lease_holder="w")
    assert claimed is not None
    return claimed[0]


async def _succeed(
    s: Store, job: JobRecord, *, tail: str = "", token: str = "", error: str = ""
) -> FinishResult:
    return await s.finish_job(
        job.id,
        token or job.lease_token or "",
        JobStatus.SUCCEEDED,
        error,
        tail,
        T1,
        auto_disable_count=3,
        claim_next_for="w",
        lease_ttl_s=TTL,
    )


async def _one_statement(s: Store, job: JobRecord) -> FinishResult | None:
    """The one-statement path alone (PostgreSQL): what it did, or None if it declined."""
    return await s.db.write_one(
        lambda conn: finish.succeed_and_start_next(
            conn, job.id, job.lease_token or "", "", "", T1, "w", TTL
        )
    )


async def _rows(db: Database) -> list[tuple[str, str]]:
    rows = await db.read(
        lambda conn: conn.execute(
            sa.select(jobs.c.task_name, jobs.c.status).order_by(jobs.c.id)
        ).all()
    )
    return [(r.task_name, r.status) for r in rows]


async def test_a_success_finishes_the_job_and_starts_the_next_in_queue_order(
    database: Database,
) -> None:
    s = await _store_with_queue(database, "a", "b", "c")
    urgent = await s.create_task(
        {"name": "urgent", "handler": "shell", "params": {"argv": ["true"]}, "task_priority": 500},
        T0,
    )
    first = await _start(s)
    await s.enqueue([urgent.id], Trigger.API, T0 + dt.timedelta(seconds=1))  # later, but higher
    result = await _succeed(s, first, tail="all good: ü")
    assert result.accepted and not result.repeat and result.job is not None
    assert result.job.status == "SUCCEEDED" and result.job.finished_at == T1
    assert result.job.output_tail == "all good: ü" and result.job.lease_expires_at is None
    assert result.job.error == "" and result.retry is None and result.anchored_next_run is None
    assert result.next_job is not None
    started, task = result.next_job
    assert (started.task_name, task.name, task.task_priority) == ("urgent", "urgent", 500)
    assert started.status == "RUNNING" and started.worker_id == "w"
    assert started.started_at == T1 and started.lease_expires_at == T1 + dt.timedelta(seconds=TTL)
    assert started.lease_token and started.lease_token != first.lease_token
    assert await _rows(database) == [
        ("a", "SUCCEEDED"),
        ("b", "QUEUED"),
        ("c", "QUEUED"),
        ("urgent", "RUNNING"),
    ]
    stored = await s.get_job(started.id)
    assert stored == started  # what the worker is sent is what is stored
    if database.dialect.writable_ctes:
        again = await s.finish_job(
            started.id, started.lease_token or "", JobStatus.SUCCEEDED, "", "", T1,
            auto_disable_count=3, claim_next_for="w", lease_ttl_s=TTL,
        )  # fmt: skip
        assert again.next_job is not None and again.next_job[0].task_name == "b"
        # ... and that one went the one-statement way: it declines only what it must.
        last = again.next_job[0]
        done = await _one_statement(s, last)
        assert done is not None and done.next_job is not None
        assert done.next_job[0].task_name == "c"


async def test_an_empty_tail_keeps_what_the_jobs_log_lines_stored(database: Database) -> None:
    s = await _store_with_queue(database, "a", "b")
    job = await _start(s)
    assert await s.append_output(job.id, job.lease_token or "", "streamed\n")
    result = await _succeed(s, job, tail="")
    assert result.job is not None and result.job.output_tail == "streamed\n"


async def test_with_nothing_queued_the_job_finishes_and_none_starts(database: Database) -> None:
    s = await _store_with_queue(database, "only")
    job = await _start(s)
    result = await _succeed(s, job)
    assert result.accepted and result.job is not None and result.job.status == "SUCCEEDED"
    assert result.next_job is None
    assert await _rows(database) == [("only", "SUCCEEDED")]


async def test_a_session_without_the_worker_lease_records_the_outcome_and_starts_nothing(
    database: Database,
) -> None:
    s = await _store_with_queue(database, "a", "b")
    job = await _start(s)
    await s.release_lease("worker", "w", T0)
    await s.acquire_lease("worker", "other", T0, 3600)
    result = await _succeed(s, job)
    assert result.accepted and result.job is not None and result.job.status == "SUCCEEDED"
    assert result.next_job is None
    assert await _rows(database) == [("a", "SUCCEEDED"), ("b", "QUEUED")]


async def test_a_success_after_failures_resets_the_tasks_count(database: Database) -> None:
    s = await _store_with_queue(database, "a", "b")
    await database.write(
        lambda conn: conn.execute(
            tasks.update().where(tasks.c.name == "a").values(consecutive_failure_count=2)
        )
    )
    job = await _start(s)
    if database.dialect.writable_ctes:
        assert await _one_statement(s, job) is None  # a follow-up: not its to do
        assert await _rows(database) == [("a", "RUNNING"), ("b", "QUEUED")]  # untouched
    result = await _succeed(s, job)
    assert result.accepted and result.next_job is not None
    assert (await s.get_task_by_name("a")).consecutive_failure_count == 0
    assert await _rows(database) == [("a", "SUCCEEDED"), ("b", "RUNNING")]


async def _scheduled_job(s: Store, db: Database, *, interval: bool) -> JobRecord:
    task = await s.get_task_by_name("a")
    values: dict[str, object] = {"name": "every", "timezone": "UTC", "next_run_at": T0}
    if interval:
        values["interval_seconds"] = 600
    else:
        values["cron_expression"] = "*/5 * * * *"
    schedule = await s.create_schedule(values, [task.id], T0)
    await db.write(
        lambda conn: conn.execute(
            jobs.update().where(jobs.c.task_name == "a").values(schedule_id=schedule.id)
        )
    )
    return await _start(s)


async def test_an_interval_schedules_next_run_is_anchored_to_the_finish(
    database: Database,
) -> None:
    s = await _store_with_queue(database, "a", "b")
    job = await _scheduled_job(s, database, interval=True)
    if database.dialect.writable_ctes:
        assert await _one_statement(s, job) is None  # a follow-up: not its to do
    result = await _succeed(s, job)
    assert result.anchored_next_run == T1 + dt.timedelta(seconds=600)
    assert result.next_job is not None and result.next_job[0].task_name == "b"
    schedule = await s.get_schedule_by_name("every")
    assert schedule.next_run_at == T1 + dt.timedelta(seconds=600)


async def test_a_cron_schedules_job_finishes_without_moving_the_schedule(
    database: Database,
) -> None:
    s = await _store_with_queue(database, "a", "b")
    job = await _scheduled_job(s, database, interval=False)
    before = (await s.get_schedule_by_name("every")).next_run_at
    result = await (_one_statement(s, job) if database.dialect.writable_ctes else _succeed(s, job))
    assert result is not None and result.anchored_next_run is None
    assert result.next_job is not None and result.next_job[0].task_name == "b"
    assert (await s.get_schedule_by_name("every")).next_run_at == before


async def test_a_stale_token_is_a_late_outcome_and_a_repeat_changes_nothing(
    database: Database,
) -> None:
    s = await _store_with_queue(database, "a", "b")
    job = await _start(s)
    stale = await _succeed(s, job, token="not-the-token")
    assert not stale.accepted and stale.next_job is None
    assert stale.job is not None and stale.job.late_outcome.startswith("SUCCEEDED at ")
    assert await _rows(database) == [("a", "RUNNING"), ("b", "QUEUED")]
    first = await _succeed(s, job)
    assert first.accepted and not first.repeat and first.next_job is not None
    repeat = await _succeed(s, job)
    assert repeat.accepted and repeat.repeat and repeat.next_job is None
    assert await _rows(database) == [("a", "SUCCEEDED"), ("b", "RUNNING")]


async def test_a_success_keeps_the_error_text_it_was_sent_and_its_repeat_is_a_repeat(
    database: Database,
) -> None:
    """Outcome.error is free text on any outcome; a worker that reports it again after a
    broken stream is recognized by (token, status, error), on both backends alike."""
    s = await _store_with_queue(database, "a", "b")
    job = await _start(s)
    first = await _succeed(s, job, error="finished with warnings")
    assert first.accepted and not first.repeat and first.next_job is not None
    assert first.job is not None and first.job.error == "finished with warnings"
    repeat = await _succeed(s, job, error="finished with warnings")
    assert repeat.accepted and repeat.repeat and repeat.job is not None
    assert repeat.job.late_outcome == ""


async def _wait_for_a_lock_wait(admin: asyncpg.Connection, database_name: str) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not await admin.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
        database_name,
    ):
        assert asyncio.get_running_loop().time() < deadline, "nothing ever waited on a lock"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_worker_deposed_while_its_outcome_waits_starts_nothing(
    database_url: str, database: Database
) -> None:
    """The outcome's statement waits on the finishing job's row (another session holds
    it); meanwhile the worker lease passes to another worker and commits. Once the row is
    free the outcome is recorded, and no job is started for the deposed worker: the lease
    row is read as it is once locked, not as the statement's snapshot saw it."""
    s = await _store_with_queue(database, "a", "b")
    job = await _start(s)
    dsn = database_url.replace("+asyncpg", "")
    holder, other = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        row_lock = holder.transaction()
        await row_lock.start()
        await holder.execute("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", job.id)
        outcome = asyncio.create_task(_succeed(s, job))
        await _wait_for_a_lock_wait(other, database_url.rsplit("/", 1)[1])
        await other.execute(
            "UPDATE leases SET holder = 'w2', token = token + 1 WHERE name = 'worker'"
        )
        await row_lock.commit()
        result = await outcome
    finally:
        await holder.close()
        await other.close()
    assert result.accepted and result.job is not None and result.job.status == "SUCCEEDED"
    assert result.next_job is None
    assert await _rows(database) == [("a", "SUCCEEDED"), ("b", "QUEUED")]


@pytest.mark.parametrize("rounds", [40])
async def test_concurrent_reports_of_one_outcome_start_one_job(
    database: Database, rounds: int
) -> None:
    """A worker that reconnects reports again while its first report is still being
    recorded (two streams, two connections): one records and starts the next job, the
    other finds it recorded; never two running jobs."""
    s = await _store_with_queue(database, *(f"t{i:02d}" for i in range(rounds + 1)))
    job = await _start(s)
    for _ in range(rounds):
        one, two = await asyncio.gather(_succeed(s, job), _succeed(s, job))
        assert one.accepted and two.accepted
        assert sorted([one.repeat, two.repeat]) == [False, True]
        started = [r.next_job for r in (one, two) if r.next_job is not None]
        assert len(started) == 1
        running = [name for name, status in await _rows(database) if status == "RUNNING"]
        assert running == [started[0][0].task_name]
        job = started[0][0]


async def test_a_claim_racing_an_outcome_never_starts_a_second_job(database: Database) -> None:
    """An idle session's claim (another stream of the same worker) at the same time as an
    outcome with its claim: at most one job runs, whichever wins."""
    s = await _store_with_queue(database, *(f"t{i:02d}" for i in range(61)))
    job = await _start(s)
    for _ in range(30):
        claim = s.claim_next_job("w", T1, TTL, worker_lease_holder="w")
        result, claimed = await asyncio.gather(_succeed(s, job), claim)
        running = [name for name, status in await _rows(database) if status == "RUNNING"]
        assert len(running) == 1
        winner = result.next_job or claimed
        assert winner is not None and not (result.next_job and claimed)
        assert running == [winner[0].task_name]
        job = winner[0]


@pytest.mark.parametrize("queue", [False, True], ids=["main-pool", "queue-pool"])
async def test_write_one_commits_each_statement_and_leaves_the_pool_transactional(
    database: Database, queue: bool
) -> None:
    """After a ``write_one`` the same pooled connection runs :meth:`Database.write` as one
    transaction again: a failure rolls back the statements before it. The queue's pool
    is the worker stream's case: the one-statement success, then a failure's
    transaction."""
    s = await _store_with_queue(database, "a")
    await database.write_one(
        lambda conn: conn.execute(tasks.update().values(description="one statement")),
        queue=queue,
    )

    def two_then_fail(conn: sa.Connection) -> None:
        conn.execute(tasks.update().values(description="rolled back"))
        raise RuntimeError("after the first statement")

    for _ in range(3):  # whichever pooled connection comes back
        with pytest.raises(RuntimeError):
            await database.write(two_then_fail, queue=queue)
    assert (await s.get_task_by_name("a")).description == "one statement"


def _plan(conn: sa.Connection, *, statement: Prepared, params: dict[str, object]) -> str:
    """PostgreSQL's plan for ``statement`` with ``params`` (EXPLAIN; nothing runs)."""
    plan = statement._plan(conn.dialect)
    values = [params[name] if name in params else plan.defaults[name] for name in plan.names]
    values = [v if bind is None else bind(v) for v, bind in zip(values, plan.bind, strict=True)]
    return "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + plan.sql, tuple(values)))


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_taking_a_job_reads_the_queue_index_whatever_the_statistics(
    database: Database,
) -> None:
    """A new jobs table, not yet analyzed, and a burst of 4,000 enqueues: left to its
    statistics the planner reads every queued job and sorts them, for each job taken; on
    the queue's connections the next job is the first ready entry of ix_jobs_queue, and
    nothing is scanned in full."""
    s = await _store_with_queue(database, "a", "b")
    job = await _start(s)
    ids = await database.write(
        lambda conn: list(
            conn.scalars(
                sa.text(
                    "INSERT INTO tasks (name, description, handler, params, task_priority,"
                    " enabled, timeout_seconds, consecutive_failure_count, max_attempts,"
                    " backoff_base_seconds, backoff_cap_seconds, disabled_reason,"
                    " created_at, updated_at) SELECT 'bulk-' || i, '', 'shell', '{}', 100,"
                    " true, 0, 0, 1, 10, 600, '', now(), now()"
                    " FROM generate_series(1, 4000) AS i RETURNING id"
                )
            )
        )
    )
    for start in range(0, len(ids), 500):
        await s.enqueue(ids[start : start + 500], Trigger.API, T0)
    params: dict[str, object] = {
        "now": T1,
        "b_slot": 0,
        "b_lease_name": "worker",
        "b_lease_token": None,
        "b_started_at": T1,
        "b_worker_id": "w",
        "b_token": job.lease_token,
        "b_next_token": "n" * 32,
        "b_expires": T1 + dt.timedelta(seconds=TTL),
        "b_job_id": job.id,
        "b_status": "SUCCEEDED",
        "b_error": "",
        "b_tail": "",
        "b_now": T1,
    }
    statements = [hot.START_NEXT_READY_LOCKED, hot.SUCCEED_AND_START_NEXT]
    for statement in statements:
        explain = functools.partial(_plan, statement=statement, params=params)
        plain = await database.write(explain)
        assert "Sort" in plain  # the case this guards against; else it tests nothing
        queue = await database.write(explain, queue=True)
        assert "Sort" not in queue and "Seq Scan" not in queue, queue
        assert "Index Scan using ix_jobs_queue on jobs" in queue, queue
