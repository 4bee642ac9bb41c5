"""DeleteTask under concurrency: exactly one of several deletes of a task succeeds, and a
run racing a delete is a clean NOT_FOUND (no ERROR in the server log)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from scheduler_svc.db import Database
from scheduler_svc.errors import FailedPrecondition
from scheduler_svc.schema import jobs
from scheduler_svc.store import Store
from scheduler_svc.values import JobStatus, Trigger
from tests.harness import Server
from tests.queue_helpers import eventually
from tickwork import Client, TickworkError
from tickwork.v1 import task_pb2, task_pb2_grpc

ROUNDS = 10
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=dt.UTC)
THREADS = 8


def _race(server: Server, calls: list[tuple[str, object]]) -> list[grpc.StatusCode]:
    """Start every call at once (one channel per thread); the status code of each."""
    barrier = threading.Barrier(len(calls))

    def one(call: tuple[str, object]) -> grpc.StatusCode:
        method, request = call
        with grpc.insecure_channel(server.address) as channel:
            stub = task_pb2_grpc.TaskServiceStub(channel)
            rpc = getattr(stub, method)
            channel_ready = grpc.channel_ready_future(channel)
            channel_ready.result(timeout=10)
            barrier.wait(timeout=10)
            try:
                rpc(request, timeout=20)
            except grpc.RpcError as err:
                return err.code()
            return grpc.StatusCode.OK

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(one, calls))


def test_concurrent_deletes_of_one_task_succeed_once(
    api_server: Server, api_client: Client
) -> None:
    for i in range(ROUNDS):
        task = api_client.create_task(f"doomed-{i}", "shell", {"argv": ["true"]})
        api_client.run(task.id)  # a queued job to delete with it
        codes = _race(
            api_server,
            [("DeleteTask", task_pb2.DeleteTaskRequest(task_id=task.id))] * THREADS,
        )
        assert codes.count(grpc.StatusCode.OK) == 1, codes
        assert set(codes) == {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND}, codes
        with pytest.raises(TickworkError) as info:
            api_client.get_task(task.id)
        assert info.value.code == grpc.StatusCode.NOT_FOUND


def test_a_run_racing_a_delete_is_a_clean_not_found(api_server: Server, api_client: Client) -> None:
    for i in range(ROUNDS):
        task = api_client.create_task(f"raced-{i}", "shell", {"argv": ["true"]})
        calls: list[tuple[str, object]] = [
            ("DeleteTask", task_pb2.DeleteTaskRequest(task_id=task.id))
        ]
        calls += [("RunTasks", task_pb2.RunTasksRequest(task_ids=[task.id]))] * (THREADS - 1)
        codes = _race(api_server, calls)
        assert codes[0] in (grpc.StatusCode.OK, grpc.StatusCode.FAILED_PRECONDITION), codes
        assert set(codes[1:]) <= {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND}, codes
    log = api_server.output()
    assert " ERROR " not in log and "Traceback" not in log, log[-5000:]


async def test_a_delete_racing_the_claim_of_its_job_never_deletes_a_running_job(
    database: Database,
) -> None:
    # DeleteTask read "no running job", then deleted the task's jobs: a claim committed in
    # between (the worker had been handed the job) had its RUNNING job deleted under it,
    # and the task with it, contrary to "FAILED_PRECONDITION while a job runs".
    if not database.dialect.row_locks:
        pytest.skip("SQLite runs one write transaction at a time")
    s = Store(database)
    task = await s.create_task({"name": "t", "handler": "shell", "params": {}}, T0)
    (run,) = (await s.enqueue([task.id], Trigger.API, T0)).runs
    claimer = create_async_engine(database.url)
    try:
        async with claimer.connect() as conn, conn.begin() as tx:
            # A claim under way: the job is RUNNING in a transaction not committed yet.
            await conn.execute(
                jobs.update()
                .where(jobs.c.id == run.job_id)
                .values(status=JobStatus.RUNNING, started_at=T0, lease_token="t", worker_id="w")
            )
            delete = asyncio.ensure_future(s.delete_task(task.id))

            async def delete_waits() -> bool:
                count: int = await database.read(
                    lambda c: c.execute(
                        sa.text(
                            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type ="
                            " 'Lock' AND datname = current_database()"
                        )
                    ).scalar_one()
                )
                return count >= 1

            await eventually(delete_waits, what="the delete waiting on the claim")
            await tx.commit()
        with pytest.raises(FailedPrecondition) as info:
            await delete
    finally:
        await claimer.dispose()
    assert info.value.field == "task_id" and "running job" in str(info.value)
    assert (await s.get_job(run.job_id)).status == JobStatus.RUNNING
    assert (await s.get_task(task.id)).id == task.id
