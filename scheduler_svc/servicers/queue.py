"""QueueService (internal): the one way jobs are enqueued for a schedule's fire."""

from __future__ import annotations

from typing import Any

import grpc

from scheduler_svc import validation
from scheduler_svc.app import App
from scheduler_svc.errors import InvalidArgument, Reason
from scheduler_svc.records import FireRequest
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers._errors import rpc_errors
from tickwork.v1 import common_pb2, queue_pb2, queue_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]


class QueueServicer(queue_pb2_grpc.QueueServiceServicer):
    """tickwork.v1.QueueService."""

    def __init__(self, app: App) -> None:
        self.app = app

    @rpc_errors
    async def Enqueue(
        self, request: queue_pb2.EnqueueRequest, context: Ctx
    ) -> queue_pb2.EnqueueResponse:
        if request.trigger == common_pb2.TRIGGER_UNSPECIFIED:
            raise InvalidArgument("required", field="trigger", reason=Reason.FIELD_REQUIRED)
        if request.trigger == common_pb2.TRIGGER_BACKFILL:
            raise InvalidArgument(
                "a backfill is BackfillSchedule's, not an enqueue", field="trigger"
            )
        trigger = cv.trigger_name(request.trigger)  # an undefined value is INVALID_ARGUMENT
        scheduled = request.trigger == common_pb2.TRIGGER_SCHEDULER
        if scheduled and (not request.schedule_id or not request.HasField("fire_time")):
            raise InvalidArgument(
                "a scheduler enqueue needs schedule_id and fire_time", field="schedule_id"
            )
        if request.task_ids or not (scheduled and request.missed):
            validation.tasks_per_call(len(request.task_ids), "task_ids")
        if scheduled:
            fire = FireRequest(
                schedule_id=request.schedule_id,
                fire_time=cv.from_ts(request.fire_time),
                task_ids=tuple(request.task_ids),
                missed=request.missed,
                missed_fire_times=tuple(cv.from_ts(t) for t in request.missed_fire_times),
            )
            recorded = await self.app.enqueue_fire(fire)
            runs, duplicate = recorded.runs, recorded.duplicate_fire
        else:
            runs, duplicate = (await self.app.enqueue(list(request.task_ids), trigger)).runs, False
        return queue_pb2.EnqueueResponse(
            runs=[cv.task_run(r) for r in runs], duplicate_fire=duplicate
        )

    @rpc_errors
    async def EnqueueFires(
        self, request: queue_pb2.EnqueueFiresRequest, context: Ctx
    ) -> queue_pb2.EnqueueFiresResponse:
        fires = []
        for i, fire in enumerate(request.fires):
            if not fire.schedule_id or not fire.HasField("fire_time"):
                raise InvalidArgument(
                    "every fire needs schedule_id and fire_time", field=f"fires[{i}]"
                )
            fires.append(
                FireRequest(
                    schedule_id=fire.schedule_id,
                    fire_time=cv.from_ts(fire.fire_time),
                    task_ids=tuple(fire.task_ids),
                    missed=fire.missed,
                    missed_fire_times=tuple(cv.from_ts(t) for t in fire.missed_fire_times),
                    start_at=(
                        cv.from_ts(fire.start_time, f"fires[{i}].start_time")
                        if fire.HasField("start_time")
                        else None
                    ),
                )
            )
        results = await self.app.enqueue_fires(fires)
        return queue_pb2.EnqueueFiresResponse(
            results=[
                queue_pb2.ScheduleFireResult(
                    schedule_id=r.request.schedule_id,
                    fire_time=cv.ts(r.request.fire_time),
                    runs=[cv.task_run(x) for x in r.runs],
                    duplicate_fire=r.duplicate_fire,
                    schedule_found=r.schedule_found,
                )
                for r in results
            ]
        )
