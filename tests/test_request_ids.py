"""request_id (AIP-155): a call repeated with the same id within 24 hours gets the first
answer, marked repeated_request, and does nothing; the same id on another request is
INVALID_ARGUMENT naming request_id. The answer is stored in the database with the effect."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tests.databases import run_sql
from tests.harness import Server
from tickwork import Client, Reason, from_rpc_error
from tickwork.v1 import (
    common_pb2,
    job_pb2,
    schedule_pb2,
    schedule_pb2_grpc,
    task_pb2,
    task_pb2_grpc,
)


@pytest.fixture
def channel(api_server: Server) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(api_server.address) as ch:
        yield ch


def job_count(server: Server) -> int:
    return int(run_sql(server.database_url, "SELECT count(*) FROM jobs")[0][0])


def test_a_repeated_run_returns_the_first_answer_and_runs_nothing(
    api_server: Server, api_client: Client, channel: grpc.Channel
) -> None:
    api_client.create_task("report", "shell", {"argv": ["true"]})
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    rid = str(uuid.uuid4())
    request = task_pb2.RunTasksRequest(task_names=["report"], request_id=rid)
    first = tasks.RunTasks(request, timeout=10)
    assert not first.repeated_request and first.runs[0].job_id
    # The first job ends (a plain run would now start another): the repeat still does not.
    api_client.cancel_job(first.runs[0].job_id)
    again = tasks.RunTasks(request, timeout=10)
    assert again.repeated_request
    assert list(again.runs) == list(first.runs)
    assert job_count(api_server) == 1
    # The same id on another request: refused, nothing run.
    with pytest.raises(grpc.RpcError) as info:
        tasks.RunTasks(
            task_pb2.RunTasksRequest(
                task_names=["report"], trigger=common_pb2.TRIGGER_MANUAL, request_id=rid
            ),
            timeout=10,
        )
    err = from_rpc_error(info.value)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.field, err.reason) == ("request_id", Reason.REQUEST_ID_REUSED)
    assert job_count(api_server) == 1
    # The SDK passes one through.
    via_sdk = api_client.run("report", request_id="sdk")
    assert api_client.run("report", request_id="sdk") == via_sdk
    assert job_count(api_server) == 2
    # Another id runs again; without an id every call takes effect.
    other = tasks.RunTasks(task_pb2.RunTasksRequest(task_names=["report"], request_id="b"))
    assert not other.repeated_request and other.runs[0].job_id != first.runs[0].job_id


def test_the_answer_is_stored_with_the_effect_and_expires_after_a_day(
    api_server: Server, api_client: Client, channel: grpc.Channel
) -> None:
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    create = task_pb2.CreateTaskRequest(
        task=task_pb2.Task(name="once", handler="shell"), request_id="create-once"
    )
    create.task.params.update({"argv": ["true"]})
    # A call that fails stores nothing: the id may be used again.
    bad = task_pb2.CreateTaskRequest(
        task=task_pb2.Task(name="once", handler="teleport"), request_id="create-once"
    )
    with pytest.raises(grpc.RpcError):
        tasks.CreateTask(bad, timeout=10)
    assert run_sql(api_server.database_url, "SELECT count(*) FROM requests") == [(0,)]
    made = tasks.CreateTask(create, timeout=10)
    repeat = tasks.CreateTask(create, timeout=10)  # not ALREADY_EXISTS: the first answer
    assert repeat.repeated_request and repeat.task == made.task
    [(method, fingerprint)] = run_sql(
        api_server.database_url, "SELECT method, fingerprint FROM requests"
    )
    assert method == "TaskService/CreateTask" and len(fingerprint) == 64
    # A day later the id is forgotten: the call takes effect (here: the name is taken).
    old = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(hours=24, minutes=1)
    run_sql(api_server.database_url, "UPDATE requests SET created_at = :old", old=old)
    with pytest.raises(grpc.RpcError) as info:
        tasks.CreateTask(create, timeout=10)
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS


def test_concurrent_calls_with_one_id_run_once(
    api_server: Server, api_client: Client, channel: grpc.Channel
) -> None:
    names = [f"t{i}" for i in range(5)]
    for name in names:
        api_client.create_task(name, "shell", {"argv": ["true"]})
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    request = task_pb2.RunTasksRequest(task_names=names, request_id="together")
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: tasks.RunTasks(request, timeout=30), range(8)))
    assert sum(not a.repeated_request for a in answers) == 1
    assert len({tuple(r.job_id for r in a.runs) for a in answers}) == 1
    assert job_count(api_server) == len(names)


def test_aborts_and_schedule_creation_take_request_ids(
    api_server: Server, api_client: Client, channel: grpc.Channel
) -> None:
    task = api_client.create_task("t", "shell", {"argv": ["true"]})
    api_client.run(task.id)
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    abort = task_pb2.AbortTasksRequest(task_ids=[task.id], request_id="stop")
    first = tasks.AbortTasks(abort, timeout=10)
    assert first.aborts[0].action == task_pb2.TaskAbort.ACTION_CANCELLED
    api_client.run(task.id)  # queued again: a repeat of the abort must not cancel it
    again = tasks.AbortTasks(abort, timeout=10)
    assert again.repeated_request and list(again.aborts) == list(first.aborts)
    statuses = [j.status for j in api_client.list_jobs(task="t")]
    assert statuses.count(job_pb2.JOB_STATUS_QUEUED) == 1

    schedules = schedule_pb2_grpc.ScheduleServiceStub(channel)
    one = schedule_pb2.CreateScheduleRequest(
        schedule=schedule_pb2.Schedule(name="s", cron_expression="@daily", task_ids=[task.id]),
        request_id="sched",
    )
    made = schedules.CreateSchedule(one, timeout=10)
    repeat = schedules.CreateSchedule(one, timeout=10)
    assert repeat.repeated_request and repeat.schedule == made.schedule
    batch = schedule_pb2.BatchCreateSchedulesRequest(
        requests=[
            schedule_pb2.CreateScheduleRequest(
                schedule=schedule_pb2.Schedule(
                    name=f"b{i}", cron_expression="@hourly", task_ids=[task.id]
                )
            )
            for i in range(3)
        ],
        request_id="batch",
    )
    made_batch = schedules.BatchCreateSchedules(batch, timeout=10)
    repeat_batch = schedules.BatchCreateSchedules(batch, timeout=10)
    assert repeat_batch.repeated_request
    assert list(repeat_batch.schedules) == list(made_batch.schedules)
    names = [s.name for s in api_client.list_schedules()]
    assert sorted(n for n in names if n in {"s", "b0", "b1", "b2"}) == ["b0", "b1", "b2", "s"]
    # An item's own request_id is refused: the batch's covers it.
    batch.request_id = "batch-2"
    batch.requests[0].request_id = "item"
    with pytest.raises(grpc.RpcError) as info:
        schedules.BatchCreateSchedules(batch, timeout=10)
    assert from_rpc_error(info.value).field == "requests[0].request_id"
