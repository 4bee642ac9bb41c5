"""Plain records the store returns: one dataclass per table row, aware UTC datetimes.

A column of a value domain holds its stored text (``JobRecord.status``, ``trigger``), which
compares equal to the member of :mod:`scheduler_svc.values` it names."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from scheduler_svc.overrides import merge_patch
from scheduler_svc.values import FireOutcome, OverlapPolicy, SkipReason, Trigger


@dataclass(frozen=True)
class TaskRecord:
    """A row of ``tasks``."""

    id: int
    name: str
    description: str
    handler: str
    params: dict[str, Any]
    task_priority: int
    enabled: bool
    timeout_seconds: float
    consecutive_failure_count: int
    max_attempts: int
    backoff_base_seconds: float
    backoff_cap_seconds: float
    disabled_reason: str
    created_at: dt.datetime
    updated_at: dt.datetime
    memory_limit_bytes: int = 0
    """RLIMIT_AS of each job process, bytes; 0: none."""
    cpu_limit_seconds: int = 0
    """RLIMIT_CPU of each job process, seconds; 0: none."""
    concurrency_group: str = ""
    """Jobs of tasks in one non-empty group never run at once; empty: the task alone."""
    expect_success_within_seconds: float = 0.0
    """Notify when no job of it succeeded for this long, seconds; 0: never."""
    warn_after_seconds: float = 0.0
    """Notify once when a job of it still runs this long after it started; 0: never."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels for ownership and filtering."""
    disable_note: str = ""
    """Why a person disabled it (DisableTask); empty otherwise."""
    disabled_until: dt.datetime | None = None
    """When it is enabled again by itself; None: when enabled."""
    disabled_by: str = ""
    """Who disabled it (a token label, "anonymous", or "tickwork" for an auto-disable)."""
    disabled_at: dt.datetime | None = None
    """When it was disabled; None while enabled."""
    notify: list[dict[str, Any]] | None = None
    """Its notification routes (``{"notifiers": [...], "events": [...], "every": bool}``,
    events as :class:`~scheduler_svc.values.EventKind` values); None: none."""
    overridable_params: list[str] | None = None
    """The dotted param paths an operator may override (``env.REGION``); None: none."""


@dataclass(frozen=True)
class ScheduleRecord:
    """A row of ``schedules`` with its task ids (in position order) and names."""

    id: int
    name: str
    description: str
    cron_expression: str
    interval_seconds: int
    timezone: str
    catch_up_policy: str
    enabled: bool
    next_run_at: dt.datetime | None
    last_run_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    task_ids: tuple[int, ...] = ()
    task_names: tuple[str, ...] = ()
    catch_up_window_seconds: float = 5.0
    """How old a missed window may be and still fire after downtime, seconds."""
    max_catch_up_runs: int = 0
    """RUN_ALL's cap on the windows fired after downtime; 0: 100."""
    jitter_seconds: float = 0.0
    """Most delay added to each fire's start, seconds; 0: none."""
    jitter_mode: str = "RANDOM"
    """RANDOM (a new delay per fire) or STABLE (one delay from the schedule's name)."""
    start_at: dt.datetime | None = None
    """No fire before this instant (aware UTC); None: no bound."""
    end_at: dt.datetime | None = None
    """No fire at or after this instant (aware UTC); None: no bound."""
    overlap_policy: str = "SKIP"
    """What a fire does while a job of its task is active (:class:`values.OverlapPolicy`)."""
    max_buffered: int = 0
    """BUFFER_ALL's cap on waiting fires; 0 means :data:`DEFAULT_MAX_BUFFERED`."""

    labels: dict[str, str] = field(default_factory=dict)
    """Labels for ownership and filtering."""
    pause_note: str = ""
    """Why it is paused (PauseSchedule); empty otherwise."""
    paused_until: dt.datetime | None = None
    """When it resumes by itself; None: when resumed."""
    paused_by: str = ""
    """Who paused it (a token label, "anonymous" without access control)."""
    paused_at: dt.datetime | None = None
    """When it was paused; None while enabled."""
    catch_up_on_resume: bool = False
    """A resume fires the paused windows through the catch-up policy."""
    #: Seconds after a fire time its job must have started by; 0: no deadline.
    start_deadline_seconds: float = 0.0
    #: Its notification routes, as :attr:`TaskRecord.notify`; None: none.
    notify: list[dict[str, Any]] | None = None

    @property
    def buffer_cap(self) -> int:
        """How many fires may wait under BUFFER_ALL."""
        return self.max_buffered or DEFAULT_MAX_BUFFERED


