"""ScheduleService.BackfillSchedule: the request's fields in, the windows out (the rules
are :mod:`scheduler_svc.backfill`'s)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import grpc

from scheduler_svc import validation
from scheduler_svc.app import App
from scheduler_svc.backfill import Range, backfill_schedule
from scheduler_svc.errors import InvalidArgument, Reason
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers._errors import rpc_errors
from scheduler_svc.servicers._request_ids import once
from scheduler_svc.store import Remember, Window
from tickwork.v1 import schedule_pb2

Ctx = grpc.aio.ServicerContext[Any, Any]

METHOD = "ScheduleService/BackfillSchedule"


def _time(request: schedule_pb2.BackfillScheduleRequest, field: str) -> dt.datetime:
    """A required Timestamp field as an aware UTC datetime. Raises InvalidArgument naming
    ``field``."""
    if not request.HasField(field):
        raise InvalidArgument("required", field=field, reason=Reason.FIELD_REQUIRED)
    return cv.from_ts(getattr(request, field), field)


def overlap_policy(value: int) -> str | None:
    """An OverlapPolicy enum value as its stored name; None for UNSPECIFIED. Raises
    InvalidArgument naming ``overlap_policy`` for a value the enum does not define."""
    if value == schedule_pb2.OVERLAP_POLICY_UNSPECIFIED:
        return None
    if value not in schedule_pb2.OverlapPolicy.values():
        raise InvalidArgument(f"unknown overlap policy {value}", field="overlap_policy")
    return str(schedule_pb2.OverlapPolicy.Name(value)).removeprefix("OVERLAP_POLICY_")


def response(found: Sequence[Window]) -> schedule_pb2.BackfillScheduleResponse:
    """The windows as the reply."""
    return schedule_pb2.BackfillScheduleResponse(
        windows=[
            schedule_pb2.BackfillWindow(
                fire_time=cv.ts(w.fire_time),
                already_fired=w.already_fired,
                fire_id=w.fire_id,
                runs=[cv.task_run(r) for r in w.runs],
            )
            for w in found
        ]
    )


class BackfillRpc:
    """The BackfillSchedule method of :class:`~.schedules.ScheduleServicer`."""

    app: App

    @rpc_errors
    async def BackfillSchedule(
        self, request: schedule_pb2.BackfillScheduleRequest, context: Ctx
    ) -> schedule_pb2.BackfillScheduleResponse:
        schedule_id = cv.required_id(request.id, "id")
        asked = Range(
            start=_time(request, "start_time"),
            end=_time(request, "end_time"),
            overlap_policy=overlap_policy(request.overlap_policy),
            dry_run=request.dry_run,
        )

        async def run(remember: Remember | None) -> schedule_pb2.BackfillScheduleResponse:
            return response(await backfill_schedule(self.app, schedule_id, asked, remember))

        if asked.dry_run:
            # A dry run writes nothing, its request_id's answer included.
            if request.request_id:
                validation.request_id(request.request_id)
            return await run(None)
        return await once(
            self.app, METHOD, request, schedule_pb2.BackfillScheduleResponse, run, response
        )
