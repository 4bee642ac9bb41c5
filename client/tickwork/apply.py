"""Declarative configuration: a TOML file of tasks and schedules, applied idempotently.

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
    max_buffered = 20              # BUFFER_ALL's cap; 0 (default) means 100, at most 10000
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
import os
import re
import tomllib
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tickwork import _requests as rq
from tickwork._sync import Client
from tickwork.apply_notifiers import NotifierSpec, parse_notifiers
from tickwork.errors import InvalidArgument, TickworkError
from tickwork.jitter import MAX_JITTER_S, jitter_text
from tickwork.v1.config_pb2 import ApplyConfigRequest, ConfigChange, ConfigSchedule
from tickwork.v1.schedule_pb2 import CatchUpPolicy, JitterMode, OverlapPolicy, Schedule
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


class ConfigError(InvalidArgument):
    """The configuration file is unreadable or malformed.

    ``details`` holds one line per problem, each starting with the key at fault, e.g.
    ``tasks[2].handler: required``.

    Attributes:
        problems (list[tuple[str, str]]): ``(key, message)`` pairs, in file order.
        source (str): the file's path, or ``"<config>"``.
    """

    def __init__(self, problems: Sequence[tuple[str, str]], source: str = "<config>") -> None:
        """Create the error from ``(key, message)`` pairs (at least one)."""
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(f"{key}: {msg}" if key else msg for key, msg in problems))

    @property
    def key(self) -> str:
        """The key of the first problem, e.g. ``"tasks[2].handler"``."""
        return self.problems[0][0]

    def __str__(self) -> str:
        """Return ``"<source>: <problem>"`` lines."""
        return "\n".join(f"{self.source}: {line}" for line in self.details.splitlines())


@dataclass(frozen=True)
class TaskSpec:
    """A task as the file describes it. Seconds are floats; ``enabled=None`` means the file
    does not manage the enabled state (new tasks are created enabled)."""

    name: str
    handler: str
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    task_priority: int = 100
    timeout_seconds: float = 0.0
    max_attempts: int = 1
    backoff_base_seconds: float = 10.0
    backoff_cap_seconds: float = 600.0
    enabled: bool | None = None
    memory_limit_bytes: int = 0
    cpu_limit_seconds: int = 0
    concurrency_group: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    expect_success_within_seconds: float = 0.0
    warn_after_seconds: float = 0.0
    #: Its notification routes: mappings of ``notifiers``, ``events``, ``every``.
    notify: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule as the file describes it: ``cron`` or ``interval_seconds`` (both given:
    cron wins, the interval is not sent); ``tasks`` are task names; ``catch_up_policy`` is
    ``"SKIP"`` or ``"RUN_ONCE"``; ``overlap_policy`` an OverlapPolicy's short name and
    ``max_buffered`` its BUFFER_ALL cap (0 means 100); ``enabled=None`` means unmanaged
    (new schedules are created enabled)."""

    name: str
    tasks: tuple[str, ...]
    cron: str | None = None
    interval_seconds: int | None = None
    timezone: str = "UTC"
    catch_up_policy: str = "SKIP"
    description: str = ""
    enabled: bool | None = None
    catch_up_window_seconds: float | None = None
    """None: the server's default, 5."""
    max_catch_up_runs: int = 0
    jitter_seconds: float = 0.0
    jitter_mode: str = "RANDOM"
    start_time: dt.datetime | None = None
    end_time: dt.datetime | None = None
    overlap_policy: str = "SKIP"
    max_buffered: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    catch_up_on_resume: bool = False
    start_deadline_seconds: float = 0.0
    notify: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Config:
    """A parsed configuration: tasks and schedules in file order."""

    tasks: tuple[TaskSpec, ...] = ()
    schedules: tuple[ScheduleSpec, ...] = ()
    source: str = "<config>"
    #: The ``[[notifiers]]`` tables (:mod:`tickwork.apply_notifiers`).
    notifiers: tuple[NotifierSpec, ...] = ()


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

