"""ConfigService: a whole configuration of tasks and schedules, applied in one transaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from scheduler_svc import selectors, validation
from scheduler_svc.app import App
from scheduler_svc.callers import caller_label
from scheduler_svc.errors import InvalidArgument, Reason, ServiceError
from scheduler_svc.firing import cron_schedule
from scheduler_svc.records import ScheduleRecord
from scheduler_svc.servicers._errors import rpc_errors
from scheduler_svc.servicers.notifiers import notifier_record
from scheduler_svc.servicers.schedules import WRITABLE as SCHEDULE_WRITABLE
from scheduler_svc.servicers.schedules import check_timing, schedule_values
from scheduler_svc.servicers.tasks import WRITABLE as TASK_WRITABLE
from scheduler_svc.servicers.tasks import task_values
from scheduler_svc.store import Applied, ScheduleItem
from scheduler_svc.store.config import TIMING, Action, Change
from scheduler_svc.store.outbox import NotifierRecord
from tickwork.v1 import config_pb2, config_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]

#: The most tasks, and the most schedules, one ApplyConfig call may hold.
MAX_ITEMS = 1000
#: How many fire times a changed schedule's preview shows, before and after.
PREVIEW = 3

#: Column names to the field paths a ConfigChange reports.
_FIELD_PATHS = {
    "max_attempts": "retry_policy.max_attempts",
    "backoff_base_seconds": "retry_policy.backoff_base_seconds",
    "backoff_cap_seconds": "retry_policy.backoff_cap_seconds",
    "start_at": "start_time",
    "end_at": "end_time",
}
_KINDS = {
    "task": config_pb2.ConfigChange.KIND_TASK,
    "schedule": config_pb2.ConfigChange.KIND_SCHEDULE,
    "notifier": config_pb2.ConfigChange.KIND_NOTIFIER,
}
_ACTIONS = {
    Action.CREATED: config_pb2.ConfigChange.ACTION_CREATED,
    Action.UPDATED: config_pb2.ConfigChange.ACTION_UPDATED,
    Action.UNCHANGED: config_pb2.ConfigChange.ACTION_UNCHANGED,
    Action.DELETED: config_pb2.ConfigChange.ACTION_DELETED,
}


@contextmanager
def at(prefix: str, kind: str) -> Iterator[None]:
    """Name the item at fault: an error about field ``task.f`` (``kind`` "task") is re-raised
    about ``<prefix>.f``, e.g. ``tasks[2].task_priority``."""
    try:
        yield
    except ServiceError as err:
        rest = err.field.removeprefix(f"{kind}.") if err.field else ""
        field = f"{prefix}.{rest}" if rest else prefix
        raise type(err)(err.text, field=field, reason=err.reason, resource=err.resource) from None


def _check_count(count: int, field: str) -> None:
    if count > MAX_ITEMS:
        raise InvalidArgument(
            f"holds {count} items; at most {MAX_ITEMS}", field=field, reason=Reason.TOO_MANY_ITEMS
        )


def _unique(names: list[str], kind: str) -> None:
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        earlier = first.setdefault(name, i)
        if earlier != i:
            raise InvalidArgument(
                f"{name!r} is also the name of {kind}[{earlier}]", field=f"{kind}[{i}].name"
            )


def task_items(request: config_pb2.ApplyConfigRequest) -> list[dict[str, Any]]:
    """The request's tasks as validated columns (``enabled`` only when set), as CreateTask
    validates them. Raises InvalidArgument naming ``tasks[i].<field>``."""
    _check_count(len(request.tasks), "tasks")
    out = []
    for i, task in enumerate(request.tasks):
        with at(f"tasks[{i}]", "task"):
            paths = tuple(p for p in TASK_WRITABLE if p != "enabled" or task.HasField("enabled"))
            values = task_values(task, paths)
            validation.handler_params(values["handler"], values["params"])
        out.append(values)
    _unique([v["name"] for v in out], "tasks")
    return out


def schedule_items(request: config_pb2.ApplyConfigRequest, now: dt.datetime) -> list[ScheduleItem]:
    """The request's schedules as validated columns and task names, as CreateSchedule
    validates them; a cron expression wins over an interval (stored as 0). Raises
    InvalidArgument naming ``schedules[i].<field>``."""
    _check_count(len(request.schedules), "schedules")
    out = []
    for i, item in enumerate(request.schedules):
        prefix = f"schedules[{i}]"
        s = item.schedule
        with at(prefix, "schedule"):
            paths = tuple(
                p
                for p in SCHEDULE_WRITABLE
                if p != "task_ids" and (p != "enabled" or s.HasField("enabled"))
            )
            values = schedule_values(s, paths)
            if values["cron_expression"]:
                values["interval_seconds"] = 0
            draft = ScheduleRecord(
                id=0,
                next_run_at=None,
                last_run_at=None,
                created_at=now,
                updated_at=now,
                **{"enabled": True, **values},
            )
            check_timing(draft)
        names = tuple(item.task_names)
        if not names:
            raise InvalidArgument(
                "name at least one task",
                field=f"{prefix}.task_names",
                reason=Reason.FIELD_REQUIRED,
            )
        if len(names) > validation.MAX_SCHEDULE_TASKS:
            raise InvalidArgument(
                f"lists {len(names)} tasks; at most {validation.MAX_SCHEDULE_TASKS}",
                field=f"{prefix}.task_names",
                reason=Reason.TOO_MANY_ITEMS,
            )
        for j, name in enumerate(names):
            validation.free_text(name, f"{prefix}.task_names[{j}]")
        if len(set(names)) != len(names):
            raise InvalidArgument("a task is named twice", field=f"{prefix}.task_names")
        out.append(ScheduleItem(values, names, prefix))
    _unique([item.values["name"] for item in out], "schedules")
    return out


def notifier_items(request: config_pb2.ApplyConfigRequest) -> list[NotifierRecord]:
    """The request's notifiers as records, checked as PutNotifier checks them. Raises
    InvalidArgument naming ``notifiers[i].<field>``."""
    _check_count(len(request.notifiers), "notifiers")
    out = []
    for i, notifier in enumerate(request.notifiers):
        with at(f"notifiers[{i}]", "notifier"):
            out.append(notifier_record(notifier))
    _unique([n.name for n in out], "notifiers")
    return out


def fire_times(record: ScheduleRecord | None, count: int = PREVIEW) -> list[dt.datetime]:
    """A schedule's next ``count`` fire times from its stored next run (cron: the
    expression's next ones; interval: one interval apart), none at or after its end_time;
    empty when disabled or None."""
    if record is None or not record.enabled or record.next_run_at is None:
        return []
    first = record.next_run_at
    if not record.cron_expression:
        step = dt.timedelta(seconds=record.interval_seconds)
        return _before_end(record, [first + k * step for k in range(count)])
    times = [first]
    times += [
        p.fire_time
        for p in cron_schedule(record.cron_expression, record.timezone).next_fire_times(
            first, count - 1
        )
    ]
    return _before_end(record, times[:count])


def _before_end(record: ScheduleRecord, times: list[dt.datetime]) -> list[dt.datetime]:
    """``times`` before the schedule's end_time (all of them without one)."""
    end = record.end_at
    return times if end is None else [t for t in times if t < end]


