"""The worker process: logging, signals, exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from tickwork._channel import TlsConfig
from tickwork.errors import InvalidArgument
from tickwork.logs import JsonFormatter, LogSettings
from worker_svc.settings import WorkerSettings
from worker_svc.worker import Worker

__all__ = ["main"]

logger = logging.getLogger(__name__)

_STRUCTURED_FIELDS = ("worker_id", "job_id", "task_id", "task_name")
"""``extra`` fields shown after the message when a log record has them."""


class _Formatter(logging.Formatter):
    """The standard format plus ``key=value`` for the structured fields a record carries."""

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record``.

        Args:
            record (logging.LogRecord): the record.

        Returns:
            str: the line(s) to write.
        """
        text = super().format(record)
        fields = [
            f"{name}={getattr(record, name)!r}"
            for name in _STRUCTURED_FIELDS
            if hasattr(record, name)
        ]
        if not fields:
            return text
        first, newline, rest = text.partition("\n")
        return f"{first} [{' '.join(fields)}]{newline}{rest}"


def _configure_logging(json_format: bool = False) -> None:
    """Log INFO and above to stderr, unless the root logger already has a handler.

    Args:
        json_format (bool): one JSON object per line (time, level, logger, message and the
            structured fields) instead of text.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)


async def _run_until_signalled(settings: WorkerSettings) -> None:
    """Run a worker; SIGTERM or SIGINT stops it, a second one aborts the running job now.

    Args:
        settings (WorkerSettings): the worker's settings.
    """
    worker = Worker(settings)
    loop = asyncio.get_running_loop()
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        if len(received) == 1:
            logger.info(
                "received %s: stopping; a running job may finish within %.1f s",
                sig.name,
                settings.job_finish_grace_s,
            )
            worker.stop()
        else:
            logger.warning("received %s again: aborting the running job now", sig.name)
            worker.stop(abort_running=True)

    handled = (signal.SIGTERM, signal.SIGINT)
    for sig in handled:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await worker.run()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def main(
    server: str | None = None,
    *,
    token: str | None = None,
    tls: TlsConfig | None = None,
    log_format: str | None = None,
    slots: int | None = None,
) -> int:
    """Run a dedicated worker process until SIGTERM or SIGINT.

    Settings come from the environment (see ``WorkerSettings.from_env``).

    Args:
        server (str | None): the scheduler service address ``HOST:PORT``; overrides
            ``TICKWORK_SERVER``.
        token (str | None): bearer token; overrides ``TICKWORK_TOKEN``.
        tls (TlsConfig | None): TLS options; override the ``TICKWORK_TLS*`` variables.
        log_format (str | None): "text" or "json"; default ``TICKWORK_LOG_FORMAT``, else text.
        slots (int | None): jobs run at once; overrides ``WORKER_SLOTS``.

    Returns:
        int: the exit code: 0 after a stop, 2 for invalid settings, 1 if the worker crashed.
    """
    try:
        logs = LogSettings(format=LogSettings.format_from_env(log_format=log_format))
    except InvalidArgument as exc:  # refused as tickwork serve refuses it, in the worker's log
        _configure_logging()
        logger.error("invalid worker settings: %s", exc.details)
        return 2
    _configure_logging(json_format=logs.json)
    try:
        settings = WorkerSettings.from_env(server, token=token, tls=tls, slots=slots)
        if settings.tls is not None:
            settings.tls.check_files()
    except InvalidArgument as exc:  # InvalidSetting, and TlsConfig's refusals
        logger.error("invalid worker settings: %s", exc.details)
        return 2
    try:
        asyncio.run(_run_until_signalled(settings))
    except Exception:
        logger.exception("the worker crashed")
        return 1
    return 0
