"""The value domains of tickwork's tables, as stored: each member's value is the exact text
(or number) written to its column, so ``JobStatus.QUEUED == "QUEUED"`` and a row read back
compares equal to the member."""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "ACTIVE_STATES",
    "FINAL_STATES",
    "AbortAction",
    "DeliveryStatus",
    "EventKind",
    "FireOutcome",
    "JobStatus",
    "Lane",
    "NotifierType",
    "SkipReason",
    "Trigger",
]


class JobStatus(StrEnum):
    """``jobs.status``: QUEUED, then RUNNING, then one of the final states (a queued job
    may also go straight to CANCELLED)."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"
    CANCELLED = "CANCELLED"


#: A job in one of these states is active: at most one per task (uq_jobs_one_active_per_task).
ACTIVE_STATES = (JobStatus.QUEUED, JobStatus.RUNNING)
#: A job in one of these states is ended: it never changes again.
FINAL_STATES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.ABORTED, JobStatus.CANCELLED)


class Trigger(StrEnum):
    """``jobs.trigger``: what asked for the job (a retry keeps its first attempt's)."""

    MANUAL = "MANUAL"
    API = "API"
    SCHEDULER = "SCHEDULER"


class Lane(IntEnum):
    """``jobs.lane``, the queue's first sort key: manual and API jobs before the scheduler's."""

    MANUAL = 0
    SCHEDULER = 1


class SkipReason(StrEnum):
    """Why a task asked to run got no new job (``TaskRunResult.skip_reason``, and in
    ``fires.runs``)."""

    ALREADY_QUEUED = "ALREADY_QUEUED"
    ALREADY_RUNNING = "ALREADY_RUNNING"
    TASK_DISABLED = "TASK_DISABLED"

    @classmethod
    def active(cls, status: str) -> SkipReason:
        """The skip of a task whose active job has ``status`` (QUEUED or RUNNING)."""
        return cls.ALREADY_RUNNING if status == JobStatus.RUNNING else cls.ALREADY_QUEUED


class FireOutcome(StrEnum):
    """``fires.outcome``: ENQUEUED when the fire created a job, SKIPPED when every task was
    skipped, MISSED when the catch-up policy passed the window over."""

    ENQUEUED = "ENQUEUED"
    SKIPPED = "SKIPPED"
    MISSED = "MISSED"


class AbortAction(StrEnum):
    """What aborting a task did to its active job (the names of ``TaskAbort.Action``
    without the ``ACTION_`` prefix)."""

    CANCELLED = "CANCELLED"
    ABORT_REQUESTED = "ABORT_REQUESTED"
    NONE = "NONE"


class EventKind(StrEnum):
    """What a notification tells (``notification_events.kind``; the webhook's ``type``)."""

    FINAL_FAILURE = "final_failure"
    """A job failed and will not be retried."""
    RECOVERY = "recovery"
    """The first success of a task after final failures."""
    AUTO_DISABLED = "auto_disabled"
    """The task was disabled after SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT failures."""
    NO_SUCCESS = "no_success"
    """No job of the task succeeded within its ``expect_success_within_seconds``."""
    LONG_RUN = "long_run"
    """A job of the task is still running ``warn_after_seconds`` after it started."""
    MISSED_FIRE = "missed_fire"
    """A schedule's fires were recorded missed under its catch-up policy (one per batch)."""
    START_DEADLINE = "start_deadline"
    """A fire's job has not started ``start_deadline_seconds`` after its fire time."""
    NO_ACTIVE_WORKER = "no_active_worker"
    """Jobs have waited longer than a worker lease TTL with no active worker."""
    WORKER_RETURNED = "worker_returned"
    """A worker is active again after a ``no_active_worker``."""
    TEST = "test"
    """Sent by ``tickwork notifiers test NAME``."""


class NotifierType(StrEnum):
    """How a notifier delivers (``notifiers.type``)."""

    EMAIL = "email"
    WEBHOOK = "webhook"
    SLACK = "slack"


class DeliveryStatus(StrEnum):
    """Where one event's delivery through one notifier stands."""

    PENDING = "PENDING"
    SENT = "SENT"
    GIVEN_UP = "GIVEN_UP"
