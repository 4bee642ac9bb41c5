"""Multi-row statements as driver SQL, for the scheduler's bursts of fires.

SQLAlchemy's executemany builds, converts and checks a parameter dict per row: at 10,000
fires a minute that was a third of the time to record them. :class:`Bulk` writes the SQL
text itself, one statement per chunk of rows, and hands the driver (sqlite3 or asyncpg)
plain tuples, with the few value types these statements carry converted exactly as the
column types would (:class:`scheduler_svc.db.UTCDateTime`, ``Boolean``, ``JSON``). Only
the hot statements of recording fires use it; everything else goes through SQLAlchemy.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from scheduler_svc.db import stored_datetime

__all__ = ["Bulk"]

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
