"""Declarative configuration: a TOML file of tasks and schedules, applied idempotently.

This module holds what a parsed file is (:class:`Config`, :class:`TaskSpec`,
:class:`ScheduleSpec`), the ``ConfigService.ApplyConfig`` request built from it, the call
that sends it and the report of what it did. Reading and checking the file is
:mod:`tickwork.apply_file`; its :func:`load_config`, :func:`parse_config` and
:class:`ConfigError` are importable from here too.

File format (every key but ``name``, ``handler`` and the schedule's timing is optional)::

    [[tasks]]
    name = "health-check"
    handler = "shell"
    params = { argv = ["sh", "-c", "echo ok"] }
    description = "..."
    task_priority = 100
    timeout_seconds = 30
    retry = { max_attempts = 3, backoff_base_seconds = 5, backoff_cap_seconds = 60 }
    memory_limit_bytes = 314572800  # RLIMIT_AS of each job process; 0: none
    cpu_limit_seconds = 60          # RLIMIT_CPU of each job process; 0: none
    concurrency_group = "staging"  # jobs of tasks in one group never run at once
    labels = { owner = "team-a" }  # for ownership, selectors and --prune
    expect_success_within_seconds = 93600  # dead-man: notify when no success for this long
    warn_after_seconds = 600       # notify when a job still runs this long after it started
    notify = [{ notifiers = ["ops-hook"], events = ["final_failure", "recovery"] }]
    enabled = true

    [[schedules]]
    name = "every-10s"
    cron = "*/10 * * * * *"        # or: interval_seconds = 30
    timezone = "UTC"
    catch_up_policy = "SKIP"       # or "RUN_ONCE", "RUN_ALL"
    catch_up_window_seconds = 5    # how old a missed window may be and still fire
    max_catch_up_runs = 100        # RUN_ALL's cap; 0 means 100
    jitter_seconds = 0             # most delay added to each fire's start, 0 to 86400
    jitter_mode = "RANDOM"         # or "STABLE" (one delay from the name)
    start_time = 2026-06-01T00:00:00Z  # no fire before (a TOML date-time with an offset)
    end_time = 2027-01-01T00:00:00Z    # no fire at or after; after start_time
    overlap_policy = "BUFFER_ALL"  # SKIP (default) | BUFFER_ONE | BUFFER_ALL | REPLACE | ALLOW
    max_buffered = 20              # BUFFER_ALL's and ALLOW's cap; 0 (default) means 100
    start_deadline_seconds = 300   # notify when a fire's job has not started by then
    notify = [{ notifiers = ["ops-hook"], events = ["missed_fire"], every = true }]
    tasks = ["health-check"]
    description = "..."
    labels = { owner = "team-a" }
    catch_up_on_resume = false     # true: a resume fires the paused windows (catch-up)
    enabled = true

    [[notifiers]]                  # see tickwork.apply_notifiers
    name = "ops-hook"
    type = "webhook"               # email | webhook | slack
    url = "https://hooks.example.com/tickwork"
    secret = "..."

:func:`load_config` parses and validates the file (no I/O besides reading it);
:func:`apply_config` upserts it by name through a :class:`~tickwork.Client`, in one
server transaction (``ConfigService.ApplyConfig``): all or nothing, or with ``dry_run``
nothing but the report. Tasks and schedules on the server that the file does not name are
left alone, unless a prune selector is given: then those whose labels match it are deleted
in the same transaction. A schedule may give both ``cron`` and ``interval_seconds``: cron
wins, as in the API.

``enabled`` is managed only when the file gives it: a task the scheduler disabled after
repeated failures stays disabled when a file without ``enabled`` is applied again.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from tickwork import _requests as rq
from tickwork._sync import Client
from tickwork.apply_file import (
    Config,
    ConfigError,
    ScheduleSpec,
    TaskSpec,
    load_config,
    parse_config,
)
from tickwork.apply_notifiers import NotifierSpec
from tickwork.errors import TickworkError
from tickwork.jitter import jitter_text
from tickwork.v1.config_pb2 import ApplyConfigRequest, ConfigChange, ConfigSchedule
from tickwork.v1.schedule_pb2 import Schedule
from tickwork.v1.task_pb2 import RetryPolicy, Task

__all__ = [
    "ApplyChange",
    "ApplyReport",
    "Config",
    "ConfigError",
    "ScheduleSpec",
    "TaskSpec",
    "apply_config",
    "config_request",
    "load_config",
    "parse_config",
]


@dataclass(frozen=True)
class ApplyChange:
    """What :func:`apply_config` did (or, in a dry run, would do) to one task or schedule.

    Attributes:
        kind: ``"task"``, ``"schedule"`` or ``"notifier"``.
        name: its name.
        action: ``"created"``, ``"updated"``, ``"unchanged"`` or ``"deleted"`` (pruned).
        fields: for ``"updated"``, the fields that differed (API field paths, e.g.
            ``retry_policy.max_attempts``, ``cron_expression``, ``task_ids``), sorted.
        fire_times_before: for a schedule whose timing changes, its next three fire
            times (aware UTC) before.
        fire_times_after: for a schedule whose timing changes or that is created, its
            next three fire times after.
    """

    kind: Literal["task", "schedule", "notifier"]
    name: str
    action: Literal["created", "updated", "unchanged", "deleted"]
    fields: tuple[str, ...] = ()
    fire_times_before: tuple[dt.datetime, ...] = ()
    fire_times_after: tuple[dt.datetime, ...] = ()
    jitter: str = ""
    """For a schedule with jitter whose fire times are shown: how its starts follow them."""

    def describe(self, *, dry_run: bool = False) -> str:
        """Lines such as ``"task health-check: updated (params, timeout_seconds)"`` (in a
        dry run ``"would be updated"``), then the fire times before and after, if any."""
        extra = f" ({', '.join(self.fields)})" if self.fields else ""
        action = (
            f"would be {self.action}" if dry_run and self.action != "unchanged" else self.action
        )
        lines = [f"{self.kind} {self.name}: {action}{extra}"]
        for label, times in (("before", self.fire_times_before), ("after", self.fire_times_after)):
            if times:
                shown = ", ".join(t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in times)
                lines.append(f"  next fire times {label}: {shown}")
        if self.jitter and self.fire_times_after:
            lines.append(f"  starts: {self.jitter}")
        return "\n".join(lines)

    def __str__(self) -> str:
        """Return :meth:`describe` of a real run."""
        return self.describe()


@dataclass
class ApplyReport:
    """The outcome of :func:`apply_config`: one change per task, then per schedule, in
    file order. ``dry_run``: nothing was written; the changes are what a run would do."""

    changes: list[ApplyChange] = field(default_factory=list)
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        """True when anything was (or would be) created or updated."""
        return any(c.action != "unchanged" for c in self.changes)

    def count(self, action: str) -> int:
        """How many changes have this action (``"created"``, ``"updated"``, ``"unchanged"``,
        ``"deleted"``)."""
        return sum(1 for c in self.changes if c.action == action)

    def summary(self) -> str:
        """Return e.g. ``"1 created, 0 updated, 3 unchanged"`` (a dry run: ``"dry run, nothing
        written: 1 to create, 0 to update, 3 unchanged"``)."""
        deleted = self.count("deleted")
        if self.dry_run:
            return (
                f"dry run, nothing written: {self.count('created')} to create, "
                f"{self.count('updated')} to update, {self.count('unchanged')} unchanged"
                + (f", {deleted} to delete" if deleted else "")
            )
        actions = ("created", "updated", "unchanged", "deleted") if deleted else _SUMMED
        return ", ".join(f"{self.count(a)} {a}" for a in actions)

    def __str__(self) -> str:
        """One line per change (and its fire times), then the summary."""
        return "\n".join(
            [*(c.describe(dry_run=self.dry_run) for c in self.changes), self.summary()]
        )


_SUMMED = ("created", "updated", "unchanged")

# -- applying -----------------------------------------------------------------------------


def config_request(
    config: Config, *, dry_run: bool = False, prune_selector: str = ""
) -> ApplyConfigRequest:
    """The ``ConfigService.ApplyConfig`` request of ``config``: every field the file
    manages set; ``enabled`` only when the file gives it; ``prune_selector`` as given."""
    request = ApplyConfigRequest(dry_run=dry_run, prune_selector=prune_selector)
    for spec in config.tasks:
        task = Task(
            name=spec.name,
            handler=spec.handler,
            params=rq.to_struct(spec.params),
            description=spec.description,
            task_priority=spec.task_priority,
            timeout_seconds=spec.timeout_seconds,
            retry_policy=RetryPolicy(
                max_attempts=spec.max_attempts,
                backoff_base_seconds=spec.backoff_base_seconds,
                backoff_cap_seconds=spec.backoff_cap_seconds,
            ),
            memory_limit_bytes=spec.memory_limit_bytes,
            cpu_limit_seconds=spec.cpu_limit_seconds,
            concurrency_group=spec.concurrency_group,
            labels=spec.labels,
            expect_success_within_seconds=spec.expect_success_within_seconds,
            warn_after_seconds=spec.warn_after_seconds,
            notify=rq.notify_routes(spec.notify),
            overridable_params=spec.overridable_params,
        )
        if spec.enabled is not None:
            task.enabled = spec.enabled
        request.tasks.append(task)
    for sched in config.schedules:
        schedule = Schedule(
            name=sched.name,
            description=sched.description,
            cron_expression=sched.cron or "",
            interval_seconds=0 if sched.cron else sched.interval_seconds or 0,
            timezone=sched.timezone,
            catch_up_policy=rq.parse_catch_up_policy(sched.catch_up_policy),
            overlap_policy=rq.parse_overlap_policy(sched.overlap_policy),
            max_buffered=sched.max_buffered,
            labels=sched.labels,
            catch_up_on_resume=sched.catch_up_on_resume,
            start_deadline_seconds=sched.start_deadline_seconds,
            notify=rq.notify_routes(sched.notify),
        )
        rq.set_timing(
            schedule,
            {
                "catch_up_window_seconds": sched.catch_up_window_seconds,
                "max_catch_up_runs": sched.max_catch_up_runs,
                "jitter_seconds": sched.jitter_seconds,
                "jitter_mode": sched.jitter_mode,
                "start_time": sched.start_time,
                "end_time": sched.end_time,
            },
        )
        if sched.enabled is not None:
            schedule.enabled = sched.enabled
        request.schedules.append(ConfigSchedule(schedule=schedule, task_names=sched.tasks))
    request.notifiers.extend(spec.message for spec in config.notifiers)
    return request


_KINDS: dict[int, Literal["task", "schedule", "notifier"]] = {
    ConfigChange.KIND_TASK: "task",
    ConfigChange.KIND_SCHEDULE: "schedule",
    ConfigChange.KIND_NOTIFIER: "notifier",
}
_ACTIONS: dict[int, Literal["created", "updated", "unchanged", "deleted"]] = {
    ConfigChange.ACTION_CREATED: "created",
    ConfigChange.ACTION_UPDATED: "updated",
    ConfigChange.ACTION_UNCHANGED: "unchanged",
    ConfigChange.ACTION_DELETED: "deleted",
}


def apply_config(
    client: Client, config: Config, *, dry_run: bool = False, prune_selector: str = ""
) -> ApplyReport:
    """Make the server's tasks and schedules match ``config``, by name, all or nothing.

    One ``ConfigService.ApplyConfig`` call: the server validates every item as CreateTask
    and CreateSchedule would, then, in one transaction, creates each one missing, updates
    one that differs in every field the file manages, and leaves one that matches alone.
    An error leaves the server as it was. Applying the same config twice reports only
    ``"unchanged"`` the second time. A schedule may name a task the file does not, if the
    server has it.

    Args:
        client (Client): a connected client.
        config (Config): from :func:`load_config` or :func:`parse_config`.
        dry_run (bool): compute what would change and write nothing.
        prune_selector (str): a label selector (``"owner=team-a"``): the stored tasks and
            schedules it matches that the file does not name are deleted in the same
            transaction (``"deleted"`` changes); empty deletes nothing.

    Returns:
        ApplyReport: one change per task and per schedule, in file order, then the
        deletions (schedules, then tasks).

    Raises:
        NotFound: a schedule names a task that is neither in the file nor on the server.
        InvalidArgument: the server refused a value (a handler, a priority, an interval...);
            the message starts with where it is in the file, e.g.
            ``tasks[1] (NAME).task_priority: ...``.
        FailedPrecondition: a task to prune is still run by a schedule that stays, or has a
            running job.
        TickworkError: any other server error. Nothing was applied.
    """
    request = config_request(config, dry_run=dry_run, prune_selector=prune_selector)
    try:
        response = client.apply_config(request)
    except TickworkError as err:
        raise _located(err, config) from None
    report = ApplyReport(dry_run=response.dry_run)
    specs = {spec.name: spec for spec in config.schedules}
    for change in response.changes:
        spec = specs.get(change.name) if change.kind == ConfigChange.KIND_SCHEDULE else None
        report.changes.append(
            ApplyChange(
                _KINDS[change.kind],
                change.name,
                _ACTIONS[change.action],
                tuple(change.fields),
                tuple(t.ToDatetime(dt.UTC) for t in change.fire_times_before),
                tuple(t.ToDatetime(dt.UTC) for t in change.fire_times_after),
                jitter_text(spec.name, spec.jitter_seconds, spec.jitter_mode) if spec else "",
            )
        )
    return report


_ITEM = re.compile(r"^(tasks|schedules|notifiers)\[(\d+)\]")


def _located(err: TickworkError, config: Config) -> TickworkError:
    """``err`` with the name of the item at fault after its position, e.g.
    ``tasks[1] (nightly).task_priority: ...``."""
    found = _ITEM.match(err.field)
    if not found:
        return err
    by_kind: dict[str, Sequence[TaskSpec | ScheduleSpec | NotifierSpec]] = {
        "tasks": config.tasks,
        "schedules": config.schedules,
        "notifiers": config.notifiers,
    }
    items = by_kind[found[1]]
    index = int(found[2])
    if index >= len(items):
        return err
    where = f"{found[0]} ({items[index].name})"
    details = err.details
    if details.startswith(found[0]):
        details = where + details[len(found[0]) :]
    located = type(err)(
        details,
        code=err.code,
        reason=err.reason,
        field=err.field,
        field_violations=err.field_violations,
        resource=err.resource,
        retry_delay=err.retry_delay,
    )
    return located
