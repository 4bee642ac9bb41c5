"""tickwork's tables, as SQLAlchemy Core metadata: tasks, schedules and their task lists,
jobs, fires, leases, request-id answers and the notification outbox. Migrations
(:mod:`scheduler_svc.migrations`) create and change them; tests compare the two.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from scheduler_svc.db_datetime import UTCDateTime

metadata = sa.MetaData()
_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: The tables whose ids the API hands out (tasks, schedules, jobs, fires) take them with
#: SQLite's AUTOINCREMENT: an id is never handed out twice, as PostgreSQL's sequences never
#: do. Without it SQLite takes max(rowid) + 1, so deleting the newest row gave its id to the
#: next one, and a client holding the old id (RunTasks, GetJob, WatchJob) reached another
#: object. The cost: one sqlite_sequence update per insert (per job enqueued).
_NEVER_REUSE_IDS: dict[str, Any] = {"sqlite_autoincrement": True}

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("handler", sa.String(200), nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("task_priority", sa.Integer, nullable=False, default=100),
    sa.Column("enabled", sa.Boolean, nullable=False, default=True),
    sa.Column("timeout_seconds", sa.Float, nullable=False, default=0.0),
    sa.Column("consecutive_failure_count", sa.Integer, nullable=False, default=0),
    sa.Column("max_attempts", sa.Integer, nullable=False, default=1),
    sa.Column("backoff_base_seconds", sa.Float, nullable=False, default=10.0),
    sa.Column("backoff_cap_seconds", sa.Float, nullable=False, default=600.0),
    sa.Column("disabled_reason", sa.Text, nullable=False, default=""),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # Server defaults only: an insert that does not name them fits every revision's table.
    sa.Column("memory_limit_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cpu_limit_seconds", sa.BigInteger, nullable=False, server_default="0"),
    # Jobs of tasks in one non-empty group never run at once (uq_jobs_running_group).
    sa.Column("concurrency_group", sa.String(200), nullable=False, server_default=""),
    # When the task's current run of final failures began; NULL: its last final outcome was
    # a success (or it never ran). A failure or a recovery is then known to be a change of
    # state without a read (scheduler_svc.store.outbox).
    sa.Column("failing_since", UTCDateTime, nullable=True),
    # The dead-man window: notify when no job of the task succeeded for this long (0: off),
    # and when that was notified (NULL: not overdue), cleared by the next success.
    sa.Column("expect_success_within_seconds", sa.Float, nullable=False, server_default="0"),
    sa.Column("overdue_since", UTCDateTime, nullable=True),
    # Notify once when a job of the task is still running this long after it started (0:
    # off); it is not stopped (that is timeout_seconds).
    sa.Column("warn_after_seconds", sa.Float, nullable=False, server_default="0"),
    # Labels for ownership and filtering (a JSON object of strings; label selectors match
    # them), and a disable by a person (DisableTask) or by the service ("tickwork", after
    # consecutive failures): its note, when it ends by itself (NULL: when enabled again),
    # who and when. Cleared when the task is enabled.
    sa.Column("labels", sa.JSON, nullable=False, server_default=sa.text("'{}'")),
    sa.Column("disable_note", sa.Text, nullable=False, server_default=""),
    sa.Column("disabled_until", UTCDateTime, nullable=True),
    sa.Column("disabled_by", sa.String(200), nullable=False, server_default=""),
    sa.Column("disabled_at", UTCDateTime, nullable=True),
    # The disables that end by themselves are found through this index.
    sa.Index("ix_tasks_disabled_until", "disabled_until"),
    # Its notification routes (Task.notify: a list of {notifiers, events, every}); NULL:
    # none, each notifier's own route applies.
    sa.Column("notify", sa.JSON(none_as_null=True), nullable=True),
    # The params an operator may override (Task.overridable_params: dotted paths, a JSON
    # list); NULL: none.
    sa.Column("overridable_params", sa.JSON(none_as_null=True), nullable=True),
    **_NEVER_REUSE_IDS,
)

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("cron_expression", sa.String(200), nullable=False, default=""),
    sa.Column("interval_seconds", sa.BigInteger, nullable=False, default=0),
    sa.Column("timezone", sa.String(64), nullable=False, default="UTC"),
    sa.Column("catch_up_policy", sa.String(16), nullable=False, default="SKIP"),
    sa.Column("enabled", sa.Boolean, nullable=False, default=True),
    sa.Column("next_run_at", UTCDateTime, nullable=True),
    sa.Column("last_run_at", UTCDateTime, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # What a fire does while a job of its task is active (values.OverlapPolicy), and
    # BUFFER_ALL's cap on the fires waiting (stored as given; 0 means 100).
    sa.Column("overlap_policy", sa.String(16), nullable=False, server_default="SKIP"),
    sa.Column("max_buffered", sa.Integer, nullable=False, server_default="0"),
    # After downtime: how old a window may be and still fire (seconds), RUN_ALL's cap on
    # the windows fired (0: 100); each fire's start delay (seconds, 0: none) and how it is
    # chosen (RANDOM, STABLE); no fire before start_at nor at or after end_at (NULL: no
    # bound). Server defaults only, as the task limits.
    sa.Column("catch_up_window_seconds", sa.Float, nullable=False, server_default="5"),
    sa.Column("max_catch_up_runs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("jitter_seconds", sa.Float, nullable=False, server_default="0"),
    sa.Column("jitter_mode", sa.String(16), nullable=False, server_default="RANDOM"),
    sa.Column("start_at", UTCDateTime, nullable=True),
    sa.Column("end_at", UTCDateTime, nullable=True),
    # Labels, as the task's; a pause (PauseSchedule, or enabled set false): its note, when
    # it resumes by itself (NULL: when resumed), who and when; cleared on resume.
    # ``catch_up_on_resume``: a resume fires the paused windows through the catch-up policy.
    sa.Column("labels", sa.JSON, nullable=False, server_default=sa.text("'{}'")),
    sa.Column("pause_note", sa.Text, nullable=False, server_default=""),
    sa.Column("paused_until", UTCDateTime, nullable=True),
    sa.Column("paused_by", sa.String(200), nullable=False, server_default=""),
    sa.Column("paused_at", UTCDateTime, nullable=True),
    sa.Column("catch_up_on_resume", sa.Boolean, nullable=False, server_default=sa.false()),
    # Seconds after a fire time its job must have started by (0: no deadline).
    sa.Column("start_deadline_seconds", sa.Float, nullable=False, server_default="0"),
    # Its notification routes (Schedule.notify), as tasks.notify.
    sa.Column("notify", sa.JSON(none_as_null=True), nullable=True),
    # Due schedules are found through this index: the cost grows with the due ones only.
    sa.Index("ix_schedules_due", "enabled", "next_run_at"),
    # And the pauses that end by themselves through this one.
    sa.Index("ix_schedules_paused_until", "paused_until"),
    **_NEVER_REUSE_IDS,
)

schedule_tasks = sa.Table(
    "schedule_tasks",
    metadata,
    sa.Column(
        "schedule_id",
        _id,
        sa.ForeignKey("schedules.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("task_id", _id, sa.ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False, default=0),
    sa.Index("ix_schedule_tasks_task", "task_id"),
)

#: The rows of uq_jobs_running_slot and uq_jobs_running_group (SQL text, for the indexes
#: and their migration).
RUNNING_SLOT_PREDICATE = "status = 'RUNNING'"
RUNNING_GROUP_PREDICATE = "status = 'RUNNING' AND concurrency_group <> ''"
#: The rows of uq_jobs_one_active_per_task: a task's plainly queued or running jobs (not a
#: fire's job that waits behind another, nor one that runs alongside; values.QueuedBehind).
ACTIVE_PLAIN_PREDICATE = "status IN ('QUEUED', 'RUNNING') AND overlap = ''"
#: The rows of uq_jobs_running_task: running jobs other than those that run alongside.
RUNNING_TASK_PREDICATE = "status = 'RUNNING' AND overlap <> 'ALLOW'"

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("task_id", _id, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    sa.Column("task_name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("trigger", sa.String(16), nullable=False),
    sa.Column("lane", sa.SmallInteger, nullable=False),
    sa.Column("task_priority", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, default=1),
    sa.Column("enqueued_at", UTCDateTime, nullable=False),
    sa.Column("not_before", UTCDateTime, nullable=True),
    sa.Column("started_at", UTCDateTime, nullable=True),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("output_tail", sa.Text, nullable=False, default=""),
    sa.Column("schedule_id", _id, nullable=True),
    sa.Column("fire_time", UTCDateTime, nullable=True),
    sa.Column("retry_of_job_id", _id, nullable=True),
    sa.Column("worker_id", sa.String(200), nullable=True),
    sa.Column("lease_token", sa.String(64), nullable=True),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Column("abort_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("late_outcome", sa.Text, nullable=False, default=""),
    # A running job's slot (0 .. TICKWORK_MAX_RUNNING_JOBS - 1), whose ``worker`` lease
    # fenced its claim, and its task's concurrency group, both set by the claim.
    sa.Column("concurrency_group", sa.String(200), nullable=False, server_default=""),
    sa.Column("slot", sa.Integer, nullable=True),
    # A manual or API run's options (RunTasks) and who asked for and who stopped the job
    # (token labels). Server defaults only, as the task limits above.
    sa.Column("params_override", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("labels", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("requested_by", sa.String(200), nullable=False, server_default=""),
    sa.Column("stopped_by", sa.String(200), nullable=False, server_default=""),
    # Whether this running job's long run (its task's warn_after_seconds) was notified.
    sa.Column("long_run_notified", sa.Boolean, nullable=False, server_default=sa.false()),
    # How the job stands to its task's other active jobs (values.QueuedBehind): '' plain,
    # WAIT (a fire's job queued behind the task's running job), ALLOW (runs alongside).
    sa.Column("overlap", sa.String(8), nullable=False, server_default=""),
    sa.Column("start_deadline_notified", sa.Boolean, nullable=False, server_default=sa.false()),
    # At most one plain queued or running job per task: the database enforces the skip
    # logic.
    sa.Index(
        "uq_jobs_one_active_per_task",
        "task_id",
        unique=True,
        sqlite_where=sa.text(ACTIVE_PLAIN_PREDICATE),
        postgresql_where=sa.text(ACTIVE_PLAIN_PREDICATE),
    ),
    # Two running jobs of one task, unless one runs alongside (ALLOW): refused.
    sa.Index(
        "uq_jobs_running_task",
        "task_id",
        unique=True,
        sqlite_where=sa.text(RUNNING_TASK_PREDICATE),
        postgresql_where=sa.text(RUNNING_TASK_PREDICATE),
    ),
    # At most one running job per slot, and per non-empty concurrency group: the database
    # enforces the slot limit and the groups, whatever a replica or a worker believes.
    sa.Index(
        "uq_jobs_running_slot",
        "slot",
        unique=True,
        sqlite_where=sa.text(RUNNING_SLOT_PREDICATE),
        postgresql_where=sa.text(RUNNING_SLOT_PREDICATE),
    ),
    sa.Index(
        "uq_jobs_running_group",
        "concurrency_group",
        unique=True,
        sqlite_where=sa.text(RUNNING_GROUP_PREDICATE),
        postgresql_where=sa.text(RUNNING_GROUP_PREDICATE),
    ),
    sa.Index("ix_jobs_task", "task_id", "id"),
    sa.Index("ix_jobs_schedule", "schedule_id", "id"),
    **_NEVER_REUSE_IDS,
)

# The queue order (lane, priority descending, enqueue time, insertion order) as an index in
# that order, so taking the next job reads one index entry instead of sorting the queue.
sa.Index(
    "ix_jobs_queue",
    jobs.c.status,
    jobs.c.lane,
    jobs.c.task_priority.desc(),
    jobs.c.enqueued_at,
    jobs.c.id,
)

fires = sa.Table(
    "fires",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column(
        "schedule_id", _id, sa.ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("fire_time", UTCDateTime, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("runs", sa.JSON, nullable=False),
    sa.Column("recorded_at", UTCDateTime, nullable=False),
    # Who caused it (values.Trigger): SCHEDULER for the loop's fires, BACKFILL for a
    # backfill's windows, MANUAL or API for TriggerSchedule.
    sa.Column("trigger", sa.String(16), nullable=False, server_default="SCHEDULER"),
    # When its jobs may start: the fire time plus the schedule's jitter; NULL: the fire time.
    sa.Column("start_at", UTCDateTime, nullable=True),
    # Every fire is idempotent: one row per (schedule, fire time).
    sa.UniqueConstraint("schedule_id", "fire_time", name="uq_fires_schedule_fire_time"),
    **_NEVER_REUSE_IDS,
)

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False, default=""),
    sa.Column("token", sa.BigInteger, nullable=False, default=0),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    # The holder's process (scheduler_svc.holders): host name, pid, the host's boot id and
    # the process's start time in clock ticks after boot; NULL when not known.
    sa.Column("holder_host", sa.String(255), nullable=True),
    sa.Column("holder_pid", sa.Integer, nullable=True),
    sa.Column("holder_boot_id", sa.String(64), nullable=True),
    sa.Column("holder_started", sa.BigInteger, nullable=True),
)

LEASE_NAMES = ("scheduler", "worker")

#: Answers of calls made with a request_id (AIP-155), for 24 h: a repeat gets the stored one.
requests = sa.Table(
    "requests",
    metadata,
    sa.Column("method", sa.String(64), primary_key=True),
    sa.Column("request_id", sa.String(200), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("response", sa.LargeBinary, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False, index=True),
)


#: Notifiers declared through the API (NotifierService): ``config`` holds the type's
#: settings, secrets included (never returned by the API); ``events``, ``every``, ``tasks``
#: and ``schedules`` are its route (see docs/operations/notifications.md).
notifiers = sa.Table(
    "notifiers",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("type", sa.String(16), nullable=False),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("events", sa.JSON, nullable=False),
    sa.Column("every", sa.Boolean, nullable=False),
    sa.Column("tasks", sa.JSON, nullable=False),
    sa.Column("schedules", sa.JSON, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

#: The outbox: one row per event, written in the transaction of the state change that
#: caused it; ``routed`` once the sender has made its deliveries.
notification_events = sa.Table(
    "notification_events",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("state_change", sa.Boolean, nullable=False),
    sa.Column("task_id", _id, nullable=True),
    sa.Column("task_name", sa.String(200), nullable=False),
    sa.Column("schedule_id", _id, nullable=True),
    sa.Column("job_id", _id, nullable=True),
    sa.Column("details", sa.JSON, nullable=False),
    sa.Column("occurred_at", UTCDateTime, nullable=False),
    sa.Column("routed", sa.Boolean, nullable=False),
    sa.UniqueConstraint("event_id", name="uq_notification_events_event_id"),
    sa.Index("ix_notification_events_unrouted", "routed", "id"),
)

#: A condition of the service as a whole that was notified when it began (``name``, e.g.
#: ``no_active_worker``) and is cleared when it ends: one row while it lasts, so it is
#: notified once, by one replica (the primary key).
notification_conditions = sa.Table(
    "notification_conditions",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("since", UTCDateTime, nullable=False),
)

#: One event's delivery through one notifier: PENDING until SENT or GIVEN_UP.
notification_deliveries = sa.Table(
    "notification_deliveries",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column(
        "event",
        _id,
        sa.ForeignKey("notification_events.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("notifier", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", UTCDateTime, nullable=True),
    sa.Column("last_error", sa.Text, nullable=False),
    sa.Column("sent_at", UTCDateTime, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index("ix_notification_deliveries_due", "status", "next_attempt_at"),
)


def slot_lease_name(slot: int) -> str:
    """The ``leases`` row of worker slot ``slot`` (>= 0): ``"worker"`` for slot 0 (the one
    slot of the default, one job at a time), ``"worker.<slot>"`` for the others, which are
    inserted when first taken."""
    return "worker" if slot == 0 else f"worker.{slot}"


#: The predicate of uq_jobs_one_active_per_task, for ON CONFLICT against it.
ACTIVE_JOB_PREDICATE = sa.text(ACTIVE_PLAIN_PREDICATE)
