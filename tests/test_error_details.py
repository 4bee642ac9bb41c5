"""Every error the service sends carries ``google.rpc.Status`` details (AIP-193): an
ErrorInfo reason code, a BadRequest field violation on INVALID_ARGUMENT, a ResourceInfo on
NOT_FOUND / ALREADY_EXISTS, a RetryInfo on UNAVAILABLE; and the SDK exposes them.

The cases are test_bad_input's: each one's details are checked here, read both through the
SDK's exceptions and raw from the trailer with ``grpc_status.rpc_status``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import _async as rpc_status_aio
from grpc_status import rpc_status

from tests.harness import Server
from tests.test_bad_input import BAD_STREAMS, CASES, shared_seeded  # noqa: F401 (fixture)
from tickwork import Client, Reason, TickworkError
from tickwork.reasons import DOMAIN

TASK, SCHEDULE, JOB = "tickwork.v1.Task", "tickwork.v1.Schedule", "tickwork.v1.Job"

#: Per test_bad_input case: (reason, field, resource type) the server sends, or None for a
#: case the SDK refuses itself before any call (it has no server details to carry).
EXPECTED: dict[str, tuple[Reason, str, str] | None] = {
    "integer param a double cannot hold": None,
    "integer param a double cannot hold, in an update": None,
    "param value of a type JSON lacks": None,
    "param key that is not a string": None,
    "max_attempts 0": None,
    "backoff base 0, in an update": None,
    "job id beyond int64": None,
    "task id beyond int64": None,
    "task name of the wrong type": None,
    "params nested past protobuf's depth": None,
    "task priority beyond int32": None,
    "task name that is not Unicode text": None,
    "interval beyond int64 on update": None,
    "cron preview count beyond int32": None,
    "cron preview from a string instant": None,
    "schedule without timing": None,
    "interval set to zero on update": (Reason.FIELD_INVALID, "schedule.interval_seconds", ""),
    "unknown task id": (Reason.TASK_NOT_FOUND, "task_ids[0]", TASK),
    "unknown task name": (Reason.TASK_NOT_FOUND, "task_names[0]", TASK),
    "empty task name": (Reason.FIELD_REQUIRED, "task.name", ""),
    "duplicate task name": (Reason.TASK_NAME_TAKEN, "task.name", TASK),
    "unknown handler": (Reason.HANDLER_UNKNOWN, "task.handler", ""),
    "shell without argv": (Reason.PARAMS_INVALID, "task.params", ""),
    "oversized schedule description": (Reason.FIELD_INVALID, "schedule.description", ""),
    "oversized task description": (Reason.FIELD_INVALID, "task.description", ""),
    "invalid cron": (Reason.CRON_INVALID, "schedule.cron_expression", ""),
    "never-firing cron": (Reason.CRON_NEVER_FIRES, "schedule.cron_expression", ""),
    "unknown timezone": (Reason.TIMEZONE_UNKNOWN, "schedule.timezone", ""),
    "duplicate schedule name": (Reason.SCHEDULE_NAME_TAKEN, "schedule.name", SCHEDULE),
    "schedule without tasks": (Reason.FIELD_REQUIRED, "schedule.task_ids", ""),
    "schedule with more tasks than a message holds": (
        Reason.TOO_MANY_ITEMS,
        "schedule.task_ids",
        "",
    ),
    "update to more tasks than a message holds": (Reason.TOO_MANY_ITEMS, "schedule.task_ids", ""),
    "batch whose reply would not fit in a message": (Reason.TOO_MANY_ITEMS, "requests", ""),
    "a run of more tasks than a reply holds": (Reason.TOO_MANY_ITEMS, "task_ids", ""),
    "a run of more task names than a reply holds": (Reason.TOO_MANY_ITEMS, "task_names", ""),
    "an abort of more tasks than a reply holds": (Reason.TOO_MANY_ITEMS, "task_ids", ""),
    "bad update of cron": (Reason.CRON_INVALID, "schedule.cron_expression", ""),
    "cancel unknown job": (Reason.JOB_NOT_FOUND, "job_id", JOB),
    "get unknown job": (Reason.JOB_NOT_FOUND, "job_id", JOB),
    "bad cron preview": (Reason.CRON_NEVER_FIRES, "cron_expression", ""),
    "huge interval": (Reason.FIELD_INVALID, "schedule.interval_seconds", ""),
    "NaN in params": (Reason.FIELD_INVALID, "task.params", ""),
    "NUL in a description": (Reason.FIELD_INVALID, "task.description", ""),
    "NUL in a lookup name": (Reason.FIELD_INVALID, "name", ""),
    "host-dependent zone": (Reason.TIMEZONE_UNKNOWN, "schedule.timezone", ""),
    "cron expression longer than its column": (
        Reason.FIELD_INVALID,
        "schedule.cron_expression",
        "",
    ),
    "cron expression longer than its column on update": (
        Reason.FIELD_INVALID,
        "schedule.cron_expression",
        "",
    ),
    "oversized name is not echoed whole": (Reason.TASK_NOT_FOUND, "name", TASK),
}


def test_every_bad_input_case_has_its_expected_details() -> None:
    assert set(EXPECTED) == {c[0] for c in CASES}


def unpack(status: status_pb2.Status) -> dict[str, Any]:
    """The details of ``status`` by kind: info, bad_request, resource, retry."""
    kinds = {
        "info": error_details_pb2.ErrorInfo,
        "bad_request": error_details_pb2.BadRequest,
        "resource": error_details_pb2.ResourceInfo,
        "retry": error_details_pb2.RetryInfo,
    }
    out: dict[str, Any] = {}
    for detail in status.details:
        for kind, cls in kinds.items():
            if detail.Is(cls.DESCRIPTOR):
                message = cls()
                detail.Unpack(message)
                assert kind not in out, f"two {kind} details"
                out[kind] = message
    assert len(out) == len(status.details), status
    return out


def check_status(
    status: status_pb2.Status | None,
    code: grpc.StatusCode,
    reason: Reason,
    field: str,
    resource_type: str = "",
) -> dict[str, Any]:
    """Assert ``status`` carries the details AIP-193 asks for a ``code`` error."""
    assert status is not None, "no grpc-status-details-bin trailer"
    assert status.code == code.value[0]
    got = unpack(status)
    assert got["info"].domain == DOMAIN
    assert got["info"].reason == reason
    assert got["info"].metadata.get("field", "") == field
    if code == grpc.StatusCode.INVALID_ARGUMENT and field:
        violations = got["bad_request"].field_violations
        assert [v.field for v in violations] == [field]
        assert violations[0].description
    else:
        assert "bad_request" not in got
    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS):
        assert got["resource"].resource_type == resource_type
        assert got["resource"].resource_name
    else:
        assert "resource" not in got
    assert ("retry" in got) == (code == grpc.StatusCode.UNAVAILABLE)
    return got


@pytest.mark.parametrize(("what", "call", "code", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_errors_carry_their_details_to_the_sdk(
    shared_seeded: tuple[Server, Client],  # noqa: F811
    what: str,
    call: Callable[[Client], object],
    code: grpc.StatusCode,
    field: str,
) -> None:
    _, client = shared_seeded
    with pytest.raises(TickworkError) as info:
        call(client)
    err = info.value
    expected = EXPECTED[what]
    if expected is None:  # refused by the SDK itself
        assert (err.reason, err.field_violations, err.resource) == ("", (), None)
        return
    reason, path, resource_type = expected
    assert err.code == code
    assert err.reason == reason
    assert err.field == path
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert [v.field for v in err.field_violations] == [path]
        assert err.details == f"{path}: {err.field_violations[0].description}"
        assert err.resource is None
    else:
        assert err.field_violations == ()
        assert err.resource is not None and err.resource.type == resource_type
    assert err.retry_delay is None


def raw_status(server: Server, call: Callable[[grpc.Channel], object]) -> Any:
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as info:
        call(channel)
    return info.value


def test_raw_calls_read_details_with_grpc_status(
    shared_seeded: tuple[Server, Client],  # noqa: F811
) -> None:
    """What any gRPC client sees: the same details through grpc_status.rpc_status.from_call,
    whose message and code agree with the call's."""
    from tickwork.v1 import job_pb2, job_pb2_grpc, task_pb2, task_pb2_grpc

    server, client = shared_seeded
    existing = client.get_task("existing").id
    cases: list[tuple[Callable[[grpc.Channel], object], grpc.StatusCode, Reason, str, str]] = [
        (
            lambda ch: task_pb2_grpc.TaskServiceStub(ch).RunTasks(
                task_pb2.RunTasksRequest(task_names=["existing", "nope"])
            ),
            grpc.StatusCode.NOT_FOUND,
            Reason.TASK_NOT_FOUND,
            "task_names[1]",
            TASK,
        ),
        (
            lambda ch: task_pb2_grpc.TaskServiceStub(ch).RunTasks(
                task_pb2.RunTasksRequest(task_ids=[existing, 987654])
            ),
            grpc.StatusCode.NOT_FOUND,
            Reason.TASK_NOT_FOUND,
            "task_ids[1]",
            TASK,
        ),
        (
            lambda ch: job_pb2_grpc.JobServiceStub(ch).ListJobs(
                job_pb2.ListJobsRequest(page_token="nope")
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            Reason.PAGE_TOKEN_INVALID,
            "page_token",
            "",
        ),
        (
            lambda ch: job_pb2_grpc.JobServiceStub(ch).GetJob(job_pb2.GetJobRequest()),
            grpc.StatusCode.INVALID_ARGUMENT,
            Reason.FIELD_REQUIRED,
            "job_id",
            "",
        ),
        (
            lambda ch: task_pb2_grpc.TaskServiceStub(ch).UpdateTask(
                task_pb2.UpdateTaskRequest(
                    task=task_pb2.Task(id=existing), update_mask={"paths": ["id"]}
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            Reason.UPDATE_MASK_INVALID,
            "update_mask",
            "",
        ),
        (
            lambda ch: ch.unary_unary("/tickwork.v1.TaskService/CreateTask", None, None)(
                b"\x0a\xff\xff", timeout=10
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            Reason.REQUEST_UNDECODABLE,
            "request",
            "",
        ),
    ]
    for call, code, reason, field, resource_type in cases:
        err = raw_status(server, call)
        assert err.code() == code, err
        check_status(rpc_status.from_call(err), code, reason, field, resource_type)


def test_a_watch_or_an_enum_error_carries_details_too(
    shared_seeded: tuple[Server, Client],  # noqa: F811
) -> None:
    from tickwork.v1 import job_pb2, job_pb2_grpc, queue_pb2, queue_pb2_grpc

    server, client = shared_seeded
    existing = client.get_task("existing").id
    err = raw_status(
        server,
        lambda ch: list(
            job_pb2_grpc.JobServiceStub(ch).WatchJob(job_pb2.WatchJobRequest(job_id=5555))
        ),
    )
    check_status(
        rpc_status.from_call(err), grpc.StatusCode.NOT_FOUND, Reason.JOB_NOT_FOUND, "job_id", JOB
    )
    err = raw_status(
        server,
        lambda ch: queue_pb2_grpc.QueueServiceStub(ch).Enqueue(
            queue_pb2.EnqueueRequest(task_ids=[existing])
        ),
    )
    # The internal QueueService answers only the service itself, with a reason too.
    check_status(
        rpc_status.from_call(err),
        grpc.StatusCode.UNAUTHENTICATED,
        Reason.TOKEN_REQUIRED,
        "",
    )


async def _stream_error(
    server: Server, messages: list[dict[str, dict[str, Any]]]
) -> status_pb2.Status | None:
    from tests.queue_helpers import DEADLINE_S, Request, raw_worker

    kinds = {"hello": Request.Hello, "outcome": Request.Outcome, "log_lines": Request.LogLines}
    async with raw_worker(server.address, "details") as w:
        for message in messages:
            await w.send(**{kind: kinds[kind](**fields) for kind, fields in message.items()})
        await asyncio.wait_for(w.call.code(), DEADLINE_S)
        return await rpc_status_aio.from_call(w.call)


@pytest.mark.parametrize(
    ("what", "messages", "code", "field"), BAD_STREAMS, ids=[c[0] for c in BAD_STREAMS]
)
def test_a_worker_stream_ends_with_details(
    shared_seeded: tuple[Server, Client],  # noqa: F811
    what: str,
    messages: list[dict[str, dict[str, Any]]],
    code: grpc.StatusCode,
    field: str,
) -> None:
    server, _ = shared_seeded
    status = asyncio.run(_stream_error(server, messages))
    path = field.split(":")[0]
    reason = (
        Reason.FAILED_PRECONDITION
        if code == grpc.StatusCode.FAILED_PRECONDITION
        else Reason.FIELD_INVALID
    )
    check_status(status, code, reason, path)


def test_unavailable_carries_retry_info_and_internal_a_reason() -> None:
    from sqlalchemy.exc import OperationalError

    from scheduler_svc.errors import StorageError
    from scheduler_svc.servicers._errors import DETAILS_KEY, RETRY_DELAY_S, translate

    for err in (
        OperationalError("SELECT 1", {}, Exception()),
        StorageError("database unavailable; the server log has the details"),
    ):
        code, message, trailers = translate(err, "TaskServicer.GetTask")
        assert code == grpc.StatusCode.UNAVAILABLE
        [(key, value)] = trailers
        assert key == DETAILS_KEY
        status = status_pb2.Status.FromString(value)
        assert status.message == message
        got = check_status(status, code, Reason.DATABASE_UNAVAILABLE, "")
        assert got["retry"].retry_delay.ToTimedelta().total_seconds() == RETRY_DELAY_S
    code, _, trailers = translate(ZeroDivisionError("x"), "TaskServicer.GetTask")
    check_status(status_pb2.Status.FromString(trailers[0][1]), code, Reason.INTERNAL, "")
