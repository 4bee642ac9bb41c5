"""Ids are never handed out twice, through the API, on both backends.

A client that holds an id (RunTasks by id, GetJob, WatchJob, a schedule's id) must never
reach another object with it. SQLite reused the id of the newest row once it was deleted
(``INTEGER PRIMARY KEY`` without AUTOINCREMENT takes max(rowid) + 1): a job of a deleted
task then answered for a job of another task. PostgreSQL's sequences never did.
"""

from __future__ import annotations

import pytest

from tickwork import Client, NotFound

SHELL = {"argv": ["true"]}


def test_a_deleted_tasks_id_is_not_given_to_the_next_task(api_client: Client) -> None:
    api_client.create_task("a", "shell", SHELL)
    b = api_client.create_task("b", "shell", SHELL)
    api_client.delete_task(b.id)

    c = api_client.create_task("c", "shell", SHELL)
    assert c.id != b.id
    assert c.id > b.id
    with pytest.raises(NotFound):
        api_client.get_task(b.id)  # the old id names nothing, not task "c"


def test_a_deleted_jobs_id_is_not_given_to_the_next_job(api_client: Client) -> None:
    # No worker (api_server): the jobs stay queued.
    api_client.create_task("keeper", "shell", SHELL)
    api_client.create_task("sleeper", "shell", SHELL)
    api_client.create_task("q1", "shell", SHELL)
    [kept] = api_client.run("keeper")
    [gone] = api_client.run("sleeper")  # the newest job
    assert gone.job_id > kept.job_id
    api_client.delete_task("sleeper")  # its job goes with it
    with pytest.raises(NotFound):
        api_client.get_job(gone.job_id)

    [new] = api_client.run("q1")
    assert new.job_id != gone.job_id
    assert new.job_id > gone.job_id
    with pytest.raises(NotFound):
        api_client.get_job(gone.job_id)  # still nothing, not q1's job
    assert api_client.get_job(new.job_id).task_name == "q1"
    assert api_client.get_job(kept.job_id).task_name == "keeper"


def test_a_deleted_schedules_id_is_not_given_to_the_next_schedule(api_client: Client) -> None:
    task = api_client.create_task("t", "shell", SHELL)
    api_client.create_schedule("s1", [task.id], interval_seconds=86400)
    s2 = api_client.create_schedule("s2", [task.id], interval_seconds=86400)
    api_client.delete_schedule(s2.id)

    s3 = api_client.create_schedule("s3", [task.id], interval_seconds=86400)
    assert s3.id != s2.id
    assert s3.id > s2.id
    with pytest.raises(NotFound):
        api_client.get_schedule(s2.id)
