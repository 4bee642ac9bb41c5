"""Python values to protobuf and back: JSON-like params to ``Struct``, aware datetimes to
``Timestamp`` (UTC) and back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from tickwork.errors import InvalidArgument

#: Deepest nesting of objects and lists in params: each level is three protobuf message
#: levels (Struct, map entry, Value) and protobuf decodes at most 100.
MAX_NESTING = 30


def _nesting(value: object, depth: int = 1) -> int:
    """How deep dicts and lists nest in ``value`` (a scalar is 0, ``{}`` is 1); stops
    counting past :data:`MAX_NESTING`."""
    if depth > MAX_NESTING + 1:
        return depth
    children: Iterable[Any]
    if isinstance(value, Mapping):
        children = value.values()
    elif isinstance(value, list | tuple):
        children = value
    else:
        return depth - 1
    return max((_nesting(child, depth + 1) for child in children), default=depth)


def to_struct(params: Mapping[str, Any], field: str = "params") -> Struct:
    """Convert a JSON-like mapping into a ``google.protobuf.Struct``.

    Numbers become doubles (JSON semantics). Raises InvalidArgument naming ``field`` when a
    value is not JSON-representable.
    """
    if not isinstance(params, Mapping):
        raise InvalidArgument(f"{field}: expected a mapping, got {type(params).__name__}")
    if _nesting(params) > MAX_NESTING:
        raise InvalidArgument(
            f"{field}: nested more than {MAX_NESTING} objects or lists deep (protobuf's "
            "limit on message depth)"
        )
    found = _unsendable(params, "")
    if found is not None:
        path, problem = found
        raise InvalidArgument(f"{field}: {path or '(top level)'}: {problem}")
    struct = Struct()
    try:
        struct.update(dict(params))
    except (ValueError, TypeError, AttributeError) as err:
        raise InvalidArgument(f"{field}: not JSON-representable: {err}") from None
    return struct


_NOT_JSON = (
    "is not JSON-representable (give a string, number, boolean, None, list, or mapping "
    "with string keys)"
)


def _unsendable(value: object, path: str) -> tuple[str, str] | None:
    """The path of the first part of ``value`` a Struct cannot carry unchanged, and why:
    a key that is not a string, a value of a type JSON lacks, or an int beyond ±2**53 (a
    double holds it inexactly: 2**53 + 1 would arrive as 2**53). None when all of it can."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        return path, (
            f"{value} is beyond ±2**53, where numbers stop being exact (a Struct holds them "
            "as doubles); give it as a string"
        )
    if value is None or isinstance(value, bool | int | float | str):
        return None
    items: Iterable[tuple[str, Any]]
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                return path, f"the key {key!r} ({type(key).__name__}) {_NOT_JSON}"
        items = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return path, f"a value of type {type(value).__name__} {_NOT_JSON}"
    for child_path, child in items:
        found = _unsendable(child, child_path)
        if found is not None:
            return found
    return None


def to_timestamp(value: datetime, field: str) -> Timestamp:
    """Convert an aware datetime into a Timestamp.

    Raises:
        InvalidArgument: ``value`` is naive (its zone would be a guess), or in UTC it falls
            outside the years 1 to 9999 that a Timestamp holds (9999-12-31T23:00-14:00).
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{field}: needs a timezone-aware datetime, got {value!r}")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument(
            f"{field}: {value.isoformat()} is outside the years 1 to 9999 in UTC"
        ) from None
    ts = Timestamp()
    ts.FromDatetime(utc)
    return ts


def to_datetime(ts: Timestamp) -> datetime:
    """Convert a Timestamp into an aware UTC datetime."""
    return ts.ToDatetime(tzinfo=UTC)
