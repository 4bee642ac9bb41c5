"""Bad input gets the right status, a message naming the field, and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tests.databases import run_sql
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


CASES: list[tuple[str, Callable[[Client], object], grpc.StatusCode, str]] = [
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
]


@pytest.mark.parametrize(("what", "call", "code", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_cleanly(
    seeded: tuple[Server, Client],
    what: str,
    call: Callable[[Client], object],
    code: grpc.StatusCode,
    field: str,
) -> None:
    server, client = seeded
    before = snapshot(server)
    with pytest.raises(TickworkError) as info:
        call(client)
    assert info.value.code == code, info.value
    assert field in info.value.details
    assert snapshot(server) == before
