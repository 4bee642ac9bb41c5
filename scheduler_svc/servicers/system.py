"""SystemService: the service's workers and queue depth, for status pages."""

from __future__ import annotations

import datetime as dt
from typing import Any

import grpc

from scheduler_svc.app import App
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers._errors import rpc_errors
from scheduler_svc.values import Lane
from scheduler_svc.worker_registry import WorkerRegistry
from tickwork.v1 import system_pb2, system_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]

_LANES = (
    (Lane.MANUAL, system_pb2.QUEUE_LANE_MANUAL),
    (Lane.SCHEDULER, system_pb2.QUEUE_LANE_SCHEDULER),
    (Lane.BACKFILL, system_pb2.QUEUE_LANE_BACKFILL),
)


class SystemServicer(system_pb2_grpc.SystemServiceServicer):
    """tickwork.v1.SystemService."""

    def __init__(self, app: App, registry: WorkerRegistry) -> None:
        self.app = app
        self.registry = registry

    @rpc_errors
    async def GetStatus(
        self, request: system_pb2.GetStatusRequest, context: Ctx
    ) -> system_pb2.GetStatusResponse:
        now = self.app.clock()
        held = await self.app.store.worker_lease_holders()
        depth = await self.app.store.queue_depth_by_lane()
        # Each active stream holds one slot lease (one with TICKWORK_MAX_RUNNING_JOBS 1).
        live = {lease.holder: lease for lease in held if lease.expires_at >= now}
        workers: list[system_pb2.WorkerStatus] = []
        for holder, seen in self.registry.items():
            active = seen.active and holder in live
            workers.append(
                system_pb2.WorkerStatus(
                    worker_id=seen.worker_id,
                    state=system_pb2.WORKER_STATE_ACTIVE
                    if active
                    else system_pb2.WORKER_STATE_STANDBY,
                    connect_time=cv.ts(seen.connect_time),
                    state_time=cv.ts(seen.state_time or seen.connect_time),
                    last_heartbeat_time=cv.ts(seen.last_message_time or seen.connect_time),
                    slots=seen.slots,
                    running_job_ids=sorted(seen.running_job_ids),
                )
            )
        local = {holder for holder, _ in self.registry.items()}
        for live_holder, lease in live.items():
            if live_holder in local:
                continue
            renewed = lease.expires_at - dt.timedelta(seconds=self.app.settings.lease_ttl_s)
            workers.append(
                system_pb2.WorkerStatus(
                    worker_id=live_holder.rsplit("#", 1)[0],
                    state=system_pb2.WORKER_STATE_ACTIVE,
                    last_heartbeat_time=cv.ts(renewed),
                    slots=1,
                    only_lease_known=True,
                )
            )
        workers.sort(
            key=lambda w: (
                w.state != system_pb2.WORKER_STATE_ACTIVE,
                w.connect_time.ToNanoseconds(),
            )
        )
        health = self.app.store.db.health
        database = system_pb2.DatabaseStatus(
            writes_ok=not health.failing,
            error=health.reason,
            failed_operations=health.failures if health.failing else 0,
        )
        stall = None
        since = self.app.queue_stalled_since
        if since is not None and (now - since).total_seconds() > self.app.settings.lease_ttl_s:
            stall = system_pb2.QueueStall(since=cv.ts(since))
        return system_pb2.GetStatusResponse(
            database=database,
            queue_stall=stall,
            workers=workers,
            queue=[
                system_pb2.LaneDepth(lane=lane, queued_jobs=depth.get(stored, 0))
                for stored, lane in _LANES
            ],
            read_time=cv.ts(now),
        )