# -- parsing ------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a TOML configuration file.

    Args:
        path (str | PathLike): the file.

    Returns:
        Config: the tasks and schedules, with defaults filled in.

    Raises:
        ConfigError: the file cannot be read, is not UTF-8 or not TOML, or a key is missing,
            unknown or of the wrong type (every problem is listed, each naming its key).
    """
    source = os.fspath(path)
    try:
        with open(source, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as err:
        raise ConfigError([("", f"cannot read: {err.strerror or err}")], source) from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError([("", f"invalid TOML: {err}")], source) from None
    except UnicodeDecodeError as err:  # TOML is UTF-8; tomllib decodes the bytes first
        raise ConfigError(
            [("", f"not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start})")],
            source,
        ) from None
    return parse_config(data, source)


def parse_config(data: Mapping[str, Any], source: str = "<config>") -> Config:
    """Validate an already-decoded configuration (the dict ``tomllib`` returns).

    Raises:
        ConfigError: every problem found, each naming its key.
    """
    problems = _Problems()
    for key in data:
        if key not in ("tasks", "schedules", "notifiers"):
            problems.add(key, "unknown key (expected tasks, schedules, notifiers)")
    tasks = tuple(
        t
        for i, item in enumerate(_tables(data, "tasks", problems))
        if (t := _task(i, item, problems))
    )
    schedules = tuple(
        s
        for i, item in enumerate(_tables(data, "schedules", problems))
        if (s := _schedule(i, item, problems))
    )
    _check_unique("tasks", [t.name for t in tasks], problems)
    _check_unique("schedules", [s.name for s in schedules], problems)
    notifiers = parse_notifiers(data.get("notifiers"), problems.add)
    if problems:
        raise ConfigError(problems, source)
    return Config(tasks=tasks, schedules=schedules, source=source, notifiers=notifiers)


class _Problems(list[tuple[str, str]]):
    def add(self, key: str, message: str) -> None:
        self.append((key, message))


_TASK_KEYS = (
    "name",
    "handler",
    "params",
    "description",
    "task_priority",
    "timeout_seconds",
    "retry",
    "enabled",
    "memory_limit_bytes",
    "cpu_limit_seconds",
    "concurrency_group",
    "labels",
    "expect_success_within_seconds",
    "warn_after_seconds",
    "notify",
)
_ALERT_KEYS = ("expect_success_within_seconds", "warn_after_seconds")
_LIMIT_KEYS = ("memory_limit_bytes", "cpu_limit_seconds")
_RETRY_KEYS = ("max_attempts", "backoff_base_seconds", "backoff_cap_seconds")
_SCHEDULE_KEYS = (
    "name",
    "cron",
    "interval_seconds",
    "timezone",
    "catch_up_policy",
    "tasks",
    "description",
    "enabled",
    *rq.TIMING_KEYWORDS,
    "overlap_policy",
    "max_buffered",
    "labels",
    "catch_up_on_resume",
    "start_deadline_seconds",
    "notify",
)


def _labels(item: Mapping[str, Any], prefix: str, problems: _Problems) -> dict[str, str]:
    """The ``labels`` table of ``item``: strings to strings (the service checks the rest)."""
    table = _get(item, prefix, "labels", "table", problems) or {}
    for key, value in table.items():
        if not isinstance(value, str):
            problems.add(
                f"{prefix}.labels.{key}", f"expected a string, got {_type_name(value)} {value!r}"
            )
    return dict(table)


def _tables(data: Mapping[str, Any], key: str, problems: _Problems) -> list[Mapping[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        problems.add(key, f"expected an array of tables ([[{key}]])")
        return []
    return value


def _unknown(
    prefix: str, item: Mapping[str, Any], allowed: Sequence[str], problems: _Problems
) -> None:
    for key in item:
        if key not in allowed:
            problems.add(f"{prefix}.{key}", f"unknown key (expected one of {', '.join(allowed)})")


def _type_name(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "table"
    names = {bool: "boolean", int: "integer", float: "float", str: "string"}
    return names.get(type(value), type(value).__name__)


def _get(
    item: Mapping[str, Any],
    prefix: str,
    key: str,
    kind: Literal["str", "int", "number", "bool", "table"],
    problems: _Problems,
    *,
    required: bool = False,
    bits: Literal[32, 64] = 64,
) -> Any:
    """Return ``item[key]`` if it has the right type, else None (recording a problem). An
    ``int`` must fit the API field's signed ``bits``-bit integer (int32 or int64)."""
    if key not in item:
        if required:
            problems.add(f"{prefix}.{key}", "required")
        return None
    value = item[key]
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "table": isinstance(value, Mapping),
    }[kind]
    if not ok:
        expected = {"str": "a string", "int": "an integer", "number": "a number",
                    "bool": "true or false", "table": "a table"}[kind]  # fmt: skip
        problems.add(f"{prefix}.{key}", f"expected {expected}, got {_type_name(value)} {value!r}")
        return None
    low, high = rq.signed_range(bits)
    if kind == "int" and not low <= value <= high:
        problems.add(f"{prefix}.{key}", f"must be between {low} and {high}, got {value}")
        return None
    if kind == "str" and required and not value.strip():
        problems.add(f"{prefix}.{key}", "must not be empty")
        return None
    return value


