"""JobService: read, watch and cancel jobs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from scheduler_svc import selectors
from scheduler_svc.app import App
from scheduler_svc.callers import caller_label
from scheduler_svc.errors import InvalidArgument, Reason
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers import _paging as paging
from scheduler_svc.servicers._errors import Failure, abort, rpc_errors, stream_errors
from scheduler_svc.values import FINAL_STATES
from tickwork.v1 import job_pb2, job_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]

#: A watcher re-reads its job at least this often (changes made by another replica), seconds.
WATCH_REFRESH_S = 1.0


class JobServicer(job_pb2_grpc.JobServiceServicer):
    """tickwork.v1.JobService."""

    def __init__(self, app: App) -> None:
        self.app = app

    @rpc_errors
    async def GetJob(self, request: job_pb2.GetJobRequest, context: Ctx) -> job_pb2.GetJobResponse:
        return job_pb2.GetJobResponse(
            job=cv.job(await self.app.store.get_job(cv.required_id(request.job_id, "job_id")))
        )

    @rpc_errors
    async def ListJobs(
        self, request: job_pb2.ListJobsRequest, context: Ctx
    ) -> job_pb2.ListJobsResponse:
        size = cv.page_size(request.page_size)
        position = paging.decode(request)  # the last job id shown
        before = None if position is None else paging.int_position(position)
        for s in request.statuses:
            if s == job_pb2.JOB_STATUS_UNSPECIFIED or s not in job_pb2.JobStatus.values():
                raise InvalidArgument(f"unknown job status {s}", field="statuses")
        rows = await self.app.store.list_jobs(
            limit=size + 1,
            before_id=before,
            task_id=request.task_id or None,
            statuses=[cv.job_status_name(s) for s in request.statuses],
            schedule_id=request.schedule_id or None,
            selector=selectors.parse(request.label_selector),
        )
        page = cv.fit_page(rows, size, cv.job)
        token = paging.encode(request, str(page.last.id)) if page.last else ""
        return job_pb2.ListJobsResponse(jobs=page.items, next_page_token=token)

    @stream_errors
    async def WatchJob(
        self, request: job_pb2.WatchJobRequest, context: Ctx
    ) -> AsyncIterator[job_pb2.WatchJobResponse]:
        cv.required_id(request.job_id, "job_id")
        last = None
        while True:
            signal = self.app.hub.job_signal(request.job_id)
            job = await self.app.store.get_job(request.job_id)
            if job != last:
                yield job_pb2.WatchJobResponse(job=cv.job(job))
                last = job
            if job.status in FINAL_STATES:
                return
            await signal.wait(WATCH_REFRESH_S)
            if not self.app.dispatching:
                # Stopping: a watch would hold the shutdown for the whole grace. The SDK
                # watches again once the service (or another replica) answers.
                await abort(
                    context,
                    Failure(
                        grpc.StatusCode.UNAVAILABLE,
                        "the service is stopping; watch the job again",
                        Reason.SERVICE_STOPPING,
                    ),
                )

    @rpc_errors
    async def CancelJob(
        self, request: job_pb2.CancelJobRequest, context: Ctx
    ) -> job_pb2.CancelJobResponse:
        job = await self.app.store.cancel_job(
            cv.required_id(request.job_id, "job_id"), self.app.clock(), caller_label()
        )
        self.app.hub.job_changed(job.id)
        return job_pb2.CancelJobResponse(job=cv.job(job))
