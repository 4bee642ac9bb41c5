"""Explicit migrations (``tickwork db upgrade`` / ``tickwork db current``) on both backends,
``serve`` refusing a schema newer than it knows, and replicas migrating an empty database
together (PostgreSQL only: SQLite is single-process)."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from scheduler_svc import migrate
from scheduler_svc.db import Database
from scheduler_svc.migrate import head_revision
from scheduler_svc.schema import fires, jobs, metadata, schedule_tasks, schedules, tasks
from scheduler_svc.store import hot
from tests.databases import PG_ADMIN, run_sql
from tests.harness import REPO, Server, base_env
from tests.test_replicas import REPLICA_ENV, Replicas, pg_url  # noqa: F401 - pg_url is a fixture

FUTURE = "9999_from_a_newer_tickwork"
HEAD = head_revision()


def tickwork_db(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``tickwork db ARGS`` with DATABASE_URL set; bounded in time."""
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "db", *args],
        env=base_env(DATABASE_URL=database_url),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def revisions(database_url: str) -> list[str]:
    return [r[0] for r in run_sql(database_url, "SELECT version_num FROM alembic_version")]


def test_db_upgrade_and_current(database_url: str) -> None:
    before = tickwork_db(database_url, "current")
    assert (before.returncode, before.stderr) == (0, "")
    assert before.stdout.startswith("none (")  # an empty database (or no SQLite file yet)

    upgraded = tickwork_db(database_url, "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"upgraded from none to {HEAD} (head)" in upgraded.stdout
    assert revisions(database_url) == [HEAD]
    leases = run_sql(database_url, "SELECT name, holder, token FROM leases ORDER BY name")
    assert leases == [("scheduler", "", 0), ("worker", "", 0)]

    again = tickwork_db(database_url, "upgrade")
    assert again.returncode == 0, again.stderr
    assert f"already at revision {HEAD} (head)" in again.stdout

    current = tickwork_db(database_url, "current")
    assert (current.returncode, current.stdout, current.stderr) == (0, f"{HEAD} (head)\n", "")


def test_serve_refuses_a_schema_newer_than_it_knows(tmp_path: Path, database_url: str) -> None:
    assert tickwork_db(database_url, "upgrade").returncode == 0
    run_sql(database_url, "UPDATE alembic_version SET version_num = :v", v=FUTURE)

    server = Server(tmp_path, database_url=database_url)
    try:
        code = server.popen.wait(60)
    finally:
        server.stop()
    output = server.output()
    assert code != 0, output
    assert (
        f"error: database schema is at revision {FUTURE}, which this tickwork does not know"
        in output
    )
    assert f"newest known: {HEAD}" in output
    assert "Traceback" not in output

    current = tickwork_db(database_url, "current")
    assert current.returncode == 1
    assert f"revision {FUTURE}, which this tickwork does not know" in current.stderr
    upgrade = tickwork_db(database_url, "upgrade")
    assert upgrade.returncode == 1
    assert f"revision {FUTURE}, which this tickwork does not know" in upgrade.stderr
    assert revisions(database_url) == [FUTURE]  # refused, not touched


def test_db_commands_report_an_unreachable_database() -> None:
    url = "postgresql+asyncpg://tickwork:secret@127.0.0.1:1/nowhere"
    result = tickwork_db(url, "current")
    assert result.returncode == 1
    assert "cannot reach the database at postgresql+asyncpg://tickwork:***@127.0.0.1:1/nowhere" in (
        result.stderr
    )
    assert "secret" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("action", ["current", "upgrade"])
def test_db_commands_report_a_missing_database_in_one_line(action: str) -> None:
    """A PostgreSQL server that answers but has no such database: one line, as serve says
    it (not SQLAlchemy's text with its "Background on this error" link on a second line)."""
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    name = f"tw_test_missing_{uuid.uuid4().hex[:12]}"
    result = tickwork_db(f"{base}/{name}", action)
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach the database at postgresql+asyncpg://"), line
    assert f'database "{name}" does not exist' in line, line
    assert "sqlalche.me" not in line, line


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql+asyncpg://tickwork:secret@127.0.0.1:notaport/test", "the port"),
        ("postgresql+asyncpg://127.0.0.1:99999/test", "the port"),
        ("sqlite+aiosqlite://", "SQLite needs a database file"),
        ("sqlite+aiosqlite:///:memory:", "SQLite needs a database file"),
        ("mysql://127.0.0.1/test", "unsupported driver"),
        ("not a url", "not a database URL"),
    ],
)
@pytest.mark.parametrize("action", ["current", "upgrade"])
def test_db_commands_refuse_a_bad_database_url_in_one_line(
    action: str, url: str, says: str
) -> None:
    """As ``tickwork serve`` does: exit 2, one line naming DATABASE_URL, no traceback."""
    result = tickwork_db(url, action)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: DATABASE_URL: "), result.stderr
    assert says in lines[0] and "secret" not in result.stderr
    assert result.stdout == ""


