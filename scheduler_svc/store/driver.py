"""Statements run on the driver's own connection, for the queue's and the scheduler's hot
paths (the statements themselves are in :mod:`scheduler_svc.store.hot`).

Two ways, both inside the caller's SQLAlchemy transaction:

- :class:`Prepared`: a statement written in SQLAlchemy Core, compiled once per dialect and
  run on the connection's DB-API cursor. Through ``Connection.execute`` each of a job's
  three small statements costs SQLAlchemy's per-call work (compiled-cache lookup, execution
  context, parameter and result processing set up anew, events), several times the query
  itself on SQLite. Parameters go through the column types' own bind processors and the
  returned columns through their result processors, so the values are exactly what
  ``Connection.execute`` gives (``tests/test_prepared.py`` checks every prepared statement
  against it, on both backends).
- :class:`Bulk`: multi-row statements as SQL text, for bursts of fires. SQLAlchemy's
  executemany builds, converts and checks a parameter dict per row, a third of the time to
  record 10,000 fires; :class:`Bulk` writes one statement per chunk of rows and hands the
  driver (sqlite3 or asyncpg) plain tuples, the few value types converted exactly as the
  column types would (:class:`scheduler_svc.db.UTCDateTime`, ``Boolean``, ``JSON``).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from scheduler_svc.db import stored_datetime

__all__ = ["Bulk", "Prepared"]

_Processor = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Plan:
    """A statement compiled for one dialect."""

    sql: str
    names: tuple[str, ...]
    """The bound parameters in the driver's positional order."""
    defaults: Mapping[str, Any]
    """Values fixed in the statement (literals SQLAlchemy binds, LIMIT)."""
    bind: tuple[_Processor, ...]
    columns: tuple[str, ...]
    types: tuple[sa.types.TypeEngine[Any], ...]
    """The returned columns' types, resolved for the dialect."""


