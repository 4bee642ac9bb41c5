"""Records to protobuf messages and back. No logic beyond the shapes, and the masking of
params' ``env`` values for a caller who may not see them."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from google.protobuf import message, struct_pb2, timestamp_pb2

from scheduler_svc import callers
from scheduler_svc.errors import InvalidArgument, Reason
from scheduler_svc.records import FireRecord, JobRecord, ScheduleRecord, TaskRecord, TaskRunResult
from scheduler_svc.servicers._routes import route_messages
from scheduler_svc.values import JobStatus, Trigger
from tickwork.structs import dict_to_struct, struct_to_dict
from tickwork.timestamps import to_timestamp
from tickwork.v1 import common_pb2, job_pb2, schedule_pb2, task_pb2

UTC = dt.UTC


#: An aware datetime as a Timestamp; None stays None (the field is left unset).
ts = to_timestamp


def from_ts(value: timestamp_pb2.Timestamp, field: str = "timestamp") -> dt.datetime:
    """A Timestamp as an aware UTC datetime.

    Raises InvalidArgument(field) for a Timestamp outside 0001-01-01..9999-12-31 or with
    out-of-range nanos.
    """
    try:
        return value.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidArgument("not a valid timestamp", field=field) from None


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    """A JSON object as a Struct."""
    return dict_to_struct(value)


def from_struct(value: struct_pb2.Struct, field: str = "params") -> dict[str, Any]:
    """A Struct as a plain dict (whole numbers come back as int, not float).

    Raises InvalidArgument(field) for values JSON cannot hold (NaN, Infinity).
    """
    try:
        return struct_to_dict(value)
    except (ValueError, TypeError) as err:
        raise InvalidArgument(f"not a JSON object: {err}", field=field) from None


#: What a viewer sees instead of each value of params' ``env``.
MASK = "*****"


def shown_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as the current caller may see them: the values of its ``env`` object
    replaced by :data:`MASK` for a caller who does not see secrets (a viewer)."""
    env = params.get("env")
    if callers.sees_secrets() or not isinstance(env, dict):
        return params
    return {**params, "env": dict.fromkeys(env, MASK)}


#: When a task's newest SUCCEEDED and newest FAILED jobs finished (None: none kept).
OutcomeTimes = tuple[dt.datetime | None, dt.datetime | None]


def task(r: TaskRecord, outcomes: OutcomeTimes = (None, None)) -> task_pb2.Task:
    """A TaskRecord as a Task message, with its ``outcomes`` times when given."""
    last_success, last_failure = outcomes
    return task_pb2.Task(
        last_success_time=ts(last_success) if last_success is not None else None,
        last_failure_time=ts(last_failure) if last_failure is not None else None,
        id=r.id,
        name=r.name,
        description=r.description,
        handler=r.handler,
        params=struct(shown_params(r.params)),
        task_priority=r.task_priority,
        enabled=r.enabled,
        timeout_seconds=r.timeout_seconds,
        consecutive_failure_count=r.consecutive_failure_count,
        retry_policy=task_pb2.RetryPolicy(
            max_attempts=r.max_attempts,
            backoff_base_seconds=r.backoff_base_seconds,
            backoff_cap_seconds=r.backoff_cap_seconds,
        ),
        disabled_reason=r.disabled_reason,
        create_time=ts(r.created_at),
        update_time=ts(r.updated_at),
        memory_limit_bytes=r.memory_limit_bytes,
        cpu_limit_seconds=r.cpu_limit_seconds,
        concurrency_group=r.concurrency_group,
        expect_success_within_seconds=r.expect_success_within_seconds,
        warn_after_seconds=r.warn_after_seconds,
        labels=r.labels,
        disable_note=r.disable_note,
        disabled_until=ts(r.disabled_until),
        disabled_by=r.disabled_by,
        disable_time=ts(r.disabled_at),
        notify=route_messages(r.notify),
        overridable_params=r.overridable_params or [],
    )


_CATCH_UP = {
    "SKIP": schedule_pb2.CATCH_UP_POLICY_SKIP,
    "RUN_ONCE": schedule_pb2.CATCH_UP_POLICY_RUN_ONCE,
    "RUN_ALL": schedule_pb2.CATCH_UP_POLICY_RUN_ALL,
}
_JITTER = {
    "RANDOM": schedule_pb2.JITTER_MODE_RANDOM,
    "STABLE": schedule_pb2.JITTER_MODE_STABLE,
}