def test_replicas_started_together_migrate_an_empty_database_once(
    tmp_path: Path,
    pg_url: str,  # noqa: F811 - the fixture
) -> None:
    """Three ``serve`` processes started at once on an empty PostgreSQL database: one
    creates the schema under the migration lock, the others wait and find it current."""
    replicas = Replicas(tmp_path, pg_url, 3, REPLICA_ENV)
    try:
        replicas.wait_healthy()
    finally:
        codes = replicas.stop()
    assert codes == [0, 0, 0]
    assert revisions(pg_url) == [HEAD]
    assert len(run_sql(pg_url, "SELECT name FROM leases")) == 2


def _migrated_schema_diff(database_url: str) -> list[object]:
    """Migrate ``database_url`` to head; what Alembic finds different from the tables."""

    async def diff() -> list[object]:
        db = Database(database_url)
        try:
            await migrate.upgrade(db)
            return await db.read(
                lambda c: list(compare_metadata(MigrationContext.configure(c), metadata))
            )
        finally:
            await db.dispose()

    return asyncio.run(diff())


def test_migrations_build_exactly_the_tables_the_code_declares(database_url: str) -> None:
    # A change to scheduler_svc/db.py without its migration (or the reverse) shows here.
    assert _migrated_schema_diff(database_url) == []


def test_taking_the_next_job_reads_the_queue_index_without_sorting(tmp_path: Path) -> None:
    # ix_jobs_queue is in the queue's order (priority descending): SQLite reads the first
    # entry instead of sorting the whole queue on every claim (a cost that grew with depth).
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    assert _migrated_schema_diff(url) == []
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            compiled = hot.NEXT_READY.compile(conn)
            params = compiled.construct_params({"now": "2030-01-01 00:00:00.000000", "b_slot": 0})
            plan = conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled}",
                tuple(params[name] for name in compiled.positiontup or ()),
            ).all()
    finally:
        engine.dispose()
    details = " / ".join(str(row[-1]) for row in plan)
    assert "ix_jobs_queue" in details
    assert "TEMP B-TREE" not in details, details


# -- 0003: ids are never reused (SQLite AUTOINCREMENT) -----------------------------------------

R = TypeVar("R")
T0 = dt.datetime(2026, 6, 1, 10, 0, tzinfo=dt.UTC)
ID_TABLES = ("tasks", "schedules", "jobs", "fires")
OUR_TABLES = ("tasks", "schedules", "schedule_tasks", "jobs", "fires", "leases")


def _write(database_url: str, fn: Callable[[sa.Connection], R]) -> R:
    """``fn(conn)`` in one write transaction of the service's own :class:`Database` (on
    SQLite: foreign keys on, BEGIN IMMEDIATE)."""

    async def go() -> R:
        db = Database(database_url)
        try:
            return await db.write(fn)
        finally:
            await db.dispose()

    return asyncio.run(go())


def _migrate(database_url: str, revision: str, *, down: bool = False) -> None:
    """Migrate up (or ``down``) to ``revision`` as the service migrates: in one transaction
    on the service's own connection (see :func:`_write`)."""

    def run(conn: sa.Connection) -> None:
        cfg = migrate.alembic_config()
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)

    _write(database_url, run)


def _sqlite_url(tmp_path: Path, name: str) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / name}"


def _sqlite_schema(database_url: str) -> dict[str, dict[str, Any]]:
    """Each table as SQLite itself describes it: columns, foreign keys (with ON DELETE),
    indexes (unique, partial, columns with their order and direction, the SQL with its
    WHERE) and whether its ids are AUTOINCREMENT."""
    engine = sa.create_engine(database_url.replace("+aiosqlite", ""))
    out: dict[str, dict[str, Any]] = {}
    try:
        with engine.connect() as conn:

            def rows(sql: str) -> list[tuple[Any, ...]]:
                return [tuple(r) for r in conn.exec_driver_sql(sql).all()]

            for name, sql in rows(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
                " AND name NOT IN ('sqlite_sequence', 'alembic_version')"
            ):
                indexes = {}
                for _, index, unique, origin, partial in rows(f"PRAGMA index_list({name})"):
                    [(index_sql,)] = rows(
                        f"SELECT coalesce(sql, '') FROM sqlite_master WHERE name = '{index}'"
                    )
                    indexes[index] = (
                        unique,
                        origin,
                        partial,
                        rows(f"PRAGMA index_xinfo({index})"),
                        " ".join(index_sql.split()),
                    )
                out[name] = {
                    "columns": rows(f"PRAGMA table_xinfo({name})"),
                    "foreign_keys": sorted(rows(f"PRAGMA foreign_key_list({name})")),
                    "indexes": indexes,
                    "autoincrement": "AUTOINCREMENT" in sql.upper(),
                }
    finally:
        engine.dispose()
    return out


