"""The one column type of every timestamp: aware UTC in Python, naive UTC in the database."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect as SaDialect

__all__ = ["UTCDateTime", "stored_datetime"]

UTC = dt.UTC


def stored_datetime(value: dt.datetime | None, *, sqlite: bool) -> Any:
    """An aware datetime as a UTCDateTime column stores it: naive UTC, and on SQLite the
    text ``YYYY-MM-DD HH:MM:SS.ffffff`` (the text SQLAlchemy's DATETIME writes). None stays
    None.

    Raises:
        ValueError: a naive datetime.
    """
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("naive datetime given to the database; use aware UTC datetimes")
    naive = value.astimezone(UTC).replace(tzinfo=None)
    return naive.isoformat(" ", "microseconds") if sqlite else naive


class _SQLiteDateTime(sqlite.DATETIME):
    """SQLite's DATETIME (text ``YYYY-MM-DD HH:MM:SS.ffffff``) for values that
    :class:`UTCDateTime` has already written as that text."""

    def bind_processor(self, dialect: SaDialect) -> None:
        return None

    def literal_processor(self, dialect: SaDialect) -> Callable[[Any], str]:
        def process(value: Any) -> str:
            text = value.isoformat(" ", "microseconds") if isinstance(value, dt.datetime) else value
            return "'" + str(text).replace("'", "''") + "'"

        return process


class UTCDateTime(sa.types.TypeDecorator[dt.datetime]):
    """An aware UTC datetime, stored as naive UTC on every backend (SQLite has no zones).

    On SQLite the value is written with ``datetime.isoformat`` in the very text SQLAlchemy's
    DATETIME writes (so rows and comparisons are unchanged), at a tenth of its cost: the
    scheduler binds several datetimes per fire.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: SaDialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(_SQLiteDateTime())  # type: ignore[no-untyped-call]
        return dialect.type_descriptor(self.impl_instance)

    def process_bind_param(self, value: dt.datetime | None, dialect: SaDialect) -> Any:
        return stored_datetime(value, sqlite=dialect.name == "sqlite")

    def process_result_value(self, value: Any, dialect: SaDialect) -> dt.datetime | None:
        if value is None:
            return None
        assert isinstance(value, dt.datetime)
        return value.replace(tzinfo=UTC)
