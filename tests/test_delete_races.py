"""DeleteTask under concurrency: exactly one of several deletes of a task succeeds, and a
run racing a delete is a clean NOT_FOUND (no ERROR in the server log)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tests.harness import Server
from tickwork import Client, TickworkError
from tickwork.v1 import task_pb2, task_pb2_grpc

ROUNDS = 10
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
