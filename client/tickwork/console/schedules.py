"""Schedules: the table, a schedule's page (fires with their outcome and trigger, next fire
times, the 24-hour strip, its overlap policy), the create and edit form, the enabled
switch, firing now, and the cron preview the form's script asks for."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import grpc
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from tickwork.console import charts
from tickwork.console import format as fmt
from tickwork.console import schedule_facts as facts
from tickwork.console import schedule_values as sv
from tickwork.console.sessions import Session
from tickwork.console.web import action, current_session, done, page, render
from tickwork.errors import TickworkError
from tickwork.v1.common_pb2 import SkipReason, Trigger
from tickwork.v1.schedule_pb2 import Fire, OverlapPolicy, Schedule

#: How many next fire times a schedule's page and the form preview show.
PREVIEW_COUNT = 10

#: The overlap policies in the form's order, with what each does in words.
OVERLAP_CHOICES = (
    ("SKIP", "skip the fire"),
    ("BUFFER_ONE", "buffer one fire until the running job ends"),
    ("BUFFER_ALL", "buffer every fire, up to the cap"),
    ("REPLACE", "abort the running job and run the new fire"),
    ("ALLOW", "run alongside"),
)


def overlap_policy(schedule: Schedule) -> str:
    """The schedule's overlap policy in words, e.g. ``buffer all (at most 100 waiting)``."""
    name = fmt.enum_name(
        schedule.overlap_policy or OverlapPolicy.OVERLAP_POLICY_SKIP,
        OverlapPolicy,
        "OVERLAP_POLICY_",
    )
    words = name.lower().replace("_", " ")
    if name == "BUFFER_ALL":
        words += f" (at most {schedule.max_buffered or 100} waiting)"
    return words


def trigger(value: int) -> str:
    """``scheduler``, ``manual``, ``api`` or ``backfill`` for a Trigger value; ``—`` when
    unknown."""
    if not value:
        return "—"
    return fmt.enum_name(value, Trigger, "TRIGGER_").lower()


def skip_reason(value: int) -> str:
    """``already running`` for SKIP_REASON_ALREADY_RUNNING, and so on."""
    return fmt.enum_name(value, SkipReason, "SKIP_REASON_").lower().replace("_", " ")


async def _last_fire(session: Session, schedule: Schedule) -> Fire | None:
    fires = await session.client.list_fires(schedule.id, limit=1)
    return fires[0] if fires else None


@page
async def schedule_list(request: Request, session: Session) -> Response:
    """GET /schedules: every schedule with its next run and last fire."""
    schedules = await session.client.list_schedules()
    last = await asyncio.gather(*(_last_fire(session, s) for s in schedules))
    return render(
        request,
        "schedules.html",
        session,
        rows=list(zip(schedules, last, strict=True)),
        skip_reason=skip_reason,
    )


@page
async def schedule_page(request: Request, session: Session) -> Response:
    """GET /schedules/{schedule_id}: fires, next fire times within its bounds with DST
    notes and jittered starts, the strip."""
    schedule = await session.client.get_schedule(int(request.path_params["schedule_id"]))
    fires = await session.client.list_fires(schedule.id, limit=200)
    now = dt.datetime.now(dt.UTC)
    preview = None
    if schedule.cron_expression:
        preview = await session.client.describe_cron(
            schedule.cron_expression,
            schedule.timezone or "UTC",
            after=facts.preview_after(schedule, now),
            count=PREVIEW_COUNT,
        )
    return render(
        request,
        "schedule.html",
        session,
        schedule=schedule,
        fires=fires,
        preview=facts.preview_rows(schedule, preview) if preview else None,
        facts=facts,
        strip=charts.fire_strip(fires, now, schedule.timezone or "UTC"),
        skip_reason=skip_reason,
        overlap_policy=overlap_policy,
        trigger=trigger,
    )


async def _form(
    request: Request,
    session: Session,
    schedule: Schedule | None,
    values: dict[str, Any],
    error: str = "",
    status_code: int = 200,
) -> Response:
    tasks = await session.client.list_tasks()
    return render(
        request,
        "schedule_form.html",
        session,
        status_code=status_code,
        schedule=schedule,
        values=values,
        tasks=tasks,
        error=error,
        overlap_choices=OVERLAP_CHOICES,
    )


