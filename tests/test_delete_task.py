"""DeleteTask: a task goes with all its jobs, but never leaves a schedule with no task."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import grpc
import pytest

from tests.harness import Server
from tickwork import Client, JobStatus, NotFound, TickworkError

WAIT_S = 30


def test_the_only_task_of_a_schedule_is_not_deleted(api_client: Client) -> None:
    only = api_client.create_task("only", "shell", {"argv": ["true"]})
    api_client.create_schedule("nightly", ["only"], cron="0 2 * * *")
    api_client.create_schedule("weekly", ["only"], cron="0 2 * * 1", enabled=False)
    with pytest.raises(TickworkError) as info:
        api_client.delete_task("only")
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.details == (
        f"task_id: task {only.id} is the only task of schedule 'nightly', 'weekly'; "
        "delete the schedule or give it another task first"
    )
    assert api_client.get_task("only").id == only.id
    assert api_client.get_schedule("nightly").task_ids == [only.id]

    api_client.delete_schedule("nightly")
    api_client.delete_schedule("weekly")
    api_client.delete_task("only")
    with pytest.raises(NotFound):
        api_client.get_task("only")


def test_a_task_shared_with_others_leaves_the_schedule_with_the_rest(
    api_client: Client,
) -> None:
    a = api_client.create_task("a", "shell", {"argv": ["true"]})
    b = api_client.create_task("b", "shell", {"argv": ["true"]})
    api_client.create_schedule("both", [a.id, b.id], cron="0 2 * * *")
    api_client.delete_task("a")
    assert api_client.get_schedule("both").task_ids == [b.id]
    with pytest.raises(TickworkError) as info:
        api_client.delete_task("b")
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_deleting_a_task_deletes_its_finished_jobs_too(server: Server) -> None:
    with Client(server.address) as client:
        client.create_task("done", "shell", {"argv": ["true"]})
        (run,) = client.run("done")
        assert client.wait(run.job_id, timeout=WAIT_S).status == JobStatus.JOB_STATUS_SUCCEEDED
        client.delete_task("done")
        with pytest.raises(NotFound):
            client.get_job(run.job_id)


def test_deleting_a_schedules_last_two_tasks_at_once_leaves_one(api_client: Client) -> None:
    # On PostgreSQL both deletes run at once; the schedule's row lock orders them, so the
    # second sees the first's delete and refuses. SQLite runs one write at a time.
    for round_ in range(8):
        a = api_client.create_task(f"a{round_}", "shell", {"argv": ["true"]})
        b = api_client.create_task(f"b{round_}", "shell", {"argv": ["true"]})
        api_client.create_schedule(f"s{round_}", [a.id, b.id], cron="0 2 * * *")
        start = threading.Barrier(2)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=_delete, args=(api_client, t.id, start, outcomes))
            for t in (a, b)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["FAILED_PRECONDITION", "deleted"], outcomes
        assert len(api_client.get_schedule(f"s{round_}").task_ids) == 1


def _delete(client: Client, task_id: int, start: threading.Barrier, outcomes: list[str]) -> None:
    start.wait()
    try:
        client.delete_task(task_id)
        outcomes.append("deleted")
    except TickworkError as err:
        outcomes.append(err.code.name)


def test_deletes_racing_schedule_updates_and_runs_never_deadlock(api_client: Client) -> None:
    # PostgreSQL: DeleteTask locked the task then the schedule, UpdateSchedule the schedule
    # then (inserting its links) the task: a deadlock, broken by failing one of them with
    # a database error. Every writer now locks tasks first.
    answers: list[str] = []
    x = api_client.create_task("x", "shell", {"argv": ["true"]})
    for round_ in range(25):
        a = api_client.create_task(f"a{round_}", "shell", {"argv": ["true"]})
        b = api_client.create_task(f"b{round_}", "shell", {"argv": ["true"]})
        s = api_client.create_schedule(f"s{round_}", [a.id, b.id], cron="0 2 * * *")
        calls: list[Callable[[], object]] = [
            functools.partial(api_client.delete_task, a.id),
            functools.partial(api_client.update_schedule, s.id, tasks=[a.id, b.id, x.id]),
            functools.partial(api_client.run, a.id, b.id),
        ]
        start = threading.Barrier(len(calls))
        threads = [threading.Thread(target=_call, args=(c, start, answers)) for c in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert set(answers) <= {"ok", "NOT_FOUND", "FAILED_PRECONDITION"}, answers


def _call(call: Callable[[], object], start: threading.Barrier, answers: list[str]) -> None:
    start.wait()
    try:
        call()
        answers.append("ok")
    except TickworkError as err:
        answers.append(err.code.name)
