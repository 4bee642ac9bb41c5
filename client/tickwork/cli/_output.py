"""How the command line prints: a terminal-safe stream, times, tables and message fields.

Control and format characters in what is printed (names, descriptions, errors, job output)
are shown as ``\\xNN`` / ``\\uNNNN`` escapes, so stored text cannot move the cursor, clear
the screen, retitle the window or reorder text with bidirectional overrides. This holds for
piped output too, which still reaches a terminal through ``less -R``, ``tee`` or a log file
read with ``cat``. Tab and newline are kept.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO, cast

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from tickwork import _requests as rq
from tickwork._text import escape_controls
from tickwork.cli._common import SKIP_TEXT
from tickwork.v1.common_pb2 import TaskRun
from tickwork.v1.job_pb2 import Job, JobStatus


class _TerminalSafe:
    """A text stream that shows control characters as escapes (see the module docstring)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(escape_controls(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def for_terminal(stream: TextIO) -> TextIO:
    """A stream that writes to ``stream`` with control characters (ANSI escape sequences,
    carriage returns, ...) as ``\\xNN`` text, whether or not ``stream`` is a terminal: piped
    output ends up on one often enough (``less -R``, ``tee``, a log file read with ``cat``).

    Args:
        stream (TextIO): e.g. ``sys.stdout``.

    Returns:
        TextIO: the stream to print to.
    """
    if isinstance(stream, _TerminalSafe):
        return stream
    return cast(TextIO, _TerminalSafe(stream))


def when(message: Message, field: str) -> str:
    """A Timestamp field as ``2026-03-29T01:00:00Z``, or ``-`` when unset."""
    if not message.HasField(field):
        return "-"
    ts: Timestamp = getattr(message, field)
    return iso_utc(rq.to_datetime(ts))


def iso_utc(value: datetime) -> str:
    """An aware datetime in UTC to the second, ``Z`` for the offset."""
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Print left-aligned columns separated by two spaces; the last column is not padded."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip(), file=out)


def first_line(text: str, width: int = 60) -> str:
    """The first non-blank line of ``text``, cut to ``width`` characters with an ellipsis."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def status(job: Job) -> str:
    """The job's status by its short name, e.g. ``RUNNING``."""
    return rq.enum_label(JobStatus, job.status)


def duration(job: Job) -> str:
    """How long the job ran (``1.5 s``, ``20 ms``), or "" when it has not finished."""
    if not (job.HasField("start_time") and job.HasField("finish_time")):
        return ""
    elapsed = (rq.to_datetime(job.finish_time) - rq.to_datetime(job.start_time)).total_seconds()
    return f"{elapsed:.1f} s" if elapsed >= 1 else f"{elapsed * 1000:.0f} ms"


def run_text(run: TaskRun) -> str:
    """What came of one task of a run or a fire, e.g. ``backup: job 12``."""
    name = run.task_name or f"task {run.task_id}"
    if run.skipped:
        reason = SKIP_TEXT.get(run.skip_reason, "skipped")
        return f"{name}: skipped ({reason}" + (f", job {run.job_id})" if run.job_id else ")")
    return f"{name}: job {run.job_id}" + (" (promoted)" if run.promoted else "")


def print_fields(message: Message, out: TextIO, skip: Sequence[str] = ()) -> None:
    """Print every field of ``message`` but ``skip``, one per line: ``name  value``.
    Times in UTC ISO 8601, enums by their short name, messages (params, retry policy) and
    maps (labels) as one line of JSON; a value of several lines continues indented under
    the first."""
    fields = [f for f in message.DESCRIPTOR.fields if f.name not in skip]
    width = max(len(f.name) for f in message.DESCRIPTOR.fields)
    for f in fields:
        value = getattr(message, f.name)
        if isinstance(value, Timestamp):
            text = when(message, f.name)
        elif isinstance(value, Message):
            # snake_case keys, as in an apply file (max_attempts, not maxAttempts)
            as_dict = json_format.MessageToDict(value, preserving_proto_field_name=True)
            text = json.dumps(as_dict, ensure_ascii=False)
        elif f.message_type is not None and f.message_type.GetOptions().map_entry:
            text = json.dumps(dict(value), ensure_ascii=False, sort_keys=True)  # labels
        elif f.enum_type is not None:
            number = f.enum_type.values_by_number.get(value)
            prefix = f.enum_type.values[0].name.removesuffix("UNSPECIFIED")
            text = number.name.removeprefix(prefix) if number is not None else str(value)
        else:
            text = str(value)
        lines = text.rstrip().splitlines() or [""]
        print(f"{f.name.ljust(width)}  {lines[0]}", file=out)
        for line in lines[1:]:
            print(f"{'':{width}}  {line}", file=out)
