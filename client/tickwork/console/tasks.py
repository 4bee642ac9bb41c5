"""Tasks: the table with status pills and actions, a task's page, and the actions."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from google.protobuf import json_format
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tickwork.console import charts
from tickwork.console import format as fmt
from tickwork.console.schedule_values import parse_time
from tickwork.console.sessions import Session
from tickwork.console.web import action, console_of, done, field, page, render
from tickwork.v1.common_pb2 import SkipReason, Trigger
from tickwork.v1.job_pb2 import Job, JobStatus
from tickwork.v1.task_pb2 import Task, TaskAbort

QUEUED, RUNNING, FAILED = (
    JobStatus.JOB_STATUS_QUEUED,
    JobStatus.JOB_STATUS_RUNNING,
    JobStatus.JOB_STATUS_FAILED,
)


@dataclass(frozen=True)
class TaskRow:
    """A task with its queued or running job and, when it failed, its last error."""

    task: Task
    job: Job | None
    last_error: str

    @property
    def state(self) -> str:
        """``running``, ``queued`` or ``idle`` (whether enabled or not)."""
        if self.job is None:
            return "idle"
        return "running" if self.job.status == RUNNING else "queued"

    @property
    def disabled_tooltip(self) -> str:
        """The Disabled pill's tooltip: the reason, the count and the last error."""
        task = self.task
        who = f"disabled by {task.disabled_by}" if task.disabled_by else "disabled by an admin"
        if task.HasField("disable_time"):
            who += f" at {fmt.clock(task.disable_time)}"
        if task.HasField("disabled_until"):
            who += f", until {fmt.clock(task.disabled_until)}"
        parts = [task.disable_note or task.disabled_reason or "", who]
        parts = [p for p in parts if p]
        if task.disable_note or not task.disabled_reason:
            # An automatic disable's reason already gives the count and the last error.
            count = self.task.consecutive_failure_count
            if count:
                parts.append(f"{count} consecutive failure{'s' if count != 1 else ''}")
            if self.last_error:
                parts.append(f"last error: {fmt.last_line(self.last_error)}")
        return fmt.text("; ".join(parts))


async def _last_error(request: Request, session: Session, task: Task) -> str:
    page_ = await console_of(request).api.jobs_page(
        session.token, task_id=task.id, statuses=[FAILED], page_size=1
    )
    return page_.jobs[0].error if page_.jobs else ""


async def rows(request: Request, session: Session, tasks: list[Task]) -> list[TaskRow]:
    """Each task with its queued or running job and (failing ones) its last error."""
    api = console_of(request).api
    active = await api.jobs_page(session.token, statuses=[QUEUED, RUNNING], page_size=1000)
    by_task: dict[int, Job] = {}
    for job in active.jobs:
        if job.task_id not in by_task or job.status == RUNNING:
            by_task[job.task_id] = job
    errors = await asyncio.gather(
        *(
            _last_error(request, session, t)
            if t.consecutive_failure_count > 0
            else asyncio.sleep(0, "")
            for t in tasks
        )
    )
    return [TaskRow(t, by_task.get(t.id), e) for t, e in zip(tasks, errors, strict=True)]


@page
async def task_list(request: Request, session: Session) -> Response:
    """GET /tasks: every task with its pill and actions."""
    tasks = await session.client.list_tasks()
    return render(request, "tasks.html", session, rows=await rows(request, session, tasks))


@page
async def task_page(request: Request, session: Session) -> Response:
    """GET /tasks/{task_id}: the task, its handler and params, retry policy, and jobs."""
    task = await session.client.get_task(int(request.path_params["task_id"]))
    token = request.query_params.get("page", "")
    [row] = await rows(request, session, [task])
    jobs = await console_of(request).api.jobs_page(
        session.token, task_id=task.id, page_size=50, page_token=token
    )
    params = json.dumps(json_format.MessageToDict(task.params), indent=2, sort_keys=True)
    return render(
        request,
        "task.html",
        session,
        row=row,
        task=task,
        params=params,
        jobs=jobs,
        chart=charts.durations(jobs.jobs),
    )


def _task_id(request: Request) -> int:
    return int(request.path_params["task_id"])


@action
async def run_now(request: Request, session: Session, form: FormData) -> Response:
    """POST /tasks/{task_id}/run: RunTasks (manual lane); goes to the job's page."""
    [run] = await session.client.run(_task_id(request), trigger=Trigger.TRIGGER_MANUAL)
    if run.skipped:
        reason = fmt.enum_name(run.skip_reason, SkipReason, "SKIP_REASON_").lower()
        session.flash("ok", f"{run.task_name}: not run again ({reason.replace('_', ' ')})")
    elif run.promoted:
        session.flash("ok", f"{run.task_name}: its queued job {run.job_id} moved to the front")
    else:
        session.flash("ok", f"{run.task_name}: job {run.job_id} enqueued")
    target = f"/jobs/{run.job_id}" if run.job_id else f"/tasks/{run.task_id}"
    return RedirectResponse(target, status_code=303)


@action
async def abort(request: Request, session: Session, form: FormData) -> Response:
    """POST /tasks/{task_id}/abort: AbortTasks (cancels a queued job, aborts a running one)."""
    [result] = await session.client.abort(_task_id(request))
    what = {
        TaskAbort.Action.ACTION_CANCELLED: "cancelled",
        TaskAbort.Action.ACTION_ABORT_REQUESTED: "told to abort",
    }.get(result.action)
    text = f"job {result.job_id}: {what}" if what else "nothing was queued or running"
    return done(session, form, text, "/tasks")


@action
async def enable(request: Request, session: Session, form: FormData) -> Response:
    """POST /tasks/{task_id}/enable (resets the consecutive failure count)."""
    task = await session.client.enable_task(_task_id(request))
    return done(session, form, f"{task.name}: enabled", "/tasks")


@action
async def disable(request: Request, session: Session, form: FormData) -> Response:
    """POST /tasks/{task_id}/disable (optional note, until: UTC unless it has an offset):
    DisableTask; the scheduler stops enqueueing it."""
    until = parse_time(field(form, "until"), "until")
    task = await session.client.disable_task(
        _task_id(request), note=field(form, "note"), until=until
    )
    text = f"{task.name}: disabled"
    if until is not None:
        text += f" until {fmt.clock(task.disabled_until)}"
    return done(session, form, text, "/tasks")
