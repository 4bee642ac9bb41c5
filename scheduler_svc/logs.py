"""Log setup for tickwork processes: one line per event, with the ids that matter.

Fields passed through ``extra`` (task_id, job_id, schedule_id, worker_id, ...) are appended
as ``key=value`` pairs, or emitted as JSON keys with ``json_format=True``.
"""

from __future__ import annotations

import json
import logging
import os
import time

from tickwork._text import escape_controls

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


def _one_line(value: object) -> str:
    """``value`` as text on one line: newlines as ``\\n`` (the formatter escapes the rest
    of the line's control characters once, at the end)."""
    return str(value).replace("\n", "\\n")


class _Formatter(logging.Formatter):
    """A formatter whose default time stamp (local time, ``2026-11-30 16:21:43,123``) is
    formatted once per second, not once per record: a busy worker logs two lines a job."""

    _second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached, text = self._second
        if cached != second:
            text = time.strftime(self.default_time_format, self.converter(second))
            self._second = (second, text)
        msec_format = self.default_msec_format
        return msec_format % (text, record.msecs) if msec_format else text


class KeyValueFormatter(_Formatter):
    """``time level logger message key=value ...``, one line per event: newlines in the
    message and fields (a job's multi-line error, say) are written ``\\n`` and control and
    format characters escaped, so stored text can neither forge log lines nor drive the
    terminal that reads them. A traceback (``exc_info``) follows on its own lines."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.msg, record.args
        record.msg, record.args = _one_line(record.getMessage()), None
        try:
            line = super().format(record)
        finally:
            record.msg, record.args = saved
        fields = " ".join(f"{k}={_one_line(v)}" for k, v in _extras(record).items())
        return escape_controls(f"{line} {fields}" if fields else line)


class JsonFormatter(_Formatter):
    """One JSON object per line: time, level, logger, message and the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def log_format_from_env() -> str:
    """TICKWORK_LOG_FORMAT ("text" or "json"; anything else is text)."""
    value = os.environ.get("TICKWORK_LOG_FORMAT", "").strip().lower()
    return "json" if value == "json" else "text"


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def log_level_from_env() -> int:
    """TICKWORK_LOG_LEVEL: DEBUG, INFO (default), WARNING or ERROR, any case.

    Raises ValueError naming the variable for anything else.
    """
    value = os.environ.get("TICKWORK_LOG_LEVEL", "").strip().upper() or "INFO"
    if value not in LOG_LEVELS:
        raise ValueError(
            f"TICKWORK_LOG_LEVEL: expected one of {', '.join(LOG_LEVELS)}, got {value!r}"
        )
    return int(getattr(logging, value))


#: Libraries whose DEBUG lines (every poll of the event loop, every statement, every HTTP/2
#: frame) would bury tickwork's own at TICKWORK_LOG_LEVEL=DEBUG: they log from INFO up.
QUIET_LIBRARIES = ("asyncio", "grpc", "aiosqlite", "sqlalchemy", "alembic", "aiosmtplib")


def setup_logging(level: int = logging.INFO, *, json_format: bool = False) -> None:
    """Send logs to stderr in the chosen format (idempotent). At DEBUG, only tickwork's own
    loggers log DEBUG lines; the libraries of :data:`QUIET_LIBRARIES` stay at INFO."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if json_format
        else KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        library = logging.getLogger(name)  # SQLAlchemy sets its own to WARNING: kept
        library.setLevel(max(level, logging.INFO, library.level))
