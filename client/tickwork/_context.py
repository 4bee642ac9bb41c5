"""What a job knows about itself: the context every job process is given.

The worker puts it in each job process's environment (the ``TICKWORK_*`` variables below)
and hands it to a ``python`` function that has a parameter named ``ctx``. A scheduled job
knows the window it was fired for (``fire_time``, not the time it started), and a retry
keeps its first attempt's window, so a job can be idempotent per window.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ENV_NAMES", "JobContext", "format_time", "parse_time"]

JOB_ID = "TICKWORK_JOB_ID"
TASK_ID = "TICKWORK_TASK_ID"
TASK = "TICKWORK_TASK"
ATTEMPT = "TICKWORK_ATTEMPT"
TRIGGER = "TICKWORK_TRIGGER"
SCHEDULE = "TICKWORK_SCHEDULE"
FIRE_TIME = "TICKWORK_FIRE_TIME"
PREVIOUS_FIRE_TIME = "TICKWORK_PREVIOUS_FIRE_TIME"
ENV_NAMES = (JOB_ID, TASK_ID, TASK, ATTEMPT, TRIGGER, SCHEDULE, FIRE_TIME, PREVIOUS_FIRE_TIME)
"""Every variable a job process may be given; the last three only for scheduled jobs."""


def format_time(value: dt.datetime) -> str:
    """``value`` as RFC 3339 in UTC, e.g. ``"2026-03-29T01:00:00Z"`` (microseconds only when
    not zero).

    Raises:
        ValueError: ``value`` is naive.
    """
    if value.tzinfo is None:
        raise ValueError(f"expected an aware datetime, got {value!r}")
    utc = value.astimezone(dt.UTC)
    spec = "microseconds" if utc.microsecond else "seconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def parse_time(text: str) -> dt.datetime:
    """An RFC 3339 time (as :func:`format_time` writes it) as an aware UTC datetime.

    Raises:
        ValueError: not such a time.
    """
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"expected an RFC 3339 time with an offset, got {text!r}")
    return value.astimezone(dt.UTC)


@dataclass(frozen=True)
class JobContext:
    """The job a process runs, as the ``TICKWORK_*`` variables describe it.

    Attributes:
        job_id (int): the job's id (``TICKWORK_JOB_ID``).
        task_id (int): its task's id (``TICKWORK_TASK_ID``).
        task (str): its task's name (``TICKWORK_TASK``).
        attempt (int): 1 for the first run, 2 for the first retry, ... (``TICKWORK_ATTEMPT``).
        trigger (str): ``"MANUAL"``, ``"API"``, ``"SCHEDULER"`` or ``"BACKFILL"``
            (``TICKWORK_TRIGGER``); a retry keeps its first attempt's.
        schedule (str | None): the name of the schedule that fired it; None unless
            scheduled (``TICKWORK_SCHEDULE``).
        fire_time (datetime | None): the fire time it was enqueued for, aware UTC; a retry
            keeps its first attempt's (``TICKWORK_FIRE_TIME``).
        previous_fire_time (datetime | None): the schedule's fire time recorded before that
            one; None when there is none (``TICKWORK_PREVIOUS_FIRE_TIME``).
    """

    job_id: int
    task_id: int
    task: str
    attempt: int
    trigger: str
    schedule: str | None = None
    fire_time: dt.datetime | None = None
    previous_fire_time: dt.datetime | None = None

    @property
    def task_name(self) -> str:
        """The task's name (as :attr:`task`)."""
        return self.task

    def log(self, stream: str, line: str) -> None:
        """Write ``line`` and a newline to this process's stdout or stderr (the job's output).

        Args:
            stream (str): ``"stdout"`` or ``"stderr"``.
            line (str): the text.

        Raises:
            ValueError: another stream.
        """
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(f"{line}\n")
        out.flush()

    def to_env(self) -> dict[str, str]:
        """The ``TICKWORK_*`` variables of this job (the schedule's only when it has them)."""
        env = {
            JOB_ID: str(self.job_id),
            TASK_ID: str(self.task_id),
            TASK: self.task,
            ATTEMPT: str(self.attempt),
            TRIGGER: self.trigger,
        }
        if self.schedule is not None:
            env[SCHEDULE] = self.schedule
        if self.fire_time is not None:
            env[FIRE_TIME] = format_time(self.fire_time)
        if self.previous_fire_time is not None:
            env[PREVIOUS_FIRE_TIME] = format_time(self.previous_fire_time)
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobContext:
        """The context of the job this process runs, from its environment.

        Args:
            environ (Mapping[str, str] | None): the variables; ``os.environ`` if None.

        Raises:
            KeyError: not a job process (``TICKWORK_JOB_ID`` and the others are unset).
            ValueError: a variable is malformed.
        """
        env = os.environ if environ is None else environ
        fire, previous = env.get(FIRE_TIME), env.get(PREVIOUS_FIRE_TIME)
        return cls(
            job_id=int(env[JOB_ID]),
            task_id=int(env.get(TASK_ID, "0")),
            task=env[TASK],
            attempt=int(env[ATTEMPT]),
            trigger=env.get(TRIGGER, ""),
            schedule=env.get(SCHEDULE),
            fire_time=parse_time(fire) if fire else None,
            previous_fire_time=parse_time(previous) if previous else None,
        )
