"""Schedule requests: GetSchedule, CreateSchedule and its bulk form, UpdateSchedule with
its field mask, and DescribeCron."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Required, TypedDict

from google.protobuf.field_mask_pb2 import FieldMask

from tickwork._requests.checks import (
    Ref,
    assign_field,
    assign_labels,
    check_ref,
    check_type,
    parse_catch_up_policy,
    parse_jitter_mode,
    parse_overlap_policy,
    task_refs,
)
from tickwork._requests.convert import to_timestamp
from tickwork._requests.routes import Route, notify_routes
from tickwork.errors import InvalidArgument
from tickwork.v1.common_pb2 import Trigger
from tickwork.v1.schedule_pb2 import (
    BatchCreateSchedulesRequest,
    CatchUpPolicy,
    CreateScheduleRequest,
    DescribeCronRequest,
    GetScheduleRequest,
    JitterMode,
    OverlapPolicy,
    PauseScheduleRequest,
    Schedule,
    TriggerScheduleRequest,
    UpdateScheduleRequest,
)


class _ScheduleOptions(TypedDict, total=False):
    """The writable Schedule fields, by SDK keyword, besides ``name`` and ``tasks``: what
    ``create_schedule``, ``create_schedules`` and ``update_schedule`` take alike."""

    description: str
    cron: str
    interval_seconds: int
    timezone: str
    catch_up_policy: CatchUpPolicy | str
    enabled: bool
    catch_up_window_seconds: float | None
    max_catch_up_runs: int
    jitter_seconds: float
    jitter_mode: JitterMode | str
    start_time: datetime | None
    end_time: datetime | None
    overlap_policy: OverlapPolicy | str
    max_buffered: int
    labels: Mapping[str, str]
    catch_up_on_resume: bool
    start_deadline_seconds: float
    notify: Sequence[Route]


class ScheduleFields(_ScheduleOptions, total=False):
    """Keyword arguments of ``update_schedule``: the writable Schedule fields.

    ``cron`` is the cron expression; ``tasks`` the task ids or names (replacing the list).
    Giving ``interval_seconds`` without ``cron`` also clears the cron expression, since a
    cron expression would otherwise win over the interval.
    """

    name: str
    tasks: Sequence[Ref]


class NewSchedule(_ScheduleOptions, total=False):
    """One schedule for ``create_schedules``: the arguments of ``create_schedule``."""

    name: Required[str]
    tasks: Required[Sequence[Ref]]


#: The catch-up, jitter and bounds keywords, Schedule fields of the same names.
TIMING_KEYWORDS = (
    "catch_up_window_seconds",
    "max_catch_up_runs",
    "jitter_seconds",
    "jitter_mode",
    "start_time",
    "end_time",
)

_NEW_SCHEDULE_KEYS = frozenset(NewSchedule.__annotations__)
_SCHEDULE_FIELDS = frozenset(ScheduleFields.__annotations__)
# SDK keyword -> Schedule field path in the update mask.
_SCHEDULE_PATHS = {"cron": "cron_expression", "tasks": "task_ids"}

SCHEDULE_MASK = (
    "name",
    "description",
    "cron_expression",
    "interval_seconds",
    "timezone",
    "catch_up_policy",
    "enabled",
    "task_ids",
    *TIMING_KEYWORDS,
    "overlap_policy",
    "max_buffered",
    "labels",
    "catch_up_on_resume",
    "start_deadline_seconds",
    "notify",
)
"""Every writable Schedule field this SDK sets: the full update mask."""


def get_schedule_request(ref: Ref) -> GetScheduleRequest:
    """Build GetSchedule by id (int) or by name (str); raises InvalidArgument on a bad ref."""
    ref = check_ref(ref, "schedule")
    if isinstance(ref, int):
        return GetScheduleRequest(schedule_id=ref)
    return GetScheduleRequest(name=ref)


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
    catch_up_window_seconds: float | None = None,
    max_catch_up_runs: int = 0,
    jitter_seconds: float = 0.0,
    jitter_mode: JitterMode | str = "RANDOM",
    start_time: datetime | None = None,
    end_time: datetime | None = None,
    overlap_policy: OverlapPolicy | str = "SKIP",
    max_buffered: int = 0,
    labels: Mapping[str, str] | None = None,
    catch_up_on_resume: bool = False,
    start_deadline_seconds: float = 0.0,
    notify: Sequence[Route] = (),
) -> Schedule:
    """Build a Schedule with every writable field set explicitly (see ``create_schedule``).

    Raises:
        InvalidArgument: neither ``cron`` nor ``interval_seconds`` given, a bad policy or
            jitter mode, or a value of the wrong type (named).
    """
    check_type(name, str, "name")
    check_type(cron, str | None, "cron")
    check_type(interval_seconds, int | None, "interval_seconds")
    check_type(timezone, str, "timezone")
    check_type(description, str, "description")
    check_type(enabled, bool, "enabled")
    check_type(catch_up_on_resume, bool, "catch_up_on_resume")
    if not cron and not interval_seconds:
        raise InvalidArgument("schedule: give cron or interval_seconds")
    policy = parse_catch_up_policy(catch_up_policy)
    schedule = Schedule(catch_up_policy=policy, overlap_policy=parse_overlap_policy(overlap_policy))
    for field, value in (
        ("max_buffered", max_buffered),
        ("name", name),
        ("description", description),
        ("cron_expression", cron or ""),
        ("interval_seconds", 0 if cron else interval_seconds or 0),
        ("timezone", timezone),
        ("enabled", enabled),
        ("catch_up_on_resume", catch_up_on_resume),
        ("start_deadline_seconds", start_deadline_seconds),
    ):
        assign_field(schedule, field, value, "cron" if field == "cron_expression" else None)
    set_timing(
        schedule,
        {
            "catch_up_window_seconds": catch_up_window_seconds,
            "max_catch_up_runs": max_catch_up_runs,
            "jitter_seconds": jitter_seconds,
            "jitter_mode": jitter_mode,
            "start_time": start_time,
            "end_time": end_time,
        },
    )
    assign_labels(schedule, labels)
    schedule.notify.extend(notify_routes(notify))
    try:
        schedule.task_ids.extend(task_ids)
    except (TypeError, ValueError):
        raise InvalidArgument(f"tasks: not task ids: {list(task_ids)!r:.80}") from None
    return schedule


def set_timing(schedule: Schedule, values: Mapping[str, object]) -> None:
    """Set the catch-up, jitter and bounds fields of ``schedule`` from ``values`` (keys of
    :data:`TIMING_KEYWORDS`; None leaves a field unset: the server's default, or no bound).

    Raises:
        InvalidArgument: a value of the wrong type or an unknown jitter mode, naming it.
    """
    for key, value in values.items():
        if value is None:
            continue
        if key == "jitter_mode":
            schedule.jitter_mode = parse_jitter_mode(value)  # type: ignore[arg-type]
        elif key in ("start_time", "end_time"):
            if not isinstance(value, datetime):
                raise InvalidArgument(f"{key}: expected an aware datetime, got {value!r:.80}")
            getattr(schedule, key).CopyFrom(to_timestamp(value, key))
        else:
            kind = int if key == "max_catch_up_runs" else int | float
            check_type(value, kind, key)
            assign_field(schedule, key, value)


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
                **_timing_of(item),
                overlap_policy=item.get("overlap_policy", "SKIP"),
                max_buffered=item.get("max_buffered", 0),
                labels=item.get("labels"),
                catch_up_on_resume=item.get("catch_up_on_resume", False),
                start_deadline_seconds=item.get("start_deadline_seconds", 0.0),
                notify=item.get("notify", ()),
            )
        except InvalidArgument as err:
            raise InvalidArgument(f"schedules[{i}]: {err.details}") from None
        requests.append(CreateScheduleRequest(schedule=schedule))
    return BatchCreateSchedulesRequest(requests=requests)


def _timing_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The catch-up, jitter and bounds keywords an item of ``create_schedules`` gives."""
    return {k: item[k] for k in TIMING_KEYWORDS if k in item}


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
        elif key in TIMING_KEYWORDS:
            set_timing(schedule, {key: value})  # None: back to the default, or no bound
        elif key == "overlap_policy":
            schedule.overlap_policy = parse_overlap_policy(fields["overlap_policy"])
        elif key == "labels":
            assign_labels(schedule, fields["labels"])
        elif key == "notify":
            schedule.notify.extend(notify_routes(fields["notify"]))
        else:
            assign_field(schedule, path, value, key)
        paths.append(path)
    if "interval_seconds" in fields and "cron" not in fields:
        schedule.cron_expression = ""
        paths.append("cron_expression")
    return UpdateScheduleRequest(schedule=schedule, update_mask=FieldMask(paths=paths))


def trigger_schedule_request(
    schedule_id: int, trigger: Trigger | int, request_id: str
) -> TriggerScheduleRequest:
    """Build TriggerSchedule; ``trigger`` TRIGGER_API or TRIGGER_MANUAL.

    Raises:
        InvalidArgument: another trigger, or a request_id that is not text.
    """
    if trigger not in (Trigger.TRIGGER_API, Trigger.TRIGGER_MANUAL):
        raise InvalidArgument(f"trigger: give TRIGGER_API or TRIGGER_MANUAL, not {trigger!r:.40}")
    check_type(request_id, str, "request_id")
    request = TriggerScheduleRequest(id=schedule_id, trigger=trigger)  # type: ignore[arg-type]
    assign_field(request, "request_id", request_id)
    return request


def describe_cron_request(
    expression: str, timezone: str, after: datetime | None, count: int
) -> DescribeCronRequest:
    """Build DescribeCron; ``after`` must be aware (None means the server's now).

    Raises:
        InvalidArgument: a value of the wrong type or range, naming it.
    """
    check_type(expression, str, "cron_expression")
    check_type(timezone, str, "timezone")
    check_type(count, int, "count")
    if after is not None and not isinstance(after, datetime):
        raise InvalidArgument(f"after: expected a datetime, got {after!r:.80}")
    request = DescribeCronRequest()
    assign_field(request, "cron_expression", expression)
    assign_field(request, "timezone", timezone)
    assign_field(request, "count", count)
    if after is not None:
        request.after.CopyFrom(to_timestamp(after, "after"))
    return request


def pause_schedule_request(
    schedule_id: int, note: str = "", until: datetime | None = None
) -> PauseScheduleRequest:
    """Build PauseSchedule: ``note`` for people, ``until`` (aware) when it resumes.

    Raises:
        InvalidArgument: a note that is not str, or a naive ``until``.
    """
    check_type(note, str, "note")
    request = PauseScheduleRequest(id=schedule_id, note=note)
    if until is not None:
        request.paused_until.CopyFrom(to_timestamp(until, "until"))
    return request
