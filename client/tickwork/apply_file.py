"""A configuration file: what it holds (:class:`Config`, its :class:`TaskSpec` and
:class:`ScheduleSpec` items), read and checked from TOML.

The file format is documented in :mod:`tickwork.apply` (the ``[[notifiers]]`` tables in
:mod:`tickwork.apply_notifiers`). :func:`load_config` reads a file, :func:`parse_config`
checks an already-decoded one; either raises :class:`ConfigError` listing every problem
found, in file order, each naming its key (``tasks[2].handler: required``). Every name
here is also importable from :mod:`tickwork.apply`, which sends a Config to the server.
"""

from __future__ import annotations

import datetime as dt
import os
import tomllib
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tickwork import _requests as rq
from tickwork.apply_notifiers import NotifierSpec, parse_notifiers
from tickwork.errors import InvalidArgument
from tickwork.jitter import MAX_JITTER_S
from tickwork.v1.schedule_pb2 import CatchUpPolicy, JitterMode, OverlapPolicy

__all__ = [
    "Config",
    "ConfigError",
    "ScheduleSpec",
    "TaskSpec",
    "load_config",
    "parse_config",
]


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
    #: The dotted param paths an operator may override when running it.
    overridable_params: tuple[str, ...] = ()


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
    "overridable_params",
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
    paths = item.get("overridable_params", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        problems.add(
            f"{prefix}.overridable_params",
            f'expected an array of param paths such as ["env.REGION"], got {_type_name(paths)}',
        )
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
        overridable_params=tuple(paths),
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
