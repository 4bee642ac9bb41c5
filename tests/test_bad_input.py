"""Bad input gets the right status, a message naming the field, and changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from tests.databases import BACKENDS, create_database, drop_database, run_sql
from tests.harness import Server
from tickwork import Client, TickworkError

TABLES = ("tasks", "schedules", "schedule_tasks", "jobs", "fires")


def snapshot(server: Server) -> dict[str, list[Any]]:
    return {t: run_sql(server.database_url, f"SELECT * FROM {t} ORDER BY 1, 2") for t in TABLES}


@pytest.fixture
def seeded(api_server: Server, api_client: Client) -> tuple[Server, Client]:
    task = api_client.create_task("existing", "shell", {"argv": ["true"]})
    api_client.create_schedule("nightly", [task.id], cron="0 2 * * *", timezone="Europe/Berlin")
    return api_server, api_client


@pytest.fixture(scope="module", params=BACKENDS)
def shared_seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Client]]:
    """One seeded API server per backend for every case below: each case checks that the
    database is unchanged around its own call, so the cases need no server of their own."""
    tmp = tmp_path_factory.mktemp(f"bad-input-{request.param}")
    url = create_database(request.param, tmp)
    try:
        srv = Server(tmp, env={"WORKER_IS_ENABLED": "false"}, name="api", database_url=url)
        try:
            srv.wait_healthy()
            with Client(srv.address) as client:
                task = client.create_task("existing", "shell", {"argv": ["true"]})
                client.create_schedule(
                    "nightly", [task.id], cron="0 2 * * *", timezone="Europe/Berlin"
                )
                yield srv, client
        finally:
            srv.stop()
    finally:
        drop_database(url)


def nested(depth: int) -> dict[str, Any]:
    """``{"x": {"x": ... {}}}``, ``depth`` objects deep."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


