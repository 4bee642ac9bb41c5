"""Update masks per AIP-134, as any gRPC client sends them (raw stubs, and grpcurl's JSON).

No mask updates the fields the request populates; ``*`` replaces every writable field;
nested paths (``retry_policy.max_attempts``) write that field alone; a path naming an
output-only field is INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from tests.harness import REPO, Server
from tests.test_grpcurl import grpcurl
from tickwork import Client, Reason, from_rpc_error
from tickwork.v1 import schedule_pb2, schedule_pb2_grpc, task_pb2, task_pb2_grpc


@pytest.fixture
def stubs(
    api_server: Server,
) -> Iterator[tuple[task_pb2_grpc.TaskServiceStub, schedule_pb2_grpc.ScheduleServiceStub]]:
    with grpc.insecure_channel(api_server.address) as channel:
        yield task_pb2_grpc.TaskServiceStub(channel), schedule_pb2_grpc.ScheduleServiceStub(channel)


def tuned_task(client: Client, name: str = "tuned") -> task_pb2.Task:
    return client.create_task(
        name,
        "shell",
        {"argv": ["true"]},
        description="keeps its settings",
        task_priority=7,
        timeout_seconds=30,
        max_attempts=5,
        backoff_base_seconds=20,
        backoff_cap_seconds=300,
    )


def update(
    tasks: task_pb2_grpc.TaskServiceStub, task: task_pb2.Task, paths: list[str] | None = None
) -> task_pb2.Task:
    request = task_pb2.UpdateTaskRequest(task=task)
    if paths is not None:
        request.update_mask.CopyFrom(FieldMask(paths=paths))
    return tasks.UpdateTask(request, timeout=10).task


def settings(task: task_pb2.Task) -> tuple[object, ...]:
    rp = task.retry_policy
    return (
        task.name,
        task.description,
        task.handler,
        task.task_priority,
        task.enabled,
        task.timeout_seconds,
        rp.max_attempts,
        rp.backoff_base_seconds,
        rp.backoff_cap_seconds,
    )


def test_an_update_without_a_mask_changes_only_the_sent_fields(
    api_client: Client, stubs: tuple[task_pb2_grpc.TaskServiceStub, object]
) -> None:
    tasks, _ = stubs
    task = tuned_task(api_client)
    before = settings(task)
    after = update(tasks, task_pb2.Task(id=task.id, enabled=False))
    assert after.enabled is False
    assert settings(after)[:4] == before[:4] and settings(after)[5:] == before[5:]
    assert (after.task_priority, after.retry_policy.max_attempts) == (7, 5)
    assert api_client.get_task(task.id) == after

    # A set message field writes its populated fields only: the rest of the policy stays.
    after = update(
        tasks, task_pb2.Task(id=task.id, retry_policy=task_pb2.RetryPolicy(max_attempts=9))
    )
    assert (after.retry_policy.max_attempts, after.retry_policy.backoff_base_seconds) == (9, 20)
    assert after.retry_policy.backoff_cap_seconds == 300 and after.task_priority == 7

    # Output-only fields a read-modify-write client sends back are ignored without a mask.
    echoed = task_pb2.Task()
    echoed.CopyFrom(after)
    echoed.description = "changed"
    echoed.consecutive_failure_count = 42
    echoed.disabled_reason = "made up"
    after = update(tasks, echoed)
    assert after.description == "changed"
    assert (after.consecutive_failure_count, after.disabled_reason) == (0, "")

    # Nothing writable populated: refused, not a silent no-op.
    with pytest.raises(grpc.RpcError) as err:
        update(tasks, task_pb2.Task(id=task.id))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert from_rpc_error(err.value).reason == Reason.UPDATE_MASK_INVALID


def test_nested_paths_write_one_field_of_the_policy(
    api_client: Client, stubs: tuple[task_pb2_grpc.TaskServiceStub, object]
) -> None:
    tasks, _ = stubs
    task = tuned_task(api_client)
    sent = task_pb2.Task(
        id=task.id,
        task_priority=1,
        retry_policy=task_pb2.RetryPolicy(max_attempts=3, backoff_base_seconds=1),
    )
    after = update(tasks, sent, ["retry_policy.max_attempts"])
    assert after.retry_policy.max_attempts == 3
    assert (after.retry_policy.backoff_base_seconds, after.task_priority) == (20, 7)
    # The whole message path replaces the policy, unset fields taking their defaults.
    after = update(tasks, sent, ["retry_policy"])
    rp = after.retry_policy
    assert (rp.max_attempts, rp.backoff_base_seconds, rp.backoff_cap_seconds) == (3, 1, 600)
    # A field set alone is checked against the stored rest: a cap below the stored base.
    low_cap = task_pb2.Task(id=task.id, retry_policy=task_pb2.RetryPolicy(backoff_cap_seconds=0.5))
    with pytest.raises(grpc.RpcError) as err:
        update(tasks, low_cap, ["retry_policy.backoff_cap_seconds"])
    error = from_rpc_error(err.value)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.field == "task.retry_policy.backoff_cap_seconds"
    assert settings(api_client.get_task(task.id)) == settings(after)


def test_a_wildcard_replaces_every_writable_field(
    api_client: Client, stubs: tuple[task_pb2_grpc.TaskServiceStub, object]
) -> None:
    tasks, _ = stubs
    task = tuned_task(api_client)
    replacement = task_pb2.Task(id=task.id, name="tuned", handler="shell")
    replacement.params.update({"argv": ["false"]})
    after = update(tasks, replacement, ["*"])
    assert settings(after) == ("tuned", "", "shell", 100, True, 0, 1, 10, 600)
    with pytest.raises(grpc.RpcError) as err:
        update(tasks, replacement, ["*", "name"])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "path", ["id", "consecutive_failure_count", "create_time", "retry_policy.nope", "nope"]
)
def test_a_mask_naming_an_output_only_or_unknown_field_is_invalid_argument(
    api_client: Client, stubs: tuple[task_pb2_grpc.TaskServiceStub, object], path: str
) -> None:
    tasks, _ = stubs
    task = tuned_task(api_client)
    with pytest.raises(grpc.RpcError) as err:
        update(tasks, task_pb2.Task(id=task.id, description="x"), [path])
    error = from_rpc_error(err.value)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.field, error.reason) == ("update_mask", Reason.UPDATE_MASK_INVALID)
    assert path in error.details
    assert api_client.get_task(task.id) == task


def test_a_schedule_update_without_a_mask_keeps_what_it_does_not_send(
    api_client: Client,
    stubs: tuple[object, schedule_pb2_grpc.ScheduleServiceStub],
) -> None:
    _, schedules = stubs
    task = tuned_task(api_client)
    made = api_client.create_schedule(
        "nightly",
        [task.id],
        cron="0 2 * * *",
        timezone="Europe/Berlin",
        catch_up_policy="RUN_ONCE",
        description="at two",
    )
    after = schedules.UpdateSchedule(
        schedule_pb2.UpdateScheduleRequest(
            schedule=schedule_pb2.Schedule(id=made.id, enabled=False, description="paused")
        ),
        timeout=10,
    ).schedule
    assert (after.enabled, after.description) == (False, "paused")
    assert (after.cron_expression, after.timezone) == ("0 2 * * *", "Europe/Berlin")
    assert after.catch_up_policy == schedule_pb2.CATCH_UP_POLICY_RUN_ONCE
    assert list(after.task_ids) == [task.id]


def test_grpcurl_sends_a_mask_as_an_object_with_paths(
    api_server: Server, api_client: Client
) -> None:
    """grpcurl 1.8 reads a FieldMask as ``{"paths": [...]}`` (the form docs/api.md shows),
    and also sends no mask at all: only the populated fields change."""
    task = tuned_task(api_client)
    masked = {
        "task": {"id": str(task.id), "description": "via grpcurl", "taskPriority": 1},
        "update_mask": {"paths": ["description"]},
    }
    out = grpcurl(
        "-d", json.dumps(masked), api_server.address, "tickwork.v1.TaskService/UpdateTask"
    )
    assert out.returncode == 0, out.stderr
    unmasked = {"task": {"id": str(task.id), "enabled": False}}
    out = grpcurl(
        "-d", json.dumps(unmasked), api_server.address, "tickwork.v1.TaskService/UpdateTask"
    )
    assert out.returncode == 0, out.stderr
    after = api_client.get_task(task.id)
    assert (after.description, after.task_priority, after.enabled) == ("via grpcurl", 7, False)
    assert after.retry_policy.max_attempts == 5


BUF = REPO / ".ci" / "node" / "node_modules" / ".bin" / "buf"


@pytest.mark.skipif(not BUF.exists(), reason="buf is installed by .ci/run into .ci/node")
def test_buf_curl_sends_a_mask_as_a_string_of_paths(api_server: Server, api_client: Client) -> None:
    """buf curl follows the canonical proto3 JSON mapping: ``"updateMask": "a,b"`` with
    lowerCamelCase paths; the object form grpcurl wants is a syntax error there."""
    task = tuned_task(api_client)
    url = f"http://{api_server.address}/tickwork.v1.TaskService/UpdateTask"

    def buf_curl(mask: str) -> subprocess.CompletedProcess[str]:
        body = (
            f'{{"task": {{"id": "{task.id}", "description": "via buf", "taskPriority": 1, '
            f'"retryPolicy": {{"maxAttempts": 3}}}}, "updateMask": {mask}}}'
        )
        args = [str(BUF), "curl", "--protocol", "grpc", "--http2-prior-knowledge", "-d", body, url]
        return subprocess.run(args, capture_output=True, text=True, timeout=60)

    out = buf_curl('"description,retryPolicy.maxAttempts"')
    assert out.returncode == 0, out.stderr
    after = api_client.get_task(task.id)
    assert (after.description, after.retry_policy.max_attempts) == ("via buf", 3)
    assert (after.task_priority, after.retry_policy.backoff_base_seconds) == (7, 20)
    refused = buf_curl('{"paths": ["description"]}')
    assert refused.returncode != 0 and "syntax error" in refused.stderr