def schedule(r: ScheduleRecord, description: str) -> schedule_pb2.Schedule:
    """A ScheduleRecord as a Schedule message with its human-readable description."""
    return schedule_pb2.Schedule(
        id=r.id,
        name=r.name,
        description=r.description,
        cron_expression=r.cron_expression,
        interval_seconds=r.interval_seconds,
        timezone=r.timezone,
        catch_up_policy=_CATCH_UP.get(r.catch_up_policy, schedule_pb2.CATCH_UP_POLICY_SKIP),
        enabled=r.enabled,
        task_ids=list(r.task_ids),
        task_names=list(r.task_names),
        next_run_time=ts(r.next_run_at),
        last_run_time=ts(r.last_run_at),
        cron_description=description,
        create_time=ts(r.created_at),
        update_time=ts(r.updated_at),
        catch_up_window_seconds=r.catch_up_window_seconds,
        max_catch_up_runs=r.max_catch_up_runs,
        jitter_seconds=r.jitter_seconds,
        jitter_mode=_JITTER.get(r.jitter_mode, schedule_pb2.JITTER_MODE_RANDOM),
        start_time=ts(r.start_at),
        end_time=ts(r.end_at),
        overlap_policy=overlap_policy_value(r.overlap_policy),  # type: ignore[arg-type]
        max_buffered=r.max_buffered,
        labels=r.labels,
        pause_note=r.pause_note,
        paused_until=ts(r.paused_until),
        paused_by=r.paused_by,
        pause_time=ts(r.paused_at),
        catch_up_on_resume=r.catch_up_on_resume,
        start_deadline_seconds=r.start_deadline_seconds,
        notify=route_messages(r.notify),
    )


def overlap_policy(value: int) -> str:
    """The stored form of an OverlapPolicy enum value (UNSPECIFIED is SKIP); unknown values
    stay unknown (``UNKNOWN(n)``, refused by validation)."""
    if value == schedule_pb2.OVERLAP_POLICY_UNSPECIFIED:
        return "SKIP"
    if value in schedule_pb2.OverlapPolicy.values():
        return schedule_pb2.OverlapPolicy.Name(value).removeprefix("OVERLAP_POLICY_")
    return f"UNKNOWN({value})"


def overlap_policy_value(name: str) -> int:
    """A stored overlap policy as an OverlapPolicy enum value."""
    return int(schedule_pb2.OverlapPolicy.Value(f"OVERLAP_POLICY_{name}"))


def catch_up_policy(value: int) -> str:
    """The stored form of a CatchUpPolicy enum value; unknown values stay unknown."""
    if value in (schedule_pb2.CATCH_UP_POLICY_UNSPECIFIED, schedule_pb2.CATCH_UP_POLICY_SKIP):
        return "SKIP"
    if value == schedule_pb2.CATCH_UP_POLICY_RUN_ONCE:
        return "RUN_ONCE"
    if value == schedule_pb2.CATCH_UP_POLICY_RUN_ALL:
        return "RUN_ALL"
    return f"UNKNOWN({value})"


def jitter_mode(value: int) -> str:
    """The stored form of a JitterMode enum value; unknown values stay unknown."""
    if value in (schedule_pb2.JITTER_MODE_UNSPECIFIED, schedule_pb2.JITTER_MODE_RANDOM):
        return "RANDOM"
    if value == schedule_pb2.JITTER_MODE_STABLE:
        return "STABLE"
    return f"UNKNOWN({value})"


def job_status(name: str) -> int:
    """A stored status as a JobStatus enum value."""
    return int(job_pb2.JobStatus.Value(f"JOB_STATUS_{name}"))


def job_status_name(value: int, field: str = "statuses") -> JobStatus:
    """A JobStatus enum value as the stored status.

    Raises InvalidArgument naming ``field`` for a value the enum does not define.
    """
    if value == job_pb2.JOB_STATUS_UNSPECIFIED or value not in job_pb2.JobStatus.values():
        raise InvalidArgument(f"unknown job status {value}", field=field)
    return JobStatus(job_pb2.JobStatus.Name(value).removeprefix("JOB_STATUS_"))


def trigger(name: str) -> int:
    """A stored trigger as a Trigger enum value."""
    return int(common_pb2.Trigger.Value(f"TRIGGER_{name}"))


def trigger_name(value: int, field: str = "trigger") -> Trigger:
    """A Trigger enum value as the stored trigger.

    Raises InvalidArgument naming ``field`` for a value the enum does not define (a client
    may send any number).
    """
    if value == common_pb2.TRIGGER_UNSPECIFIED or value not in common_pb2.Trigger.values():
        raise InvalidArgument(f"unknown trigger {value}", field=field)
    return Trigger(common_pb2.Trigger.Name(value).removeprefix("TRIGGER_"))