def _with_autoincrement(schema: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``schema`` as 0003 is to leave it: the same but for AUTOINCREMENT on the id tables."""
    out = copy.deepcopy(schema)
    for name in ID_TABLES:
        out[name]["autoincrement"] = True
    return out


def _all_rows(database_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of ours (all columns, ids included)."""
    return {t: run_sql(database_url, f"SELECT * FROM {t} ORDER BY rowid") for t in OUR_TABLES}


def _sequences(database_url: str) -> dict[str, int]:
    """SQLite's AUTOINCREMENT counters: the largest id handed out, per table."""
    rows = run_sql(database_url, "SELECT name, seq FROM sqlite_sequence")
    return {str(name): int(seq) for name, seq in rows}


def _new_task(conn: sa.Connection, name: str, **row: Any) -> int:
    values = {"name": name, "handler": "shell", "params": {}, "created_at": T0, "updated_at": T0}
    return int(conn.execute(tasks.insert().values(values | row).returning(tasks.c.id)).scalar_one())


def _new_schedule(conn: sa.Connection, name: str, **row: Any) -> int:
    values = {"name": name, "interval_seconds": 60, "created_at": T0, "updated_at": T0}
    stmt = schedules.insert().values(values | row).returning(schedules.c.id)
    return int(conn.execute(stmt).scalar_one())


def _new_job(conn: sa.Connection, task_id: int, status: str, **row: Any) -> int:
    values = {"task_id": task_id, "task_name": f"task {task_id}", "status": status}
    values |= {"trigger": "SCHEDULER", "lane": 1, "task_priority": 100, "enqueued_at": T0}
    return int(conn.execute(jobs.insert().values(values | row).returning(jobs.c.id)).scalar_one())


def _new_fire(conn: sa.Connection, schedule_id: int, runs: list[Any], minute: int = 0) -> int:
    values = {"schedule_id": schedule_id, "outcome": "FIRED", "runs": runs, "recorded_at": T0}
    values["fire_time"] = T0 + dt.timedelta(minutes=minute)
    return int(conn.execute(fires.insert().values(values).returning(fires.c.id)).scalar_one())


def _fill(conn: sa.Connection) -> None:
    """Rows of every kind, as a database in use holds them. The newest task, job, schedule
    and fire were deleted (cascades, foreign keys on) and some rows still name them: job 3
    schedule 3, fire 2 task 4 and job 5."""
    assert [_new_task(conn, n) for n in ("keep", "busy", "other", "newest")] == [1, 2, 3, 4]
    assert [_new_schedule(conn, n) for n in ("s1", "s2", "s-newest")] == [1, 2, 3]
    conn.execute(
        schedule_tasks.insert(),
        [
            {"schedule_id": 1, "task_id": 1, "position": 0},
            {"schedule_id": 1, "task_id": 3, "position": 1},
            {"schedule_id": 2, "task_id": 2, "position": 0},
            {"schedule_id": 3, "task_id": 4, "position": 0},
        ],
    )
    assert _new_job(conn, 1, "FAILED", schedule_id=1, fire_time=T0) == 1
    assert _new_job(conn, 1, "QUEUED", retry_of_job_id=1, not_before=T0) == 2
    assert _new_job(conn, 2, "RUNNING", schedule_id=3, worker_id="w", lease_token="x") == 3
    assert _new_job(conn, 3, "SUCCEEDED", output_tail="ok", started_at=T0) == 4
    assert _new_job(conn, 4, "QUEUED") == 5
    runs = [{"task_id": 4, "task_name": "newest", "job_id": 5, "skip_reason": None}]
    assert [_new_fire(conn, 1, []), _new_fire(conn, 2, runs), _new_fire(conn, 3, [])] == [1, 2, 3]
    conn.execute(schedules.delete().where(schedules.c.id == 3))  # and fire 3, a link
    conn.execute(tasks.delete().where(tasks.c.id == 4))  # and job 5, a link
    assert conn.execute(sa.select(jobs.c.id).order_by(jobs.c.id)).scalars().all() == [1, 2, 3, 4]
    assert conn.execute(sa.select(fires.c.id).order_by(fires.c.id)).scalars().all() == [1, 2]
    assert conn.execute(sa.select(sa.func.count()).select_from(schedule_tasks)).scalar() == 3


def _assert_new_ids_are_past_every_id_still_named(database_url: str) -> None:
    """New rows get ids above every id that any row still names (0003's seeds)."""

    def insert(conn: sa.Connection) -> list[int]:
        return [
            _new_task(conn, "after"),
            _new_schedule(conn, "s-after"),
            _new_job(conn, 3, "QUEUED"),
            _new_fire(conn, 1, [], minute=1),
        ]

    task, schedule, job, fire = _write(database_url, insert)
    assert task == 5  # task 4 is deleted, but fire 2 names it
    assert schedule == 4  # schedule 3 is deleted, but job 3 names it
    assert job == 6  # job 5 is deleted, but fire 2 names it
    # Fire 3 went with its schedule and nothing names it: its id cannot be known (0003's
    # docstring says so); the new one is above every fire left.
    assert fire == 3


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_0002_sqlite_database_upgrades_with_its_rows_indexes_and_foreign_keys(
    database_url: str,
) -> None:
    _migrate(database_url, "0002")
    at_0002 = _sqlite_schema(database_url)
    assert not any(t["autoincrement"] for t in at_0002.values())
    _write(database_url, _fill)
    rows = _all_rows(database_url)

    _migrate(database_url, "0003")
    assert _all_rows(database_url) == rows  # ids and every column kept
    assert _sqlite_schema(database_url) == _with_autoincrement(at_0002)
    assert _sequences(database_url) == {"tasks": 4, "schedules": 3, "jobs": 5, "fires": 2}
    assert _migrated_schema_diff(database_url) == []  # as the service upgrades on start
    assert revisions(database_url) == [HEAD]

    _assert_new_ids_are_past_every_id_still_named(database_url)

    # The partial unique index still holds: task 2 has a running job.
    with pytest.raises(sa.exc.IntegrityError):
        _write(database_url, lambda conn: _new_job(conn, 2, "QUEUED"))
    _write(database_url, lambda conn: _new_job(conn, 2, "FAILED"))
    # The foreign keys still cascade, to the copied rows.
    _write(database_url, lambda conn: conn.execute(tasks.delete().where(tasks.c.id == 1)))
    assert run_sql(database_url, "SELECT id FROM jobs WHERE task_id = 1") == []
    assert run_sql(database_url, "SELECT task_id FROM schedule_tasks ORDER BY task_id") == [
        (2,),
        (3,),
    ]
    _write(database_url, lambda conn: conn.execute(schedules.delete().where(schedules.c.id == 1)))
    assert run_sql(database_url, "SELECT schedule_id FROM fires") == [(2,)]
    assert run_sql(database_url, "SELECT schedule_id FROM schedule_tasks") == [(2,)]
    assert run_sql(database_url, "PRAGMA foreign_key_check") == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_0003_downgrades_to_0002_and_upgrades_again_with_its_rows(database_url: str) -> None:
    _migrate(database_url, "0002")
    at_0002 = _sqlite_schema(database_url)
    _write(database_url, _fill)
    rows = _all_rows(database_url)
    _migrate(database_url, "0003")
    assert _sqlite_schema(database_url) == _with_autoincrement(at_0002)

    _migrate(database_url, "0002", down=True)
    assert revisions(database_url) == ["0002"]
    assert _sqlite_schema(database_url) == at_0002
    assert _all_rows(database_url) == rows
    assert _sequences(database_url) == {}

    _migrate(database_url, "0003")
    assert _sqlite_schema(database_url) == _with_autoincrement(at_0002)
    assert _all_rows(database_url) == rows
    _migrate(database_url, "head")
    _assert_new_ids_are_past_every_id_still_named(database_url)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_0004_adds_the_task_limits_as_no_limit_and_downgrades_with_the_rows(
    database_url: str,
) -> None:
    _migrate(database_url, "0003")
    _write(database_url, _fill)
    rows = _all_rows(database_url)
    _migrate(database_url, "head")
    limits = run_sql(
        database_url, "SELECT DISTINCT memory_limit_bytes, cpu_limit_seconds FROM tasks"
    )
    assert [tuple(row) for row in limits] == [(0, 0)]
    _migrate(database_url, "0003", down=True)
    assert revisions(database_url) == ["0003"]
    assert _all_rows(database_url) == rows


def test_0007_adds_the_run_options_as_none_and_downgrades_with_the_rows(
    database_url: str,
) -> None:
    _migrate(database_url, "0006")
    _write(database_url, _fill)
    before = run_sql(database_url, "SELECT * FROM jobs ORDER BY id")
    _migrate(database_url, "0007")
    added = run_sql(
        database_url,
        "SELECT DISTINCT params_override IS NULL, labels IS NULL, requested_by, stopped_by"
        " FROM jobs",
    )
    assert [tuple(row) for row in added] == [(True, True, "", "")]
    # A new job may carry them.
    job = _write(
        database_url,
        lambda conn: _new_job(conn, 3, "QUEUED", labels={"a": "b"}, requested_by="ops"),
    )
    assert run_sql(database_url, f"SELECT requested_by FROM jobs WHERE id = {job}") == [("ops",)]
    _write(database_url, lambda conn: conn.execute(jobs.delete().where(jobs.c.id == job)))
    _migrate(database_url, "0006", down=True)
    assert revisions(database_url) == ["0006"]
    assert run_sql(database_url, "SELECT * FROM jobs ORDER BY id") == before
    _migrate(database_url, "head")
    assert _migrated_schema_diff(database_url) == []


def test_sqlite_tables_never_reuse_ids_as_the_code_declares(tmp_path: Path) -> None:
    # compare_metadata does not see AUTOINCREMENT: here the migrated schema is compared
    # with the one db.py's tables create, as SQLite itself describes both.
    migrated = _sqlite_url(tmp_path, "migrated.db")
    assert _migrated_schema_diff(migrated) == []
    declared = _sqlite_url(tmp_path, "declared.db")
    engine = sa.create_engine(declared.replace("+aiosqlite", ""))
    try:
        metadata.create_all(engine)
    finally:
        engine.dispose()
    schema = _sqlite_schema(migrated)
    assert schema == _sqlite_schema(declared)
    assert {name for name, t in schema.items() if t["autoincrement"]} == set(ID_TABLES)


async def test_an_id_is_not_reused_after_the_newest_row_is_deleted(database: Database) -> None:
    """On the migrated schema, for each table whose ids the API shows: after the newest
    row is deleted, the next row gets a new id (PostgreSQL's sequences always did)."""

    def ids(conn: sa.Connection) -> list[tuple[int, int]]:
        out = []
        task = _new_task(conn, "a")
        newest = _new_task(conn, "b")
        conn.execute(tasks.delete().where(tasks.c.id == newest))
        out.append((newest, _new_task(conn, "c")))

        _new_schedule(conn, "s1")
        newest = _new_schedule(conn, "s2")
        conn.execute(schedules.delete().where(schedules.c.id == newest))
        schedule = _new_schedule(conn, "s3")
        out.append((newest, schedule))

        _new_job(conn, task, "SUCCEEDED")
        newest = _new_job(conn, task, "FAILED")
        conn.execute(jobs.delete().where(jobs.c.id == newest))
        out.append((newest, _new_job(conn, task, "QUEUED")))

        _new_fire(conn, schedule, [], minute=0)
        newest = _new_fire(conn, schedule, [], minute=1)
        conn.execute(fires.delete().where(fires.c.id == newest))
        out.append((newest, _new_fire(conn, schedule, [], minute=2)))
        return out

    for deleted, new in await database.write(ids):
        assert new > deleted


def test_0012_adds_labels_and_pause_fields_empty_and_downgrades_with_the_rows(
    database_url: str,
) -> None:
    _migrate(database_url, "0009")
    _write(database_url, _fill)
    before = _rows_by_first_column(database_url)
    _migrate(database_url, "0012")
    for table, past in (("tasks", "disabled"), ("schedules", "paused")):
        added = run_sql(
            database_url,
            f"SELECT DISTINCT CAST(labels AS TEXT), {past}_until IS NULL, {past}_by,"
            f" {past}_at IS NULL"
            f" FROM {table}",
        )
        assert [(json.loads(r[0]), *r[1:]) for r in added] == [({}, True, "", True)]
    assert run_sql(database_url, "SELECT DISTINCT catch_up_on_resume FROM schedules") in (
        [(False,)],
        [(0,)],
    )
    _migrate(database_url, "0009", down=True)
    assert _rows_by_first_column(database_url) == before
    _migrate(database_url, "head")
    assert _migrated_schema_diff(database_url) == []


def _rows_by_first_column(database_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of ours, on either backend (ordered by the first column)."""
    return {t: run_sql(database_url, f"SELECT * FROM {t} ORDER BY 1, 2") for t in OUR_TABLES}
