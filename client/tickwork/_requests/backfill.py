"""BackfillSchedule's request: a schedule's past windows in a range."""

from __future__ import annotations

from datetime import datetime

from tickwork._requests.checks import _parse_enum, check_type
from tickwork._requests.convert import to_timestamp
from tickwork.errors import InvalidArgument
from tickwork.v1.schedule_pb2 import BackfillScheduleRequest, OverlapPolicy


def backfill_request(
    schedule_id: int,
    start: datetime,
    end: datetime,
    *,
    overlap_policy: OverlapPolicy | str | None,
    dry_run: bool,
    request_id: str,
) -> BackfillScheduleRequest:
    """Build BackfillSchedule for the windows in [``start``, ``end``) (aware datetimes).

    ``overlap_policy``: ``"SKIP"``, ``"OVERLAP_POLICY_SKIP"``, the enum, or None (the
    schedule's own).

    Raises:
        InvalidArgument: a naive or non-datetime time, an unknown policy, a value of the
            wrong type; naming the argument.
    """
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, datetime):
            raise InvalidArgument(f"{name}: expected a datetime, got {value!r:.80}")
    check_type(dry_run, bool, "dry_run")
    check_type(request_id, str, "request_id")
    request = BackfillScheduleRequest(id=schedule_id, dry_run=dry_run, request_id=request_id)
    request.start_time.CopyFrom(to_timestamp(start, "start"))
    request.end_time.CopyFrom(to_timestamp(end, "end"))
    if overlap_policy is not None:
        request.overlap_policy = _parse_enum(
            OverlapPolicy, "OVERLAP_POLICY_", overlap_policy, "overlap_policy"
        )  # type: ignore[assignment]
    return request
