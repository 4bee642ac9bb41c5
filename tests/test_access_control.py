"""Access control on real processes: every RPC of every service, with every role and none.

The expected access is written here from the issue's role definitions, independently of
the server's table: admin changes tasks and schedules, operator runs and stops them, viewer
reads, worker holds the worker stream, and QueueService is the service's own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor

from tests.harness import REPO, Server, WorkerProc, base_env, free_port, healthy, wait_for
from tests.security import role_tokens, tokens_file
from tickwork import Client, JobStatus, PermissionDenied, Reason, Unauthenticated
from tickwork.v1 import (
    job_pb2,
    notifier_pb2,
    queue_pb2,
    schedule_pb2,
    system_pb2,
    task_pb2,
    worker_pb2,
)

ADMIN_ONLY = {
    "TaskService/CreateTask",
    "TaskService/UpdateTask",
    "TaskService/DeleteTask",
    "ScheduleService/CreateSchedule",
    "ScheduleService/BatchCreateSchedules",
    "ScheduleService/UpdateSchedule",
    "ScheduleService/DeleteSchedule",
    "NotifierService/PutNotifier",
    "NotifierService/DeleteNotifier",
}
OPERATE = {
    "TaskService/RunTasks",
    "TaskService/AbortTasks",
    "ScheduleService/TriggerSchedule",
    "ScheduleService/BackfillSchedule",
    "JobService/CancelJob",
    "NotifierService/TestNotifier",
    "TaskService/DisableTask",
    "TaskService/EnableTask",
    "ScheduleService/PauseSchedule",
    "ScheduleService/ResumeSchedule",
}
VIEW = {
    "TaskService/GetTask",
    "TaskService/ListTasks",
    "ScheduleService/GetSchedule",
    "ScheduleService/ListSchedules",
    "ScheduleService/DescribeCron",
    "ScheduleService/ListFires",
    "JobService/GetJob",
    "JobService/ListJobs",
    "JobService/WatchJob",
    "SystemService/GetStatus",
    "NotifierService/ListNotifiers",
    "NotifierService/ListNotifications",
}
WORK = {"WorkerService/Connect", "WorkerService/PurgeHistory"}
SELF_ONLY = {"QueueService/Enqueue", "QueueService/EnqueueFires"}

ALLOWED = {
    "admin": ADMIN_ONLY | OPERATE | VIEW,
    "operator": OPERATE | VIEW,
    "viewer": VIEW,
    "worker": WORK,
}

DENIALS = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}


def all_methods() -> list[MethodDescriptor]:
    """Every RPC of every tickwork.v1 service."""
    out = []
    modules = (task_pb2, schedule_pb2, job_pb2, queue_pb2, worker_pb2, system_pb2, notifier_pb2)
    for module in modules:
        for service in module.DESCRIPTOR.services_by_name.values():
            out.extend(service.methods)
    return out


def short(method: MethodDescriptor) -> str:
    return f"{method.containing_service.name}/{method.name}"


def call(channel: grpc.Channel, method: MethodDescriptor, token: str | None) -> grpc.StatusCode:
    """Call ``method`` with an empty request; the status code it ends with."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    request = message_factory.GetMessageClass(method.input_type)()
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    kwargs: dict[str, Any] = {
        "request_serializer": type(request).SerializeToString,
        "response_deserializer": lambda raw: raw,
    }
    try:
        if method.client_streaming and method.server_streaming:
            stream = channel.stream_stream(path, **kwargs)
            list(stream(iter(()), metadata=metadata, timeout=10))
        elif method.server_streaming:
            list(channel.unary_stream(path, **kwargs)(request, metadata=metadata, timeout=10))
        elif method.client_streaming:
            channel.stream_unary(path, **kwargs)(iter(()), metadata=metadata, timeout=10)
        else:
            channel.unary_unary(path, **kwargs)(request, metadata=metadata, timeout=10)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


@pytest.fixture
def tokens() -> dict[str, str]:
    return role_tokens()