def job(r: JobRecord) -> job_pb2.Job:
    """A JobRecord as a Job message."""
    return job_pb2.Job(
        id=r.id,
        task_id=r.task_id,
        task_name=r.task_name,
        status=job_status(r.status),  # type: ignore[arg-type]
        trigger=trigger(r.trigger),  # type: ignore[arg-type]
        attempt=r.attempt,
        enqueue_time=ts(r.enqueued_at),
        start_time=ts(r.started_at),
        finish_time=ts(r.finished_at),
        not_before_time=ts(r.not_before),
        error=r.error,
        output_tail=r.output_tail,
        schedule_id=r.schedule_id or 0,
        fire_time=ts(r.fire_time),
        retry_of_job_id=r.retry_of_job_id or 0,
        task_priority=r.task_priority,
        late_outcome=r.late_outcome,
        params_override=struct(shown_params(r.params_override)) if r.params_override else None,
        labels=r.labels or {},
        requested_by=r.requested_by,
        stopped_by=r.stopped_by,
    )


def task_run(r: TaskRunResult) -> common_pb2.TaskRun:
    """A TaskRunResult as a TaskRun message."""
    return common_pb2.TaskRun(
        task_id=r.task_id,
        task_name=r.task_name,
        job_id=r.job_id,
        skipped=r.skip_reason is not None,
        skip_reason=(
            common_pb2.SkipReason.Value(f"SKIP_REASON_{r.skip_reason}")  # type: ignore[arg-type]
            if r.skip_reason
            else common_pb2.SKIP_REASON_UNSPECIFIED
        ),
        promoted=r.promoted,
    )


def fire(r: FireRecord) -> schedule_pb2.Fire:
    """A FireRecord as a Fire message."""
    return schedule_pb2.Fire(
        id=r.id,
        schedule_id=r.schedule_id,
        fire_time=ts(r.fire_time),
        outcome=schedule_pb2.FireOutcome.Value(f"FIRE_OUTCOME_{r.outcome}"),  # type: ignore[arg-type]
        runs=[task_run(x) for x in r.runs],
        record_time=ts(r.recorded_at),
        start_time=ts(r.start_at or r.fire_time),
        trigger=trigger(r.trigger),  # type: ignore[arg-type]
    )


def required_id(value: int, field: str) -> int:
    """An id a request must give: 0 (left out, as in ``grpcurl -d '{}'``) is
    INVALID_ARGUMENT "required", and a negative one INVALID_ARGUMENT "must be a positive
    id" (ids start at 1), not a lookup that answers NOT_FOUND."""
    if value == 0:
        raise InvalidArgument("required", field=field, reason=Reason.FIELD_REQUIRED)
    if value < 0:
        raise InvalidArgument(
            f"must be a positive id, got {value}", field=field, reason=Reason.FIELD_INVALID
        )
    return value


def positive_ids(values: Iterable[int], field: str) -> list[int]:
    """The ids a repeated id field gives, in order; an id below 1 (ids start at 1) is
    INVALID_ARGUMENT "must be a positive id" naming ``field[i]``, not a lookup that answers
    NOT_FOUND."""
    ids = list(values)
    for i, value in enumerate(ids):
        if value < 1:
            raise InvalidArgument(
                f"must be a positive id, got {value}",
                field=f"{field}[{i}]",
                reason=Reason.FIELD_INVALID,
            )
    return ids


def page_size(value: int) -> int:
    """A requested page size: 0 means 100; at most 1000 (see :func:`fit_page`)."""
    if value < 0:
        raise InvalidArgument("must be >= 0", field="page_size")
    return 100 if value == 0 else min(value, 1000)


#: The most a listing's items may add up to, in bytes encoded (3 MiB): under the 4 MiB a
#: gRPC client accepts by default (grpcurl, the SDK), with room for the rest of the reply.
MAX_PAGE_BYTES = 3 * 1024 * 1024

_R = TypeVar("_R")
_M = TypeVar("_M", bound=message.Message)


@dataclasses.dataclass(frozen=True)
class Page(Generic[_R, _M]):
    """One page of a listing (see :func:`fit_page`)."""

    items: list[_M]
    """The rows as messages."""
    last: _R | None
    """The row the next page starts after; None on the last page."""


def fit_page(rows: Sequence[_R], size: int, convert: Callable[[_R], _M]) -> Page[_R, _M]:
    """One page of a listing: the first ``size`` of ``rows`` as messages, fewer when their
    encoded sizes would pass :data:`MAX_PAGE_BYTES`, never none while rows are left (one
    item always fits: its fields are capped, e.g. :data:`validation.MAX_PARAMS_BYTES`).

    ``rows`` is what the store returned for ``size + 1``. As AIP-158 allows, a page may be
    shorter than asked without being the last one.
    """
    items: list[_M] = []
    total = 0
    for row in rows[:size]:
        item = convert(row)
        total += item.ByteSize() + 6  # the field's tag and length prefix, at most
        if items and total > MAX_PAGE_BYTES:
            break
        items.append(item)
    return Page(items, rows[len(items) - 1] if len(rows) > len(items) else None)
