"""Jobs: the filtered, paginated list, a job's page, its live state as server-sent events
(over WatchJob), and Cancel."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import cast

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tickwork.console import format as fmt
from tickwork.console.sessions import Session
from tickwork.console.web import action, console_of, current_session, done, int_param, page, render
from tickwork.errors import InvalidArgument, TickworkError
from tickwork.limits import OUTPUT_TAIL_CHARS
from tickwork.v1.job_pb2 import Job, JobStatus

log = logging.getLogger(__name__)

#: The statuses the filter offers, in the order of a job's life.
STATUSES = ("QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "ABORTED", "CANCELLED")
PAGE_SIZE = 50
#: Most attempts of one job's chain the job page follows back.
CHAIN_LIMIT = 20


@page
async def job_list(request: Request, session: Session) -> Response:
    """GET /jobs?task=&status=&schedule=&page=: jobs, newest first, 50 a page; a filter
    it cannot read is refused naming it (400), never dropped."""
    params = request.query_params
    task_ref = params.get("task", "").strip()
    task_id = 0
    if task_ref:
        task_id = (
            int(task_ref) if task_ref.isdigit() else (await session.client.get_task(task_ref)).id
        )
    status = params.get("status", "")
    if status and status not in STATUSES:
        raise InvalidArgument(f"status: expected one of {', '.join(STATUSES)}, got {status!r}")
    statuses = [cast(JobStatus, JobStatus.Value(f"JOB_STATUS_{status}"))] if status else []
    schedule_id = int_param(params, "schedule")
    if params.get("schedule") and schedule_id == 0:
        raise InvalidArgument(
            f"schedule: expected a schedule id (a positive number), got {params['schedule']!r}"
        )
    jobs = await console_of(request).api.jobs_page(
        session.token,
        task_id=task_id,
        statuses=statuses,
        schedule_id=schedule_id,
        page_size=PAGE_SIZE,
        page_token=params.get("page", ""),
    )
    schedules = await session.client.list_schedules()
    return render(
        request,
        "jobs.html",
        session,
        jobs=jobs,
        task_ref=task_ref,
        status=status,
        schedule_id=schedule_id,
        statuses=STATUSES,
        schedules=schedules,
    )


async def _chain(session: Session, job: Job) -> list[Job]:
    """The attempts before ``job`` (its retry_of chain), oldest first, then ``job``."""
    chain = [job]
    while chain[0].retry_of_job_id and len(chain) < CHAIN_LIMIT:
        try:
            chain.insert(0, await session.client.get_job(chain[0].retry_of_job_id))
        except TickworkError:
            break
    return chain


@page
async def job_page(request: Request, session: Session) -> Response:
    """GET /jobs/{job_id}: state, times, attempt chain, error, late outcome, output."""
    job = await session.client.get_job(int(request.path_params["job_id"]))
    retries = await console_of(request).api.jobs_page(
        session.token, task_id=job.task_id, page_size=PAGE_SIZE
    )
    followups = [j for j in retries.jobs if j.retry_of_job_id == job.id]
    return render(
        request,
        "job.html",
        session,
        job=job,
        chain=await _chain(session, job),
        followups=followups,
        final=fmt.job_status(job.status) not in ("QUEUED", "RUNNING"),
        tail_chars=OUTPUT_TAIL_CHARS,
    )


def job_json(job: Job) -> str:
    """The fields the job page's script updates, as JSON; text as stored (the script sets
    it as text, never as HTML)."""
    return json.dumps(
        {
            "id": job.id,
            "status": fmt.job_status(job.status),
            "output": fmt.text(job.output_tail),
            "error": fmt.text(job.error),
            "start": fmt.clock(job.start_time),
            "finish": fmt.clock(job.finish_time),
            "late_outcome": fmt.text(job.late_outcome),
        }
    )


async def events(request: Request) -> Response:
    """GET /jobs/{job_id}/events: ``text/event-stream`` of the job's states (event ``job``)
    until it has ended, then event ``end``. 401 without a session."""
    session = await current_session(request)
    if session is None:
        return JSONResponse({"error": "not signed in"}, status_code=401)
    job_id = int(request.path_params["job_id"])

    async def stream() -> AsyncIterator[str]:
        try:
            async for job in session.client.watch(job_id):
                yield f"event: job\ndata: {job_json(job)}\n\n"
        except TickworkError as err:
            yield f"event: failure\ndata: {json.dumps({'error': err.details})}\n\n"
        except asyncio.CancelledError:
            raise
        yield "event: end\ndata: {}\n\n"

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


@action
async def cancel(request: Request, session: Session, form: FormData) -> Response:
    """POST /jobs/{job_id}/cancel: CancelJob (a queued job only)."""
    job = await session.client.cancel_job(int(request.path_params["job_id"]))
    return done(session, form, f"job {job.id} cancelled", f"/jobs/{job.id}")