@pytest.fixture
def secured(tmp_path: Path, tokens: dict[str, str]) -> Iterator[Server]:
    """The embedded service with access control (SQLite: nothing here depends on it)."""
    path = tokens_file(tmp_path / "tokens", tokens)
    srv = Server(
        tmp_path,
        env={"TICKWORK_TOKENS_FILE": str(path), "WORKER_POLL_INTERVAL_SECONDS": "1"},
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def test_the_expected_table_names_every_rpc() -> None:
    names = {short(m) for m in all_methods()}
    assert names == ADMIN_ONLY | OPERATE | VIEW | WORK | SELF_ONLY


def test_every_rpc_with_every_role_and_without_a_token(
    secured: Server, tokens: dict[str, str]
) -> None:
    wrong: list[str] = []
    with grpc.insecure_channel(secured.address) as channel:
        for method in all_methods():
            name = short(method)
            for who, token in [("no token", None), ("unknown token", "tw_nope"), *tokens.items()]:
                code = call(channel, method, token)
                if token is None or who == "unknown token":
                    expected = "UNAUTHENTICATED"
                    ok = code == grpc.StatusCode.UNAUTHENTICATED
                elif name in ALLOWED[who]:
                    expected = "not a denial"
                    ok = code not in DENIALS
                else:
                    expected = "PERMISSION_DENIED"
                    ok = code == grpc.StatusCode.PERMISSION_DENIED
                if not ok:
                    wrong.append(f"{name} as {who}: {code.name}, expected {expected}")
    assert not wrong, "\n".join(wrong)
    log = secured.output()
    for token in tokens.values():
        assert token not in log  # tokens are never logged
    assert "role may not call this method" in log and "token_label=viewer-test" in log


def test_health_and_reflection_need_no_token(secured: Server) -> None:
    assert healthy(secured.address)
    from tests.test_grpcurl import grpcurl

    out = grpcurl(secured.address, "list")
    assert out.returncode == 0, out.stderr
    assert "tickwork.v1.TaskService" in out.stdout


def test_scheduler_and_embedded_worker_use_the_internal_token(
    secured: Server, tokens: dict[str, str]
) -> None:
    with Client(secured.address, token=tokens["admin"]) as admin:
        admin.create_task("tick", "shell", {"argv": ["echo", "tick"]})
        admin.create_schedule("every-second", ["tick"], cron="* * * * * *")

        def succeeded() -> bool:
            jobs = admin.list_jobs(task="tick", statuses=["SUCCEEDED"])
            return any(j.schedule_id for j in jobs)

        wait_for(succeeded, timeout_s=20, what="a scheduled job to succeed")
        admin.update_schedule("every-second", enabled=False)
    with Client(secured.address, token=tokens["viewer"]) as viewer:
        assert viewer.list_tasks()
        with pytest.raises(PermissionDenied) as denied:
            viewer.run("tick")
        assert "viewer" in denied.value.details
        assert denied.value.reason == Reason.ROLE_NOT_ALLOWED
    with Client(secured.address, token="") as anonymous, pytest.raises(Unauthenticated) as no:
        anonymous.list_tasks()
    assert no.value.reason == Reason.TOKEN_REQUIRED
    with Client(secured.address, token="tw_nope") as stranger, pytest.raises(Unauthenticated) as no:
        stranger.list_tasks()
    assert no.value.reason == Reason.TOKEN_UNKNOWN


def tickwork(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def test_cli_and_dedicated_worker_take_tokens(tmp_path: Path, tokens: dict[str, str]) -> None:
    path = tokens_file(tmp_path / "tokens", tokens)
    api = Server(
        tmp_path,
        env={"TICKWORK_TOKENS": path.read_text(), "WORKER_IS_ENABLED": "false"},
        name="api",
    ).wait_healthy()
    workers: list[WorkerProc] = []
    try:
        env = base_env(TICKWORK_SERVER=api.address)
        created = tickwork(
            "--token", tokens["admin"], "apply", "-f", str(_config(tmp_path)), env=env
        )
        assert created.returncode == 0, created.stderr
        refused = tickwork("tasks", "run", "hello", env=env)
        assert refused.returncode == 1
        assert refused.stderr.startswith("error: UNAUTHENTICATED"), refused.stderr
        # A viewer token cannot hold the worker stream: the worker is refused and retries.
        workers.append(
            WorkerProc(tmp_path, api.address, env={"TICKWORK_TOKEN": tokens["viewer"]}, name="w1")
        )
        wait_for(
            lambda: "PERMISSION_DENIED" in workers[0].output(),
            timeout_s=15,
            what="the viewer-token worker to be refused",
        )
        workers[0].stop()
        workers.append(
            WorkerProc(tmp_path, api.address, env={"TICKWORK_TOKEN": tokens["worker"]}, name="w2")
        )
        env_operator = {**env, "TICKWORK_TOKEN": tokens["operator"]}
        ran = tickwork("tasks", "run", "hello", "--wait", "--timeout", "30", env=env_operator)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "hello from tickwork" in ran.stdout
    finally:
        for proc in workers:
            proc.stop()
        api.stop()
    for token in tokens.values():
        assert token not in api.output()


def _config(tmp: Path) -> Path:
    path = tmp / "tasks.toml"
    path.write_text(
        '[[tasks]]\nname = "hello"\nhandler = "shell"\n'
        'params = { argv = ["echo", "hello from tickwork"] }\n'
    )
    return path


def test_a_plain_token_in_the_tokens_setting_is_refused(tmp_path: Path) -> None:
    env = base_env(
        TICKWORK_LISTEN=f"127.0.0.1:{free_port()}",
        DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}",
        TICKWORK_TOKENS="admin:hunter2",
    )
    result = tickwork("serve", env=env)
    assert result.returncode == 2
    assert "TICKWORK_TOKENS: entry 1: expected the token's SHA-256" in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


def test_job_states_reach_clients_of_every_reading_role(
    secured: Server, tokens: dict[str, str]
) -> None:
    with Client(secured.address, token=tokens["admin"]) as admin:
        admin.create_task("quick", "shell", {"argv": ["true"]})
    with Client(secured.address, token=tokens["operator"]) as operator:
        [run] = operator.run("quick")
    with Client(secured.address, token=tokens["viewer"]) as viewer:
        assert viewer.wait(run.job_id, timeout=20).status == JobStatus.JOB_STATUS_SUCCEEDED


def test_an_operator_switches_tasks_and_schedules_on_and_off_and_nothing_else(
    secured: Server, tokens: dict[str, str]
) -> None:
    with Client(secured.address, token=tokens["admin"]) as admin:
        admin.create_task("switched", "shell", {"argv": ["true"]}, task_priority=7)
        admin.create_schedule("hourly", ["switched"], cron="0 * * * *")
    with Client(secured.address, token=tokens["operator"]) as operator:
        assert not operator.disable_task("switched").enabled
        assert operator.enable_task("switched").enabled
        assert not operator.update_schedule("hourly", enabled=False).enabled
        for change in (
            lambda: operator.update_task("switched", task_priority=1),
            lambda: operator.update_task("switched", enabled=False, task_priority=1),
            lambda: operator.update_schedule("hourly", cron="5 * * * *"),
        ):
            with pytest.raises(PermissionDenied, match=r"update_mask\.paths"):
                change()
    with Client(secured.address, token=tokens["viewer"]) as viewer:
        with pytest.raises(PermissionDenied):
            viewer.disable_task("switched")
        task = viewer.get_task("switched")
        assert task.enabled and task.task_priority == 7
        assert viewer.get_schedule("hourly").cron_expression == "0 * * * *"
    assert "operator may only switch enabled" in secured.output()


async def test_worker_handler_allow_list(tmp_path: Path, database_url: str) -> None:
    """WORKER_HANDLERS restricts what a worker runs: another handler's job fails unrun."""
    import asyncio
    import datetime as dt

    from tests.inprocess import inprocess
    from worker_svc import Worker, WorkerSettings

    start = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    async with inprocess(tmp_path, database_url, start) as h:
        await h.client.create_task("py", "python", {"callable": "os:getcwd"})
        await h.client.create_task("sh", "shell", {"argv": ["true"]})
        settings = WorkerSettings.from_env(
            h.service.address, {"WORKER_HANDLERS": "shell", "WORKER_POLL_INTERVAL_SECONDS": "1"}
        )
        assert settings.handlers == ("shell",)
        worker = Worker(settings)
        running = asyncio.create_task(worker.run())
        try:
            [py] = await h.client.run("py")
            [sh] = await h.client.run("sh")
            refused = await h.client.wait(py.job_id, timeout=20)
            allowed = await h.client.wait(sh.job_id, timeout=20)
        finally:
            worker.stop()
            await asyncio.wait_for(running, 15)
    assert refused.status == JobStatus.JOB_STATUS_FAILED
    assert "handler 'python' is not allowed on this worker" in refused.error
    assert allowed.status == JobStatus.JOB_STATUS_SUCCEEDED
