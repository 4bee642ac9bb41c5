"""Listings page by size as well as by count: every reply fits in a gRPC message.

A client accepts 4 MiB by default (grpcurl, the SDK). A page of 1,000 tasks with large
params or descriptions is far more, so a listing stops at ``MAX_PAGE_BYTES`` and hands
the rest over with its next_page_token (AIP-158: a short page need not be the last).
"""

from __future__ import annotations

import grpc
import pytest

from scheduler_svc.servicers._convert import MAX_PAGE_BYTES, fit_page
from scheduler_svc.validation import MAX_PARAMS_BYTES
from tests.harness import Server
from tickwork import Client, TickworkError
from tickwork.cli import main
from tickwork.v1 import task_pb2, task_pb2_grpc

BIG = 900_000  # bytes of params per task: four of them pass MAX_PAGE_BYTES


def big_params(i: int) -> dict[str, object]:
    return {"argv": ["true"], "env": {"BLOB": chr(ord("a") + i) * BIG}}


def test_a_listing_of_large_tasks_pages_under_the_message_limit(
    api_server: Server, api_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f"big-{i}" for i in range(9)]
    for i, name in enumerate(names):
        api_client.create_task(name, "shell", big_params(i), description="é" * 4000)
    expected = sorted(t.name for t in api_client.list_tasks())
    assert set(names) <= set(expected)

    pages: list[list[str]] = []
    with grpc.insecure_channel(api_server.address) as channel:
        stub = task_pb2_grpc.TaskServiceStub(channel)
        token = ""
        while True:
            reply = stub.ListTasks(task_pb2.ListTasksRequest(page_size=1000, page_token=token))
            assert reply.ByteSize() <= MAX_PAGE_BYTES + 1024
            pages.append([t.name for t in reply.tasks])
            token = reply.next_page_token
            if not token:
                break
    assert [n for page in pages for n in page] == expected  # nothing lost or repeated
    assert len(pages) >= 3 and all(pages)
    got = {t.name: t for t in api_client.list_tasks()}
    assert got["big-3"].params == big_params(3)

    assert main(["--server", api_server.address, "tasks", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in names)


def test_params_over_the_limit_are_refused_on_create_and_update(api_client: Client) -> None:
    too_big = {"argv": ["true"], "env": {"BLOB": "x" * MAX_PARAMS_BYTES}}
    with pytest.raises(TickworkError) as info:
        api_client.create_task("huge", "shell", too_big)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details.startswith("task.params: is ")
    assert "at most 1,048,576" in info.value.details
    assert "huge" not in {t.name for t in api_client.list_tasks()}

    api_client.create_task("small", "shell", {"argv": ["true"]})
    with pytest.raises(TickworkError) as info:
        api_client.update_task("small", params=too_big)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert api_client.get_task("small").params == {"argv": ["true"]}

    just_under = {"argv": ["true"], "env": {"BLOB": "x" * (MAX_PARAMS_BYTES - 100)}}
    assert api_client.create_task("at-limit", "shell", just_under).id


def task_of(size: int) -> task_pb2.Task:
    return task_pb2.Task(name=f"t{size}", description="x" * size)


def test_fit_page_keeps_count_paging_when_items_are_small() -> None:
    rows = list(range(11))
    page = fit_page(rows, 10, task_of)
    assert [t.name for t in page.items] == [f"t{i}" for i in range(10)]
    assert page.last == 9
    last_page = fit_page(rows[:4], 10, task_of)
    assert len(last_page.items) == 4 and last_page.last is None
    no_rows: list[int] = []
    empty = fit_page(no_rows, 10, task_of)
    assert empty.items == [] and empty.last is None


def test_fit_page_stops_at_the_byte_budget_but_never_returns_an_empty_page() -> None:
    third = MAX_PAGE_BYTES // 3
    rows = [third, third, third, 10, 10]
    page = fit_page(rows, 1000, task_of)
    assert len(page.items) == 2 and page.last == third  # a third would pass the budget
    assert sum(t.ByteSize() for t in page.items) <= MAX_PAGE_BYTES

    alone = fit_page([MAX_PAGE_BYTES + 10, 5], 1000, task_of)
    assert len(alone.items) == 1 and alone.last == MAX_PAGE_BYTES + 10  # one always fits

    last_small = fit_page([third, 10], 1000, task_of)
    assert len(last_small.items) == 2 and last_small.last is None


def test_a_run_naming_one_long_named_task_a_thousand_times_gets_its_reply(
    api_client: Client,
) -> None:
    # Each result names the task: 1,000 of them with a 200-character name of four-byte
    # characters is 0.8 MB; 10,000 were 8 MB, over what a client reads, with the job
    # already queued.
    task = api_client.create_task("😀" * 200, "shell", {"argv": ["true"]})
    runs = api_client.run(*[task.id] * 1000)
    assert len(runs) == 1000 and len({r.job_id for r in runs}) == 1
    assert [r.skipped for r in runs] == [False] + [True] * 999