CASES: list[tuple[str, Callable[[Client], object], grpc.StatusCode, str]] = [
    (
        # A Struct holds numbers as doubles: 2**53 + 1 would arrive as 2**53, silently.
        "integer param a double cannot hold",
        lambda c: c.create_task(
            "x",
            "python",
            {"callable": "json:dumps", "kwargs": {"obj": [1, 2**53 + 1]}},
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.params: kwargs.obj[1]",
    ),
    (
        "param value of a type JSON lacks",
        lambda c: c.create_task(
            "x", "python", {"callable": "json:dumps", "kwargs": {"obj": [1, {"at": {3}}]}}
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.params: kwargs.obj[1].at: a value of type set is not JSON-representable",
    ),
    (
        "param key that is not a string",
        lambda c: c.update_task("existing", params={"argv": ["echo"], "env": {1: "x"}}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.params: env: the key 1 (int) is not JSON-representable",
    ),
    (
        "integer param a double cannot hold, in an update",
        lambda c: c.update_task(
            "existing", params={"argv": ["echo"], "timeout_seconds": -(10**17)}
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.params: timeout_seconds",
    ),
    (
        # 0 on the wire is "unset": the server would store the default, 1, silently.
        "max_attempts 0",
        lambda c: c.create_task("x", "shell", {"argv": ["true"]}, max_attempts=0),
        grpc.StatusCode.INVALID_ARGUMENT,
        "max_attempts: must be above 0",
    ),
    (
        "backoff base 0, in an update",
        lambda c: c.update_task("existing", backoff_base_seconds=0),
        grpc.StatusCode.INVALID_ARGUMENT,
        "backoff_base_seconds: must be above 0",
    ),
    (
        "job id beyond int64",
        lambda c: c.get_job(2**63),
        grpc.StatusCode.INVALID_ARGUMENT,
        "job_id",
    ),
    (
        "task id beyond int64",
        lambda c: c.run(2**63),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task",
    ),
    (
        "task name of the wrong type",
        lambda c: c.create_task(5, "shell", {"argv": ["true"]}),  # type: ignore[arg-type]
        grpc.StatusCode.INVALID_ARGUMENT,
        "name",
    ),
    (
        "params nested past protobuf's depth",
        lambda c: c.create_task("deep", "shell", {"argv": ["true"], "env": nested(40)}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "params",
    ),
    (
        "task priority beyond int32",
        lambda c: c.create_task("p", "shell", {"argv": ["true"]}, task_priority=2**40),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task_priority",
    ),
    (
        "task name that is not Unicode text",
        lambda c: c.create_task("a\udc80b", "shell", {"argv": ["true"]}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "name",
    ),
    (
        "interval beyond int64 on update",
        lambda c: c.update_schedule("nightly", interval_seconds=2**70),
        grpc.StatusCode.INVALID_ARGUMENT,
        "interval_seconds",
    ),
    (
        "cron preview count beyond int32",
        lambda c: c.describe_cron("* * * * *", count=2**40),
        grpc.StatusCode.INVALID_ARGUMENT,
        "count",
    ),
    (
        "cron preview from a string instant",
        lambda c: c.describe_cron("* * * * *", after="2026-01-01"),  # type: ignore[arg-type]
        grpc.StatusCode.INVALID_ARGUMENT,
        "after",
    ),
    (
        "interval set to zero on update",
        lambda c: c.update_schedule("nightly", interval_seconds=0),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.interval_seconds",
    ),
    ("unknown task id", lambda c: c.run(987654), grpc.StatusCode.NOT_FOUND, "task_ids"),
    ("unknown task name", lambda c: c.run("nope"), grpc.StatusCode.NOT_FOUND, "nope"),
    (
        "empty task name",
        lambda c: c.create_task("  ", "shell", {"argv": ["true"]}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.name",
    ),
    (
        "duplicate task name",
        lambda c: c.create_task("existing", "shell", {"argv": ["true"]}),
        grpc.StatusCode.ALREADY_EXISTS,
        "task.name",
    ),
    (
        "unknown handler",
        lambda c: c.create_task("x", "teleport", {}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.handler",
    ),
    (
        "shell without argv",
        lambda c: c.create_task("x", "shell", {}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.params",
    ),
    (
        "oversized schedule description",
        lambda c: c.create_schedule("s", ["existing"], cron="@daily", description="x" * 4001),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.description",
    ),
    (
        "oversized task description",
        lambda c: c.create_task("x", "shell", {"argv": ["true"]}, description="é" * 4001),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.description",
    ),
    (
        "invalid cron",
        lambda c: c.create_schedule("s", ["existing"], cron="61 * * * *"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.cron_expression",
    ),
    (
        "never-firing cron",
        lambda c: c.create_schedule("s", ["existing"], cron="0 0 30 2 *"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.cron_expression",
    ),
    (
        "unknown timezone",
        lambda c: c.create_schedule("s", ["existing"], cron="0 2 * * *", timezone="Mars/Olympus"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.timezone",
    ),
    (
        "duplicate schedule name",
        lambda c: c.create_schedule("nightly", ["existing"], cron="0 * * * *"),
        grpc.StatusCode.ALREADY_EXISTS,
        "schedule.name",
    ),
    (
        "schedule without tasks",
        lambda c: c.create_schedule("s", [], cron="0 * * * *"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.task_ids",
    ),
    (
        "schedule with more tasks than a message holds",
        lambda c: c.create_schedule("s", list(range(1, 1002)), cron="0 * * * *"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.task_ids: lists 1001 tasks; at most 1000",
    ),
    (
        "update to more tasks than a message holds",
        lambda c: c.update_schedule("nightly", tasks=list(range(1, 1002))),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.task_ids",
    ),
    (
        "batch whose reply would not fit in a message",
        lambda c: c.create_schedules(
            [{"name": f"b{i}", "tasks": [*range(1, 11)], "cron": "0 * * * *"} for i in range(1000)]
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "requests: the reply could reach",
    ),
    (
        "a run of more tasks than a reply holds",
        lambda c: c.run(*range(1, 1_002)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task_ids: names 1001 tasks; at most 1,000 a call",
    ),
    (
        "a run of more task names than a reply holds",
        lambda c: c.run(*[f"t{i}" for i in range(1_001)]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task_names: names 1001 tasks; at most 1,000 a call",
    ),
    (
        "an abort of more tasks than a reply holds",
        lambda c: c.abort(*range(1, 1_002)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task_ids: names 1001 tasks",
    ),
    (
        "schedule without timing",
        lambda c: c.create_schedule("s", ["existing"]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule",
    ),
    (
        "bad update of cron",
        lambda c: c.update_schedule("nightly", cron="* * * *"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.cron_expression",
    ),
    ("cancel unknown job", lambda c: c.cancel_job(5555), grpc.StatusCode.NOT_FOUND, "job_id"),
    ("get unknown job", lambda c: c.get_job(5555), grpc.StatusCode.NOT_FOUND, "job_id"),
    (
        "bad cron preview",
        lambda c: c.describe_cron("0 0 31 4 *"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "cron_expression",
    ),
    (
        "huge interval",
        lambda c: c.create_schedule("s", ["existing"], interval_seconds=10**12),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.interval_seconds",
    ),
    (
        "NaN in params",
        lambda c: c.create_task("x", "shell", {"argv": ["ls"], "timeout_seconds": float("nan")}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.params",
    ),
    (
        "NUL in a description",
        lambda c: c.create_task("x", "shell", {"argv": ["ls"]}, description="a\x00b"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.description",
    ),
    (
        "NUL in a lookup name",
        lambda c: c.get_task("a\x00"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "name",
    ),
    (
        "host-dependent zone",
        lambda c: c.create_schedule("s", ["existing"], cron="0 2 * * *", timezone="localtime"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.timezone",
    ),
    (
        # A valid expression longer than its column: PostgreSQL refused the INSERT
        # (UNAVAILABLE, "database error") and SQLite stored it.
        "cron expression longer than its column",
        lambda c: c.create_schedule("s", ["existing"], cron="0 0 * * " + ",".join(["1"] * 100)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.cron_expression: is 207 characters; at most 200",
    ),
    (
        "cron expression longer than its column on update",
        lambda c: c.update_schedule("nightly", cron="0 0 * * " + ",".join(["1"] * 100)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "schedule.cron_expression",
    ),
    (
        "oversized name is not echoed whole",
        lambda c: c.get_task("x" * 100_000),
        grpc.StatusCode.NOT_FOUND,
        "no task named",
    ),
]


def raw_call(server: Server, call: Callable[[grpc.Channel], object]) -> grpc.RpcError:
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as info:
        call(channel)
    return info.value


def test_huge_page_token_and_invalid_timestamps_are_invalid_argument(
    seeded: tuple[Server, Client],
) -> None:
    from google.protobuf.timestamp_pb2 import Timestamp

    from tickwork.v1 import job_pb2, job_pb2_grpc, schedule_pb2, schedule_pb2_grpc

    server, _ = seeded
    err = raw_call(
        server,
        lambda ch: job_pb2_grpc.JobServiceStub(ch).ListJobs(
            job_pb2.ListJobsRequest(page_token="9" * 30)
        ),
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in (err.details() or "")
    err = raw_call(
        server,
        lambda ch: schedule_pb2_grpc.ScheduleServiceStub(ch).DescribeCron(
            schedule_pb2.DescribeCronRequest(
                cron_expression="0 * * * *", after=Timestamp(seconds=0, nanos=-5)
            )
        ),
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "after" in (err.details() or "")


def test_name_ordered_listings_page_with_their_own_tokens_only(
    seeded: tuple[Server, Client],
) -> None:
    # A token is the service's own: a guessed or mistyped one is refused, not read as a
    # name to skip to (which silently skipped rows).
    from tickwork.v1 import schedule_pb2, schedule_pb2_grpc, task_pb2, task_pb2_grpc

    server, client = seeded
    for i in range(5):
        client.create_task(f"paged-{i}", "shell", {"argv": ["true"]})
    expected = sorted(t.name for t in client.list_tasks())
    with grpc.insecure_channel(server.address) as channel:
        tasks = task_pb2_grpc.TaskServiceStub(channel)
        schedules = schedule_pb2_grpc.ScheduleServiceStub(channel)
        seen, token = [], ""
        while True:
            page = tasks.ListTasks(task_pb2.ListTasksRequest(page_size=2, page_token=token))
            seen += [t.name for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        assert seen == expected
        for bad in ("paged-2", "zzz", "YWZ0ZXI", "!!", "\u00e9"):
            for call in (
                lambda t: tasks.ListTasks(task_pb2.ListTasksRequest(page_token=t)),
                lambda t: schedules.ListSchedules(schedule_pb2.ListSchedulesRequest(page_token=t)),
            ):
                with pytest.raises(grpc.RpcError) as err:
                    call(bad)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
                assert (err.value.details() or "").startswith("page_token: malformed")


def test_a_page_token_naming_a_nul_character_is_invalid_argument(
    shared_seeded: tuple[Server, Client],
) -> None:
    # A well-formed token of a name with a NUL in it: PostgreSQL cannot compare against a
    # NUL, and answered UNAVAILABLE ("database error") instead of refusing the token.
    import base64

    from tickwork.v1 import schedule_pb2, schedule_pb2_grpc, task_pb2, task_pb2_grpc

    server, _ = shared_seeded
    token = base64.urlsafe_b64encode(b"after:a\x00b").decode()
    for call in (
        lambda ch: task_pb2_grpc.TaskServiceStub(ch).ListTasks(
            task_pb2.ListTasksRequest(page_token=token)
        ),
        lambda ch: schedule_pb2_grpc.ScheduleServiceStub(ch).ListSchedules(
            schedule_pb2.ListSchedulesRequest(page_token=token)
        ),
    ):
        err = raw_call(server, call)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert (err.details() or "").startswith("page_token: malformed")


@pytest.mark.parametrize(("what", "call", "code", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_cleanly(
    shared_seeded: tuple[Server, Client],
    what: str,
    call: Callable[[Client], object],
    code: grpc.StatusCode,
    field: str,
) -> None:
    server, client = shared_seeded
    before = snapshot(server)
    with pytest.raises(TickworkError) as info:
        call(client)
    assert info.value.code == code, info.value
    assert field in info.value.details
    assert snapshot(server) == before


def test_unexpected_errors_never_reach_the_client_with_sql_or_tracebacks() -> None:
    from sqlalchemy.exc import IntegrityError

    from scheduler_svc.servicers._errors import translate

    db_error = IntegrityError("INSERT INTO tasks (name) VALUES ('SECRET-ARG')", {}, Exception())
    code, details, trailers = translate(db_error, "TaskServicer.CreateTask")
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "SECRET" not in details and "INSERT" not in details
    assert all(b"SECRET" not in value and b"INSERT" not in value for _, value in trailers)
    code, details, trailers = translate(
        ZeroDivisionError("boom at line 3"), "TaskServicer.CreateTask"
    )
    assert code == grpc.StatusCode.INTERNAL and "boom" not in details
    assert all(b"boom" not in value for _, value in trailers)


def test_an_unknown_catch_up_policy_is_named_once() -> None:
    from tickwork._requests import build_schedule

    with pytest.raises(TickworkError) as info:
        build_schedule(
            "s",
            [1],
            cron="* * * * *",
            interval_seconds=None,
            timezone="UTC",
            catch_up_policy="NEVER",
            description="",
            enabled=True,
        )
    assert str(info.value).count("INVALID_ARGUMENT") == 1, str(info.value)
    assert "catch_up_policy" in info.value.details


def _field(message: Any, name: str) -> int:
    return int(message.DESCRIPTOR.fields_by_name[name].number)


def _length_delimited(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _deep_struct(depth: int) -> bytes:
    """A google.protobuf.Struct nested ``depth`` objects deep, encoded by hand (protobuf's
    Python API refuses to build one past its depth limit; other clients need not)."""
    from google.protobuf import struct_pb2

    encoded = b""
    for _ in range(depth):
        value = _length_delimited(_field(struct_pb2.Value, "struct_value"), encoded)
        entry = _length_delimited(1, b"x") + _length_delimited(2, value)  # map key, value
        encoded = _length_delimited(_field(struct_pb2.Struct, "fields"), entry)
    return encoded


def test_requests_that_do_not_decode_are_invalid_argument(
    shared_seeded: tuple[Server, Client],
) -> None:
    """Bytes that are not the request message (garbage, or a Struct nested past
    protobuf's depth limit, as any gRPC client can send) get INVALID_ARGUMENT naming the
    request, on unary and streaming methods alike; never UNKNOWN, and nothing is written."""
    from tickwork.v1 import task_pb2

    server, _ = shared_seeded
    before = snapshot(server)
    task = _length_delimited(_field(task_pb2.Task, "name"), b"deep") + _length_delimited(
        _field(task_pb2.Task, "params"), _deep_struct(60)
    )
    deep_request = _length_delimited(_field(task_pb2.CreateTaskRequest, "task"), task)
    with grpc.insecure_channel(server.address) as channel:
        for method, payload in [
            ("/tickwork.v1.TaskService/CreateTask", b"\x0a\xff\xff"),
            ("/tickwork.v1.TaskService/CreateTask", deep_request),
            ("/tickwork.v1.JobService/WatchJob", b"\x08"),
        ]:
            if method.endswith("WatchJob"):
                call: Any = channel.unary_stream(method, None, None)
                outcome: Any = lambda p, call=call: list(call(p, timeout=10))  # noqa: E731
            else:
                call = channel.unary_unary(method, None, None)
                outcome = lambda p, call=call: call(p, timeout=10)  # noqa: E731
            with pytest.raises(grpc.RpcError) as err:
                outcome(payload)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, err.value)
            assert (err.value.details() or "").startswith("request: not a valid"), method
        connect = channel.stream_stream("/tickwork.v1.WorkerService/Connect", None, None)
        with pytest.raises(grpc.RpcError) as err:
            list(connect(iter([b"\x0a\xff"]), timeout=10))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert snapshot(server) == before


def test_enum_values_the_proto_does_not_define_are_invalid_argument(
    shared_seeded: tuple[Server, Client],
) -> None:
    """Any client can send any number for an enum field: an undefined one is
    INVALID_ARGUMENT naming the field (never INTERNAL from a failed enum lookup), and
    nothing is written."""
    from tickwork.v1 import (
        common_pb2,
        job_pb2,
        job_pb2_grpc,
        queue_pb2,
        queue_pb2_grpc,
        schedule_pb2,
        schedule_pb2_grpc,
        task_pb2,
        task_pb2_grpc,
    )

    server, client = shared_seeded
    task_id = client.get_task("existing").id
    before = snapshot(server)
    calls: list[tuple[str, Callable[[grpc.Channel], object]]] = [
        (
            "trigger",
            lambda ch: task_pb2_grpc.TaskServiceStub(ch).RunTasks(
                task_pb2.RunTasksRequest(task_ids=[task_id], trigger=99)  # type: ignore[arg-type]
            ),
        ),
        (
            "statuses",
            lambda ch: job_pb2_grpc.JobServiceStub(ch).ListJobs(
                job_pb2.ListJobsRequest(statuses=[99])  # type: ignore[list-item]
            ),
        ),
        (
            "schedule.catch_up_policy",
            lambda ch: schedule_pb2_grpc.ScheduleServiceStub(ch).CreateSchedule(
                schedule_pb2.CreateScheduleRequest(
                    schedule=schedule_pb2.Schedule(
                        name="odd-policy",
                        cron_expression="@daily",
                        task_ids=[task_id],
                        catch_up_policy=99,  # type: ignore[arg-type]
                    )
                )
            ),
        ),
    ]
    for field, call in calls:
        err = raw_call(server, call)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, err)
        assert (err.details() or "").startswith(field), (field, err.details())
    # QueueService is the service's own: from outside, even without access control, any
    # request (a fire off its schedule's grid, for tasks not in it, in the future, or with
    # an undefined trigger) is refused before it is read.
    requests = [
        queue_pb2.EnqueueRequest(task_ids=[task_id], trigger=99),  # type: ignore[arg-type]
        queue_pb2.EnqueueRequest(task_ids=[task_id], trigger=common_pb2.TRIGGER_MANUAL),
    ]
    for request in requests:

        def enqueue(ch: grpc.Channel, r: queue_pb2.EnqueueRequest = request) -> object:
            return queue_pb2_grpc.QueueServiceStub(ch).Enqueue(r)

        err = raw_call(server, enqueue)
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err
    err = raw_call(
        server,
        lambda ch: queue_pb2_grpc.QueueServiceStub(ch).EnqueueFires(
            queue_pb2.EnqueueFiresRequest(
                fires=[queue_pb2.ScheduleFire(schedule_id=1, task_ids=[task_id])]
            )
        ),
    )
    assert err.code() == grpc.StatusCode.UNAUTHENTICATED, err
    assert snapshot(server) == before


def test_numbers_are_not_page_tokens(shared_seeded: tuple[Server, Client]) -> None:
    """ListJobs and ListFires tokens are opaque: the last id or fire time as a number (what
    a client could guess), or any other script's digits, signs or spaces, is malformed."""
    from tickwork.v1 import job_pb2, job_pb2_grpc, schedule_pb2, schedule_pb2_grpc

    server, client = shared_seeded
    schedule_id = client.get_schedule("nightly").id
    with grpc.insecure_channel(server.address) as channel:
        jobs = job_pb2_grpc.JobServiceStub(channel)
        schedules = schedule_pb2_grpc.ScheduleServiceStub(channel)
        for bad in ("10", "1782000000000000", "\u0661\u0660", "+10", " 10", "1_0", "-5", "\u00b2"):
            for call in (
                lambda t: jobs.ListJobs(job_pb2.ListJobsRequest(page_token=t)),
                lambda t: schedules.ListFires(
                    schedule_pb2.ListFiresRequest(schedule_id=schedule_id, page_token=t)
                ),
            ):
                with pytest.raises(grpc.RpcError) as err:
                    call(bad)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, repr(bad)
                assert (err.value.details() or "").startswith("page_token: malformed"), repr(bad)


@pytest.mark.parametrize(
    ("method", "field"),
    [
        ("tickwork.v1.TaskService/DeleteTask", "task_id"),
        ("tickwork.v1.ScheduleService/DeleteSchedule", "schedule_id"),
        ("tickwork.v1.ScheduleService/ListFires", "schedule_id"),
        ("tickwork.v1.JobService/GetJob", "job_id"),
        ("tickwork.v1.JobService/CancelJob", "job_id"),
        ("tickwork.v1.JobService/WatchJob", "job_id"),
    ],
)
def test_a_missing_id_is_invalid_argument(
    shared_seeded: tuple[Server, Client], method: str, field: str
) -> None:
    """An empty request (``grpcurl -d '{}'``) names no object: INVALID_ARGUMENT "required",
    as GetTask and UpdateTask answer, not NOT_FOUND "no job with id 0"."""
    server, _ = shared_seeded
    before = snapshot(server)
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as err:
        if method.endswith("WatchJob"):
            list(channel.unary_stream(f"/{method}", None, None)(b"", timeout=10))
        else:
            channel.unary_unary(f"/{method}", None, None)(b"", timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert err.value.details() == f"{field}: required", err.value.details()
    # A negative id (field 1, varint -3) names no object either.
    negative = b"\x08" + _varint((-3) & (2**64 - 1))
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as err:
        if method.endswith("WatchJob"):
            list(channel.unary_stream(f"/{method}", None, None)(negative, timeout=10))
        else:
            channel.unary_unary(f"/{method}", None, None)(negative, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert err.value.details() == f"{field}: must be a positive id, got -3"
    assert snapshot(server) == before


async def _stream_status(
    server: Server, messages: list[dict[str, dict[str, Any]]]
) -> tuple[grpc.StatusCode, str]:
    """Open a worker stream, send ``messages`` (one ConnectRequest field each, as a dict),
    and return the status the server ended it with."""
    from tests.queue_helpers import DEADLINE_S, Request, raw_worker

    kinds = {"hello": Request.Hello, "outcome": Request.Outcome, "log_lines": Request.LogLines}
    async with raw_worker(server.address, "bad-input") as w:
        for message in messages:
            await w.send(**{kind: kinds[kind](**fields) for kind, fields in message.items()})
        code = await asyncio.wait_for(w.call.code(), DEADLINE_S)
        return code, await w.call.details() or ""


BAD_STREAMS: list[tuple[str, list[dict[str, dict[str, Any]]], grpc.StatusCode, str]] = [
    (
        "a worker id longer than its column",
        [{"hello": {"worker_id": "w" * 250}}],
        grpc.StatusCode.INVALID_ARGUMENT,
        "hello.worker_id: must be at most 191 characters",
    ),
    (
        "a worker id with a NUL",
        [{"hello": {"worker_id": "w\x00"}}],
        grpc.StatusCode.INVALID_ARGUMENT,
        "hello.worker_id",
    ),
    (
        "a second Hello",
        [{"hello": {"worker_id": "w"}}, {"hello": {"worker_id": "w"}}],
        grpc.StatusCode.FAILED_PRECONDITION,
        "hello: sent twice",
    ),
    (
        "an outcome under a lease token with a NUL",
        [
            {"hello": {"worker_id": "w"}},
            {"outcome": {"job_id": 1, "lease_token": "\x00", "status": 4}},
        ],
        grpc.StatusCode.INVALID_ARGUMENT,
        "outcome.lease_token",
    ),
    (
        # Named "statuses" (ListJobs' field), which no Outcome has.
        "an outcome with a status the enum does not define",
        [
            {"hello": {"worker_id": "w"}},
            {"outcome": {"job_id": 1, "lease_token": "t", "status": 99}},
        ],
        grpc.StatusCode.INVALID_ARGUMENT,
        "outcome.status: unknown job status 99",
    ),
    (
        "log lines under a lease token with a NUL",
        [
            {"hello": {"worker_id": "w"}},
            {"log_lines": {"job_id": 1, "lease_token": "a\x00", "lines": ["x"]}},
        ],
        grpc.StatusCode.INVALID_ARGUMENT,
        "log_lines.lease_token",
    ),
]


@pytest.mark.parametrize(
    ("what", "messages", "code", "field"), BAD_STREAMS, ids=[c[0] for c in BAD_STREAMS]
)
def test_bad_worker_stream_input_ends_the_stream_with_its_status(
    shared_seeded: tuple[Server, Client],
    what: str,
    messages: list[dict[str, dict[str, Any]]],
    code: grpc.StatusCode,
    field: str,
) -> None:
    # These ended the stream UNKNOWN with the exception's text: the SQL and its parameters
    # for the database's refusals (PostgreSQL), the class name for a domain error.
    server, _ = shared_seeded
    before = snapshot(server)
    got, details = asyncio.run(_stream_status(server, messages))
    assert got == code, details
    assert field in details
    assert "SQL" not in details and "Unexpected" not in details
    assert snapshot(server) == before


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ("run", "task_ids[1]: must be a positive id, got 0"),
        ("run-by-name", "task_names[1]: required"),
        ("abort", "task_ids[1]: must be a positive id, got -7"),
        ("schedule", "schedule.task_ids[1]: must be a positive id, got -7"),
    ],
)
def test_an_id_below_1_in_a_list_of_ids_is_invalid_argument_naming_its_place(
    shared_seeded: tuple[Server, Client], call: str, field: str
) -> None:
    """Ids start at 1: one below names no object, INVALID_ARGUMENT at its index as a single
    id field answers, not NOT_FOUND "no task with id -7" (nor "no task named ''" for an
    empty name), and nothing is written."""
    from tickwork.v1 import schedule_pb2, schedule_pb2_grpc, task_pb2, task_pb2_grpc

    server, client = shared_seeded
    existing = client.get_task("existing").id
    bad = 0 if call == "run" else -7
    before = snapshot(server)
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as err:
        tasks = task_pb2_grpc.TaskServiceStub(channel)
        if call == "run":
            tasks.RunTasks(task_pb2.RunTasksRequest(task_ids=[existing, bad]), timeout=10)
        elif call == "run-by-name":
            by_name = task_pb2.RunTasksRequest(task_names=["existing", ""])
            tasks.RunTasks(by_name, timeout=10)
        elif call == "abort":
            tasks.AbortTasks(task_pb2.AbortTasksRequest(task_ids=[existing, bad]), timeout=10)
        else:
            schedule = schedule_pb2.Schedule(
                name="odd", task_ids=[existing, bad], cron_expression="0 3 * * *"
            )
            schedule_pb2_grpc.ScheduleServiceStub(channel).CreateSchedule(
                schedule_pb2.CreateScheduleRequest(schedule=schedule), timeout=10
            )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert err.value.details() == field
    assert snapshot(server) == before
