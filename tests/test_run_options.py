"""Run options of RunTasks: params_override (a JSON Merge Patch over the task's params for
that job only), not_before_time (the job waits QUEUED until then), labels (stored on the job),
and requested_by / stopped_by (the caller's token label) on every run, abort and cancel."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.databases import run_sql
from tests.harness import REPO, Server, base_env
from tests.inprocess import inprocess
from tests.queue_helpers import claim, finish
from tests.security import role_tokens, tokens_file
from tickwork import Client, InvalidArgument, JobStatus, Reason, from_rpc_error
from tickwork.structs import struct_to_dict
from tickwork.v1 import common_pb2, job_pb2, task_pb2, task_pb2_grpc

UTC = dt.UTC
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ADD = {"callable": "tests.handler_fixtures:add", "kwargs": {"a": 2, "b": 3}}


def job_count(server: Server) -> int:
    return int(run_sql(server.database_url, "SELECT count(*) FROM jobs")[0][0])


def request_count(server: Server) -> int:
    return int(run_sql(server.database_url, "SELECT count(*) FROM requests")[0][0])


def test_the_override_is_merged_for_that_job_only_and_labels_are_echoed(
    server: Server, client: Client
) -> None:
    client.create_task("add", "python", ADD)
    (run,) = client.run(
        "add", params_override={"kwargs": {"a": 10, "b": 5}}, labels={"team": "data", "k": ""}
    )
    job = client.wait(run.job_id, timeout=30)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert job.output_tail.strip().endswith("15")  # the python function saw the merge
    assert struct_to_dict(job.params_override) == {"kwargs": {"a": 10, "b": 5}}
    assert dict(job.labels) == {"team": "data", "k": ""}
    assert job.requested_by == "anonymous"  # access control is off
    assert job.stopped_by == ""
    # The task is unchanged, and a plain run runs its own params.
    assert struct_to_dict(client.get_task("add").params) == ADD
    (plain,) = client.run("add")
    again = client.wait(plain.job_id, timeout=30)
    assert again.output_tail.strip().endswith("5") and not again.output_tail.strip().endswith("15")
    assert not again.labels and not again.params_override.fields
    # Get, List and Watch all carry the labels.
    assert dict(client.get_job(job.id).labels) == {"team": "data", "k": ""}
    listed = {j.id: dict(j.labels) for j in client.list_jobs("add")}
    assert listed == {job.id: {"team": "data", "k": ""}, again.id: {}}
    watched = list(client.watch(job.id))
    assert watched and all(dict(w.labels) == {"team": "data", "k": ""} for w in watched)


@pytest.fixture
def tasks(api_server: Server) -> Iterator[task_pb2_grpc.TaskServiceStub]:
    with grpc.insecure_channel(api_server.address) as channel:
        yield task_pb2_grpc.TaskServiceStub(channel)


def _refusal(stub: task_pb2_grpc.TaskServiceStub, request: task_pb2.RunTasksRequest) -> object:
    with pytest.raises(grpc.RpcError) as info:
        stub.RunTasks(request, timeout=10)
    return from_rpc_error(info.value)


def test_bad_run_options_are_refused_naming_the_field_and_nothing_is_written(
    api_server: Server, api_client: Client, tasks: task_pb2_grpc.TaskServiceStub
) -> None:
    api_client.create_task("sh", "shell", {"argv": ["true"]})
    api_client.create_task("py", "python", ADD)
    far = dt.datetime.now(UTC) + dt.timedelta(days=11 * 366)
    many = {f"k{i}": "v" for i in range(65)}
    cases: list[tuple[dict[str, object], str, Reason]] = [
        ({"params_override": {"argv": "not a list"}}, "params_override", Reason.PARAMS_INVALID),
        # The merge must be valid for each task named: fine for sh, not for py.
        ({"params_override": {"callable": "no colon"}}, "params_override", Reason.PARAMS_INVALID),
        (
            {"params_override": {"blob": "x" * (1024 * 1024 + 1)}},
            "params_override",
            Reason.PARAMS_INVALID,
        ),
        ({"not_before": far}, "not_before_time", Reason.FIELD_INVALID),
        ({"labels": {"bad key": "x"}}, 'labels["bad key"]', Reason.FIELD_INVALID),
        ({"labels": {"k" * 64: "x"}}, f'labels["{"k" * 64}"]', Reason.FIELD_INVALID),
        ({"labels": {"team": "v" * 64}}, 'labels["team"]', Reason.FIELD_INVALID),
        ({"labels": {"team": "a\nb"}}, 'labels["team"]', Reason.FIELD_INVALID),
        ({"labels": many}, "labels", Reason.TOO_MANY_ITEMS),
    ]
    for options, field, reason in cases:
        with pytest.raises(InvalidArgument) as info:
            api_client.run("sh", "py", request_id=f"bad-{field}-{len(cases)}", **options)  # type: ignore[arg-type]
        assert (info.value.field, info.value.reason) == (field, reason), options
        assert field in str(info.value)
    # Nothing written: no job, no stored answer.
    assert job_count(api_server) == 0
    assert request_count(api_server) == 0
    # Keys may hold . _ - / and 63 characters; 64 labels are fine; a value may be empty.
    good = {f"k{i}": "" for i in range(63)} | {"app.kubernetes.io/part-of": "x" * 63}
    (run,) = api_client.run("sh", labels=good)
    assert dict(api_client.get_job(run.job_id).labels) == good


def test_a_request_id_repeat_must_carry_the_same_run_options(
    api_server: Server, api_client: Client, tasks: task_pb2_grpc.TaskServiceStub
) -> None:
    api_client.create_task("sh", "shell", {"argv": ["true"]})
    request = task_pb2.RunTasksRequest(task_names=["sh"], request_id="orchestrator-7")
    request.params_override.update({"argv": ["echo", "one"]})
    request.labels["run"] = "7"
    first = tasks.RunTasks(request, timeout=10)
    again = tasks.RunTasks(request, timeout=10)
    assert again.repeated_request and list(again.runs) == list(first.runs)
    for change in ("params_override", "labels", "not_before_time"):
        other = task_pb2.RunTasksRequest()
        other.CopyFrom(request)
        if change == "params_override":
            other.params_override.update({"argv": ["echo", "two"]})
        elif change == "labels":
            other.labels["run"] = "8"
        else:
            other.not_before_time.FromDatetime(dt.datetime(2030, 1, 1))
        err = _refusal(tasks, other)
        assert (err.field, err.reason) == ("request_id", Reason.REQUEST_ID_REUSED), change  # type: ignore[attr-defined]
    assert job_count(api_server) == 1


def test_run_options_never_change_a_job_already_queued(
    api_server: Server, api_client: Client
) -> None:
    api_client.create_task("sh", "shell", {"argv": ["true"]})
    (first,) = api_client.run("sh")
    later = dt.datetime.now(UTC) + dt.timedelta(hours=1)
    choices: list[dict[str, object]] = [
        {"labels": {"a": "b"}},
        {"params_override": {"env": {}}},
        {"not_before": later},
    ]
    for options in choices:
        (run,) = api_client.run("sh", **options)  # type: ignore[arg-type]
        assert run.skipped and run.skip_reason == common_pb2.SKIP_REASON_ALREADY_QUEUED
        assert run.job_id == first.job_id
    job = api_client.get_job(first.job_id)
    assert not job.labels and not job.params_override.fields and not job.HasField("not_before_time")
    assert job_count(api_server) == 1


async def test_not_before_time_holds_the_job_queued_until_then(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("later", "shell", {"argv": ["true"]}, max_attempts=2)
        await h.client.create_task("now", "shell", {"argv": ["true"]})
        at = T0 + dt.timedelta(minutes=10)
        (run,) = await h.client.run("later", not_before=at, labels={"batch": "b1"})
        job = await h.client.get_job(run.job_id)
        assert job.status == job_pb2.JOB_STATUS_QUEUED
        assert job.not_before_time.ToDatetime(tzinfo=UTC) == at
        store = h.service.app.store
        assert await store.claim_next_job("w", h.clock(), 30) is None
        assert await store.next_ready_time(h.clock()) == at
        # A plain run of the task leaves the deferred job deferred.
        (plain,) = await h.client.run("later")
        assert plain.skipped and plain.job_id == run.job_id
        assert (await h.client.get_job(run.job_id)).not_before_time.ToDatetime(tzinfo=UTC) == at
        # A past not_before_time runs now.
        (past,) = await h.client.run("now", not_before=T0 - dt.timedelta(days=1))
        assert not (await h.client.get_job(past.job_id)).HasField("not_before_time")
        ran = await claim(h)
        assert ran.id == past.job_id
        await finish(h, ran, "SUCCEEDED")  # the one slot is free again
        h.clock.set(at - dt.timedelta(milliseconds=1))
        assert await store.claim_next_job("w", h.clock(), 30) is None
        h.clock.set(at)
        started = await claim(h)
        assert started.id == run.job_id
        # Its retry is the same run: labels and requested_by kept, its own backoff.
        result = await finish(h, started, "FAILED", "boom")
        assert result.retry is not None
        assert result.retry.labels == {"batch": "b1"}
        assert result.retry.requested_by == "anonymous"


async def test_a_scheduled_job_has_no_requested_by(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("tick", "shell", {"argv": ["true"]})
        await h.client.create_schedule("every-minute", ["tick"], interval_seconds=60)
        await h.tick(T0 + dt.timedelta(minutes=2))
        (job,) = await h.client.list_jobs("tick")
        assert job.trigger == common_pb2.TRIGGER_SCHEDULER
        assert (job.requested_by, dict(job.labels), job.stopped_by) == ("", {}, "")


@pytest.fixture
def tokens() -> dict[str, str]:
    return role_tokens()


@pytest.fixture
def secured(tmp_path: Path, tokens: dict[str, str]) -> Iterator[Server]:
    """The embedded service (with its worker) with access control."""
    path = tokens_file(tmp_path / "tokens", tokens)
    srv = Server(
        tmp_path,
        env={"TICKWORK_TOKENS_FILE": str(path), "WORKER_POLL_INTERVAL_SECONDS": "1"},
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def _until(check: object, what: str, timeout_s: float = 30.0) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()  # type: ignore[operator]
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_requested_by_and_stopped_by_are_the_callers_token_labels(
    secured: Server, tokens: dict[str, str]
) -> None:
    with (
        Client(secured.address, token=tokens["admin"]) as admin,
        Client(secured.address, token=tokens["operator"]) as operator,
    ):
        admin.create_task("long", "shell", {"argv": ["sleep", "60"]})
        admin.create_task("queued", "shell", {"argv": ["true"]})
        (run,) = operator.run("long")
        _until(
            lambda: operator.get_job(run.job_id).status == JobStatus.JOB_STATUS_RUNNING, "running"
        )
        (abort,) = admin.abort("long")
        assert abort.job_id == run.job_id
        job = admin.wait(run.job_id, timeout=30)
        assert job.status == JobStatus.JOB_STATUS_ABORTED
        assert (job.requested_by, job.stopped_by) == ("operator-test", "admin-test")

        later = dt.datetime.now(UTC) + dt.timedelta(hours=1)
        (held,) = admin.run("queued", not_before=later)
        cancelled = operator.cancel_job(held.job_id)
        assert cancelled.status == JobStatus.JOB_STATUS_CANCELLED
        assert (cancelled.requested_by, cancelled.stopped_by) == ("admin-test", "operator-test")
        (held,) = operator.run("queued", not_before=later)
        admin.abort("queued")
        job = admin.get_job(held.job_id)
        assert job.status == JobStatus.JOB_STATUS_CANCELLED
        assert (job.requested_by, job.stopped_by) == ("operator-test", "admin-test")


def tickwork_cli(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    """``tickwork ARGS`` against ``server``; bounded in time."""
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", *args],
        capture_output=True,
        text=True,
        env=base_env(TICKWORK_SERVER=server.address),
        cwd=REPO,
        timeout=30,
    )


def test_the_cli_passes_params_labels_and_not_before(
    api_server: Server, api_client: Client
) -> None:
    api_client.create_task("sh", "shell", {"argv": ["true"], "env": {"A": "1"}})
    done = tickwork_cli(
        api_server,
        *("tasks", "run", "sh", "--param", 'argv=["echo", "hi"]', "--param", "cwd=/tmp"),
        *("--label", "team=data", "--label", "note=a=b", "--not-before", "2030-01-01T00:00:00Z"),
    )
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.split()[1])
    job = api_client.get_job(job_id)
    assert struct_to_dict(job.params_override) == {"argv": ["echo", "hi"], "cwd": "/tmp"}
    assert dict(job.labels) == {"team": "data", "note": "a=b"}
    assert job.not_before_time.ToDatetime(tzinfo=UTC) == dt.datetime(2030, 1, 1, tzinfo=UTC)
    assert job.trigger == common_pb2.TRIGGER_MANUAL
    shown = tickwork_cli(api_server, "jobs", "get", str(job_id))
    assert shown.returncode == 0, shown.stderr
    labels = r'^labels +\{"note": "a=b", "team": "data"\}$'
    assert re.search(labels, shown.stdout, re.M), shown.stdout
    assert re.search(r"^requested_by +anonymous$", shown.stdout, re.M), shown.stdout
    naive = tickwork_cli(api_server, "tasks", "run", "sh", "--not-before", "2030-01-01")
    assert naive.returncode == 2 and "--not-before" in naive.stderr and "offset" in naive.stderr


def test_the_cli_runs_several_tasks_in_one_call(api_server: Server, api_client: Client) -> None:
    for name in ("one", "two"):
        api_client.create_task(name, "shell", {"argv": ["true"]})
    later = ("--not-before", "2030-01-01T00:00:00Z")  # they stay queued: the repeat skips
    first = tickwork_cli(api_server, "tasks", "run", "one", "two", *later)
    assert first.returncode == 0, first.stderr
    assert re.fullmatch(r"one: job \d+\ntwo: job \d+\n", first.stdout), first.stdout
    again = tickwork_cli(api_server, "tasks", "run", "one", "two", *later)
    assert re.fullmatch(r"(\w+: skipped: .* \(job \d+\)\n){2}", again.stdout), again.stdout
    assert {job.task_name for job in api_client.list_jobs()} == {"one", "two"}
    waited = tickwork_cli(api_server, "tasks", "run", "one", "two", "--wait")
    assert waited.returncode == 2 and "--wait: follows one job" in waited.stderr


def test_the_sdk_refuses_a_naive_not_before_before_calling(api_client: Client) -> None:
    with pytest.raises(InvalidArgument, match="not_before"):
        api_client.run("anything", not_before=dt.datetime(2030, 1, 1))