#: BUFFER_ALL's cap when a schedule's max_buffered is 0, and the largest one may give.
DEFAULT_MAX_BUFFERED = 100
MAX_MAX_BUFFERED = 10_000


@dataclass(frozen=True)
class JobRecord:
    """A row of ``jobs``: ``status`` a :class:`~scheduler_svc.values.JobStatus`,
    ``trigger`` a :class:`~scheduler_svc.values.Trigger`, ``lane`` a
    :class:`~scheduler_svc.values.Lane`, as stored."""

    id: int
    task_id: int
    task_name: str
    status: str
    trigger: str
    lane: int
    task_priority: int
    attempt: int
    enqueued_at: dt.datetime
    not_before: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    error: str
    output_tail: str
    schedule_id: int | None
    fire_time: dt.datetime | None
    retry_of_job_id: int | None
    worker_id: str | None
    lease_token: str | None
    lease_expires_at: dt.datetime | None
    abort_requested: bool
    late_outcome: str
    slot: int | None = None
    """The worker slot it ran in (set when claimed)."""
    concurrency_group: str = ""
    """Its task's concurrency group when it was claimed."""
    params_override: dict[str, Any] | None = None
    """Params patched over its task's when it starts (a run option); None: none."""
    labels: dict[str, str] | None = None
    """The labels of the run that asked for it; None: none."""
    requested_by: str = ""
    """The token label of who asked for it ("anonymous" without access control); empty
    for a scheduled job."""
    stopped_by: str = ""
    """The token label of who cancelled it or asked for its abort; empty otherwise."""
    overlap: str = ""
    """How it stands to its task's other active jobs (:class:`values.QueuedBehind`)."""

    def run_params(self, task_params: dict[str, Any]) -> dict[str, Any]:
        """The params the job runs with: ``params_override`` applied to ``task_params`` as
        a JSON Merge Patch (:func:`scheduler_svc.overrides.merge_patch`)."""
        if not self.params_override:
            return task_params
        patched: dict[str, Any] = merge_patch(task_params, self.params_override)
        return patched


@dataclass(frozen=True)
class RunOptions:
    """What a manual or API run asks of the jobs it creates (RunTasks).

    ``params_override`` (a JSON Merge Patch over the task's params when the job starts),
    ``not_before`` (aware UTC; the job is not started before it) and ``labels`` shape a new
    job only: with any of them set, a task that already has a queued or running job is
    skipped and that job left as it is. ``requested_by`` (the caller's token label) is
    recorded on every new job."""

    requested_by: str = ""
    params_override: dict[str, Any] | None = None
    not_before: dt.datetime | None = None
    labels: dict[str, str] | None = None

    @property
    def shape_new_jobs_only(self) -> bool:
        """True when the run carries a run option that an existing job would not honour."""
        return bool(self.params_override or self.not_before or self.labels)

    def columns(self) -> dict[str, Any]:
        """The ``jobs`` columns of a new job of this run (beyond :func:`rows.job_row`)."""
        return {
            "params_override": self.params_override or None,
            "labels": self.labels or None,
            "requested_by": self.requested_by,
        }


#: A run without options: the default of every enqueue.
NO_OPTIONS = RunOptions()


