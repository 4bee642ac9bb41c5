"""The whole path on real processes: serve without its worker plus a dedicated worker."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.harness import Server, WorkerProc, wait_for
from tickwork import Client, Job, JobStatus, SkipReason


def test_six_field_schedule_fires_and_jobs_succeed(api_client: Client, worker: WorkerProc) -> None:
    task = api_client.create_task("tick", "shell", {"argv": ["sh", "-c", "echo tick"]})
    schedule = api_client.create_schedule("every-2s", [task.id], cron="*/2 * * * * *")
    assert schedule.cron_description == "Every 2 seconds"
    assert schedule.HasField("next_run_time")

    def two_succeeded() -> list[Job] | None:
        jobs = api_client.list_jobs(task="tick", statuses=[JobStatus.JOB_STATUS_SUCCEEDED])
        return jobs if len(jobs) >= 2 else None

    jobs = wait_for(two_succeeded, timeout_s=20, what="two scheduled jobs to succeed")
    for job in jobs:
        assert job.schedule_id == schedule.id
        assert job.output_tail.strip() == "tick"
        # Fire times are whole even seconds: the seconds-first field was read as seconds.
        assert job.fire_time.seconds % 2 == 0 and job.fire_time.nanos == 0
    fires = api_client.list_fires("every-2s")
    assert fires and all(f.runs for f in fires)


def test_run_tasks_then_wait_reaches_succeeded(api_client: Client, worker: WorkerProc) -> None:
    api_client.create_task("hello", "shell", {"argv": ["echo", "hello world"]})
    (run,) = api_client.run("hello")
    assert run.job_id > 0 and not run.skipped
    job = api_client.wait(run.job_id, timeout=20)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED
    assert job.output_tail.strip() == "hello world"
    assert job.HasField("start_time") and job.HasField("finish_time")


def test_failing_shell_task_fails_with_stderr_tail(api_client: Client, worker: WorkerProc) -> None:
    api_client.create_task(
        "broken", "shell", {"argv": ["sh", "-c", "echo to-stdout; echo disk is full >&2; exit 3"]}
    )
    (run,) = api_client.run("broken")
    job = api_client.wait(run.job_id, timeout=20)
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert "exit code 3" in job.error
    assert "disk is full" in job.error


def test_abort_running_sleep_ends_aborted_quickly(api_client: Client, worker: WorkerProc) -> None:
    api_client.create_task("long", "shell", {"argv": ["sleep", "60"]})
    (run,) = api_client.run("long")
    wait_for(
        lambda: api_client.get_job(run.job_id).status == JobStatus.JOB_STATUS_RUNNING,
        what="the sleep to start",
    )
    # A second run of a running task returns the running job.
    (again,) = api_client.run("long")
    assert again.skipped and again.skip_reason == SkipReason.SKIP_REASON_ALREADY_RUNNING
    assert again.job_id == run.job_id
    started = time.monotonic()
    api_client.abort("long")
    job = api_client.wait(run.job_id, timeout=5)
    assert time.monotonic() - started < 5
    assert job.status == JobStatus.JOB_STATUS_ABORTED
    # The process is gone: no `sleep 60` child of the worker is left.
    assert not _children_named(worker.pid, "sleep")


def _children_named(pid: int, name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if comm == name and ppid == pid:
            found.append(int(entry))
    return found


def test_embedded_server_runs_python_task(server: Server, client: Client) -> None:
    client.create_task(
        "add", "python", {"callable": "tests.handler_fixtures:add", "kwargs": {"a": 2, "b": 3}}
    )
    (run,) = client.run("add")
    job = client.wait(run.job_id, timeout=20)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert "5" in job.output_tail


def test_queue_skip_logic_returns_same_job(api_client: Client) -> None:
    # No worker: the job stays queued, so a second run reports it as already queued.
    api_client.create_task("q", "shell", {"argv": ["true"]})
    (first,) = api_client.run("q")
    (second,) = api_client.run("q")
    assert second.skipped and second.skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED
    assert second.job_id == first.job_id


def test_debug_logging_shows_tickwork_s_lines_not_every_library_s(tmp_path: Path) -> None:
    """TICKWORK_LOG_LEVEL=DEBUG adds tickwork's own detail (each assignment, each finish);
    asyncio, gRPC, SQLAlchemy and aiosqlite keep to INFO and above, so it stays readable."""
    srv = Server(tmp_path, env={"TICKWORK_LOG_LEVEL": "DEBUG"}).wait_healthy()
    try:
        with Client(srv.address) as client:
            client.create_task("hello", "shell", {"argv": ["echo", "hello"]})
            (run,) = client.run("hello")
            assert client.wait(run.job_id, timeout=30).status == JobStatus.JOB_STATUS_SUCCEEDED
        output = srv.output()
    finally:
        srv.stop()
    debug = [line.split()[3] for line in output.splitlines() if " DEBUG " in line]
    assert debug, output[-2000:]
    assert all(name.split(".")[0] in ("scheduler_svc", "worker_svc") for name in debug), debug
