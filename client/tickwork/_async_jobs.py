"""The asyncio client's methods for running tasks and following their jobs (TaskService's
RunTasks and AbortTasks, JobService): :class:`JobsMixin`, a part of
:class:`~tickwork.AsyncClient`.

Hand-written; ``scripts/unasync.py`` generates :mod:`tickwork._sync_jobs` from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from datetime import datetime
from typing import Any

import grpc

from tickwork import _async_transport as transport
from tickwork import _requests as rq
from tickwork._async_base import ClientBase
from tickwork.errors import JobTimeout, TickworkError, from_rpc_error
from tickwork.v1.common_pb2 import TaskRun, Trigger
from tickwork.v1.job_pb2 import CancelJobRequest, GetJobRequest, Job, JobStatus, WatchJobRequest
from tickwork.v1.task_pb2 import AbortTasksRequest, TaskAbort

__all__ = ["JobsMixin"]


class JobsMixin(ClientBase):
    """Running tasks, and jobs: get, list, watch, wait for, cancel."""

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