@dataclass(frozen=True)
class TaskRunResult:
    """What came of one task asked to run.

    ``job_id`` is the new, promoted, or already active job (0 when the task is disabled);
    ``skip_reason`` is None when the task got a new (or promoted) job.
    ``made_ready``: a manual or API run found the job queued with a not_before still ahead
    (a retry's backoff) and made it ready now (not stored with a fire: the scheduler never
    does this).
    """

    task_id: int
    task_name: str
    job_id: int
    skip_reason: SkipReason | None = None
    promoted: bool = False
    made_ready: bool = False
    overlap: str = ""
    """For a fire's task: BUFFERED (its new job waits behind the task's running job) or
    REPLACED (it aborted the running job ``replaced_job_id``); empty otherwise."""
    replaced_job_id: int = 0

    def to_json(self) -> dict[str, Any]:
        """The form stored in ``fires.runs``."""
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "task_name": self.task_name,
            "job_id": self.job_id,
            "skip_reason": self.skip_reason,
            "promoted": self.promoted,
        }
        if self.overlap:
            out["overlap"] = self.overlap
            out["replaced_job_id"] = self.replaced_job_id
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskRunResult:
        """Inverse of :meth:`to_json`."""
        return cls(
            task_id=int(data["task_id"]),
            task_name=str(data.get("task_name", "")),
            job_id=int(data.get("job_id", 0)),
            skip_reason=SkipReason(data["skip_reason"]) if data.get("skip_reason") else None,
            promoted=bool(data.get("promoted", False)),
            overlap=str(data.get("overlap", "")),
            replaced_job_id=int(data.get("replaced_job_id", 0)),
        )


@dataclass(frozen=True)
class FireRecord:
    """A row of ``fires``."""

    id: int
    schedule_id: int
    fire_time: dt.datetime
    outcome: FireOutcome
    runs: tuple[TaskRunResult, ...]
    recorded_at: dt.datetime
    start_at: dt.datetime | None = None
    """When its jobs may start (the fire time plus jitter); None: at its fire time."""
    trigger: str = Trigger.SCHEDULER
    """Who caused it (:class:`values.Trigger`): SCHEDULER, or BACKFILL."""


@dataclass(frozen=True)
class EnqueueResult:
    """Result of a manual or API enqueue: one result per task asked for, in request order."""

    runs: tuple[TaskRunResult, ...]


@dataclass(frozen=True)
class FireRequest:
    """One schedule's fire as the scheduler decided it (see :class:`firing.FirePlan`)."""

    schedule_id: int
    fire_time: dt.datetime
    task_ids: tuple[int, ...]
    missed: bool = False
    missed_fire_times: tuple[dt.datetime, ...] = ()
    start_at: dt.datetime | None = None
    """When its jobs may start (the fire time plus the schedule's jitter; its jobs' not
    before); None: at once."""
    trigger: Trigger = Trigger.SCHEDULER
    """Who caused it: its jobs carry it, in the lane of :func:`fires.lane_of` (the
    scheduler lane for SCHEDULER, the backfill lane for BACKFILL, the manual lane for
    MANUAL and API (TriggerSchedule))."""
    overlap_policy: OverlapPolicy | None = None
    """The overlap policy its tasks go through; None: the schedule's own."""


@dataclass(frozen=True)
class FireResult:
    """What recording one fire did: per-task results, whether it was already recorded,
    and whether the schedule still existed (nothing is recorded when it did not)."""

    request: FireRequest
    runs: tuple[TaskRunResult, ...]
    duplicate_fire: bool = False
    schedule_found: bool = True
    outcome: str = ""
    """The fire's :class:`~scheduler_svc.values.FireOutcome` (empty when not found)."""
    fire_id: int = 0
    """The fire's row (0 when not found)."""
    recorded_at: dt.datetime | None = None
    """When the fire was recorded (None when not found)."""


@dataclass(frozen=True)
class FinishResult:
    """What recording a job's outcome did.

    ``accepted`` False: the lease was lost (stale token); the outcome was recorded as late.
    ``retry`` is the queued retry job, if one was made. ``disabled_task`` is the task when
    this failure disabled it (auto-disable), so the caller can send the email.
    ``anchored_next_run`` is the new next run of the job's interval schedule, if it moved.
    ``next_job`` is the job (and its task) leased to the worker in the same transaction,
    when the caller asked for one and one was ready. ``repeat`` True: this very outcome
    (same lease token, status and error) had already been recorded, and nothing changed
    (a worker reporting again after its stream broke before the OutcomeAck).
    """

    accepted: bool
    job: JobRecord | None
    retry: JobRecord | None = None
    disabled_task: TaskRecord | None = None
    anchored_next_run: dt.datetime | None = None
    next_job: tuple[JobRecord, TaskRecord] | None = None
    repeat: bool = False
    events: tuple[str, ...] = ()
    """The ids of the notification events written with the outcome (final failure,
    recovery, auto-disabled)."""


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease (``WORKER_ID#NONCE`` for a worker slot) and until when (aware UTC)."""

    holder: str
    expires_at: dt.datetime