def _task(i: int, item: Mapping[str, Any], problems: _Problems) -> TaskSpec | None:
    prefix = f"tasks[{i}]"
    before = len(problems)
    _unknown(prefix, item, _TASK_KEYS, problems)
    name = _get(item, prefix, "name", "str", problems, required=True)
    handler = _get(item, prefix, "handler", "str", problems, required=True)
    params = _get(item, prefix, "params", "table", problems)
    description = _get(item, prefix, "description", "str", problems)
    priority = _get(item, prefix, "task_priority", "int", problems, bits=32)
    timeout = _get(item, prefix, "timeout_seconds", "number", problems)
    enabled = _get(item, prefix, "enabled", "bool", problems)
    group = _get(item, prefix, "concurrency_group", "str", problems)
    labels = _labels(item, prefix, problems)
    if timeout is not None and timeout < 0:
        problems.add(f"{prefix}.timeout_seconds", f"must be >= 0 (0 means no limit), got {timeout}")
    alerts = {key: _get(item, prefix, key, "number", problems) for key in _ALERT_KEYS}
    for key, number in alerts.items():
        if number is not None and number < 0:
            problems.add(f"{prefix}.{key}", f"must be >= 0 (0 means never), got {number}")
    notify = _notify(prefix, item, problems)
    limits = {key: _get(item, prefix, key, "int", problems) for key in _LIMIT_KEYS}
    for key, value in limits.items():
        if value is not None and value < 0:
            problems.add(f"{prefix}.{key}", f"must be >= 0 (0 means no limit), got {value}")
    retry = _get(item, prefix, "retry", "table", problems) or {}
    rprefix = f"{prefix}.retry"
    _unknown(rprefix, retry, _RETRY_KEYS, problems)
    attempts = _get(retry, rprefix, "max_attempts", "int", problems, bits=32)
    base = _get(retry, rprefix, "backoff_base_seconds", "number", problems)
    cap = _get(retry, rprefix, "backoff_cap_seconds", "number", problems)
    if attempts is not None and not 1 <= attempts <= 100:
        problems.add(f"{rprefix}.max_attempts", f"must be between 1 and 100, got {attempts}")
    for key, value in (("backoff_base_seconds", base), ("backoff_cap_seconds", cap)):
        if value is not None and value <= 0:
            problems.add(f"{rprefix}.{key}", f"must be > 0 seconds, got {value}")
    if params is not None:
        try:
            rq.to_struct(params)
        except InvalidArgument as err:
            problems.add(f"{prefix}.params", err.details.removeprefix("params: "))
    if len(problems) > before:
        return None
    return TaskSpec(
        name=name,
        handler=handler,
        params=dict(params or {}),
        description=description or "",
        task_priority=100 if priority is None else priority,
        timeout_seconds=float(timeout or 0),
        max_attempts=1 if attempts is None else attempts,
        backoff_base_seconds=10.0 if base is None else float(base),
        backoff_cap_seconds=600.0 if cap is None else float(cap),
        enabled=enabled,
        memory_limit_bytes=limits["memory_limit_bytes"] or 0,
        cpu_limit_seconds=limits["cpu_limit_seconds"] or 0,
        concurrency_group=(group or "").strip(),
        labels=labels,
        expect_success_within_seconds=float(alerts["expect_success_within_seconds"] or 0),
        warn_after_seconds=float(alerts["warn_after_seconds"] or 0),
        notify=notify,
    )


