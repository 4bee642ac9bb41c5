"""Aware datetimes to protobuf Timestamps, for every layer that builds messages (the
scheduler loop and the servicers both do)."""

from __future__ import annotations

import datetime as dt

from google.protobuf import timestamp_pb2

__all__ = ["to_timestamp"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_timestamp(value: dt.datetime | None) -> timestamp_pb2.Timestamp | None:
    """An aware datetime as a Timestamp (exact to the microsecond); None stays None, so the
    field is left unset."""
    if value is None:
        return None
    since = value - _EPOCH  # normalised: 0 <= seconds < 86400, 0 <= microseconds < 10**6
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86400 + since.seconds, nanos=since.microseconds * 1000
    )
