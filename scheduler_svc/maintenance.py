"""Built-in maintenance: the retention task and its schedule.

On start the service creates the task ``tickwork-retention`` (handler ``tickwork.retention``,
params ``{"keep_days": TICKWORK_RETENTION_DAYS}``) and the schedule ``tickwork-retention``
(daily at 03:17 UTC, catch-up RUN_ONCE) when they do not exist; from then on they are
ordinary rows: listed, edited, disabled like any other. The worker runs the task like any
job; its handler asks the service to delete old history through
``WorkerService.PurgeHistory`` (the worker never touches the database).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from scheduler_svc.app import App
from scheduler_svc.errors import AlreadyExists, InvalidArgument, NotFound
from scheduler_svc.records import ScheduleRecord

log = logging.getLogger(__name__)

RETENTION_HANDLER = "tickwork.retention"
RETENTION_TASK = "tickwork-retention"
RETENTION_SCHEDULE = "tickwork-retention"
RETENTION_CRON = "17 3 * * *"


def keep_days(params: dict[str, Any]) -> int:
    """The ``keep_days`` param: a whole number >= 1. Raises InvalidArgument."""
    value = params.get("keep_days")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(
            f"keep_days must be a whole number of days >= 1, got {value!r}", field="keep_days"
        )
    return value


async def ensure_builtins(app: App) -> None:
    """Create the retention task and schedule if missing (no-op when retention_days is 0).

    Safe with several replicas starting at once: a concurrent create is taken as done.
    """
    days = app.settings.retention_days
    if days <= 0:
        return
    now = app.clock()
    try:
        task = await app.store.get_task_by_name(RETENTION_TASK)
    except NotFound:
        values: dict[str, Any] = {
            "name": RETENTION_TASK,
            "description": (
                "Built in: deletes ended jobs and fire records older than keep_days days."
            ),
            "handler": RETENTION_HANDLER,
            "params": {"keep_days": days},
            "task_priority": 100,
            "enabled": True,
            "timeout_seconds": 3600.0,
            "max_attempts": 3,
            "backoff_base_seconds": 60.0,
            "backoff_cap_seconds": 600.0,
        }
        try:
            task = await app.store.create_task(values, now)
            log.info("built-in retention task created", extra={"task_id": task.id})
        except AlreadyExists:
            task = await app.store.get_task_by_name(RETENTION_TASK)
    try:
        await app.store.get_schedule_by_name(RETENTION_SCHEDULE)
        return
    except NotFound:
        pass
    schedule: dict[str, Any] = {
        "name": RETENTION_SCHEDULE,
        "description": "Built in: runs the retention task daily.",
        "cron_expression": RETENTION_CRON,
        "interval_seconds": 0,
        "timezone": "UTC",
        "catch_up_policy": "RUN_ONCE",
        "enabled": True,
    }
    draft = ScheduleRecord(
        id=0, next_run_at=None, last_run_at=None, created_at=now, updated_at=now, **schedule
    )
    schedule["next_run_at"] = app.next_run(draft)
    try:
        created = await app.store.create_schedule(schedule, [task.id], now)
    except AlreadyExists:
        return
    log.info("built-in retention schedule created", extra={"schedule_id": created.id})
    app.schedules_changed()


def cutoff(now: dt.datetime, days: int) -> dt.datetime:
    """History before this instant is deleted."""
    return now - dt.timedelta(days=days)