def _stamps(times: list[dt.datetime]) -> list[timestamp_pb2.Timestamp]:
    out = []
    for t in times:
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(t)
        out.append(stamp)
    return out


def change_message(change: Change) -> config_pb2.ConfigChange:
    """One change as the API answers it (field paths of Task and Schedule)."""
    out = config_pb2.ConfigChange(
        kind=_KINDS[change.kind],
        name=change.name,
        action=_ACTIONS[change.action],
        fields=sorted(_FIELD_PATHS.get(f, f) for f in change.fields),
        id=max(change.id, 0),
    )
    if change.kind == "schedule":
        timing = set(TIMING)
        if change.action == Action.CREATED or timing & set(change.fields):
            out.fire_times_after.extend(_stamps(fire_times(change.after)))
        if change.action == Action.UPDATED and timing & set(change.fields):
            out.fire_times_before.extend(_stamps(fire_times(change.before)))
    return out


class ConfigServicer(config_pb2_grpc.ConfigServiceServicer):
    """tickwork.v1.ConfigService."""

    def __init__(self, app: App) -> None:
        self.app = app

    @rpc_errors
    async def ApplyConfig(
        self, request: config_pb2.ApplyConfigRequest, context: Ctx
    ) -> config_pb2.ApplyConfigResponse:
        now = self.app.clock()
        prune = selectors.parse(request.prune_selector, "prune_selector")
        tasks = task_items(request)
        schedules = schedule_items(request, now)
        notifiers = notifier_items(request)
        applied: Applied = await self.app.store.apply_config(
            tasks,
            schedules,
            now,
            self.app.next_run,
            dry_run=request.dry_run,
            by=caller_label(),
            prune=prune or None,
            notifier_items=notifiers,
        )
        if not request.dry_run:
            for job_id in applied.cancelled_jobs:
                self.app.hub.job_changed(job_id)
            if any(c.action != Action.UNCHANGED for c in applied.changes):
                self.app.schedules_changed()
        changes = [change_message(c) for c in applied.changes]
        if request.dry_run:
            for change in changes:  # ids a rolled-back insert took are not the items'
                if change.action == config_pb2.ConfigChange.ACTION_CREATED:
                    change.id = 0
        return config_pb2.ApplyConfigResponse(changes=changes, dry_run=request.dry_run)
