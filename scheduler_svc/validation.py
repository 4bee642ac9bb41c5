"""Validation of what clients send, before anything is written.

Every function raises :class:`InvalidArgument` whose ``field`` names the request field
(e.g. ``task.name``, ``schedule.cron_expression``), so a client sees what to fix.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from scheduler_svc.errors import InvalidArgument, Reason
from scheduler_svc.firing import DEFAULT_MAX_CATCH_UP_RUNS, MAX_CATCH_UP_RUNS, cron_schedule
from scheduler_svc.records import DEFAULT_MAX_BUFFERED, MAX_MAX_BUFFERED
from scheduler_svc.values import OverlapPolicy
from tickwork.cron import CronError, CronSchedule, validate_timezone
from tickwork.jitter import MAX_JITTER_S
from tickwork.limits import MAX_SECONDS as MAX_SECONDS
from worker_svc.handlers import InvalidParams, UnknownHandler, get_handler, unsupported_limit

MAX_NAME_CHARS = 200
MAX_PRIORITY = 1_000_000
CATCH_UP_POLICIES = ("SKIP", "RUN_ONCE", "RUN_ALL")
JITTER_MODES = ("RANDOM", "STABLE")


def name(value: str, field: str) -> str:
    """A unique name: non-empty after trimming, at most 200 characters, no control chars."""
    return _label(value.strip(), field, MAX_NAME_CHARS)


def _label(text: str, field: str, max_chars: int) -> str:
    """``text`` if it is non-empty, at most ``max_chars`` characters and free of control
    and format characters (it is stored and printed in tables and logs).

    Raises:
        InvalidArgument: naming ``field``.
    """
    if not text:
        raise InvalidArgument("must not be empty", field=field, reason=Reason.FIELD_REQUIRED)
    if len(text) > max_chars:
        raise InvalidArgument(f"must be at most {max_chars} characters", field=field)
    if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in text):
        raise InvalidArgument("must not contain control or format characters", field=field)
    return text


def concurrency_group(value: str, field: str = "task.concurrency_group") -> str:
    """A task's concurrency group: empty (the task alone) or a label of at most 200
    characters without control or format characters, trimmed.

    Raises:
        InvalidArgument: naming ``field``.
    """
    text = value.strip()
    return _label(text, field, MAX_NAME_CHARS) if text else ""


def handler_params(handler: str, params: dict[str, Any], field: str = "task.params") -> None:
    """The handler exists (built in or an entry point) and accepts ``params`` (refused
    naming ``field``)."""
    if not handler.strip():
        raise InvalidArgument(
            "must not be empty (e.g. shell, python)",
            field="task.handler",
            reason=Reason.FIELD_REQUIRED,
        )
    try:
        impl = get_handler(handler)
    except (UnknownHandler, LookupError) as err:
        raise InvalidArgument(
            str(err).strip("'\""), field="task.handler", reason=Reason.HANDLER_UNKNOWN
        ) from None
    try:
        impl.validate(params)
    except InvalidParams as err:
        raise InvalidArgument(str(err), field=field, reason=Reason.PARAMS_INVALID) from None


#: The longest description of a task or schedule, in characters.
MAX_DESCRIPTION_CHARS = 4000

#: Most tasks one schedule runs. A schedule lists its tasks' ids and names, and a fire one
#: run per task; both must fit in one gRPC message (4 MiB) with room to spare.
MAX_SCHEDULE_TASKS = 1000

#: Most tasks one call runs, stops or enqueues (RunTasks, AbortTasks, Enqueue), repeats
#: included: its reply holds one result per task, a TaskRun of up to ~840 bytes (with a
#: 200-character name), and must fit in one gRPC message (4 MiB).
MAX_TASKS_PER_CALL = 1000


def tasks_per_call(count: int, field: str) -> None:
    """A call names 1 to :data:`MAX_TASKS_PER_CALL` tasks (``count``) in ``field``."""
    if count == 0:
        raise InvalidArgument("name at least one task", field=field, reason=Reason.FIELD_REQUIRED)
    if count > MAX_TASKS_PER_CALL:
        raise InvalidArgument(
            f"names {count} tasks; at most {MAX_TASKS_PER_CALL:,} a call",
            field=field,
            reason=Reason.TOO_MANY_ITEMS,
        )


#: The largest ``task.params``, in bytes of its protobuf encoding (1 MiB). A task, and the
#: job a worker receives with its params, must fit in one gRPC message (4 MiB by default in
#: every client: grpcurl, the SDK, the worker); listings are paged by size to stay under it
#: (``servicers._convert.fit_page``).
MAX_PARAMS_BYTES = 1024 * 1024


def params_size(size: int, field: str = "task.params") -> None:
    """Params (``field``) are at most :data:`MAX_PARAMS_BYTES` bytes encoded (``size``)."""
    if size > MAX_PARAMS_BYTES:
        raise InvalidArgument(
            f"is {size:,} bytes encoded; at most {MAX_PARAMS_BYTES:,}",
            field=field,
            reason=Reason.PARAMS_INVALID,
        )


def free_text(value: str, field: str) -> str:
    """Free text (lookup names): no NUL characters, which PostgreSQL cannot store and
    terminals mishandle."""
    if "\x00" in value:
        raise InvalidArgument("must not contain NUL characters", field=field)
    return value


#: The longest worker id a Hello may give: the id, "#" and an 8-digit session nonce name
#: the stream as the ``worker`` lease holder and on the jobs it runs (200 characters).
MAX_WORKER_ID_CHARS = MAX_NAME_CHARS - 9


def worker_id(value: str, field: str = "hello.worker_id") -> str:
    """A worker id: non-empty, at most :data:`MAX_WORKER_ID_CHARS` characters, no control
    or format characters (it is stored, and printed in the logs)."""
    return _label(value, field, MAX_WORKER_ID_CHARS)


#: The longest request_id accepted, in characters (a UUID is 36).
MAX_REQUEST_ID_CHARS = 200


def request_id(value: str, field: str = "request_id") -> str:
    """A request id (AIP-155): non-empty, at most :data:`MAX_REQUEST_ID_CHARS` characters,
    no control or format characters."""
    return _label(value, field, MAX_REQUEST_ID_CHARS)


def description(value: str, field: str) -> str:
    """A description: free text of at most :data:`MAX_DESCRIPTION_CHARS` characters."""
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise InvalidArgument(
            f"is {len(value)} characters; at most {MAX_DESCRIPTION_CHARS}", field=field
        )
    return free_text(value, field)


def interval_seconds(value: int) -> int:
    """An interval of 1 s to ten years."""
    if not 1 <= value <= MAX_SECONDS:
        raise InvalidArgument(
            f"must be between 1 and {MAX_SECONDS} seconds", field="schedule.interval_seconds"
        )
    return value


def seconds(value: float, field: str, *, minimum: float = 0.0) -> float:
    """A finite number of seconds >= minimum."""
    if not math.isfinite(value) or value < minimum or value > MAX_SECONDS:
        raise InvalidArgument(
            f"must be a number of seconds from {minimum:g} to {MAX_SECONDS}", field=field
        )
    return float(value)


def process_limit(value: int, field: str) -> int:
    """A per-task process limit (``task.memory_limit_bytes``, ``task.cpu_limit_seconds``):
    0 for none, else a positive number this platform can apply; a CPU limit at most
    :data:`MAX_SECONDS` (its hard limit, a second above, must fit the platform's rlim_t).

    Raises:
        InvalidArgument: negative, a CPU limit above :data:`MAX_SECONDS`, or the platform
            cannot apply the limit; naming ``field``.
    """
    if value < 0:
        raise InvalidArgument(f"must be >= 0 (0 means no limit), got {value}", field=field)
    if field.endswith("cpu_limit_seconds") and value > MAX_SECONDS:
        raise InvalidArgument(
            f"must be at most {MAX_SECONDS} seconds (ten years), got {value}", field=field
        )
    if value > 0:
        problem = unsupported_limit(field.rpartition(".")[2])
        if problem:
            raise InvalidArgument(problem, field=field)
    return int(value)


def priority(value: int) -> int:
    """task_priority in [-1,000,000, 1,000,000]."""
    if not -MAX_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidArgument(
            f"must be between {-MAX_PRIORITY} and {MAX_PRIORITY}", field="task.task_priority"
        )
    return value


def retry_policy(max_attempts: int, base_s: float, cap_s: float) -> tuple[int, float, float]:
    """max_attempts in [1, 100], base > 0, cap >= base (seconds)."""
    if not 1 <= max_attempts <= 100:
        raise InvalidArgument("must be between 1 and 100", field="task.retry_policy.max_attempts")
    base = seconds(base_s, "task.retry_policy.backoff_base_seconds", minimum=0.001)
    cap = seconds(cap_s, "task.retry_policy.backoff_cap_seconds", minimum=base)
    return max_attempts, base, cap


#: The longest cron expression stored, in characters (its column's length).
MAX_CRON_CHARS = 200


def cron_text(value: str, field: str) -> str:
    """A cron expression to store, its whitespace normalized: at most
    :data:`MAX_CRON_CHARS` characters (PostgreSQL refuses a longer one for the column)."""
    text = " ".join(value.split())
    if len(text) > MAX_CRON_CHARS:
        raise InvalidArgument(f"is {len(text)} characters; at most {MAX_CRON_CHARS}", field=field)
    return text


def cron(expression: str, timezone: str, prefix: str = "schedule.") -> CronSchedule:
    """A valid cron expression in a valid IANA zone that fires at least once.

    The field is ``schedule.cron_expression`` or ``schedule.timezone``; the message names the
    cron field at fault (e.g. "day_of_month: 32 is out of range 1-31").
    """
    unknown_zone = Reason.TIMEZONE_UNKNOWN
    try:
        validate_timezone(timezone)
    except CronError as err:
        raise InvalidArgument(err.reason, field=f"{prefix}timezone", reason=unknown_zone) from None
    try:
        return cron_schedule(expression, timezone)  # parsed once per (expression, zone)
    except CronError as err:
        if err.field == "timezone":
            raise InvalidArgument(
                err.reason, field=f"{prefix}timezone", reason=unknown_zone
            ) from None
        detail = err.reason if err.field == "expression" else str(err)
        # The parser's one message for an expression that parses but matches no day.
        never = err.field == "day_of_month" and err.reason.startswith("can never fire")
        raise InvalidArgument(
            detail,
            field=f"{prefix}cron_expression",
            reason=Reason.CRON_NEVER_FIRES if never else Reason.CRON_INVALID,
        ) from None


def catch_up_policy(value: str) -> str:
    """SKIP, RUN_ONCE or RUN_ALL."""
    if value not in CATCH_UP_POLICIES:
        raise InvalidArgument(
            f"must be one of {', '.join(CATCH_UP_POLICIES)}", field="schedule.catch_up_policy"
        )
    return value


def catch_up_window_seconds(value: float) -> float:
    """How old a missed window may be and still fire: 0 to ten years, seconds."""
    return seconds(value, "schedule.catch_up_window_seconds")


def max_catch_up_runs(value: int) -> int:
    """RUN_ALL's cap: 0 (the default, 100) to :data:`firing.MAX_CATCH_UP_RUNS`."""
    if not 0 <= value <= MAX_CATCH_UP_RUNS:
        raise InvalidArgument(
            f"must be between 0 (meaning {DEFAULT_MAX_CATCH_UP_RUNS}) and "
            f"{MAX_CATCH_UP_RUNS:,}, got {value}",
            field="schedule.max_catch_up_runs",
        )
    return int(value)


def jitter_seconds(value: float) -> float:
    """The most delay added to a fire's start: 0 (none) to a day, seconds."""
    if not math.isfinite(value) or not 0 <= value <= MAX_JITTER_S:
        raise InvalidArgument(
            f"must be a number of seconds from 0 to {MAX_JITTER_S:g}",
            field="schedule.jitter_seconds",
        )
    return float(value)


def jitter_mode(value: str) -> str:
    """RANDOM or STABLE."""
    if value not in JITTER_MODES:
        raise InvalidArgument(
            f"must be one of {', '.join(JITTER_MODES)}", field="schedule.jitter_mode"
        )
    return value


def overlap_policy(value: str, field: str = "schedule.overlap_policy") -> str:
    """One of :class:`~scheduler_svc.values.OverlapPolicy`; INVALID_ARGUMENT naming
    ``field`` otherwise."""
    names = [p.value for p in OverlapPolicy]
    if value not in names:
        raise InvalidArgument(f"must be one of {', '.join(names)}", field=field)
    return value


def max_buffered(value: int, field: str = "schedule.max_buffered") -> int:
    """BUFFER_ALL's cap: 0 (meaning 100) to 10,000; INVALID_ARGUMENT naming ``field``
    otherwise."""
    if not 0 <= value <= MAX_MAX_BUFFERED:
        raise InvalidArgument(
            f"must be between 0 (meaning {DEFAULT_MAX_BUFFERED}) and {MAX_MAX_BUFFERED:,},"
            f" got {value}",
            field=field,
        )
    return value


def bounds(start: dt.datetime | None, end: dt.datetime | None) -> None:
    """A schedule's end_time, when both are set, is after its start_time.

    Raises:
        InvalidArgument: naming ``schedule.end_time``.
    """
    if start is not None and end is not None and end <= start:
        raise InvalidArgument(
            f"must be after start_time ({start.isoformat()}), got {end.isoformat()}",
            field="schedule.end_time",
        )


#: Most labels on one run's jobs, and the longest label key and value, in characters
#: (the rules of Kubernetes labels, with "/" allowed anywhere in a key).
MAX_LABELS = 64
MAX_LABEL_CHARS = 63
_LABEL_KEY = re.compile(r"[A-Za-z0-9._/-]+")


def labels(value: Mapping[str, str], field: str = "labels") -> dict[str, str]:
    """A run's labels: at most :data:`MAX_LABELS`; each key 1 to :data:`MAX_LABEL_CHARS`
    characters of ASCII letters, digits and ``._-/``; each value at most
    :data:`MAX_LABEL_CHARS` characters without control or format characters.

    Raises:
        InvalidArgument: naming ``field`` or the label (``labels["bad key"]``).
    """
    if len(value) > MAX_LABELS:
        raise InvalidArgument(
            f"has {len(value)} labels; at most {MAX_LABELS}",
            field=field,
            reason=Reason.TOO_MANY_ITEMS,
        )
    for key in sorted(value):
        where = f"{field}[{json.dumps(key)}]"
        if not key:
            raise InvalidArgument("a label key must not be empty", field=where)
        if len(key) > MAX_LABEL_CHARS or not _LABEL_KEY.fullmatch(key):
            raise InvalidArgument(
                f"a label key is 1 to {MAX_LABEL_CHARS} characters of A-Z, a-z, 0-9 and ._-/",
                field=where,
            )
        text = value[key]
        if len(text) > MAX_LABEL_CHARS:
            raise InvalidArgument(
                f"a label value is at most {MAX_LABEL_CHARS} characters", field=where
            )
        if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in text):
            raise InvalidArgument(
                "a label value must not contain control or format characters", field=where
            )
    return dict(value)


def not_before(when: dt.datetime, now: dt.datetime, field: str = "not_before_time") -> dt.datetime:
    """A run's not-before instant (aware UTC): at most ten years (:data:`MAX_SECONDS`)
    after ``now``; a past instant is kept (the job is ready at once).

    Raises:
        InvalidArgument: naming ``field``.
    """
    if when - now > dt.timedelta(seconds=MAX_SECONDS):
        raise InvalidArgument(f"is more than ten years ({MAX_SECONDS} seconds) ahead", field=field)
    return when
