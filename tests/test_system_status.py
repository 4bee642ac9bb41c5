"""SystemService.GetStatus on real processes: the active worker and the standby, since
when, their last heartbeat and slots, the running job, and the queue depth by lane."""

from __future__ import annotations

import signal
from pathlib import Path

import grpc

from tests.harness import Server, WorkerProc, wait_for
from tickwork import Client
from tickwork.v1 import system_pb2, system_pb2_grpc

ACTIVE, STANDBY = system_pb2.WORKER_STATE_ACTIVE, system_pb2.WORKER_STATE_STANDBY


def status(address: str) -> system_pb2.GetStatusResponse:
    with grpc.insecure_channel(address) as channel:
        stub = system_pb2_grpc.SystemServiceStub(channel)
        return stub.GetStatus(system_pb2.GetStatusRequest(), timeout=10)


def states(address: str) -> list[tuple[int, int]]:
    """(state, slots) of each worker, as listed."""
    return [(w.state, w.slots) for w in status(address).workers]


def test_active_and_standby_workers_and_the_queue_by_lane(tmp_path: Path) -> None:
    api = Server(
        tmp_path,
        env={
            "WORKER_IS_ENABLED": "false",
            "TICKWORK_LEASE_TTL_SECONDS": "3",
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "1",
            "WORKER_POLL_INTERVAL_SECONDS": "1",
        },
        name="api",
    ).wait_healthy()
    workers: list[WorkerProc] = []
    try:
        empty = status(api.address)
        assert list(empty.workers) == []
        assert [(q.lane, q.queued_jobs) for q in empty.queue] == [
            (system_pb2.QUEUE_LANE_MANUAL, 0),
            (system_pb2.QUEUE_LANE_SCHEDULER, 0),
            (system_pb2.QUEUE_LANE_BACKFILL, 0),
        ]
        with Client(api.address) as tw:
            tw.create_task("sleepy", "shell", {"argv": ["sleep", "30"]})
            tw.create_task("waiting", "shell", {"argv": ["true"]})
            [queued] = tw.run("waiting")
            assert status(api.address).queue[0].queued_jobs == 1
            tw.cancel_job(queued.job_id)
            workers.append(WorkerProc(tmp_path, api.address, name="first"))
            wait_for(lambda: states(api.address) == [(ACTIVE, 1)], what="the first worker")
            workers.append(WorkerProc(tmp_path, api.address, name="second"))
            wait_for(
                lambda: states(api.address) == [(ACTIVE, 1), (STANDBY, 1)],
                what="a standby",
            )
            [run] = tw.run("sleepy")
            wait_for(
                lambda: list(status(api.address).workers[0].running_job_ids) == [run.job_id],
                what="the running job on the active worker",
            )
            seen = status(api.address)
            active, standby = seen.workers
            assert active.connect_time.ToDatetime() <= active.state_time.ToDatetime()
            assert standby.connect_time.ToDatetime() > active.connect_time.ToDatetime()
            # Heartbeats keep arriving while the job runs.
            first_beat = active.last_heartbeat_time.ToDatetime()
            wait_for(
                lambda: (
                    status(api.address).workers[0].last_heartbeat_time.ToDatetime() > first_beat
                ),
                what="a later heartbeat",
            )
            workers[0].kill(signal.SIGKILL)
            wait_for(lambda: states(api.address) == [(ACTIVE, 1)], timeout_s=30, what="failover")
            assert status(api.address).workers[0].worker_id == standby.worker_id
    finally:
        for w in workers:
            w.stop()
        api.stop()
