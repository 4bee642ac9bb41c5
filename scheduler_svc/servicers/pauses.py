"""PauseSchedule, ResumeSchedule, DisableTask and EnableTask: a pause or a disable with a
note, who (the caller's token label) and when, optionally ending by itself; the rules are
:mod:`scheduler_svc.pausing`'s. Mixed into the schedule and task servicers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import grpc

from scheduler_svc import pausing
from scheduler_svc.app import App
from scheduler_svc.callers import caller_label
from scheduler_svc.errors import NotFound
from scheduler_svc.records import ScheduleRecord, TaskRecord
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers._errors import rpc_errors
from tickwork.v1 import schedule_pb2, task_pb2

Ctx = grpc.aio.ServicerContext[Any, Any]


def _named_by_id(err: NotFound) -> NotFound:
    """``err`` about the request's ``id`` field."""
    return NotFound(err.text, field="id", reason=err.reason, resource=err.resource)


class SchedulePauses:
    """ScheduleService.PauseSchedule and ResumeSchedule."""

    app: App

    def _out(self, record: ScheduleRecord) -> schedule_pb2.Schedule:
        """The schedule as the API answers it (the servicer's)."""
        raise NotImplementedError

    @rpc_errors
    async def PauseSchedule(
        self, request: schedule_pb2.PauseScheduleRequest, context: Ctx
    ) -> schedule_pb2.PauseScheduleResponse:
        sid = cv.required_id(request.id, "id")
        now = self.app.clock()
        text = pausing.note(request.note)
        until = None
        if request.HasField("paused_until"):
            until = pausing.until(
                cv.from_ts(request.paused_until, "paused_until"), now, "paused_until"
            )
        columns = pausing.pause_columns(caller_label(), now, text, until)
        stored = await self._update_by_id(sid, columns, now)
        self.app.schedules_changed(until)  # the loop wakes by the end of the pause
        return schedule_pb2.PauseScheduleResponse(schedule=self._out(stored))

    @rpc_errors
    async def ResumeSchedule(
        self, request: schedule_pb2.ResumeScheduleRequest, context: Ctx
    ) -> schedule_pb2.ResumeScheduleResponse:
        sid = cv.required_id(request.id, "id")
        now = self.app.clock()

        def resume(current: ScheduleRecord) -> dict[str, Any]:
            # An enabled schedule is left as it is (an interval's next run does not move).
            return {} if current.enabled else pausing.resume_columns(current, now)

        stored = await self._update_by_id(sid, {}, now, resume)
        self.app.schedules_changed(stored.next_run_at)
        return schedule_pb2.ResumeScheduleResponse(schedule=self._out(stored))

    async def _update_by_id(
        self,
        sid: int,
        values: dict[str, Any],
        now: dt.datetime,
        complete: Callable[[ScheduleRecord], dict[str, Any]] | None = None,
    ) -> ScheduleRecord:
        """:meth:`Store.update_schedule` for a request whose schedule is its ``id``."""
        try:
            return await self.app.store.update_schedule(sid, values, None, now, complete=complete)
        except NotFound as err:
            raise _named_by_id(err) from None


class TaskDisables:
    """TaskService.DisableTask and EnableTask."""

    app: App

    @rpc_errors
    async def DisableTask(
        self, request: task_pb2.DisableTaskRequest, context: Ctx
    ) -> task_pb2.DisableTaskResponse:
        task_id = cv.required_id(request.id, "id")
        now = self.app.clock()
        text = pausing.note(request.note)
        until = None
        if request.HasField("disabled_until"):
            until = pausing.until(
                cv.from_ts(request.disabled_until, "disabled_until"), now, "disabled_until"
            )
        columns = pausing.disable_columns(caller_label(), now, text, until)
        stored, cancelled = await self._update(task_id, columns, now)
        for job_id in cancelled:
            self.app.hub.job_changed(job_id)
        self.app.schedules_changed(until)  # the loop wakes by the end of the disable
        return task_pb2.DisableTaskResponse(task=cv.task(stored))

    @rpc_errors
    async def EnableTask(
        self, request: task_pb2.EnableTaskRequest, context: Ctx
    ) -> task_pb2.EnableTaskResponse:
        task_id = cv.required_id(request.id, "id")
        stored, _ = await self._update(task_id, dict(pausing.ENABLED), self.app.clock())
        return task_pb2.EnableTaskResponse(task=cv.task(stored))

    async def _update(
        self, task_id: int, columns: dict[str, Any], now: dt.datetime
    ) -> tuple[TaskRecord, list[int]]:
        """:meth:`Store.update_task` for a request whose task is its ``id``."""
        try:
            return await self.app.store.update_task(task_id, columns, now)
        except NotFound as err:
            raise _named_by_id(err) from None
