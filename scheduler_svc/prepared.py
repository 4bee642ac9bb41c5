"""The queue's hot statements, compiled once and run on the driver's cursor.

Every job goes through one finish-and-claim transaction of three small statements. Through
``Connection.execute`` each costs SQLAlchemy's per-call work (compiled-cache lookup,
execution context, parameter and result processing set up anew, events), which on SQLite
was several times the query itself. A :class:`Prepared` statement is still written in
SQLAlchemy Core, so one definition serves both dialects; it is compiled once per dialect,
its parameters are bound through the column types' own bind processors, it runs on the
connection's DB-API cursor inside the caller's transaction, and the returned columns go
through the types' own result processors. The values are therefore exactly what
``Connection.execute`` would give (``tests/test_prepared.py`` checks every statement the
store prepares against it, on both backends).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared"]

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
    """A Core statement run at the driver level; see the module docstring."""

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
