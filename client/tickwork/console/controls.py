"""A schedule's pause and resume with a note, and its backfill: the dry run that lists the
windows a range holds, and the run itself. Each is a POST with the session's CSRF token;
the API's roles decide who may (operator and up)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from tickwork.console import format as fmt
from tickwork.console.schedule_values import parse_time
from tickwork.console.sessions import Session
from tickwork.console.web import action, done, field, render
from tickwork.errors import InvalidArgument


def _schedule_id(request: Request) -> int:
    return int(request.path_params["schedule_id"])


@action
async def pause(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}/pause (note, until: UTC unless it has an offset):
    PauseSchedule; a paused schedule's note is replaced."""
    until = parse_time(field(form, "until"), "until")
    schedule = await session.client.pause_schedule(
        _schedule_id(request), note=field(form, "note"), until=until
    )
    text = f"schedule {schedule.name} paused"
    if until is not None:
        text += f" until {fmt.clock(schedule.paused_until, schedule.timezone or 'UTC')}"
    return done(session, form, text, f"/schedules/{schedule.id}")


@action
async def resume(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}/resume: ResumeSchedule."""
    schedule = await session.client.resume_schedule(_schedule_id(request))
    return done(session, form, f"schedule {schedule.name} resumed", f"/schedules/{schedule.id}")


@action
async def backfill(request: Request, session: Session, form: FormData) -> Response:
    """POST /schedules/{schedule_id}/backfill (from, to: UTC unless with an offset;
    dry_run=on for the list only): BackfillSchedule. A dry run shows the windows and a
    button to run them; a run goes back to the schedule's page with what it did."""
    start = parse_time(field(form, "from"), "from")
    end = parse_time(field(form, "to"), "to")
    if start is None or end is None:
        raise InvalidArgument(f"{'from' if start is None else 'to'}: give a time")
    schedule = await session.client.get_schedule(_schedule_id(request))
    dry_run = field(form, "dry_run") == "on"
    answer = await session.client.backfill_schedule(schedule.id, start, end, dry_run=dry_run)
    if not dry_run:
        fired = sum(1 for w in answer.windows if not w.already_fired)
        text = (
            f"backfill of {schedule.name}: {fired} window{'s' if fired != 1 else ''} run, "
            f"{len(answer.windows) - fired} already fired"
        )
        return done(session, form, text, f"/schedules/{schedule.id}")
    return render(
        request,
        "backfill.html",
        session,
        schedule=schedule,
        windows=answer.windows,
        start=field(form, "from"),
        end=field(form, "to"),
    )
