"""Request building shared by the sync and asyncio clients: pure functions, no I/O.

Everything that turns SDK arguments into protobuf requests (and a few answers back into
Python values) lives here, so :mod:`tickwork._sync` and :mod:`tickwork._async` only differ
in how they call the stubs. Argument errors raise :class:`~tickwork.errors.InvalidArgument`
(also a ``ValueError``) naming the argument, before anything is sent.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Required, TypedDict, cast

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from tickwork.errors import InvalidArgument, TickworkError
from tickwork.v1.common_pb2 import TaskRun, Trigger
from tickwork.v1.job_pb2 import Job, JobStatus, ListJobsRequest
from tickwork.v1.schedule_pb2 import (
    BatchCreateSchedulesRequest,
    CatchUpPolicy,
    CreateScheduleRequest,
    DescribeCronRequest,
    GetScheduleRequest,
    Schedule,
    UpdateScheduleRequest,
)
from tickwork.v1.task_pb2 import (
    GetTaskRequest,
    RetryPolicy,
    RunTasksRequest,
    Task,
    UpdateTaskRequest,
)

DEFAULT_SERVER = "127.0.0.1:50051"
"""Address used when neither an argument nor ``TICKWORK_SERVER`` gives one."""

SERVER_ENV = "TICKWORK_SERVER"
"""Environment variable holding the default ``HOST:PORT`` of the tickwork API."""

MAX_PAGE_SIZE = 1000
"""Largest page the list RPCs return."""

TERMINAL_STATUSES: frozenset[int] = frozenset(
    {
        JobStatus.JOB_STATUS_SUCCEEDED,
        JobStatus.JOB_STATUS_FAILED,
        JobStatus.JOB_STATUS_ABORTED,
        JobStatus.JOB_STATUS_CANCELLED,
    }
)
"""Job states after which a job never changes again."""

Ref = int | str
"""A task or schedule reference: an id (int) or a name (str)."""


class TaskFields(TypedDict, total=False):
    """Keyword arguments of ``update_task``: the writable Task fields.

    ``max_attempts``, ``backoff_base_seconds`` and ``backoff_cap_seconds`` update the
    task's retry policy (the other two keep their current values).
    """

    name: str
    description: str
    handler: str
    params: Mapping[str, Any]
    task_priority: int
    enabled: bool
    timeout_seconds: float
    max_attempts: int
    backoff_base_seconds: float
    backoff_cap_seconds: float


class ScheduleFields(TypedDict, total=False):
    """Keyword arguments of ``update_schedule``: the writable Schedule fields.

    ``cron`` is the cron expression; ``tasks`` the task ids or names (replacing the list).
    Giving ``interval_seconds`` without ``cron`` also clears the cron expression, since a
    cron expression would otherwise win over the interval.
    """

    name: str
    description: str
    cron: str
    interval_seconds: int
    timezone: str
    catch_up_policy: CatchUpPolicy | str
    enabled: bool
    tasks: Sequence[Ref]


class NewSchedule(TypedDict, total=False):
    """One schedule for ``create_schedules``: the arguments of ``create_schedule``."""

    name: Required[str]
    tasks: Required[Sequence[Ref]]
    cron: str
    interval_seconds: int
    timezone: str
    catch_up_policy: CatchUpPolicy | str
    description: str
    enabled: bool


_NEW_SCHEDULE_KEYS = frozenset(NewSchedule.__annotations__)

_RETRY_FIELDS = ("max_attempts", "backoff_base_seconds", "backoff_cap_seconds")
_TASK_FIELDS = frozenset(TaskFields.__annotations__)
_SCHEDULE_FIELDS = frozenset(ScheduleFields.__annotations__)
# SDK keyword -> Schedule field path in the update mask.
_SCHEDULE_PATHS = {"cron": "cron_expression", "tasks": "task_ids"}


def resolve_server(server: str | None) -> str:
    """Return the ``HOST:PORT`` to dial: ``server``, else ``$TICKWORK_SERVER``, else the
    default ``127.0.0.1:50051``; a host given without a port gets tickwork's port 50051
    (see :func:`with_default_port`)."""
    return with_default_port(server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER)


DEFAULT_PORT = 50051
"""The port the service listens on unless told otherwise (``TICKWORK_LISTEN``)."""


def with_default_port(target: str) -> str:
    """``target`` with ``:50051`` added when it is a bare host name or address
    (``localhost``, ``10.0.0.5``, ``[::1]``); gRPC would otherwise dial port 443. A target
    with a port, or a gRPC name-resolver URI (``unix:``, ``dns:``, ``ipv4:``, ``ipv6:``,
    ``scheme://...``), is returned as it is.

    Args:
        target (str): the address as the user gave it.

    Returns:
        str: the address to dial.
    """
    target = target.strip()
    if not target or "://" in target or target.startswith(("unix:", "dns:", "ipv4:", "ipv6:")):
        return target
    if target.startswith("["):  # [IPv6] or [IPv6]:PORT
        return target if "]:" in target else f"{target}:{DEFAULT_PORT}"
    if ":" in target:  # HOST:PORT (a bare IPv6 address has several colons: left alone)
        return target
    return f"{target}:{DEFAULT_PORT}"


def check_ref(ref: object, what: str = "task") -> Ref:
    """Validate a task or schedule reference.

    Args:
        ref (object): an id (positive int) or a name (non-empty str).
        what (str): ``"task"`` or ``"schedule"``, for the message.

    Returns:
        int | str: ``ref`` unchanged.

    Raises:
        InvalidArgument: ``ref`` is a bool, a non-positive int, an empty string or another type.
    """
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        raise InvalidArgument(f"{what}: expected an id (int) or a name (str), got {ref!r}")
    if isinstance(ref, int) and not 0 < ref <= MAX_ID:
        raise InvalidArgument(f"{what}: id must be from 1 to {MAX_ID}, got {ref}")
    if isinstance(ref, str) and not ref:
        raise InvalidArgument(f"{what}: name must not be empty")
    return ref


#: The largest id (ids are int64).
MAX_ID = 2**63 - 1


def check_job_id(job_id: object) -> int:
    """Validate a job id: an int from 1 to :data:`MAX_ID`.

    Raises:
        InvalidArgument: naming ``job_id``.
    """
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InvalidArgument(f"job_id: expected an integer, got {job_id!r:.80}")
    if not 0 < job_id <= MAX_ID:
        raise InvalidArgument(f"job_id: must be from 1 to {MAX_ID}, got {job_id}")
    return job_id


def get_task_request(ref: Ref) -> GetTaskRequest:
    """Build GetTask by id (int) or by name (str); raises InvalidArgument on a bad ref."""
    ref = check_ref(ref, "task")
    if isinstance(ref, int):
        return GetTaskRequest(task_id=ref)
    return GetTaskRequest(name=ref)


def get_schedule_request(ref: Ref) -> GetScheduleRequest:
    """Build GetSchedule by id (int) or by name (str); raises InvalidArgument on a bad ref."""
    ref = check_ref(ref, "schedule")
    if isinstance(ref, int):
        return GetScheduleRequest(schedule_id=ref)
    return GetScheduleRequest(name=ref)


def run_tasks_request(refs: Sequence[Ref], trigger: Trigger) -> RunTasksRequest:
    """Build RunTasks from ids and names.

    Raises:
        InvalidArgument: no task given, or a bad reference.
    """
    if not refs:
        raise InvalidArgument("tasks: name at least one task id or name")
    checked = [check_ref(r, "task") for r in refs]
    return RunTasksRequest(
        task_ids=[r for r in checked if isinstance(r, int)],
        task_names=[r for r in checked if isinstance(r, str)],
        trigger=trigger,
    )


def runs_in_argument_order(refs: Sequence[Ref], runs: Sequence[TaskRun]) -> list[TaskRun]:
    """Reorder RunTasks' answer (ids first, then names) into the caller's argument order.

    Args:
        refs (Sequence[int | str]): the references as the caller gave them.
        runs (Sequence[TaskRun]): the server's runs, one per reference.

    Returns:
        list[TaskRun]: ``runs[i]`` belongs to ``refs[i]``. When the counts differ (a server
        that merged duplicates) the server's order is kept.
    """
    if len(runs) != len(refs):
        return list(runs)
    n_ids = sum(1 for r in refs if isinstance(r, int))
    by_id = iter(runs[:n_ids])
    by_name = iter(runs[n_ids:])
    return [next(by_id) if isinstance(r, int) else next(by_name) for r in refs]


def parse_job_status(value: JobStatus | str | int) -> JobStatus:
    """Turn ``"failed"``, ``"FAILED"``, ``"JOB_STATUS_FAILED"`` or the enum into a JobStatus.

    Raises:
        InvalidArgument: an unknown name or number, or UNSPECIFIED.
    """
    return cast("JobStatus", _parse_enum(JobStatus, "JOB_STATUS_", value, "status"))


def parse_catch_up_policy(value: CatchUpPolicy | str | int) -> CatchUpPolicy:
    """Turn ``"SKIP"``, ``"run_once"``, ``"CATCH_UP_POLICY_RUN_ONCE"`` or the enum into a
    CatchUpPolicy.

    Raises:
        InvalidArgument: an unknown name or number, or UNSPECIFIED.
    """
    policy = _parse_enum(CatchUpPolicy, "CATCH_UP_POLICY_", value, "catch_up_policy")
    return cast("CatchUpPolicy", policy)


def _parse_enum(enum: Any, prefix: str, value: object, field: str) -> int:
    """Look ``value`` (a name with or without ``prefix``, or a number) up in ``enum``."""
    known: dict[str, int] = {
        str(name): int(number)
        for name, number in enum.items()
        if not str(name).endswith("_UNSPECIFIED")
    }
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        key = key if key.startswith(prefix) else prefix + key
        if key in known:
            return known[key]
    elif isinstance(value, int) and not isinstance(value, bool) and value in known.values():
        return value
    short = ", ".join(name.removeprefix(prefix) for name in known)
    raise InvalidArgument(f"{field}: expected one of {short}, got {value!r}")


def enum_label(enum: Any, value: int) -> str:
    """Short name of an enum value: ``JOB_STATUS_FAILED`` -> ``"FAILED"``.

    Args:
        enum: a generated protobuf enum (``JobStatus``, ``Trigger``, ...).
        value (int): its number; unknown numbers come back as the number.
    """
    try:
        name = str(enum.Name(value))
    except ValueError:
        return str(value)
    prefix = str(enum.keys()[0]).removesuffix("UNSPECIFIED")
    return name.removeprefix(prefix)


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
    inexact = _inexact_integer(params, "")
    if inexact is not None:
        path, number = inexact
        raise InvalidArgument(
            f"{field}: {path}: {number} is beyond ±2**53, where numbers stop being exact (a "
            "Struct holds them as doubles); give it as a string"
        )
    struct = Struct()
    try:
        struct.update(dict(params))
    except (ValueError, TypeError, AttributeError) as err:
        raise InvalidArgument(f"{field}: not JSON-representable: {err}") from None
    return struct


def _inexact_integer(value: object, path: str) -> tuple[str, int] | None:
    """The path and value of the first int in ``value`` that a double cannot hold exactly
    (it would arrive changed: 2**53 + 1 as 2**53), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (path, value) if abs(value) > 2**53 else None
    if isinstance(value, Mapping):
        items: Iterable[tuple[str, Any]] = (
            (f"{path}.{k}" if path else str(k), v) for k, v in value.items()
        )
    elif isinstance(value, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for child_path, child in items:
        found = _inexact_integer(child, child_path)
        if found is not None:
            return found
    return None


def to_timestamp(value: datetime, field: str) -> Timestamp:
    """Convert an aware datetime into a Timestamp.

    Raises:
        InvalidArgument: ``value`` is naive (its zone would be a guess).
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{field}: needs a timezone-aware datetime, got {value!r}")
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def to_datetime(ts: Timestamp) -> datetime:
    """Convert a Timestamp into an aware UTC datetime."""
    return ts.ToDatetime(tzinfo=UTC)


def is_terminal(job: Job) -> bool:
    """True when the job has ended (SUCCEEDED, FAILED, ABORTED or CANCELLED)."""
    return job.status in TERMINAL_STATUSES


def resume_delay_s(error: TickworkError, last: Job | None, resumed: int) -> float | None:
    """Whether a job watch that failed with ``error`` is taken up again, and after how many
    seconds: only when it was UNAVAILABLE (the service restarting, a replica going away)
    after the watch had already shown a state (``last``), so a wrong address or a service
    that is down from the start still fails at once. ``resumed`` is how many times this
    watch has been taken up already: the delay grows from 0.1 s to 2 s. None: raise."""
    if error.code != grpc.StatusCode.UNAVAILABLE or last is None:
        return None
    return float(min(2.0, 0.1 * 2**resumed))


def watch_deadline(timeout: float | None) -> float | None:
    """The ``time.monotonic()`` at which a watch of ``timeout`` seconds gives up."""
    return None if timeout is None else time.monotonic() + timeout


def remaining_s(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (from :func:`watch_deadline`), at least 0."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def page_size(limit: int | None, collected: int) -> int:
    """Page size for the next list call: what is still wanted, at most 1000."""
    if limit is None:
        return MAX_PAGE_SIZE
    return max(1, min(MAX_PAGE_SIZE, limit - collected))


def check_limit(limit: int) -> int:
    """Validate a ``limit`` argument (at least 1); raises InvalidArgument."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit: expected a positive int, got {limit!r}")
    return limit


def task_refs(tasks: Sequence[int | str], field: str = "tasks") -> Sequence[int | str]:
    """A sequence of task ids or names; a bare string is refused rather than split into
    characters. Raises InvalidArgument naming ``field``."""
    if isinstance(tasks, str | bytes):
        raise InvalidArgument(f"{field}: expected a list of task ids or names, got a string")
    if isinstance(tasks, Mapping) or not isinstance(tasks, Sequence):
        raise InvalidArgument(
            f"{field}: expected a list of task ids or names, got {type(tasks).__name__}"
        )
    return tasks


def wait_timeout(timeout: float | None) -> float | None:
    """A wait's timeout in seconds: None, inf or more than ten years wait forever (gRPC
    deadlines overflow beyond that); NaN or negative raise InvalidArgument."""
    if timeout is None:
        return None
    if math.isnan(timeout) or timeout < 0:
        raise InvalidArgument(f"timeout: expected seconds >= 0 or None, got {timeout!r}")
    return None if timeout > 10 * 366 * 86400 else float(timeout)


def list_jobs_request(
    task_id: int, statuses: Iterable[JobStatus | str], schedule_id: int
) -> ListJobsRequest:
    """Build the first ListJobs request (page size and token are set per page). A single
    status may be given alone."""
    if isinstance(statuses, str):
        statuses = [statuses]
    return ListJobsRequest(
        task_id=task_id,
        statuses=[parse_job_status(s) for s in statuses],
        schedule_id=schedule_id,
    )


def build_task(
    name: str,
    handler: str,
    params: Mapping[str, Any],
    *,
    description: str,
    task_priority: int,
    enabled: bool,
    timeout_seconds: float,
    max_attempts: int,
    backoff_base_seconds: float,
    backoff_cap_seconds: float,
) -> Task:
    """Build a Task with every writable field set explicitly (see ``create_task``).

    Raises:
        InvalidArgument: a value of the wrong Python type, or params that are not JSON.
    """
    _of_type(name, str, "name")
    _of_type(handler, str, "handler")
    _of_type(description, str, "description")
    _of_type(task_priority, int, "task_priority")
    _of_type(enabled, bool, "enabled")
    _of_type(timeout_seconds, int | float, "timeout_seconds")
    _of_type(max_attempts, int, "max_attempts")
    _of_type(backoff_base_seconds, int | float, "backoff_base_seconds")
    _of_type(backoff_cap_seconds, int | float, "backoff_cap_seconds")
    task = Task(params=to_struct(params, "task.params"))
    for field, value in (
        ("name", name),
        ("description", description),
        ("handler", handler),
        ("task_priority", task_priority),
        ("enabled", enabled),
        ("timeout_seconds", timeout_seconds),
    ):
        _assign(task, field, value)
    for field, value in (
        ("max_attempts", max_attempts),
        ("backoff_base_seconds", backoff_base_seconds),
        ("backoff_cap_seconds", backoff_cap_seconds),
    ):
        _assign_retry(task.retry_policy, field, value)
    return task


def _assign_retry(retry: RetryPolicy, field: str, value: object) -> None:
    """Set a retry policy field. 0 is refused: on the wire it means "unset", which the
    server reads as the default (1 attempt, 10 s, 600 s), not as the 0 asked for.

    Raises:
        InvalidArgument: ``field: ...`` for 0, a wrong type or a number out of range.
    """
    if value == 0 and not isinstance(value, bool):
        raise InvalidArgument(
            f"{field}: must be above 0 (0 would be read as the default)"
            + (": 1 means no retry" if field == "max_attempts" else "")
        )
    _assign(retry, field, value)


TASK_MASK = (
    "name",
    "description",
    "handler",
    "params",
    "task_priority",
    "enabled",
    "timeout_seconds",
    "retry_policy",
)
"""Every writable Task field: the full update mask."""

SCHEDULE_MASK = (
    "name",
    "description",
    "cron_expression",
    "interval_seconds",
    "timezone",
    "catch_up_policy",
    "enabled",
    "task_ids",
)
"""Every writable Schedule field: the full update mask."""


def update_task_request(current: Task, fields: TaskFields) -> UpdateTaskRequest:
    """Build UpdateTask changing only ``fields`` of ``current``.

    Args:
        current (Task): the stored task (its id names it; its retry policy fills the retry
            values not given).
        fields (TaskFields): the new values, by SDK keyword.

    Returns:
        UpdateTaskRequest: the task with the new values and a mask of exactly the given
        fields (the three retry keywords map to the one path ``retry_policy``).

    Raises:
        TypeError: an unknown keyword.
        InvalidArgument: no field given, or params not JSON-representable.
    """
    unknown = sorted(set(fields) - _TASK_FIELDS)
    if unknown:
        raise TypeError(
            f"update_task() got unknown field(s) {', '.join(unknown)}; "
            f"expected some of {', '.join(sorted(_TASK_FIELDS))}"
        )
    if not fields:
        raise InvalidArgument("update_task: give at least one field to change")
    task = Task(id=current.id)
    paths: list[str] = []
    for key, value in fields.items():
        if key in _RETRY_FIELDS:
            continue
        if key == "params":
            task.params.CopyFrom(to_struct(fields["params"], "task.params"))
        else:
            _assign(task, key, value)
        paths.append(key)
    if any(k in fields for k in _RETRY_FIELDS):
        retry = RetryPolicy()
        retry.CopyFrom(current.retry_policy)
        if not current.HasField("retry_policy"):
            retry.max_attempts, retry.backoff_base_seconds, retry.backoff_cap_seconds = 1, 10, 600
        for key in _RETRY_FIELDS:
            if key in fields:
                _assign_retry(retry, key, fields[key])  # type: ignore[literal-required]
        task.retry_policy.CopyFrom(retry)
        paths.append("retry_policy")
    return UpdateTaskRequest(task=task, update_mask=FieldMask(paths=paths))


def build_schedule(
    name: str,
    task_ids: Sequence[int],
    *,
    cron: str | None,
    interval_seconds: int | None,
    timezone: str,
    catch_up_policy: CatchUpPolicy | str,
    description: str,
    enabled: bool,
) -> Schedule:
    """Build a Schedule with every writable field set explicitly (see ``create_schedule``).

    Raises:
        InvalidArgument: neither ``cron`` nor ``interval_seconds`` given, or a bad policy.
    """
    _of_type(name, str, "name")
    _of_type(cron, str | None, "cron")
    _of_type(interval_seconds, int | None, "interval_seconds")
    _of_type(timezone, str, "timezone")
    _of_type(description, str, "description")
    _of_type(enabled, bool, "enabled")
    if not cron and not interval_seconds:
        raise InvalidArgument("schedule: give cron or interval_seconds")
    policy = parse_catch_up_policy(catch_up_policy)
    schedule = Schedule(catch_up_policy=policy)
    for field, value in (
        ("name", name),
        ("description", description),
        ("cron_expression", cron or ""),
        ("interval_seconds", 0 if cron else interval_seconds or 0),
        ("timezone", timezone),
        ("enabled", enabled),
    ):
        _assign(schedule, field, value, "cron" if field == "cron_expression" else None)
    try:
        schedule.task_ids.extend(task_ids)
    except (TypeError, ValueError):
        raise InvalidArgument(f"tasks: not task ids: {list(task_ids)!r:.80}") from None
    return schedule


def _of_type(value: object, kind: Any, field: str) -> None:
    """Refuse a value of the wrong Python type (bool is not an int here) with
    InvalidArgument naming ``field``, rather than protobuf's TypeError or a coercion."""
    wrong_bool = isinstance(value, bool) and kind is not bool
    if wrong_bool or not isinstance(value, kind):
        raise InvalidArgument(f"{field}: expected {_type_name(kind)}, got {value!r:.80}")


def _type_name(kind: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "True or False"}
    parts = [names.get(k, "None") for k in getattr(kind, "__args__", (kind,))]
    return " or ".join(parts)


def _assign(message: Any, field: str, value: object, name: str | None = None) -> None:
    """``setattr(message, field, value)``, with protobuf's refusals (a number out of the
    field's range, a string that is not valid Unicode, a wrong type) raised as
    InvalidArgument naming ``name`` (default ``field``)."""
    try:
        setattr(message, field, value)
    except UnicodeError:
        raise InvalidArgument(f"{name or field}: not valid Unicode text") from None
    except ValueError as err:  # "Value out of range: N"
        raise InvalidArgument(f"{name or field}: {err} for a {_kind(message, field)}") from None
    except TypeError:
        raise InvalidArgument(f"{name or field}: wrong type, got {value!r:.80}") from None


def _kind(message: Any, field: str) -> str:
    """The protobuf type of ``field`` in words, e.g. ``"32-bit integer"``."""
    kind = message.DESCRIPTOR.fields_by_name[field].type
    words = {
        FieldDescriptor.TYPE_INT32: "32-bit integer",
        FieldDescriptor.TYPE_INT64: "64-bit integer",
    }
    return words.get(kind, "field")


def new_schedule_refs(schedules: Sequence[NewSchedule]) -> list[Sequence[Ref]]:
    """The task references of each item of ``create_schedules``, checked.

    Raises:
        InvalidArgument: not a sequence of mappings, an unknown key, no ``name`` or
            ``tasks`` (the message names the item, e.g. ``schedules[3]``).
    """
    if isinstance(schedules, str | bytes | Mapping) or not isinstance(schedules, Sequence):
        raise InvalidArgument("schedules: give a sequence of schedules (mappings)")
    refs = []
    for i, item in enumerate(schedules):
        if not isinstance(item, Mapping):
            raise InvalidArgument(f"schedules[{i}]: give a mapping, not {type(item).__name__}")
        unknown = sorted(set(item) - _NEW_SCHEDULE_KEYS)
        if unknown:
            raise InvalidArgument(
                f"schedules[{i}]: unknown key {unknown[0]!r}; "
                f"known: {', '.join(sorted(_NEW_SCHEDULE_KEYS))}"
            )
        if "name" not in item or "tasks" not in item:
            raise InvalidArgument(f"schedules[{i}]: give 'name' and 'tasks'")
        refs.append(task_refs(item["tasks"], field=f"schedules[{i}].tasks"))
    return refs


def batch_create_schedules_request(
    schedules: Sequence[NewSchedule], task_ids: Sequence[Sequence[int]]
) -> BatchCreateSchedulesRequest:
    """Build BatchCreateSchedules from checked items (:func:`new_schedule_refs`) and their
    resolved task ids."""
    requests = []
    for i, (item, ids) in enumerate(zip(schedules, task_ids, strict=True)):
        try:
            schedule = build_schedule(
                item["name"],
                ids,
                cron=item.get("cron"),
                interval_seconds=item.get("interval_seconds"),
                timezone=item.get("timezone", "UTC"),
                catch_up_policy=item.get("catch_up_policy", "SKIP"),
                description=item.get("description", ""),
                enabled=item.get("enabled", True),
            )
        except InvalidArgument as err:
            raise InvalidArgument(f"schedules[{i}]: {err.details}") from None
        requests.append(CreateScheduleRequest(schedule=schedule))
    return BatchCreateSchedulesRequest(requests=requests)


def update_schedule_request(
    schedule_id: int, fields: ScheduleFields, task_ids: Sequence[int] | None
) -> UpdateScheduleRequest:
    """Build UpdateSchedule changing only ``fields``.

    Args:
        schedule_id (int): the schedule.
        fields (ScheduleFields): the new values, by SDK keyword.
        task_ids (Sequence[int] | None): ``fields["tasks"]`` resolved to ids, when given.

    Raises:
        TypeError: an unknown keyword.
        InvalidArgument: no field given, or a bad catch-up policy.
    """
    unknown = sorted(set(fields) - _SCHEDULE_FIELDS)
    if unknown:
        raise TypeError(
            f"update_schedule() got unknown field(s) {', '.join(unknown)}; "
            f"expected some of {', '.join(sorted(_SCHEDULE_FIELDS))}"
        )
    if not fields:
        raise InvalidArgument("update_schedule: give at least one field to change")
    schedule = Schedule(id=schedule_id)
    paths: list[str] = []
    for key, value in fields.items():
        path = _SCHEDULE_PATHS.get(key, key)
        if key == "tasks":
            schedule.task_ids.extend(task_ids or [])
        elif key == "catch_up_policy":
            schedule.catch_up_policy = parse_catch_up_policy(fields["catch_up_policy"])
        else:
            _assign(schedule, path, value, key)
        paths.append(path)
    if "interval_seconds" in fields and "cron" not in fields:
        schedule.cron_expression = ""
        paths.append("cron_expression")
    return UpdateScheduleRequest(schedule=schedule, update_mask=FieldMask(paths=paths))


def describe_cron_request(
    expression: str, timezone: str, after: datetime | None, count: int
) -> DescribeCronRequest:
    """Build DescribeCron; ``after`` must be aware (None means the server's now).

    Raises:
        InvalidArgument: a value of the wrong type or range, naming it.
    """
    _of_type(expression, str, "cron_expression")
    _of_type(timezone, str, "timezone")
    _of_type(count, int, "count")
    if after is not None and not isinstance(after, datetime):
        raise InvalidArgument(f"after: expected a datetime, got {after!r:.80}")
    request = DescribeCronRequest()
    _assign(request, "cron_expression", expression)
    _assign(request, "timezone", timezone)
    _assign(request, "count", count)
    if after is not None:
        request.after.CopyFrom(to_timestamp(after, "after"))
    return request
