"""The data store: every read and write of tickwork's tables, on SQLite or PostgreSQL.

:class:`Store` is the one interface; its body is the index of every operation, each
docstring the operation's contract. The operations live in one module per concern:
:mod:`.tasks`, :mod:`.schedules`, :mod:`.queue` (runs in, jobs out), :mod:`.finish`
(outcomes, retries, recovery), :mod:`.fires`, :mod:`.backfill`, :mod:`.leases`,
:mod:`.retention`; they share :mod:`.rows` (row and record conversions), :mod:`.locks`
(the lock order) and :mod:`.hot` (the statements every job and fire runs, on the driver
through :mod:`.driver`).

Every operation is one transaction and takes ``now`` (aware UTC) from its caller; the
store never reads the clock. Unique violations become :class:`AlreadyExists` naming the
field; other driver errors propagate as SQLAlchemy's ``DBAPIError`` (the servicers answer
them UNAVAILABLE without the SQL; the loops log them and retry).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Database
from scheduler_svc.holders import HolderProcess
from scheduler_svc.records import (
    NO_OPTIONS,
    EnqueueResult,
    FinishResult,
    FireRecord,
    FireRequest,
    FireResult,
    JobRecord,
    LeaseHolder,
    RunOptions,
    ScheduleRecord,
    TaskRecord,
)
from scheduler_svc.store import (
    backfill,
    config,
    finish,
    fires,
    leases,
    outbox,
    pauses,
    queue,
    requests,
    retention,
    schedules,
    tasks,
)
from scheduler_svc.store.backfill import Planned, PlanWindows, Span, Window
from scheduler_svc.store.config import Applied, ScheduleItem
from scheduler_svc.store.finish import LEASE_LOST, backoff_delay_s
from scheduler_svc.store.locks import LOCK_ORDER
from scheduler_svc.store.outbox import NotifierRecord
from scheduler_svc.store.requests import Answer, Remember, RequestRaced
from scheduler_svc.store.rows import ABORTED_BY_OPERATOR, ERROR_CHARS, OUTPUT_TAIL_CHARS, job_error
from scheduler_svc.store.schedules import due_schedules_query
from scheduler_svc.store.tasks import TASK_DISABLED
from scheduler_svc.values import AbortAction, JobStatus, Trigger

#: Attempts of :meth:`Store.claim_next_job` when the database refuses a claim that another
#: slot's claim of the same concurrency group beat.
CLAIM_ATTEMPTS = 3

__all__ = [
    "ABORTED_BY_OPERATOR",
    "ERROR_CHARS",
    "LEASE_LOST",
    "LOCK_ORDER",
    "OUTPUT_TAIL_CHARS",
    "TASK_DISABLED",
    "Answer",
    "Applied",
    "Remember",
    "RequestRaced",
    "ScheduleItem",
    "Store",
    "Window",
    "backoff_delay_s",
    "due_schedules_query",
    "job_error",
]


R = TypeVar("R")


def _once(fn: Callable[[Connection], R], remember: Remember | None) -> Callable[[Connection], R]:
    """``fn``, followed in its transaction by storing its answer under ``remember``."""
    if remember is None:
        return fn

    def run(conn: Connection) -> R:
        result = fn(conn)
        requests.remember(conn, remember, result)
        return result

    return run


class Store:
    """tickwork's tables behind one async interface. Safe to share in one event loop.

    Reads run in a read-only transaction (:meth:`Database.read`), writes in a read-write
    one (:meth:`Database.write`); what takes jobs off the queue runs on the queue's
    connections (``queue=True``).
    """

    def __init__(
        self,
        database: Database,
        *,
        rng: random.Random | None = None,
        process: HolderProcess | None = None,
    ) -> None:
        """``rng`` draws the retries' backoff jitter (seeded in tests); ``process`` is what
        the leases this store takes record as their holder's process (None: nothing, and no
        dead holder is taken over)."""
        self.db = database
        self.rng = rng or random.Random()
        self.process = process
        #: The notification outbox, notifiers and deliveries.
        self.outbox = outbox.Outbox(database)

    # ------------------------------------------------------------------------ tasks

    async def create_task(
        self, values: dict[str, Any], now: dt.datetime, *, remember: Remember | None = None
    ) -> TaskRecord:
        """Insert a task from validated ``values`` (column names) and return it.

        ``remember``, here and on the other operations that take it: store the call's answer
        in the same transaction (see :meth:`find_request`); RequestRaced (nothing written)
        when another call stored one under that request_id first.
        Raises AlreadyExists(field="task.name") when the name is taken.
        """
        return await self.db.write(
            _once(lambda conn: tasks.create_task(conn, values, now), remember)
        )

    async def get_task(self, task_id: int) -> TaskRecord:
        """The task with ``task_id``. Raises NotFound(field="task_id")."""
        return await self.db.read(lambda conn: tasks.get_task(conn, task_id))

    async def get_task_by_name(self, name: str, *, field: str = "name") -> TaskRecord:
        """The task named ``name``. Raises NotFound(field=``field``), the request field
        that gave the name (``name``, or ``task_names[i]`` for RunTasks)."""
        return await self.db.read(lambda conn: tasks.get_task_by_name(conn, name, field))

    async def task_outcome_times(
        self, task_ids: Sequence[int]
    ) -> dict[int, tuple[dt.datetime | None, dt.datetime | None]]:
        """For each task of ``task_ids`` that exists: when its newest SUCCEEDED job and its
        newest FAILED job finished (aware UTC; None when no such job is kept)."""
        return await self.db.read(lambda conn: tasks.outcome_times(conn, task_ids))

    async def list_tasks(
        self, limit: int, after_name: str = "", selector: dict[str, str] | None = None
    ) -> list[TaskRecord]:
        """Up to ``limit`` tasks with names after ``after_name``, ascending by name, whose
        labels hold every key=value of ``selector`` (when given)."""
        return await self.db.read(
            lambda conn: tasks.list_tasks(conn, limit, after_name, selector or {})
        )

    async def update_task(
        self, task_id: int, values: dict[str, Any], now: dt.datetime, *, by: str = ""
    ) -> tuple[TaskRecord, list[int]]:
        """Update the given columns of a task (and updated_at); return it and the ids of the
        jobs cancelled.

        Turning ``enabled`` from false to true resets consecutive_failure_count to 0 and
        clears disabled_reason and the disable fields (note, until, who, when). Turning it
        from true to false records ``by`` and ``now`` as who disabled it and when, unless
        ``values`` give them. Setting it false cancels the task's queued scheduler-lane and
        backfill-lane jobs (a scheduled or backfilled run or its retry; not one a manual or
        API run asked for or promoted), error :data:`TASK_DISABLED`; a running job is left
        to finish. Changing ``concurrency_group`` moves the task's running jobs into the
        new group, so the group's next jobs wait for them.
        Raises NotFound(field="task.id"), AlreadyExists(field="task.name"),
        FailedPrecondition(field="task.concurrency_group") when a job of the task runs
        while a job of the new group (or a second job of the task) runs too.
        """
        dialect = self.db.dialect
        return await self.db.write(
            lambda conn: tasks.update_task(conn, dialect, task_id, values, now, by)
        )

    async def delete_task(self, task_id: int) -> None:
        """Delete a task with all its jobs (finished ones too) and its schedule links.

        Raises NotFound(field="task_id"); FailedPrecondition(field="task_id") when a job of
        it is running, or when it is the only task of a schedule (which would be left
        firing nothing).
        """
        await self.db.write(lambda conn: tasks.delete_task(conn, self.db.dialect, task_id))

    async def consecutive_failures(self) -> dict[str, int]:
        """Every task's consecutive_failure_count, by task name."""
        return await self.db.read(tasks.consecutive_failures)

    # -------------------------------------------------------------------- schedules

    async def create_schedule(
        self,
        values: dict[str, Any],
        task_ids: Sequence[int],
        now: dt.datetime,
        *,
        remember: Remember | None = None,
    ) -> ScheduleRecord:
        """Insert a schedule (validated ``values``, next_run_at included) with its tasks in
        the order of ``task_ids``, and return it.

        Raises AlreadyExists(field="schedule.name"), NotFound(field="schedule.task_ids").
        Nothing is written when it raises.
        """
        return await self.db.write(
            _once(lambda conn: schedules.create_schedule(conn, values, task_ids, now), remember)
        )

    async def create_schedules(
        self,
        items: Sequence[tuple[dict[str, Any], Sequence[int]]],
        now: dt.datetime,
        *,
        remember: Remember | None = None,
    ) -> list[ScheduleRecord]:
        """Insert many schedules (each as :meth:`create_schedule`: validated ``values`` with
        the same keys, and task ids), all or none; return them in the order of ``items``.

        Set-based: one read of taken names, one of the tasks, one executemany INSERT of the
        schedules, one of their links. Raises AlreadyExists(field="requests[i].schedule.name")
        and NotFound(field="requests[i].schedule.task_ids") for the first item at fault,
        AlreadyExists(field="requests") for a name another transaction took meanwhile.
        """
        return await self.db.write(
            _once(lambda conn: schedules.create_schedules(conn, items, now), remember)
        )

    async def get_schedule(self, schedule_id: int) -> ScheduleRecord:
        """The schedule with ``schedule_id``. Raises NotFound(field="schedule_id")."""
        return await self.db.read(lambda conn: schedules.get_schedule(conn, schedule_id))

    async def get_schedule_by_name(self, name: str) -> ScheduleRecord:
        """The schedule named ``name``. Raises NotFound(field="name")."""
        return await self.db.read(lambda conn: schedules.get_schedule_by_name(conn, name))

    async def list_schedules(
        self, limit: int, after_name: str = "", selector: dict[str, str] | None = None
    ) -> list[ScheduleRecord]:
        """Up to ``limit`` schedules with names after ``after_name``, ascending by name,
        whose labels hold every key=value of ``selector`` (when given)."""
        return await self.db.read(
            lambda conn: schedules.list_schedules(conn, limit, after_name, selector or {})
        )

    async def update_schedule(
        self,
        schedule_id: int,
        values: dict[str, Any],
        task_ids: Sequence[int] | None,
        now: dt.datetime,
        *,
        complete: Callable[[ScheduleRecord], dict[str, Any]] | None = None,
    ) -> ScheduleRecord:
        """Update the given columns (and updated_at; the task list too when ``task_ids`` is
        not None) and return the schedule.

        With ``complete``, the schedule is read first in this transaction, its row locked
        (FOR UPDATE where rows are locked, after the tasks: LOCK_ORDER), and
        ``complete(current)`` returns the further columns to set (the next run) or raises
        (InvalidArgument: the merge is invalid): so the update is validated against the
        schedule it changes, not one read before another update committed.

        Raises NotFound(field="schedule_id", "schedule.id" or "schedule.task_ids"),
        AlreadyExists(field="schedule.name").
        """
        dialect = self.db.dialect
        return await self.db.write(
            lambda conn: schedules.update_schedule(
                conn, dialect, schedule_id, values, task_ids, now, complete
            )
        )

    async def delete_schedule(self, schedule_id: int) -> None:
        """Delete a schedule and its fire history. Raises NotFound(field="schedule_id")."""
        await self.db.write(lambda conn: schedules.delete_schedule(conn, schedule_id))

    async def apply_config(
        self,
        task_items: Sequence[dict[str, Any]],
        schedule_items: Sequence[ScheduleItem],
        now: dt.datetime,
        next_run: Callable[[ScheduleRecord], dt.datetime | None],
        *,
        dry_run: bool = False,
        by: str = "",
        prune: dict[str, str] | None = None,
        notifier_items: Sequence[NotifierRecord] = (),
    ) -> Applied:
        """Upsert tasks, then schedules, by name, in one transaction: all or nothing.

        ``task_items`` are validated task columns (``name`` always; ``enabled`` only when
        managed), ``schedule_items`` validated schedule columns with task names. A missing
        item is created (``enabled`` true unless given; a schedule's next run from
        ``next_run``), one that differs in a given column is updated in those columns (a
        schedule's next run recomputed only when a timing column changes; a task disabled
        cancels its queued scheduler jobs, as :meth:`update_task`), one that matches is not
        written. A schedule disabled is paused by ``by`` (who), one enabled resumed, as
        UpdateSchedule does. ``notifier_items`` are put after the schedules, each whole by
        name (as :meth:`Outbox.put_notifier`). With ``prune`` (a label selector), the stored
        schedules, then tasks, whose labels match it and that the items do not name are
        deleted (DELETED changes after all the others). ``dry_run``: the same transaction,
        rolled back.

        Raises NotFound(field="schedules[i].task_names[j]"), AlreadyExists (a name taken by
        another transaction meanwhile), FailedPrecondition(field="prune_selector") for a
        task to prune that a schedule left in place runs or that has a running job; nothing
        is written when it raises.
        """
        dialect = self.db.dialect

        def run(conn: Connection) -> Applied:
            return config.apply_config(
                conn,
                dialect,
                task_items,
                schedule_items,
                now,
                next_run,
                by,
                prune,
                notifier_items,
            )

        return await (self.db.rehearse(run) if dry_run else self.db.write(run))

    async def due_schedules(self, now: dt.datetime, limit: int) -> list[ScheduleRecord]:
        """Up to ``limit`` enabled schedules with next_run_at <= now, earliest next run
        first, then by id (index ix_schedules_due)."""
        return await self.db.read(lambda conn: schedules.due_schedules(conn, now, limit))

    async def schedules_without_next_run(
        self, limit: int, now: dt.datetime | None = None
    ) -> list[ScheduleRecord]:
        """Up to ``limit`` enabled schedules whose next_run_at is NULL (written directly to
        the database), by id; with ``now``, not those whose end_time has passed (they have
        no next run)."""
        return await self.db.read(
            lambda conn: schedules.schedules_without_next_run(conn, limit, now)
        )

    async def earliest_next_run(self) -> dt.datetime | None:
        """The earliest next_run_at among enabled schedules; None when there is none."""
        return await self.db.read(schedules.earliest_next_run)

    async def resume_due_schedules(self, now: dt.datetime, limit: int) -> list[ScheduleRecord]:
        """Resume up to ``limit`` paused schedules whose paused_until is at or before
        ``now`` (:func:`scheduler_svc.pausing.resume_columns`, automatic), in one
        transaction, their rows locked; return them resumed, with their next runs."""
        dialect = self.db.dialect
        return await self.db.write(lambda conn: pauses.resume_due(conn, dialect, now, limit))

    async def enable_due_tasks(self, now: dt.datetime) -> list[int]:
        """Enable every disabled task whose disabled_until is at or before ``now`` (the
        disable fields and the failure count cleared); return their ids."""
        return await self.db.write(lambda conn: pauses.enable_due(conn, now))

    async def earliest_pause_end(self) -> dt.datetime | None:
        """The earliest paused_until of a paused schedule or disabled_until of a disabled
        task; None when no pause ends by itself."""
        return await self.db.read(pauses.earliest_end)

    async def set_next_run(
        self,
        schedule_id: int,
        expected: dt.datetime | None,
        next_run_at: dt.datetime | None,
        last_run_at: dt.datetime | None = None,
    ) -> bool:
        """Move a schedule's next_run_at from ``expected`` to ``next_run_at``, and set its
        last_run_at when given. Conditional on next_run_at still being ``expected`` (NULL
        matches None), so an API update made meanwhile wins. True if it moved."""
        return await self.db.write(
            lambda conn: schedules.set_next_run(
                conn, schedule_id, expected, next_run_at, last_run_at
            )
        )

    async def set_next_runs(
        self,
        moves: Sequence[tuple[int, dt.datetime | None, dt.datetime | None, dt.datetime | None]],
    ) -> None:
        """Many :meth:`set_next_run` in one transaction: (schedule_id, expected, next_run_at,
        last_run_at) each, each conditional on next_run_at still being ``expected``."""
        if moves:
            await self.db.write(lambda conn: schedules.set_next_runs(conn, moves))

    # ------------------------------------------------------------------------ fires

    async def enqueue_fires(
        self, requests: Sequence[FireRequest], now: dt.datetime
    ) -> list[FireResult]:
        """Record scheduler fires; one result per request, in the order of ``requests``.

        Each fire is recorded once per (schedule, fire time), with each of its
        ``missed_fire_times`` as a MISSED fire: a repeat (in this call or a later one)
        returns the recorded result with duplicate_fire=True and changes nothing. A fire
        that is not ``missed`` enqueues the schedule's enabled tasks in ascending task-name
        order, with the request's trigger (SCHEDULER: scheduler lane; MANUAL, API: manual
        lane); a disabled task is skipped TASK_DISABLED. A task with an active job goes
        through the fire's overlap policy (the request's, else the schedule's; see
        :func:`scheduler_svc.store.overlap.decide`): skipped ALREADY_QUEUED /
        ALREADY_RUNNING / BUFFER_FULL naming a job, or a new job that waits (BUFFERED), or
        one that replaces the running job (whose abort is asked for, REPLACED), or one that
        runs alongside (ALLOW). The fire's outcome is REPLACED, BUFFERED, ENQUEUED (a job
        was created), SKIPPED otherwise, MISSED when ``missed``. A fire of a schedule that
        no longer exists is not recorded and gets schedule_found=False.
        """
        dialect = self.db.dialect
        return await self.db.write(lambda conn: fires.enqueue_fires(conn, dialect, requests, now))

    async def enqueue_fire(
        self, request: FireRequest, now: dt.datetime, *, remember: Remember | None = None
    ) -> FireResult:
        """Record one fire, as :meth:`enqueue_fires` does (its answer stored under
        ``remember`` in the same transaction, when given).

        Raises NotFound(field="schedule_id") when the schedule does not exist (nothing is
        recorded).
        """
        dialect = self.db.dialect
        return await self.db.write(
            _once(lambda conn: fires.enqueue_fire(conn, dialect, request, now), remember)
        )

    async def backfill(
        self,
        schedule_id: int,
        plan_windows: PlanWindows,
        now: dt.datetime,
        *,
        overlap_policy: str | None = None,
        dry_run: bool = False,
        planned: Planned | None = None,
        span: Span | None = None,
        remember: Remember | None = None,
    ) -> list[Window]:
        """Backfill a schedule: its windows ``plan_windows(schedule)`` (aware UTC, oldest
        first, from the schedule as read in this transaction; it raises to refuse), each
        recorded as a fire with trigger BACKFILL as :meth:`enqueue_fires` records one (its
        jobs in the backfill lane, with the window as their fire time), in window order, in
        one transaction. A window that already has a fire is left alone (``already_fired``).
        ``overlap_policy``: a stored policy name, or None for the schedule's own.
        ``dry_run``: a read; nothing is written (the windows carry no fire nor runs).
        ``planned``: windows planned before (see :meth:`plan_backfill`), used when the
        schedule's expression, zone and tasks are still those they were planned from, so
        that a long range is not walked while the transaction holds the writer.
        ``span``: only the windows in [start, end) of it (one batch of a long backfill,
        see :func:`scheduler_svc.backfill.backfill_schedule`); None: all of them.

        Raises NotFound(field="id"), and whatever ``plan_windows`` raises; nothing is
        written when it raises.
        """
        dialect = self.db.dialect

        def run(conn: Connection) -> list[Window]:
            return backfill.backfill(
                conn,
                dialect,
                schedule_id,
                plan_windows,
                now,
                overlap_policy=overlap_policy,
                dry_run=dry_run,
                planned=planned,
                span=span,
            )

        if dry_run:
            return await self.db.read(run)
        return await self.db.write(_once(run, remember))

    async def plan_backfill(self, schedule_id: int, plan_windows: PlanWindows) -> Planned:
        """The schedule and its windows ``plan_windows(schedule)``, in a read (for
        :meth:`backfill`'s ``planned``). Raises NotFound(field="id"), and whatever
        ``plan_windows`` raises."""

        def run(conn: Connection) -> Planned:
            schedule = backfill.schedule_of(conn, schedule_id)
            return schedule, plan_windows(schedule)

        return await self.db.read(run)

    async def list_fires(
        self, schedule_id: int, limit: int, before: dt.datetime | None = None
    ) -> list[FireRecord]:
        """Up to ``limit`` fires of a schedule, newest fire time first, with fire times
        before ``before`` when given. Raises NotFound(field="schedule_id")."""
        return await self.db.read(lambda conn: fires.list_fires(conn, schedule_id, limit, before))

    async def fire_window(
        self, schedule_id: int, fire_time: dt.datetime
    ) -> tuple[str, dt.datetime | None]:
        """The window a scheduled job was fired for, as its job process is told it: the
        schedule's name (``""`` when it is gone) and the latest fire time recorded for it
        before ``fire_time`` (UTC; None for its first fire, or when the record was purged)."""
        return await self.db.read(lambda conn: fires.fire_window(conn, schedule_id, fire_time))

    # -------------------------------------------------------------- queue: runs in

    async def enqueue(
        self,
        task_ids: Sequence[int],
        trigger: Trigger,
        now: dt.datetime,
        *,
        options: RunOptions = NO_OPTIONS,
        remember: Remember | None = None,
    ) -> EnqueueResult:
        """Enqueue a manual or API run (``trigger`` MANUAL or API) of each of ``task_ids``;
        one result per entry of ``task_ids``, in that order. New jobs carry ``options``
        (see :class:`RunOptions`; a ``not_before`` after ``now`` holds them back until then).

        New jobs go to the manual lane in request order. A disabled task still runs. A job
        the scheduler queued is promoted to the manual lane (its trigger kept: promoted
        True); a queued retry waiting out its backoff is made ready now (made_ready True);
        a running job is reported ALREADY_RUNNING, a queued one ALREADY_QUEUED, each with
        its job id. A task named again is reported skipped with the job of its first entry.
        A first attempt queued with a not_before keeps it; with options that shape new jobs
        only, a queued job is left as it is and reported ALREADY_QUEUED.

        Raises NotFound(field="task_ids") for an unknown task (nothing is enqueued);
        FailedPrecondition(field="task_ids") when other transactions keep queueing a task
        meanwhile.
        """
        dialect = self.db.dialect
        return await self.db.write(
            _once(
                lambda conn: queue.enqueue(conn, dialect, task_ids, trigger, now, options),
                remember,
            )
        )

    async def cancel_job(self, job_id: int, now: dt.datetime, stopped_by: str = "") -> JobRecord:
        """Cancel a queued job (status CANCELLED, finished_at ``now``, error "cancelled",
        ``stopped_by`` the caller's token label) and return it. Raises
        NotFound(field="job_id"); FailedPrecondition(field="job_id") when it is not queued."""
        return await self.db.write(lambda conn: queue.cancel_job(conn, job_id, now, stopped_by))

    async def abort_tasks(
        self,
        task_ids: Sequence[int],
        now: dt.datetime,
        *,
        stopped_by: str = "",
        remember: Remember | None = None,
    ) -> list[tuple[int, int, AbortAction, int]]:
        """For each task: cancel its queued jobs (error "aborted by operator") and flag its
        running jobs for abort (abort_requested), recording ``stopped_by`` (the caller's
        token label) on each; a task has several when an overlap policy let a fire's job
        wait behind the running one or run alongside.

        Returns (task_id, job_id, action, cancelled) in request order, naming the job
        :func:`locks.active_jobs` names (ABORT_REQUESTED when it runs, CANCELLED when
        queued) and how many queued jobs of the task were cancelled; action NONE (job_id
        0, cancelled 0) when the task has no active job, or when it is named again in the
        request.
        Raises NotFound(field="task_ids") for an unknown task (nothing changes).
        """
        dialect = self.db.dialect
        return await self.db.write(
            _once(
                lambda conn: queue.abort_tasks(conn, dialect, task_ids, now, stopped_by),
                remember,
            )
        )

    # -------------------------------------------------------------- request ids

    async def find_request(self, method: str, request_id: str, now: dt.datetime) -> Answer | None:
        """The stored answer of a call of ``method`` with ``request_id`` made within 24 h
        of ``now`` (see :mod:`.requests`), or None."""
        return await self.db.read(lambda conn: requests.find(conn, method, request_id, now))

    async def purge_requests(self, now: dt.datetime) -> int:
        """Delete the answers stored over 24 h before ``now``; return how many."""
        return await self.db.write(lambda conn: requests.purge(conn, now))

    # ------------------------------------------------------------ queue: jobs out

    async def claim_next_job(
        self,
        worker_id: str,
        now: dt.datetime,
        lease_ttl_s: float,
        *,
        worker_lease_holder: str | None = None,
        slot: int = 0,
        lease_token: int | None = None,
    ) -> tuple[JobRecord, TaskRecord] | None:
        """Take the next ready job and lease it to ``worker_id`` in worker slot ``slot``
        (>= 0): the job (as started) and its task; None when none is ready.

        Order: manual/API lane first, then the scheduler lane, then the backfill lane;
        task_priority descending, enqueue time, insertion order. Ready: QUEUED, not_before
        unset or <= now, and not a scheduler-lane or backfill-lane job of a disabled task;
        a job whose task's non-empty concurrency_group has a RUNNING job is passed over,
        and so is one (not ALLOW) whose task has a RUNNING job that is not ALLOW
        (uq_jobs_running_task refuses two). The job becomes RUNNING in ``slot`` with a
        fresh lease token, its task's concurrency group, started_at ``now`` (never before
        its enqueue time) and lease_expires_at = now + lease_ttl_s. Never returns a job
        while another job is RUNNING in ``slot`` (one job per slot): claims of a slot are
        serialized on its ``worker`` lease row
        (:func:`scheduler_svc.schema.slot_lease_name`), and the database refuses a second
        running job in a slot or a group (uq_jobs_running_slot, uq_jobs_running_group; a
        claim so refused is tried again, up to :data:`CLAIM_ATTEMPTS` times in all). With
        ``worker_lease_holder``, None unless that holder holds the slot's lease, under
        ``lease_token`` when given (fencing a session that believes it still holds the
        slot).
        """
        dialect = self.db.dialect
        for attempt in range(1, CLAIM_ATTEMPTS + 1):
            try:
                return await self.db.write(
                    lambda conn: queue.claim(
                        conn,
                        dialect,
                        worker_id,
                        now,
                        lease_ttl_s,
                        worker_lease_holder,
                        slot=slot,
                        lease_token=lease_token,
                    ),
                    queue=True,
                )
            except sa.exc.IntegrityError:
                # Another slot's claim of a job of the same group committed first; the next
                # attempt sees it and passes the group over.
                if attempt == CLAIM_ATTEMPTS:
                    return None
        return None

    async def next_ready_time(self, now: dt.datetime) -> dt.datetime | None:
        """When the next queued job becomes ready: ``now`` if one is ready, the earliest
        not_before in the future otherwise, None when nothing is queued."""
        return await self.db.read(lambda conn: queue.next_ready_time(conn, now))

    async def renew_job_lease(
        self, job_id: int, token: str, now: dt.datetime, lease_ttl_s: float
    ) -> bool:
        """A heartbeat: extend a running job's lease to now + lease_ttl_s. False when the
        job is not RUNNING under ``token`` (the lease was lost)."""
        return await self.db.write(
            lambda conn: queue.renew_job_lease(conn, job_id, token, now, lease_ttl_s)
        )

    async def append_output(self, job_id: int, token: str, text: str) -> bool:
        """Append ``text`` to a running job's output tail (kept to its last
        :data:`OUTPUT_TAIL_CHARS`, NUL characters as U+FFFD). False when the job is not
        RUNNING under ``token``."""
        return await self.db.write(lambda conn: queue.append_output(conn, job_id, token, text))

    async def running_job_task(self, job_id: int, token: str) -> TaskRecord | None:
        """The task of job ``job_id`` when it is RUNNING under lease ``token``; else None."""
        return await self.db.read(lambda conn: queue.running_job_task(conn, job_id, token))

    # ------------------------------------------------------------- queue: outcomes

    async def finish_job(
        self,
        job_id: int,
        token: str,
        status: JobStatus,
        error: str,
        output_tail: str,
        now: dt.datetime,
        *,
        auto_disable_count: int,
        claim_next_for: str | None = None,
        claim_slot: int = 0,
        claim_lease_token: int | None = None,
        lease_ttl_s: float = 0.0,
    ) -> FinishResult:
        """Record a running job's outcome (``status`` SUCCEEDED, FAILED or ABORTED).

        Fenced by ``token``: when the lease was lost, the outcome is stored in late_outcome
        and nothing else changes (accepted=False); a repeat of the outcome already recorded
        under ``token`` (same status and error) changes nothing (accepted, ``repeat``). A
        failure with attempts left queues a retry (not ready before now + backoff), unless
        it is a scheduler-lane or backfill-lane job whose task is disabled (it simply
        ends). A final failure of a scheduler-triggered job (not a backfilled one)
        increments the task's consecutive_failure_count and, when it reaches
        ``auto_disable_count`` (> 0), disables the task (``disabled_task``).
        Any success resets the count. An interval schedule's next run is anchored to this
        finish. ``error`` is stored as :func:`job_error` gives it, ``output_tail`` as its
        last :data:`OUTPUT_TAIL_CHARS` (empty keeps the tail LogLines stored), a NUL
        character in either as U+FFFD: no text a job writes can make its outcome fail.

        With ``claim_next_for`` (a worker id), an accepted outcome is followed in the same
        transaction by :meth:`claim_next_job` for that worker in ``claim_slot`` (fenced by
        that slot's ``worker`` lease, under ``claim_lease_token`` when given, leased for
        ``lease_ttl_s`` seconds): the result's ``next_job``. Where the
        database has writable CTEs, a success with nothing to follow it is one statement
        with that claim (its own transaction: a sixth of the round trips).

        Raises:
            sqlalchemy.exc.DBAPIError, StorageError: the database failed or could not be
                reached. Nothing was recorded, unless the connection was lost while the
                commit was under way (as with any database): a report of the same outcome
                again is then a repeat.
        """
        error = job_error(error)
        succeeded = status == JobStatus.SUCCEEDED
        if claim_next_for is not None and succeeded and self.db.dialect.writable_ctes:
            worker_id = claim_next_for
            try:
                done = await self.db.write_one(
                    lambda conn: finish.succeed_and_start_next(
                        conn,
                        job_id,
                        token,
                        error,
                        output_tail,
                        now,
                        worker_id,
                        lease_ttl_s,
                        slot=claim_slot,
                        lease_token=claim_lease_token,
                    ),
                    queue=True,
                )
            except sa.exc.IntegrityError:
                done = None  # its claim lost a slot or group to another: recorded below
            if done is not None:
                return done
        return await self.db.write(
            lambda conn: finish.finish(
                conn,
                self.db.dialect,
                self.rng,
                job_id,
                token,
                status,
                error,
                output_tail,
                now,
                auto_disable_count=auto_disable_count,
                claim_next_for=claim_next_for,
                claim_slot=claim_slot,
                claim_lease_token=claim_lease_token,
                lease_ttl_s=lease_ttl_s,
            ),
            queue=claim_next_for is not None,
        )

    async def reap_expired_leases(
        self,
        now: dt.datetime,
        *,
        auto_disable_count: int,
        kill_deadline_s: float = 0.0,
        grace_s: float = 0.0,
        lease_ttl_s: float = 0.0,
    ) -> list[FinishResult]:
        """Fail every RUNNING job whose lease expired before ``now`` (error
        :data:`LEASE_LOST`), with the retry and auto-disable rules of :meth:`finish_job`;
        a retry is not ready before the lease's expiry + ``kill_deadline_s`` seconds either
        (the old run's processes are dead by then). A job whose abort was asked for ends
        ABORTED instead (error: the abort's reason, then :data:`LEASE_LOST`; no retry, no
        failure counted). With ``grace_s`` > 0 (seconds the
        storage was down, the outage ending about ``now``), every running job's lease that
        was valid when the outage began is first moved that much later, to no later than
        ``lease_ttl_s`` (> 0, required with ``grace_s``; ValueError otherwise) seconds from
        ``now`` (never shortened), in the same transaction: so
        replicas that each extend after the same outage give at most a TTL from its end.
        One result per recovered job; a job finished, renewed or reaped concurrently
        (another replica) is left alone."""
        dialect, rng = self.db.dialect, self.rng
        return await self.db.write(
            lambda conn: finish.reap_expired_leases(
                conn, dialect, rng, now, auto_disable_count, kill_deadline_s, grace_s, lease_ttl_s
            )
        )

    # ------------------------------------------------------------------ job reads

    async def get_job(self, job_id: int) -> JobRecord:
        """The job with ``job_id``. Raises NotFound(field="job_id")."""
        return await self.db.read(lambda conn: queue.get_job(conn, job_id))

    async def list_jobs(
        self,
        *,
        limit: int,
        before_id: int | None = None,
        task_id: int | None = None,
        statuses: Sequence[str] = (),
        schedule_id: int | None = None,
        selector: dict[str, str] | None = None,
    ) -> list[JobRecord]:
        """Up to ``limit`` jobs, newest (highest id) first, with id < ``before_id``, of
        ``task_id``, in one of ``statuses``, of ``schedule_id``, whose labels hold every
        key=value of ``selector`` (each when given)."""
        return await self.db.read(
            lambda conn: queue.list_jobs(
                conn, limit, before_id, task_id, statuses, schedule_id, selector or {}
            )
        )

    async def queued_jobs_in_order(self, now: dt.datetime) -> list[JobRecord]:
        """Every ready queued job, in the order :meth:`claim_next_job` takes them."""
        return await self.db.read(lambda conn: queue.queued_jobs_in_order(conn, now))

    async def queue_depth_by_lane(self) -> dict[int, int]:
        """Number of QUEUED jobs (ready or not) per lane; lanes without jobs are absent."""
        return await self.db.read(queue.queue_depth_by_lane)

    # ----------------------------------------------------------------------- leases

    async def acquire_lease(
        self, name: str, holder: str, now: dt.datetime, ttl_s: float
    ) -> int | None:
        """Take or renew the lease ``name`` ("scheduler" or "worker") for ``holder``, to
        expire at now + ttl_s.

        Succeeds when ``holder`` already holds it, it expired, or its holder is a process of
        this store's host and boot that no longer runs (:mod:`scheduler_svc.holders`).
        Records this store's process as the holder's. Returns the fencing token
        (incremented on every change of holder), or None when someone else holds it.
        Raises InvalidArgument(field="name") for an unknown lease.
        """
        process = self.process
        return await self.db.write(
            lambda conn: leases.acquire_lease(conn, name, holder, now, ttl_s, process)
        )

    async def acquire_slot_lease(
        self, holder: str, now: dt.datetime, ttl_s: float, slots: int
    ) -> tuple[int, int] | None:
        """Take or renew one of the ``slots`` (>= 1) worker slot leases for ``holder``, to
        expire at now + ttl_s: the one it holds (a renewal), else the lowest free one (expired,
        or never taken: its row, :func:`scheduler_svc.schema.slot_lease_name`, is inserted).

        Returns (slot, fencing token), or None when every slot is held by others. With
        ``slots`` 1 this is :meth:`acquire_lease` of ``"worker"`` (a slot whose holder died
        on this host is free too).
        """
        dialect, process = self.db.dialect, self.process
        return await self.db.write(
            lambda conn: leases.acquire_slot_lease(
                conn, dialect, holder, now, ttl_s, slots, process
            )
        )

    async def take_over_dead_holders(
        self, now: dt.datetime, *, auto_disable_count: int
    ) -> list[FinishResult]:
        """In one transaction: expire every lease whose holder is a process of this store's
        host and boot that no longer runs (a predecessor killed before it could let go), and
        fail as lease lost (retried per policy, as :meth:`reap_expired_leases`) the RUNNING
        jobs of the embedded worker that ran in such a process (worker id ``host:pid:...``),
        whatever their lease's expiry. Nothing without a :attr:`process`."""
        process = self.process
        if process is None:
            return []
        dialect, rng = self.db.dialect, self.rng

        def take_over(conn: Connection) -> list[FinishResult]:
            dead = leases.expire_dead_holders(conn, now, process)
            return finish.reap_jobs_of_dead_workers(
                conn, dialect, rng, now, auto_disable_count, dead
            )

        return await self.db.write(take_over)

    async def worker_lease_holders(self) -> list[LeaseHolder]:
        """The holders and expiries of the worker slot leases (``worker``, ``worker.1``, ...),
        in slot-name order, in one read transaction; a slot nobody ever held is left out. An
        expired lease is returned as it is: the caller compares ``expires_at`` with its clock."""
        return await self.db.read(leases.worker_lease_holders)

    async def release_lease(self, name: str, holder: str, now: dt.datetime) -> None:
        """Give up the lease ``name`` if ``holder`` holds it (it expires at once)."""
        await self.db.write(lambda conn: leases.release_lease(conn, name, holder, now))

    # -------------------------------------------------------------------- retention

    async def purge_history(self, before: dt.datetime, batch: int = 1000) -> tuple[int, int]:
        """Delete ended jobs that finished before ``before`` and fires whose fire time is
        before it, ``batch`` rows per transaction (writers are never blocked for long).

        Queued and running jobs are never deleted. Notification events of before go too,
        with their deliveries, once none is pending. Returns (jobs deleted, fires deleted).
        """
        return await retention.purge_history(self.db, before, batch)
