"""Log setup for tickwork processes (``tickwork serve``, ``tickwork worker``): one line per
event, with the ids that matter.

Fields passed through ``extra`` (task_id, job_id, schedule_id, worker_id, ...) are appended
as ``key=value`` pairs, or emitted as JSON keys with ``json_format=True``. The environment
(TICKWORK_LOG_FORMAT, TICKWORK_LOG_LEVEL) is read here only, by :meth:`LogSettings.from_env`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tickwork._text import escape_controls
from tickwork.errors import InvalidSetting

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


LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


@dataclass(frozen=True)
class LogSettings:
    """How a tickwork process logs.

    Attributes:
        format (str): "text" (``key=value`` lines) or "json" (one object per line).
        level (int): the :mod:`logging` level of tickwork's own loggers.
    """

    format: str = "text"
    level: int = logging.INFO

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS:
            raise InvalidSetting(
                f"TICKWORK_LOG_FORMAT: expected one of {', '.join(LOG_FORMATS)}, "
                f"got {self.format!r}"
            )

    @property
    def json(self) -> bool:
        """True for JSON lines."""
        return self.format == "json"

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, log_format: str | None = None
    ) -> LogSettings:
        """The format as :meth:`format_from_env` reads it, and TICKWORK_LOG_LEVEL (DEBUG,
        INFO, default, WARNING or ERROR; any case).

        Raises:
            InvalidSetting: naming the variable whose value is none of those.
        """
        e = os.environ if env is None else env
        level = e.get("TICKWORK_LOG_LEVEL", "").strip().upper() or "INFO"
        if level not in LOG_LEVELS:
            raise InvalidSetting(
                f"TICKWORK_LOG_LEVEL: expected one of {', '.join(LOG_LEVELS)}, got {level!r}"
            )
        return cls(
            format=cls.format_from_env(e, log_format=log_format), level=getattr(logging, level)
        )

    @staticmethod
    def format_from_env(
        env: Mapping[str, str] | None = None, *, log_format: str | None = None
    ) -> str:
        """TICKWORK_LOG_FORMAT, overridden by ``log_format`` (``--log-format``) when given,
        lower-cased; "text" when neither is set. Not checked: the constructor refuses
        anything but :data:`LOG_FORMATS`."""
        e = os.environ if env is None else env
        return (log_format or e.get("TICKWORK_LOG_FORMAT", "")).strip().lower() or "text"


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
