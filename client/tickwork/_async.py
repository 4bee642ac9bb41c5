"""The asyncio client, :class:`AsyncClient`: the one hand-written client of the SDK.

:mod:`tickwork._sync` (:class:`~tickwork.Client`, blocking) is generated from this file by
``scripts/unasync.py``: edit this file, then run ``python scripts/unasync.py``; CI runs it
with ``--check``. The generator rewrites tokens (``async def`` to ``def``, ``await`` away,
``AsyncClient`` to ``Client``, ``asyncio.sleep`` to ``time.sleep``, ...), so code here must
read right once they are gone; what the two clients do differently lives behind the
transport seam (:mod:`tickwork._async_transport` and :mod:`tickwork._sync_transport`).
Request building and answer reading are shared through :mod:`tickwork._requests`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

import grpc

from tickwork import _async_transport as transport
from tickwork import _channel as ch
from tickwork import _requests as rq
from tickwork._channel import TlsConfig
from tickwork._requests.backfill import backfill_request
from tickwork.errors import JobTimeout, TickworkError, from_rpc_error
from tickwork.v1.common_pb2 import TaskRun, Trigger
from tickwork.v1.config_pb2 import ApplyConfigRequest, ApplyConfigResponse
from tickwork.v1.job_pb2 import CancelJobRequest, GetJobRequest, Job, JobStatus, WatchJobRequest
from tickwork.v1.notifier_pb2 import (
    DeleteNotifierRequest,
    ListNotificationsRequest,
    ListNotifiersRequest,
    Notification,
    NotificationStatus,
    Notifier,
    PutNotifierRequest,
    PutNotifierResponse,
    TestNotifierRequest,
    TestNotifierResponse,
)
from tickwork.v1.schedule_pb2 import (
    BackfillScheduleResponse,
    CatchUpPolicy,
    CreateScheduleRequest,
    DeleteScheduleRequest,
    DescribeCronResponse,
    Fire,
    JitterMode,
    ListFiresRequest,
    ListSchedulesRequest,
    OverlapPolicy,
    ResumeScheduleRequest,
    Schedule,
)
from tickwork.v1.task_pb2 import (
    AbortTasksRequest,
    CreateTaskRequest,
    DeleteTaskRequest,
    EnableTaskRequest,
    ListTasksRequest,
    Task,
    TaskAbort,
)

__all__ = ["AsyncClient"]

_T = TypeVar("_T")


class AsyncClient:
    """The asyncio client of the tickwork API.

    Use it as an async context manager, or close it with :meth:`close`::

        async with AsyncClient("127.0.0.1:50051") as tw:
            [run] = await tw.run("health-check")
            job = await tw.wait(run.job_id, timeout=60)

    Its channel opens on first use, inside the running event loop: construct it anywhere.

    Tasks and schedules are referred to by id (``int``) or name (``str``). Times are aware
    ``datetime`` objects or protobuf Timestamps in UTC; durations are seconds. Every method
    raises a :class:`~tickwork.errors.TickworkError` subclass on failure (``Unavailable``
    when the server cannot be reached, ``DeadlineExceeded`` past ``timeout``), never a raw
    ``grpc.RpcError``.

    Args:
        server (str | None): ``HOST:PORT``; default ``$TICKWORK_SERVER``, else
            ``127.0.0.1:50051``. A host without a port gets port 50051.
        timeout (float | None): deadline of each unary call, seconds; ``None`` for none.
            Streams (:meth:`watch`, :meth:`wait`) are not bounded by it.
        token (str | None): bearer token sent with every call; default ``$TICKWORK_TOKEN``
            (none when unset). A server with access control answers ``Unauthenticated``
            without one and ``PermissionDenied`` when its role may not make the call.
        tls (TlsConfig | bool | None): ``None`` (default): as the environment says
            (``TICKWORK_TLS``, ``TICKWORK_TLS_CA_FILE``, ...; plaintext when unset);
            ``False``: plaintext; ``True``: TLS with the system's roots; a
            :class:`~tickwork.TlsConfig`: TLS with that CA and client certificate.

    Raises:
        InvalidArgument: ``TICKWORK_TLS`` is not a boolean, a client certificate has no
            key, or (when the channel opens) a TLS file cannot be read.
    """

    def __init__(
        self,
        server: str | None = None,
        *,
        timeout: float | None = 30.0,
        token: str | None = None,
        tls: TlsConfig | bool | None = None,
    ) -> None:
        self.server: str = rq.resolve_server(server)
        self.timeout = timeout
        self._metadata = ch.auth_metadata(ch.resolve_token(token))
        self._connection = transport.Connection(self.server, ch.resolve_tls(tls))

    async def __aenter__(self) -> Self:
        self._stubs()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; calls in flight are cancelled. Idempotent."""
        await self._connection.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.server!r})"

    # -- plumbing ---------------------------------------------------------------------------

    def _stubs(self) -> transport.Stubs:
        """The open channel and the API's stubs on it."""
        return self._connection.stubs()

    @property
    def _channel(self) -> transport.Channel:
        """The open channel, for stubs beyond this client's (the CLI's health check)."""
        return self._stubs().channel

    async def _call(self, method: Callable[..., Awaitable[_T]], request: Any) -> _T:
        """Invoke a unary stub method with the client's deadline, translating errors."""
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    @staticmethod
    async def _collect(
        fetch: Callable[[int, str], Awaitable[tuple[Sequence[_T], str]]], limit: int | None
    ) -> list[_T]:
        """Follow page tokens until ``limit`` items (or all, for ``None``) are collected."""
        items: list[_T] = []
        token = ""
        while True:
            page, token = await fetch(rq.page_size(limit, len(items)), token)
            items.extend(page)
            if not token or (limit is not None and len(items) >= limit):
                return items if limit is None else items[:limit]

    async def _task_id(self, ref: rq.Ref) -> int:
        """Resolve a task reference to its id (GetTask for a name). Raises NotFound."""
        ref = rq.check_ref(ref, "task")
        if isinstance(ref, int):
            return ref
        task = await self.get_task(ref)
        return task.id

    async def _schedule_id(self, ref: rq.Ref) -> int:
        """Resolve a schedule reference to its id (GetSchedule for a name). Raises NotFound."""
        ref = rq.check_ref(ref, "schedule")
        if isinstance(ref, int):
            return ref
        schedule = await self.get_schedule(ref)
        return schedule.id

    # -- running and jobs -------------------------------------------------------------------

    async def run(
        self,
        *tasks: int | str,
        trigger: Trigger = Trigger.TRIGGER_API,
        request_id: str = "",
        params_override: Mapping[str, Any] | None = None,
        not_before: datetime | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[TaskRun]:
        """Run tasks now (or at ``not_before``), in the manual lane (before scheduler jobs).

        Args:
            *tasks (int | str): task ids or names, at least one.
            trigger (Trigger): ``TRIGGER_API`` (default) or ``TRIGGER_MANUAL`` (a person).
            request_id (str): makes the call safe to retry: a repeat with the same id
                within 24 hours returns the first call's runs and runs nothing (e.g.
                ``str(uuid.uuid4())``, kept across retries). "" (default): none.
            params_override (Mapping[str, Any] | None): params for these jobs only, merged
                shallowly over each task's params (a top-level key replaces the task's
                value whole); the tasks are unchanged.
            not_before (datetime | None): an aware datetime; the jobs stay QUEUED until
                then (a past instant runs them now; at most ten years ahead).
            labels (Mapping[str, str] | None): labels stored on the new jobs (at most 64;
                keys of ``A-Za-z0-9._-/``, keys and values at most 63 characters).

        With any of ``params_override``, ``not_before`` or ``labels``, a task that already
        has a queued or running job gets no new job (skipped) and that job is unchanged.

        Returns:
            list[TaskRun]: one per argument, in argument order: the new job's id, or
            ``skipped`` with ``skip_reason`` and the job already queued or running;
            ``promoted`` when a scheduler-queued job was moved to the manual lane.

        Raises:
            NotFound: an unknown task (then nothing is enqueued).
            InvalidArgument: no task given, or a bad reference.
        """
        request = rq.run_tasks_request(
            tasks,
            trigger,
            params_override=params_override,
            not_before=not_before,
            labels=labels,
        )
        request.request_id = request_id
        response = await self._call(self._stubs().tasks.RunTasks, request)
        return rq.runs_in_argument_order(tasks, response.runs)

    async def abort(self, *tasks: int | str, request_id: str = "") -> list[TaskAbort]:
        """Stop the queued or running job of each task.

        A queued job is cancelled (CANCELLED); a running job is told to stop and ends
        ABORTED once the worker has stopped its handler.

        Args:
            *tasks (int | str): task ids or names (names are resolved with GetTask first).
            request_id (str): as for :meth:`run`: a repeat within 24 hours returns the first
                answer and stops nothing.

        Returns:
            list[TaskAbort]: one per task, in argument order, with the job and ``action``
            (CANCELLED, ABORT_REQUESTED, or NONE when nothing was queued or running).

        Raises:
            NotFound: an unknown task.
            InvalidArgument: a bad reference.
        """
        ids = [await self._task_id(t) for t in rq.task_refs(tasks)]
        request = AbortTasksRequest(task_ids=ids, request_id=request_id)
        response = await self._call(self._stubs().tasks.AbortTasks, request)
        return list(response.aborts)

    async def get_job(self, job_id: int) -> Job:
        """Return one job: its status, attempt, output tail and times (UTC Timestamps).

        Args:
            job_id (int): the job.

        Raises:
            NotFound: no such job.
            InvalidArgument: ``job_id`` is not a positive int64.
        """
        request = GetJobRequest(job_id=rq.check_job_id(job_id))
        response = await self._call(self._stubs().jobs.GetJob, request)
        return response.job

    async def list_jobs(
        self,
        task: int | str | None = None,
        statuses: Iterable[JobStatus | str] = (),
        schedule: int | str | None = None,
        limit: int = 100,
        selector: str = "",
    ) -> list[Job]:
        """List jobs, newest (highest id) first.

        Args:
            task (int | str | None): only this task's jobs.
            statuses (Iterable[JobStatus | str]): only jobs in these states (enum values or
                names such as ``"FAILED"``); empty means all.
            schedule (int | str | None): only jobs fired by this schedule.
            limit (int): at most this many jobs (pages are followed until reached).
            selector (str): only jobs whose labels (a run's labels) match this label
                selector, ``"key=value,key2=value2"`` (all must hold); empty means all.

        Raises:
            NotFound: an unknown task or schedule name.
            InvalidArgument: a bad status name or limit.
        """
        limit = rq.check_limit(limit)
        base = rq.list_jobs_request(
            await self._task_id(task) if task is not None else 0,
            statuses,
            await self._schedule_id(schedule) if schedule is not None else 0,
            selector,
        )

        async def fetch(size: int, token: str) -> tuple[Sequence[Job], str]:
            base.page_size, base.page_token = size, token
            response = await self._call(self._stubs().jobs.ListJobs, base)
            return response.jobs, response.next_page_token

        return await self._collect(fetch, limit)

    async def watch(
        self,
        job_id: int,
        timeout: float | None = None,  # noqa: ASYNC109 - a deadline for the whole watch
    ) -> AsyncGenerator[Job, None]:
        """Stream a job's states: the current one at once, then every change (status or
        output) until it has ended; then the iteration stops.

        A watch that has shown a state survives the service restarting (or a replica going
        away): it waits for the service and goes on, the first state after that being the
        job's current one. Leaving the ``async for`` loop early cancels the stream.

        Args:
            job_id (int): the job.
            timeout (float | None): stop watching after this many seconds; ``None``: never.

        Yields:
            Job: each state of the job, the last one ended (unless ``timeout`` passed).

        Raises:
            NotFound: no such job (on the first item).
            JobTimeout: the job had not ended within ``timeout`` (it goes on running).
            Unavailable: the service could not be reached before the first state.
            InvalidArgument: ``job_id`` is not a positive int64.
        """
        request = WatchJobRequest(job_id=rq.check_job_id(job_id))
        deadline = rq.watch_deadline(timeout)
        last: Job | None = None
        resumed = 0
        while True:
            call = self._stubs().jobs.WatchJob(
                request,
                timeout=rq.remaining_s(deadline),
                metadata=self._metadata,
                wait_for_ready=resumed > 0,
            )
            try:
                async for response in call:
                    last = response.job
                    yield response.job
                return
            except grpc.RpcError as err:
                error = from_rpc_error(err)
                if timeout is not None and error.code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise JobTimeout(job_id, timeout, last) from None
                delay = rq.resume_delay_s(error, last, resumed)
                if delay is None:
                    raise error from None
            finally:
                transport.cancel(call)
            resumed += 1
            await asyncio.sleep(delay)

    async def wait(self, job_id: int, timeout: float | None = None) -> Job:  # noqa: ASYNC109
        """Wait until the job has ended and return it (SUCCEEDED, FAILED, ABORTED or
        CANCELLED). A failed job's retry is a new job (``retry_of_job_id``): this returns
        the attempt asked for. Like :meth:`watch`, it waits through a service restart.

        Args:
            job_id (int): the job.
            timeout (float | None): give up after this many seconds; ``None``, ``inf`` or
                more than ten years wait forever.

        Raises:
            JobTimeout: the job had not ended within ``timeout`` (it goes on running).
            NotFound: no such job.
            InvalidArgument: a bad ``job_id``, or a negative or NaN ``timeout``.
        """
        async with aclosing(self.watch(job_id, rq.wait_timeout(timeout))) as states:
            async for job in states:
                if rq.is_terminal(job):
                    return job
        job = await self.get_job(job_id)
        if rq.is_terminal(job):
            return job
        raise TickworkError(
            f"the watch of job {job_id} ended before the job did", grpc.StatusCode.UNAVAILABLE
        )

    async def cancel_job(self, job_id: int) -> Job:
        """Cancel a queued job and return it (now CANCELLED).

        Args:
            job_id (int): the job.

        Raises:
            NotFound: no such job.
            FailedPrecondition: the job is not queued (abort a running one with :meth:`abort`).
            InvalidArgument: ``job_id`` is not a positive int64.
        """
        request = CancelJobRequest(job_id=rq.check_job_id(job_id))
        response = await self._call(self._stubs().jobs.CancelJob, request)
        return response.job

    # -- tasks ------------------------------------------------------------------------------

    async def create_task(
        self,
        name: str,
        handler: str,
        params: Mapping[str, Any],
        *,
        description: str = "",
        task_priority: int = 100,
        enabled: bool = True,
        timeout_seconds: float = 0,
        max_attempts: int = 1,
        backoff_base_seconds: float = 10,
        backoff_cap_seconds: float = 600,
        memory_limit_bytes: int = 0,
        cpu_limit_seconds: int = 0,
        concurrency_group: str = "",
        labels: Mapping[str, str] | None = None,
        notify: Sequence[rq.Route] = (),
    ) -> Task:
        """Create a task and return it with its id.

        Args:
            name (str): unique, non-empty, at most 200 characters.
            handler (str): ``"shell"``, ``"python"`` or a registered handler name.
            params (Mapping[str, Any]): the handler's parameters (JSON-like), e.g.
                ``{"argv": ["sh", "-c", "echo ok"]}`` or ``{"callable": "pkg.mod:fn"}``.
            description (str): free text.
            task_priority (int): higher runs first within a lane; default 100.
            enabled (bool): a disabled task is never enqueued by the scheduler.
            timeout_seconds (float): longest run time, seconds; 0 means no limit.
            max_attempts (int): attempts including the first; 1 means no retry.
            backoff_base_seconds (float): base of the exponential retry backoff, seconds.
            backoff_cap_seconds (float): upper bound of one backoff delay, seconds.
            memory_limit_bytes (int): address space each job process may map, bytes
                (RLIMIT_AS); 0 means no limit.
            cpu_limit_seconds (int): CPU time each job process may use, seconds
                (RLIMIT_CPU); 0 means no limit.
            concurrency_group (str): jobs of tasks in one non-empty group never run at
                once (with the service's TICKWORK_MAX_RUNNING_JOBS above 1); empty: the
                task alone.
            labels (Mapping[str, str] | None): labels for ownership and filtering (keys of
                at most 63 characters of A-Z, a-z, 0-9 and ``._-/``; values at most 63).

            notify (Sequence[Route]): which notifiers get which of its events: NotifyRoute
                messages or mappings ``{"notifiers": [...], "events": ["final_failure"],
                "every": False}``; empty: each notifier's own route.

        Raises:
            AlreadyExists: the name is taken.
            InvalidArgument: a bad field, e.g. params the handler rejects (named).
        """
        task = rq.build_task(
            name,
            handler,
            params,
            description=description,
            task_priority=task_priority,
            enabled=enabled,
            timeout_seconds=timeout_seconds,
            max_attempts=max_attempts,
            backoff_base_seconds=backoff_base_seconds,
            backoff_cap_seconds=backoff_cap_seconds,
            memory_limit_bytes=memory_limit_bytes,
            cpu_limit_seconds=cpu_limit_seconds,
            concurrency_group=concurrency_group,
            labels=labels,
        )
        task.notify.extend(rq.notify_routes(notify))
        request = CreateTaskRequest(task=task)
        response = await self._call(self._stubs().tasks.CreateTask, request)
        return response.task

    async def get_task(self, task: int | str) -> Task:
        """Return a task by id or name, with its failure count and retry policy.

        Args:
            task (int | str): the task's id or name.

        Raises:
            NotFound: no such task.
            InvalidArgument: a bad reference.
        """
        request = rq.get_task_request(task)
        response = await self._call(self._stubs().tasks.GetTask, request)
        return response.task

    async def list_tasks(self, selector: str = "") -> list[Task]:
        """Return every task, in ascending name order (all pages are followed).

        Args:
            selector (str): only tasks whose labels match this label selector,
                ``"key=value,key2=value2"`` (all must hold); empty means all.

        Raises:
            InvalidArgument: a malformed selector.
        """
        rq.check_type(selector, str, "selector")

        async def fetch(size: int, token: str) -> tuple[Sequence[Task], str]:
            request = ListTasksRequest(page_size=size, page_token=token, label_selector=selector)
            response = await self._call(self._stubs().tasks.ListTasks, request)
            return response.tasks, response.next_page_token

        return await self._collect(fetch, None)

    async def update_task(self, task: int | str, **fields: Unpack[rq.TaskFields]) -> Task:
        """Change the given fields of a task and return the stored task.

        Only the keywords given are sent (the update mask is built from their names), e.g.
        ``await update_task("backup", enabled=False, timeout_seconds=600)``. Keywords are
        those of :meth:`create_task` plus ``name``; ``max_attempts`` and the backoff keywords
        change the retry policy, keeping the values not given. Re-enabling resets the
        failure count.

        Args:
            task (int | str): the task's id or name.
            **fields (TaskFields): the new values (durations in seconds).

        Raises:
            NotFound: no such task.
            InvalidArgument: no field, or a bad value.
            AlreadyExists: the new name is taken.
            TypeError: an unknown keyword.
        """
        current = await self.get_task(task)
        request = rq.update_task_request(current, fields)
        response = await self._call(self._stubs().tasks.UpdateTask, request)
        return response.task

    async def delete_task(self, task: int | str) -> None:
        """Delete a task with all its jobs (their history too) and its place in schedules.

        Args:
            task (int | str): the task's id or name.

        Raises:
            NotFound: no such task.
            FailedPrecondition: the task has a running job, or is the only task of a
                schedule (delete the schedule first, or give it another task).
        """
        request = DeleteTaskRequest(task_id=await self._task_id(task))
        await self._call(self._stubs().tasks.DeleteTask, request)

    async def enable_task(self, task: int | str) -> Task:
        """Enable a task, clearing its disable note and resetting its failure count, and
        return it.

        Args:
            task (int | str): the task's id or name.

        Raises:
            NotFound: no such task.
        """
        request = EnableTaskRequest(id=await self._task_id(task))
        response = await self._call(self._stubs().tasks.EnableTask, request)
        return response.task

    async def disable_task(
        self, task: int | str, note: str = "", until: datetime | None = None
    ) -> Task:
        """Disable a task, so that the scheduler stops enqueueing it, and return it (a manual
        or API run still runs it). Who disabled it (the token's label) and when are kept.

        Args:
            task (int | str): the task's id or name.
            note (str): why, for people (at most 4000 characters).
            until (datetime | None): enable it again by itself at this time (aware); None:
                disabled until :meth:`enable_task`.

        Raises:
            NotFound: no such task.
            InvalidArgument: a note too long, or ``until`` not in the future.
        """
        request = rq.disable_task_request(await self._task_id(task), note, until)
        response = await self._call(self._stubs().tasks.DisableTask, request)
        return response.task

    # -- schedules --------------------------------------------------------------------------

    async def create_schedule(
        self,
        name: str,
        tasks: Sequence[int | str],
        *,
        cron: str | None = None,
        interval_seconds: int | None = None,
        timezone: str = "UTC",
        catch_up_policy: CatchUpPolicy | str = "SKIP",
        description: str = "",
        enabled: bool = True,
        catch_up_window_seconds: float | None = None,
        max_catch_up_runs: int = 0,
        jitter_seconds: float = 0.0,
        jitter_mode: JitterMode | str = "RANDOM",
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        overlap_policy: OverlapPolicy | str = "SKIP",
        max_buffered: int = 0,
        labels: Mapping[str, str] | None = None,
        catch_up_on_resume: bool = False,
        start_deadline_seconds: float = 0.0,
        notify: Sequence[rq.Route] = (),
    ) -> Schedule:
        """Create a schedule and return it with its id, next run time (UTC) and description.

        Args:
            name (str): unique, non-empty.
            tasks (Sequence[int | str]): the tasks it runs (ids or names), at least one.
            cron (str | None): 5 fields, or 6 with seconds first, or a macro (``@daily``).
            interval_seconds (int | None): run this many seconds after the previous run
                finished; used when ``cron`` is not given.
            timezone (str): IANA zone the expression is read in.
            catch_up_policy (CatchUpPolicy | str): after downtime, ``"SKIP"`` the missed
                windows, ``"RUN_ONCE"`` (one run for them) or ``"RUN_ALL"`` (every window
                within the catch-up window, oldest first).
            description (str): free text.
            enabled (bool): a disabled schedule does not fire.
            catch_up_window_seconds (float | None): how old a missed window may be and still
                fire after downtime, seconds; None means the server's default, 5.
            max_catch_up_runs (int): RUN_ALL's cap on the windows fired after downtime (the
                newest kept); 0 means 100, at most 10,000.
            jitter_seconds (float): most delay added to each fire's start, seconds, 0 to
                86400; the fire keeps its nominal fire time.
            jitter_mode (JitterMode | str): ``"RANDOM"`` (a new delay per fire) or
                ``"STABLE"`` (one delay derived from the schedule's name).
            start_time (datetime | None): no fire before this aware instant.
            end_time (datetime | None): no fire at or after this aware instant; after
                ``start_time``.
            overlap_policy (OverlapPolicy | str): what a fire does while a job of its task is
                queued or running: ``"SKIP"`` it (default), ``"BUFFER_ONE"``,
                ``"BUFFER_ALL"`` (wait), ``"REPLACE"`` the running job, ``"ALLOW"`` both.
            max_buffered (int): BUFFER_ALL's cap on waiting fires; 0 means 100, at most
                10,000.
            labels (Mapping[str, str] | None): labels for ownership and filtering, as a
                task's.
            catch_up_on_resume (bool): on resume, fire the paused windows through the
                catch-up policy; by default the paused time is never caught up.
            start_deadline_seconds (float): a start_deadline notification goes out when a
                fire's job has not started this many seconds after the fire time; 0: never.
            notify (Sequence[Route]): which notifiers get which events of its jobs and of
                itself, added to its tasks' routes (as ``create_task``'s).

        Raises:
            InvalidArgument: no cron nor interval; an invalid or never-firing expression or an
                unknown zone; a negative catch-up window or start deadline, a jitter over
                86400 s, an unknown jitter mode or overlap policy, a max_buffered outside
                0..10000, an end_time not after start_time (the message names the field).
            AlreadyExists: the name is taken.
            NotFound: an unknown task.
        """
        schedule = rq.build_schedule(
            name,
            [await self._task_id(t) for t in rq.task_refs(tasks)],
            cron=cron,
            interval_seconds=interval_seconds,
            timezone=timezone,
            catch_up_policy=catch_up_policy,
            description=description,
            enabled=enabled,
            catch_up_window_seconds=catch_up_window_seconds,
            max_catch_up_runs=max_catch_up_runs,
            jitter_seconds=jitter_seconds,
            jitter_mode=jitter_mode,
            start_time=start_time,
            end_time=end_time,
            overlap_policy=overlap_policy,
            max_buffered=max_buffered,
            labels=labels,
            catch_up_on_resume=catch_up_on_resume,
            start_deadline_seconds=start_deadline_seconds,
            notify=notify,
        )
        request = CreateScheduleRequest(schedule=schedule)
        response = await self._call(self._stubs().schedules.CreateSchedule, request)
        return response.schedule

    async def create_schedules(self, schedules: Sequence[rq.NewSchedule]) -> list[Schedule]:
        """Create up to 1,000 schedules in one transaction, all or none (a bulk import),
        and return them in order, as :meth:`create_schedule` would one by one.

        Args:
            schedules (Sequence[NewSchedule]): mappings with ``create_schedule``'s arguments:
                ``name`` and ``tasks`` (ids or names) required; ``cron`` or
                ``interval_seconds``; ``timezone``, ``catch_up_policy``, ``description``,
                ``enabled``, ``overlap_policy``, ``max_buffered`` and the catch-up, jitter and
                bounds keywords optional.

        Raises:
            InvalidArgument: a bad item or field, an empty batch or more than 1,000; the
                message names the item (``schedules[3]``, or the server's
                ``requests[3].schedule.cron_expression``).
            AlreadyExists: a name is taken, or given twice.
            NotFound: an unknown task.
        """
        ids = []
        for i, item_refs in enumerate(rq.new_schedule_refs(schedules)):
            try:
                ids.append([await self._task_id(t) for t in item_refs])
            except TickworkError as err:
                raise type(err)(f"schedules[{i}].tasks: {err.details}", err.code) from None
        request = rq.batch_create_schedules_request(schedules, ids)
        response = await self._call(self._stubs().schedules.BatchCreateSchedules, request)
        return list(response.schedules)

    async def get_schedule(self, schedule: int | str) -> Schedule:
        """Return a schedule by id or name, with its next run time (UTC) and description.

        Args:
            schedule (int | str): the schedule's id or name.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a bad reference.
        """
        request = rq.get_schedule_request(schedule)
        response = await self._call(self._stubs().schedules.GetSchedule, request)
        return response.schedule

    async def list_schedules(self, selector: str = "") -> list[Schedule]:
        """Return every schedule, in ascending name order (all pages are followed).

        Args:
            selector (str): only schedules whose labels match this label selector,
                ``"key=value,key2=value2"`` (all must hold); empty means all.

        Raises:
            InvalidArgument: a malformed selector.
        """
        rq.check_type(selector, str, "selector")

        async def fetch(size: int, token: str) -> tuple[Sequence[Schedule], str]:
            request = ListSchedulesRequest(
                page_size=size, page_token=token, label_selector=selector
            )
            response = await self._call(self._stubs().schedules.ListSchedules, request)
            return response.schedules, response.next_page_token

        return await self._collect(fetch, None)

    async def update_schedule(
        self, schedule: int | str, **fields: Unpack[rq.ScheduleFields]
    ) -> Schedule:
        """Change the given fields of a schedule and return the stored schedule.

        Keywords: ``name``, ``description``, ``cron``, ``interval_seconds``, ``timezone``,
        ``catch_up_policy``, ``enabled``, ``tasks`` (ids or names, replacing the list),
        ``overlap_policy``, ``max_buffered``, ``catch_up_window_seconds``,
        ``max_catch_up_runs``, ``jitter_seconds``, ``jitter_mode``, ``start_time``,
        ``end_time`` (as in :meth:`create_schedule`; None
        resets the catch-up window to 5 s and removes a bound), ``start_deadline_seconds``,
        ``notify``.
        ``interval_seconds`` without ``cron`` also clears the cron expression. The server
        recomputes the next run time (UTC) when the timing or enabled state changes.

        Args:
            schedule (int | str): the schedule's id or name.
            **fields (ScheduleFields): the new values.

        Raises:
            NotFound: no such schedule or task.
            InvalidArgument: no field or a bad value (named).
            AlreadyExists: the new name is taken.
            TypeError: an unknown keyword.
        """
        schedule_id = await self._schedule_id(schedule)
        task_ids = (
            [await self._task_id(t) for t in rq.task_refs(fields["tasks"])]
            if "tasks" in fields
            else None
        )
        request = rq.update_schedule_request(schedule_id, fields, task_ids)
        response = await self._call(self._stubs().schedules.UpdateSchedule, request)
        return response.schedule

    async def pause_schedule(
        self, schedule: int | str, note: str = "", until: datetime | None = None
    ) -> Schedule:
        """Pause a schedule (it does not fire) with a note, and return it. Who paused it (the
        token's label) and when are kept; pausing a paused schedule replaces its note.

        Args:
            schedule (int | str): the schedule's id or name.
            note (str): why, for people (at most 4000 characters).
            until (datetime | None): resume it by itself at this time (aware); None: paused
                until :meth:`resume_schedule`.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a note too long, or ``until`` not in the future.
        """
        request = rq.pause_schedule_request(await self._schedule_id(schedule), note, until)
        response = await self._call(self._stubs().schedules.PauseSchedule, request)
        return response.schedule

    async def resume_schedule(self, schedule: int | str) -> Schedule:
        """Resume a paused schedule and return it with its next run time. The paused windows
        are not fired unless its ``catch_up_on_resume`` is set.

        Args:
            schedule (int | str): the schedule's id or name.

        Raises:
            NotFound: no such schedule.
        """
        request = ResumeScheduleRequest(id=await self._schedule_id(schedule))
        response = await self._call(self._stubs().schedules.ResumeSchedule, request)
        return response.schedule

    async def delete_schedule(self, schedule: int | str) -> None:
        """Delete a schedule and its fire history; its tasks stay.

        Args:
            schedule (int | str): the schedule's id or name.

        Raises:
            NotFound: no such schedule.
        """
        request = DeleteScheduleRequest(schedule_id=await self._schedule_id(schedule))
        await self._call(self._stubs().schedules.DeleteSchedule, request)

    async def trigger_schedule(
        self,
        schedule: int | str,
        *,
        trigger: Trigger = Trigger.TRIGGER_API,
        request_id: str = "",
    ) -> Fire:
        """Fire a schedule now: all its tasks, as its next fire would, through its overlap
        policy, in the manual lane; its next run time is unchanged. A paused or disabled
        schedule fires too.

        Args:
            schedule (int | str): the schedule's id or name.
            trigger (Trigger): ``TRIGGER_API`` (default) or ``TRIGGER_MANUAL`` (a person);
                the fire and its jobs carry it.
            request_id (str): makes the call safe to retry: a repeat with the same id
                within 24 hours returns the first call's fire and fires nothing. "": none.

        Returns:
            Fire: the fire recorded (fire time: the server's now, UTC), with its runs.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a bad trigger, reference or request_id.
        """
        schedule_id = await self._schedule_id(schedule)
        request = rq.trigger_schedule_request(schedule_id, trigger, request_id)
        response = await self._call(self._stubs().schedules.TriggerSchedule, request)
        return response.fire

    async def list_fires(self, schedule: int | str, limit: int = 100) -> list[Fire]:
        """Return a schedule's recorded fires, newest fire time first: what came of each
        (enqueued job ids, skipped and why, or missed under catch-up SKIP).

        Args:
            schedule (int | str): the schedule's id or name.
            limit (int): at most this many fires (pages are followed until reached).

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a bad limit.
        """
        limit = rq.check_limit(limit)
        schedule_id = await self._schedule_id(schedule)

        async def fetch(size: int, token: str) -> tuple[Sequence[Fire], str]:
            request = ListFiresRequest(schedule_id=schedule_id, page_size=size, page_token=token)
            response = await self._call(self._stubs().schedules.ListFires, request)
            return response.fires, response.next_page_token

        return await self._collect(fetch, limit)

    async def backfill_schedule(
        self,
        schedule: int | str,
        start: datetime,
        end: datetime,
        *,
        dry_run: bool = False,
        overlap_policy: OverlapPolicy | str | None = None,
        request_id: str = "",
    ) -> BackfillScheduleResponse:
        """Run a schedule's past windows in [``start``, ``end``): each fire time its cron
        expression had in its time zone (DST rules as :meth:`describe_cron`), oldest first,
        recorded as a fire with trigger BACKFILL; its jobs carry that window as their fire
        time (``TICKWORK_FIRE_TIME``) and wait in the backfill lane, behind scheduled and
        manual jobs. A window that already has a fire is not run again (``already_fired``).

        Args:
            schedule (int | str): the schedule's id or name (a cron schedule).
            start (datetime): aware; the first instant of the range, inclusive.
            end (datetime): aware; the end of the range, exclusive, after ``start`` and not
                after now. At most 10,000 windows.
            dry_run (bool): list the windows and whether each already fired; run nothing.
            overlap_policy (OverlapPolicy | str | None): ``"SKIP"`` or None (the schedule's
                own) for now. With SKIP a task whose job is still queued or running is
                skipped for a window: a backfill of one task runs its first window only.
            request_id (str): as for :meth:`run` (not remembered for a dry run).

        Returns:
            BackfillScheduleResponse: ``windows``, oldest first, each with ``fire_time``
            (UTC), ``already_fired``, ``fire_id`` and per task ``runs`` (the job, or why
            skipped); ``repeated_request`` for a repeat of ``request_id``.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a naive time, ``end`` not after ``start`` or after now, more
                than 10,000 windows, a policy other than SKIP (the message names the field).
            FailedPrecondition: an interval schedule (it has no fixed windows).
        """
        request = backfill_request(
            await self._schedule_id(schedule),
            start,
            end,
            overlap_policy=overlap_policy,
            dry_run=dry_run,
            request_id=request_id,
        )
        return await self._call(self._stubs().schedules.BackfillSchedule, request)

    async def describe_cron(
        self,
        expression: str,
        timezone: str = "UTC",
        after: datetime | None = None,
        count: int = 5,
    ) -> DescribeCronResponse:
        """Describe a cron expression in words and preview its next fire times.

        Args:
            expression (str): the cron expression.
            timezone (str): IANA zone it is read in.
            after (datetime | None): preview strictly after this aware instant; default now.
            count (int): how many fire times, 1 to 1000.

        Returns:
            DescribeCronResponse: ``description`` and ``fire_times`` (each with the UTC
            ``fire_time``, the ISO 8601 ``local_time`` and any ``dst_note``).

        Raises:
            InvalidArgument: a bad expression, zone, count, or a naive ``after``.
        """
        request = rq.describe_cron_request(expression, timezone, after, count)
        return await self._call(self._stubs().schedules.DescribeCron, request)

    # -- notifiers --------------------------------------------------------------------------

    async def put_notifier(
        self, notifier: Notifier, *, validate_only: bool = False
    ) -> PutNotifierResponse:
        """Create the notifier of ``notifier.name``, or replace it whole (PutNotifier);
        ``validate_only``: check it and answer as a put would, writing nothing.

        Returns:
            PutNotifierResponse: ``notifier`` as stored, without its secrets (``has_url``,
            ``has_secret`` say whether they were written); ``created``; ``changed`` (False:
            every field, secrets included, was already so).

        Raises:
            InvalidArgument: a field that cannot be used, named.
        """
        request = PutNotifierRequest(notifier=notifier, validate_only=validate_only)
        return await self._call(self._stubs().notifiers.PutNotifier, request)

    async def list_notifiers(self) -> list[Notifier]:
        """Every notifier by name, the SMTP_* one (``builtin``) included; no secrets.

        Raises:
            Unavailable: the server cannot be reached.
        """
        response = await self._call(self._stubs().notifiers.ListNotifiers, ListNotifiersRequest())
        return list(response.notifiers)

    async def delete_notifier(self, name: str) -> None:
        """Delete a declared notifier; its notifications stay listed.

        Raises:
            NotFound: no declared notifier of that name.
        """
        await self._call(self._stubs().notifiers.DeleteNotifier, DeleteNotifierRequest(name=name))

    async def test_notifier(self, name: str) -> TestNotifierResponse:
        """Send a test event through notifier ``name`` now.

        Returns:
            TestNotifierResponse: ``delivered``, the ``error`` when not, the ``event_id``.

        Raises:
            NotFound: no such notifier.
        """
        return await self._call(
            self._stubs().notifiers.TestNotifier, TestNotifierRequest(name=name)
        )

    async def list_notifications(
        self, *, limit: int = 50, notifier: str = "", status: NotificationStatus | None = None
    ) -> list[Notification]:
        """Notifications (one event through one notifier), newest first.

        Args:
            limit (int): 1 to 1000.
            notifier (str): only this notifier's; empty: all.
            status (NotificationStatus | None): only in this status; None: any.

        Raises:
            InvalidArgument: a bad limit or status.
        """
        request = ListNotificationsRequest(limit=limit, notifier=notifier, status=status)
        response = await self._call(self._stubs().notifiers.ListNotifications, request)
        return list(response.notifications)

    async def apply_config(self, request: ApplyConfigRequest) -> ApplyConfigResponse:
        """Apply a configuration of tasks and schedules by name, all or nothing (one server
        transaction; with ``request.dry_run`` nothing is written). :mod:`tickwork.apply`
        builds the request from a TOML file.

        Returns:
            ApplyConfigResponse: one change per task, then per schedule, in request order.

        Raises:
            InvalidArgument: an item is malformed (the field names it, e.g.
                ``tasks[2].task_priority``). NotFound: a schedule names an unknown task.
            Unavailable: the service cannot be reached or its database fails.
        """
        return await self._call(self._stubs().config.ApplyConfig, request)