@page
async def new_form(request: Request, session: Session) -> Response:
    """GET /schedules/new: the create form."""
    return await _form(request, session, None, sv.values_of(None))


@page
async def edit_form(request: Request, session: Session) -> Response:
    """GET /schedules/{schedule_id}/edit: the edit form."""
    schedule = await session.client.get_schedule(int(request.path_params["schedule_id"]))
    return await _form(request, session, schedule, sv.values_of(schedule))


@action
async def create(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules: CreateSchedule; the form again with the server's message on error."""
    values = sv.values_posted(form)
    try:
        schedule = await session.client.create_schedule(
            values["name"], sorted(values["tasks"]), **sv.keywords(values)
        )
    except TickworkError as err:
        if err.code == grpc.StatusCode.PERMISSION_DENIED:
            raise
        return await _form(request, session, None, values, err.details, 400)
    session.flash("ok", f"schedule {schedule.name} created")
    return RedirectResponse(f"/schedules/{schedule.id}", status_code=303)


@action
async def update(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}: UpdateSchedule with every field of the form."""
    schedule_id = int(request.path_params["schedule_id"])
    values = sv.values_posted(form)
    try:
        schedule = await session.client.update_schedule(
            schedule_id,
            name=values["name"],
            tasks=sorted(values["tasks"]),
            **sv.keywords(values),
        )
    except TickworkError as err:
        if err.code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND):
            raise
        current = await session.client.get_schedule(schedule_id)
        return await _form(request, session, current, values, err.details, 400)
    session.flash("ok", f"schedule {schedule.name} saved")
    return RedirectResponse(f"/schedules/{schedule.id}", status_code=303)


@action
async def trigger_now(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}/trigger: TriggerSchedule (trigger MANUAL)."""
    fire = await session.client.trigger_schedule(
        int(request.path_params["schedule_id"]), trigger=Trigger.TRIGGER_MANUAL
    )
    outcome = fmt.fire_outcome(fire.outcome).lower()
    return done(session, form, f"schedule fired now: {outcome}", "/schedules")


@action
async def switch(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}/enable or /disable."""
    enabled = request.url.path.endswith("/enable")
    schedule = await session.client.update_schedule(
        int(request.path_params["schedule_id"]), enabled=enabled
    )
    state = "enabled" if enabled else "disabled"
    return done(session, form, f"schedule {schedule.name} {state}", "/schedules")


@action
async def delete(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}/delete: DeleteSchedule (its tasks stay)."""
    await session.client.delete_schedule(int(request.path_params["schedule_id"]))
    session.flash("ok", "schedule deleted")
    return RedirectResponse("/schedules", status_code=303)


async def describe(request: Request) -> Response:
    """GET /cron/describe?expression=&timezone=: DescribeCron as JSON for the form's script.

    200 ``{"description", "fire_times": [{"utc", "local", "dst_note"}]}``; 400
    ``{"error"}`` with the server's message naming the field; 401 without a session.
    """
    session = await current_session(request)
    if session is None:
        return JSONResponse({"error": "not signed in"}, status_code=401)
    expression = request.query_params.get("expression", "").strip()
    timezone = request.query_params.get("timezone", "").strip() or "UTC"
    if not expression:
        return JSONResponse({"error": "cron_expression: enter an expression"}, status_code=400)
    try:
        answer = await session.client.describe_cron(expression, timezone, count=PREVIEW_COUNT)
    except TickworkError as err:
        status = 400 if err.code == grpc.StatusCode.INVALID_ARGUMENT else 502
        return JSONResponse({"error": err.details}, status_code=status)
    return JSONResponse(
        {
            "description": answer.description,
            "fire_times": [
                {
                    "utc": fmt.clock(f.fire_time),
                    "local": fmt.clock(f.fire_time, timezone),
                    "iso": f.local_time,
                    "dst_note": f.dst_note,
                }
                for f in answer.fire_times
            ],
        }
    )
