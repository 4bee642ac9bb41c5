"""The value domains of tickwork's tables, as stored: each member's value is the exact text
(or number) written to its column, so ``JobStatus.QUEUED == "QUEUED"`` and a row read back
compares equal to the member."""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "ACTIVE_STATES",
    "FINAL_STATES",
    "FIRED_LANES",
    "AbortAction",
    "DeliveryStatus",
    "EventKind",
    "FireOutcome",
    "JobStatus",
    "Lane",
    "NotifierType",
    "OverlapPolicy",
    "QueuedBehind",
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


#: A job in one of these states is active: at most one per task (uq_jobs_one_active_per_task)
#: among the jobs queued plainly (``jobs.overlap`` empty, see :class:`QueuedBehind`).
ACTIVE_STATES = (JobStatus.QUEUED, JobStatus.RUNNING)
#: A job in one of these states is ended: it never changes again.
FINAL_STATES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.ABORTED, JobStatus.CANCELLED)


class Trigger(StrEnum):
    """``jobs.trigger``: what asked for the job (a retry keeps its first attempt's)."""

    MANUAL = "MANUAL"
    API = "API"
    SCHEDULER = "SCHEDULER"
    BACKFILL = "BACKFILL"


class Lane(IntEnum):
    """``jobs.lane``, the queue's first sort key: manual and API jobs first, then the
    scheduler's, then a backfill's (so fresh scheduled work never waits behind one)."""

    MANUAL = 0
    SCHEDULER = 1
    BACKFILL = 2


#: The lanes of jobs a schedule fired (for its fire time or a backfilled window): a
#: disabled task's jobs in them are cancelled and never started, unlike a manual run's.
FIRED_LANES = (Lane.SCHEDULER, Lane.BACKFILL)


class SkipReason(StrEnum):
    """Why a task asked to run got no new job (``TaskRunResult.skip_reason``, and in
    ``fires.runs``)."""

    ALREADY_QUEUED = "ALREADY_QUEUED"
    ALREADY_RUNNING = "ALREADY_RUNNING"
    TASK_DISABLED = "TASK_DISABLED"
    BUFFER_FULL = "BUFFER_FULL"

    @classmethod
    def active(cls, status: str) -> SkipReason:
        """The skip of a task whose active job has ``status`` (QUEUED or RUNNING)."""
        return cls.ALREADY_RUNNING if status == JobStatus.RUNNING else cls.ALREADY_QUEUED


class FireOutcome(StrEnum):
    """``fires.outcome``: ENQUEUED when the fire created a job, SKIPPED when every task was
    skipped, MISSED when the catch-up policy passed the window over; BUFFERED when a job it
    created waits behind its task's running job, REPLACED when it aborted one."""

    ENQUEUED = "ENQUEUED"
    SKIPPED = "SKIPPED"
    MISSED = "MISSED"
    BUFFERED = "BUFFERED"
    REPLACED = "REPLACED"


class OverlapPolicy(StrEnum):
    """``schedules.overlap_policy``: what a fire does while a job of its task is queued or
    running (the names of the OverlapPolicy enum without the ``OVERLAP_POLICY_`` prefix)."""

    SKIP = "SKIP"
    BUFFER_ONE = "BUFFER_ONE"
    BUFFER_ALL = "BUFFER_ALL"
    REPLACE = "REPLACE"
    ALLOW = "ALLOW"


class QueuedBehind(StrEnum):
    """``jobs.overlap``: how a job stands to the other active jobs of its task.

    PLAIN jobs are at most one queued or running per task (uq_jobs_one_active_per_task).
    A WAIT job (a fire buffered, or the one that replaces a running job) is not counted by
    that rule: it may be queued beside the task's active job, and starts only while no
    other job of the task that is not ALLOW runs. An ALLOW job is counted by neither rule:
    it runs alongside the task's other jobs. Whatever the kinds, two jobs of one task that
    are not ALLOW never run at once (uq_jobs_running_task)."""

    PLAIN = ""
    WAIT = "WAIT"
    ALLOW = "ALLOW"


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
