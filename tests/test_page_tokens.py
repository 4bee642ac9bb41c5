"""Page tokens are opaque and bound to the request they continue (AIP-158): a token reused
with another filter, on another listing, edited or made up is INVALID_ARGUMENT naming
page_token; with the same filter (page_size may change) it continues the listing."""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from tests.harness import Server, wait_for
from tickwork import Client, Reason, from_rpc_error
from tickwork.v1 import (
    job_pb2,
    job_pb2_grpc,
    schedule_pb2,
    schedule_pb2_grpc,
    task_pb2,
    task_pb2_grpc,
)


@pytest.fixture
def channel(api_server: Server) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(api_server.address) as ch:
        yield ch


def refused(call: Callable[[], Any]) -> str:
    """Call, expect INVALID_ARGUMENT on page_token; return the message."""
    with pytest.raises(grpc.RpcError) as info:
        call()
    err = from_rpc_error(info.value)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT, err
    assert (err.field, err.reason) == ("page_token", Reason.PAGE_TOKEN_INVALID)
    assert [v.field for v in err.field_violations] == ["page_token"]
    return err.details


def test_a_jobs_token_is_refused_with_another_filter(
    api_client: Client, channel: grpc.Channel
) -> None:
    first = api_client.create_task("first", "shell", {"argv": ["true"]})
    second = api_client.create_task("second", "shell", {"argv": ["true"]})
    for _ in range(3):
        api_client.run(first.id, second.id)
        for job in api_client.list_jobs():
            if job.status == job_pb2.JOB_STATUS_QUEUED:
                api_client.cancel_job(job.id)
    jobs = job_pb2_grpc.JobServiceStub(channel)
    page = jobs.ListJobs(job_pb2.ListJobsRequest(task_id=first.id, page_size=2))
    assert len(page.jobs) == 2 and page.next_page_token
    token = page.next_page_token
    assert str(page.jobs[-1].id) not in base64.urlsafe_b64decode(token + "==").decode()

    # The same filter continues, page_size may change.
    rest = jobs.ListJobs(job_pb2.ListJobsRequest(task_id=first.id, page_size=5, page_token=token))
    assert [j.task_id for j in rest.jobs] == [first.id] and not rest.next_page_token

    for other in (
        job_pb2.ListJobsRequest(task_id=second.id, page_token=token),
        job_pb2.ListJobsRequest(page_token=token),
        job_pb2.ListJobsRequest(
            task_id=first.id, statuses=[job_pb2.JOB_STATUS_CANCELLED], page_token=token
        ),
    ):
        message = refused(functools.partial(jobs.ListJobs, other))
        assert message.startswith("page_token: was made for another request")

    # Another listing's request refuses it too.
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    refused(lambda: tasks.ListTasks(task_pb2.ListTasksRequest(page_token=token)))


def test_name_listings_bind_their_tokens_too(api_client: Client, channel: grpc.Channel) -> None:
    for i in range(3):
        task = api_client.create_task(f"t{i}", "shell", {"argv": ["true"]})
        api_client.create_schedule(f"s{i}", [task.id], cron="@daily")
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    schedules = schedule_pb2_grpc.ScheduleServiceStub(channel)
    task_token = tasks.ListTasks(task_pb2.ListTasksRequest(page_size=1)).next_page_token
    schedule_token = schedules.ListSchedules(
        schedule_pb2.ListSchedulesRequest(page_size=1)
    ).next_page_token
    rest = tasks.ListTasks(task_pb2.ListTasksRequest(page_token=task_token))
    assert [t.name for t in rest.tasks][:2] == ["t1", "t2"]
    refused(
        lambda: schedules.ListSchedules(schedule_pb2.ListSchedulesRequest(page_token=task_token))
    )
    refused(lambda: tasks.ListTasks(task_pb2.ListTasksRequest(page_token=schedule_token)))


def test_a_fires_token_is_bound_to_its_schedule(api_client: Client, channel: grpc.Channel) -> None:
    task = api_client.create_task("t", "shell", {"argv": ["true"]})
    # Schedule one fires every second (the service's scheduler loop records its fires; the
    # internal QueueService takes no fire from outside), until it has three.
    one = api_client.create_schedule("one", [task.id], cron="* * * * * *")
    two = api_client.create_schedule("two", [task.id], cron="@daily")
    wait_for(lambda: len(api_client.list_fires(one.id)) >= 3, timeout_s=30, what="three fires")
    api_client.update_schedule(one.id, enabled=False)
    fires = api_client.list_fires(one.id)
    schedules = schedule_pb2_grpc.ScheduleServiceStub(channel)
    page = schedules.ListFires(schedule_pb2.ListFiresRequest(schedule_id=one.id, page_size=2))
    assert len(page.fires) == 2 and page.next_page_token
    rest = schedules.ListFires(
        schedule_pb2.ListFiresRequest(schedule_id=one.id, page_token=page.next_page_token)
    )
    assert len(rest.fires) == len(fires) - 2
    assert rest.fires[-1].fire_time == fires[-1].fire_time  # the oldest
    refused(
        lambda: schedules.ListFires(
            schedule_pb2.ListFiresRequest(schedule_id=two.id, page_token=page.next_page_token)
        )
    )


def test_an_edited_or_made_up_token_is_refused(api_client: Client, channel: grpc.Channel) -> None:
    api_client.create_task("a", "shell", {"argv": ["true"]})
    api_client.create_task("b", "shell", {"argv": ["true"]})
    tasks = task_pb2_grpc.TaskServiceStub(channel)
    token = tasks.ListTasks(task_pb2.ListTasksRequest(page_size=1)).next_page_token
    _, digest, check = base64.urlsafe_b64decode(token + "==").decode().split(".")
    # Skip ahead by editing the position, keeping the filter and check of a real token.
    moved = base64.urlsafe_b64encode(b"zzz").decode().rstrip("=")
    edited = base64.urlsafe_b64encode(f"{moved}.{digest}.{check}".encode()).decode()
    forged = [edited, "YWZ0ZXI6YQ==", "a", token[:-2], token + "x", "after:a"]
    for bad in forged:
        message = refused(
            functools.partial(tasks.ListTasks, task_pb2.ListTasksRequest(page_token=bad))
        )
        assert message.startswith("page_token: malformed"), bad
