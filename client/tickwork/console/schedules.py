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
from tickwork.console.sessions import Session
from tickwork.console.web import action, current_session, done, page, render
from tickwork.errors import TickworkError
from tickwork.v1.common_pb2 import SkipReason, Trigger
from tickwork.v1.schedule_pb2 import CatchUpPolicy, Fire, OverlapPolicy, Schedule

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
    """GET /schedules/{schedule_id}: fires, next fire times with DST notes, the strip."""
    schedule = await session.client.get_schedule(int(request.path_params["schedule_id"]))
    fires = await session.client.list_fires(schedule.id, limit=200)
    preview = None
    if schedule.cron_expression:
        preview = await session.client.describe_cron(
            schedule.cron_expression, schedule.timezone or "UTC", count=PREVIEW_COUNT
        )
    now = dt.datetime.now(dt.UTC)
    return render(
        request,
        "schedule.html",
        session,
        schedule=schedule,
        fires=fires,
        preview=preview,
        strip=charts.fire_strip(fires, now, schedule.timezone or "UTC"),
        skip_reason=skip_reason,
        overlap_policy=overlap_policy,
        trigger=trigger,
    )


def _values_of(schedule: Schedule | None) -> dict[str, Any]:
    if schedule is None:
        return {
            "name": "",
            "description": "",
            "cron": "",
            "interval_seconds": "",
            "timezone": "UTC",
            "catch_up_policy": "SKIP",
            "overlap_policy": "SKIP",
            "max_buffered": "0",
            "enabled": True,
            "tasks": set(),
        }
    return {
        "name": schedule.name,
        "description": schedule.description,
        "cron": schedule.cron_expression,
        "interval_seconds": str(schedule.interval_seconds or ""),
        "timezone": schedule.timezone or "UTC",
        "catch_up_policy": fmt.enum_name(
            schedule.catch_up_policy or CatchUpPolicy.CATCH_UP_POLICY_SKIP,
            CatchUpPolicy,
            "CATCH_UP_POLICY_",
        ),
        "overlap_policy": fmt.enum_name(
            schedule.overlap_policy or OverlapPolicy.OVERLAP_POLICY_SKIP,
            OverlapPolicy,
            "OVERLAP_POLICY_",
        ),
        "max_buffered": str(schedule.max_buffered),
        "enabled": schedule.enabled,
        "tasks": set(schedule.task_ids),
    }


def _values_posted(form: FormData) -> dict[str, Any]:
    return {
        "name": str(form.get("name") or "").strip(),
        "description": str(form.get("description") or ""),
        "cron": str(form.get("cron") or "").strip(),
        "interval_seconds": str(form.get("interval_seconds") or "").strip(),
        "timezone": str(form.get("timezone") or "").strip() or "UTC",
        "catch_up_policy": str(form.get("catch_up_policy") or "SKIP"),
        "overlap_policy": str(form.get("overlap_policy") or "SKIP"),
        "max_buffered": str(form.get("max_buffered") or "0").strip(),
        "enabled": form.get("enabled") == "on",
        "tasks": {int(v) for v in form.getlist("tasks") if isinstance(v, str) and v.isdigit()},
    }


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
    return await _form(request, session, None, _values_of(None))


@page
async def edit_form(request: Request, session: Session) -> Response:
    """GET /schedules/{schedule_id}/edit: the edit form."""
    schedule = await session.client.get_schedule(int(request.path_params["schedule_id"]))
    return await _form(request, session, schedule, _values_of(schedule))


def _overlap(values: dict[str, Any]) -> dict[str, Any]:
    """The SDK's overlap keywords; a cap that is not a number is sent as -1, for the
    server to refuse naming the field."""
    raw = values["max_buffered"]
    return {
        "overlap_policy": values["overlap_policy"],
        "max_buffered": int(raw) if raw.isdigit() and len(raw) < 10 else -1,
    }


def _timing(values: dict[str, Any]) -> dict[str, Any]:
    """The SDK's timing keywords: the cron expression, else the interval."""
    if values["cron"]:
        return {"cron": values["cron"]}
    raw = values["interval_seconds"]
    return {"interval_seconds": int(raw) if raw.isdigit() else 0}


@action
async def create(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules: CreateSchedule; the form again with the server's message on error."""
    values = _values_posted(form)
    try:
        schedule = await session.client.create_schedule(
            values["name"],
            sorted(values["tasks"]),
            **_timing(values),
            timezone=values["timezone"],
            catch_up_policy=values["catch_up_policy"],
            description=values["description"],
            enabled=values["enabled"],
            **_overlap(values),
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
    values = _values_posted(form)
    try:
        schedule = await session.client.update_schedule(
            schedule_id,
            name=values["name"],
            description=values["description"],
            **_timing(values),
            timezone=values["timezone"],
            catch_up_policy=values["catch_up_policy"],
            enabled=values["enabled"],
            tasks=sorted(values["tasks"]),
            **_overlap(values),
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