class Prepared:
    """A Core statement run on the driver's cursor; see the module docstring."""

    def __init__(self, statement: sa.ClauseElement) -> None:
        """Args:
        statement (sa.ClauseElement): a SELECT, or an INSERT/UPDATE/DELETE (with or without
            RETURNING), whose parameters are named ``bindparam``s with simple types.
        """
        self.statement = statement
        self._plans: dict[type[Dialect], _Plan] = {}
        self._results: dict[type[Dialect], tuple[_Processor, ...]] = {}

    def _plan(self, dialect: Dialect) -> _Plan:
        plan = self._plans.get(type(dialect))
        if plan is not None:
            return plan
        compiled = self.statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        if dialect.paramstyle not in ("qmark", "numeric_dollar") or compiled.positiontup is None:
            raise ValueError(f"unsupported DB-API parameter style {dialect.paramstyle!r}")
        names = tuple(compiled.positiontup)
        binds = {name: compiled.binds[name] for name in names}
        columns = getattr(self.statement, "exported_columns", None)
        selected = list(columns) if columns is not None else []
        plan = _Plan(
            sql=compiled.string,
            names=names,
            defaults={n: b.effective_value for n, b in binds.items() if not b.required},
            bind=tuple(binds[n].type.dialect_impl(dialect).bind_processor(dialect) for n in names),
            columns=tuple(column.key for column in selected),
            types=tuple(column.type.dialect_impl(dialect) for column in selected),
        )
        self._plans[type(dialect)] = plan
        return plan

    def _run(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        plan = self._plan(conn.dialect)
        values = []
        for name, process in zip(plan.names, plan.bind, strict=True):
            value = params[name] if name in params else plan.defaults[name]
            values.append(value if process is None else process(value))
        dbapi_conn = conn.connection.dbapi_connection
        assert dbapi_conn is not None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(plan.sql, tuple(values))
        except BaseException as exc:
            # As Connection.execute would: the driver's error becomes SQLAlchemy's DBAPIError
            # subclass (callers answer UNAVAILABLE); a connection that was lost, or whose
            # statement was cancelled midway (its state unknown), is not reused. The
            # pool's checkout ping (db.py) checks the other pooled connections.
            cursor.close()
            dbapi_error = conn.dialect.loaded_dbapi.Error
            if not isinstance(exc, Exception):
                conn.invalidate(exc)
                raise
            if not isinstance(exc, dbapi_error):
                raise
            lost = conn.dialect.is_disconnect(exc, dbapi_conn, cursor)
            if lost:
                conn.invalidate(exc)
            raise sa.exc.DBAPIError.instance(
                plan.sql,
                tuple(values),
                exc,
                dbapi_error,
                connection_invalidated=lost,
                dialect=conn.dialect,
            ) from exc
        return cursor, plan

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run the statement in ``conn``'s transaction; return every returned row as a dict
        of column key to value, converted as SQLAlchemy converts it.

        Args:
            conn (Connection): a connection in a transaction (SQLite's sqlite3 or asyncpg
                under SQLAlchemy's asyncio bridge).
            params (Mapping[str, Any]): a value for every parameter of the statement.

        Raises:
            KeyError: a parameter without a value.
            sqlalchemy.exc.DBAPIError: the driver's error, wrapped as ``Connection.execute``
                wraps it (OperationalError, IntegrityError, ...).
        """
        cursor, plan = self._run(conn, params)
        try:
            if not plan.columns:
                return []
            raw = cursor.fetchall()
            processors = self._results.get(type(conn.dialect))
            if processors is None:
                # Some processors depend on the driver's type code (asyncpg's numerics).
                dialect = conn.dialect
                processors = tuple(
                    type_.result_processor(dialect, description[1])
                    for type_, description in zip(plan.types, cursor.description, strict=True)
                )
                self._results[type(dialect)] = processors
        finally:
            cursor.close()
        return [
            {
                key: value if process is None else process(value)
                for key, value, process in zip(plan.columns, row, processors, strict=True)
            }
            for row in raw
        ]

    def first(self, conn: Connection, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first returned row (see :meth:`rows`), or None."""
        rows = self.rows(conn, params)
        return rows[0] if rows else None


UTC = dt.UTC

#: Most bound values in one statement (SQLite allows 32,766, PostgreSQL 32,767).
MAX_PARAMS = 30_000


class Bulk:
    """Driver-level multi-row statements on one connection (inside its transaction)."""

    def __init__(self, conn: Connection) -> None:
        """Args:
        conn (Connection): a SQLAlchemy connection to SQLite (sqlite3, ``?`` parameters)
            or PostgreSQL (asyncpg, ``$n`` parameters).

        Raises:
            ValueError: a driver with another parameter style.
        """
        self._conn = conn
        self._sqlite = conn.dialect.name == "sqlite"
        style = conn.dialect.paramstyle
        if style not in ("qmark", "numeric_dollar"):
            raise ValueError(f"unsupported DB-API parameter style {style!r}")
        self._numbered = style == "numeric_dollar"
        self._stored: dict[dt.datetime, Any] = {}
        self._max_params = MAX_PARAMS
        if self._sqlite:  # a library may be built with a lower limit (999 before 3.32)
            raw = conn.connection.dbapi_connection
            limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)  # type: ignore[union-attr]
            self._max_params = min(MAX_PARAMS, limit)

    # -- values, as the column types write and read them ---------------------------------

    def when(self, value: dt.datetime | None) -> Any:
        """An aware datetime as UTCDateTime stores it (:func:`db.stored_datetime`).

        A UTC value is converted once per instant for this object's life: a minute's fires
        share their fire time and their enqueue time, 10,000 rows over a handful of instants.

        Raises:
            ValueError: a naive datetime.
        """
        if value is None or value.tzinfo is not UTC:
            # Only UTC values are remembered: in a zone with a repeated hour, two instants
            # that differ only by ``fold`` compare (and hash) equal.
            return stored_datetime(value, sqlite=self._sqlite)
        stored = self._stored.get(value)
        if stored is None:
            stored = self._stored[value] = stored_datetime(value, sqlite=self._sqlite)
        return stored

    def read_when(self, value: Any) -> dt.datetime | None:
        """A datetime column's raw driver value (text on SQLite) as an aware UTC datetime."""
        if value is None:
            return None
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        assert isinstance(value, dt.datetime)
        return value.replace(tzinfo=UTC)

    def flag(self, value: bool) -> Any:
        """A boolean as the Boolean type stores it (0/1 on SQLite)."""
        return int(value) if self._sqlite else bool(value)

    @staticmethod
    def json(value: Any) -> str:
        """A JSON column's value as its text (json.dumps, as SQLAlchemy's JSON writes it)."""
        return json.dumps(value)

    # -- statements ----------------------------------------------------------------------

    def _marks(self, count: int, start: int) -> str:
        if self._numbered:
            return ", ".join(f"${i}" for i in range(start + 1, start + count + 1))
        return ", ".join("?" * count)

    def insert(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        suffix: str = "",
        returning: Sequence[str] = (),
    ) -> list[tuple[Any, ...]]:
        """``INSERT INTO table (columns) VALUES (...), (...) [suffix] [RETURNING ...]`` in
        chunks of at most :data:`MAX_PARAMS` values (fewer when the SQLite library allows
        fewer).

        Args:
            table (str): the table name (trusted text, never user input).
            columns (Sequence[str]): column names (trusted text).
            rows (Sequence[Sequence[Any]]): one tuple of driver values per row, in
                ``columns`` order (convert with :meth:`when`, :meth:`flag`, :meth:`json`).
            suffix (str): e.g. ``"ON CONFLICT (a, b) DO NOTHING"`` (trusted text).
            returning (Sequence[str]): columns to return for every inserted row.

        Returns:
            list[tuple[Any, ...]]: the returned rows as raw driver values, in no
            particular order (match them by their columns).
        """
        if not rows:
            return []
        width = len(columns)
        per_chunk = max(1, self._max_params // width)
        head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        tail = (f" {suffix}" if suffix else "") + (
            f" RETURNING {', '.join(returning)}" if returning else ""
        )
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(rows), per_chunk):
            chunk = rows[start : start + per_chunk]
            groups = ", ".join(f"({self._marks(width, i * width)})" for i in range(len(chunk)))
            params = tuple(value for row in chunk for value in row)
            result = self._conn.exec_driver_sql(head + groups + tail, params)
            if returning:
                out.extend(tuple(row) for row in result.all())
        return out

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once per row (the driver's executemany).

        Args:
            sql (str): the statement with ``{}`` for each parameter, in row order (trusted
                text); written as ``?`` or ``$n`` for the driver.
            rows (Sequence[Sequence[Any]]): one tuple of driver values per execution.
        """
        if not rows:
            return
        count = sql.count("{}")
        marks = (f"${i}" for i in range(1, count + 1)) if self._numbered else iter("?" * count)
        self._conn.exec_driver_sql(sql.format(*marks), list(rows))