def _schedule(i: int, item: Mapping[str, Any], problems: _Problems) -> ScheduleSpec | None:
    prefix = f"schedules[{i}]"
    before = len(problems)
    _unknown(prefix, item, _SCHEDULE_KEYS, problems)
    name = _get(item, prefix, "name", "str", problems, required=True)
    cron = _get(item, prefix, "cron", "str", problems)
    interval = _get(item, prefix, "interval_seconds", "int", problems)
    timezone = _get(item, prefix, "timezone", "str", problems)
    policy = _get(item, prefix, "catch_up_policy", "str", problems)
    description = _get(item, prefix, "description", "str", problems)
    enabled = _get(item, prefix, "enabled", "bool", problems)
    timing = _schedule_timing(prefix, item, problems)
    overlap = _get(item, prefix, "overlap_policy", "str", problems)
    max_buffered = _get(item, prefix, "max_buffered", "int", problems, bits=32)
    if overlap is not None:
        try:
            overlap = OverlapPolicy.Name(rq.parse_overlap_policy(overlap)).removeprefix(
                "OVERLAP_POLICY_"
            )
        except InvalidArgument as err:
            problems.add(f"{prefix}.overlap_policy", err.details.split(": ", 1)[1])
    if max_buffered is not None and not 0 <= max_buffered <= 10_000:
        problems.add(
            f"{prefix}.max_buffered",
            f"must be between 0 (meaning 100) and 10000, got {max_buffered}",
        )
    labels = _labels(item, prefix, problems)
    catch_up_on_resume = _get(item, prefix, "catch_up_on_resume", "bool", problems)
    deadline = _get(item, prefix, "start_deadline_seconds", "number", problems)
    if deadline is not None and deadline < 0:
        problems.add(
            f"{prefix}.start_deadline_seconds", f"must be >= 0 (0 means none), got {deadline}"
        )
    notify = _notify(prefix, item, problems)
    if "cron" not in item and "interval_seconds" not in item:
        problems.add(prefix, "give cron or interval_seconds")
    if cron is not None and not cron.strip():
        problems.add(f"{prefix}.cron", "must not be empty")
    if interval is not None and interval < 1:
        problems.add(f"{prefix}.interval_seconds", f"must be at least 1, got {interval}")
    if timezone is not None:
        try:
            zoneinfo.ZoneInfo(timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            problems.add(f"{prefix}.timezone", f"unknown IANA time zone {timezone!r}")
    if policy is not None:
        try:
            policy = CatchUpPolicy.Name(rq.parse_catch_up_policy(policy)).removeprefix(
                "CATCH_UP_POLICY_"
            )
        except InvalidArgument as err:
            problems.add(f"{prefix}.catch_up_policy", err.details.split(": ", 1)[1])
    tasks = item.get("tasks")
    if "tasks" not in item:
        problems.add(f"{prefix}.tasks", "required")
    elif not isinstance(tasks, list) or not all(isinstance(t, str) and t for t in tasks):
        problems.add(f"{prefix}.tasks", f"expected an array of task names, got {tasks!r}")
    elif not tasks:
        problems.add(f"{prefix}.tasks", "name at least one task")
    elif len(set(tasks)) != len(tasks):
        problems.add(f"{prefix}.tasks", "a task is named twice")
    if len(problems) > before:
        return None
    return ScheduleSpec(
        name=name,
        tasks=tuple(tasks or ()),
        cron=" ".join(cron.split()) if cron else None,
        interval_seconds=interval,
        timezone=timezone or "UTC",
        catch_up_policy=policy or "SKIP",
        description=description or "",
        enabled=enabled,
        **timing,
        overlap_policy=overlap or "SKIP",
        max_buffered=max_buffered or 0,
        labels=labels,
        catch_up_on_resume=bool(catch_up_on_resume),
        start_deadline_seconds=float(deadline or 0),
        notify=notify,
    )


def _schedule_timing(prefix: str, item: Mapping[str, Any], problems: _Problems) -> dict[str, Any]:
    """The catch-up, jitter and bounds keys of a schedule table, checked as far as the file
    can be (the server checks the rest, naming the same fields)."""
    out: dict[str, Any] = {}
    window = _get(item, prefix, "catch_up_window_seconds", "number", problems)
    if window is not None:
        if window < 0:
            problems.add(f"{prefix}.catch_up_window_seconds", f"must be >= 0, got {window}")
        out["catch_up_window_seconds"] = float(window)
    runs = _get(item, prefix, "max_catch_up_runs", "int", problems, bits=32)
    if runs is not None:
        out["max_catch_up_runs"] = runs
    jitter = _get(item, prefix, "jitter_seconds", "number", problems)
    if jitter is not None:
        if not 0 <= jitter <= MAX_JITTER_S:
            problems.add(f"{prefix}.jitter_seconds", f"must be 0 to 86400, got {jitter}")
        out["jitter_seconds"] = float(jitter)
    mode = _get(item, prefix, "jitter_mode", "str", problems)
    if mode is not None:
        try:
            out["jitter_mode"] = JitterMode.Name(rq.parse_jitter_mode(mode)).removeprefix(
                "JITTER_MODE_"
            )
        except InvalidArgument as err:
            problems.add(f"{prefix}.jitter_mode", err.details.split(": ", 1)[1])
    for key in ("start_time", "end_time"):
        if key not in item:
            continue
        value = item[key]
        if not isinstance(value, dt.datetime) or value.utcoffset() is None:
            problems.add(
                f"{prefix}.{key}",
                f"expected a date-time with an offset (e.g. 2026-06-01T00:00:00Z), got {value!r}",
            )
        else:
            out[key] = value.astimezone(dt.UTC)
    start, end = out.get("start_time"), out.get("end_time")
    if start is not None and end is not None and end <= start:
        problems.add(f"{prefix}.end_time", "must be after start_time")
    return out


def _notify(
    prefix: str, item: Mapping[str, Any], problems: _Problems
) -> tuple[Mapping[str, Any], ...]:
    """The ``notify`` routes of a task or schedule table, checked as the SDK checks them."""
    value = item.get("notify", [])
    try:
        rq.notify_routes(value)
    except InvalidArgument as err:
        problems.add(f"{prefix}.{err.details.split(':', 1)[0]}", err.details.split(": ", 1)[-1])
        return ()
    return tuple(value)


def _check_unique(kind: str, names: Sequence[str], problems: _Problems) -> None:
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            problems.add(
                f"{kind}[{i}].name", f"duplicate name {name!r} (also {kind}[{seen[name]}])"
            )
        else:
            seen[name] = i


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
