"""A python job that times out or is aborted, on real processes: its job process is
stopped (SIGTERM, then SIGKILL after WORKER_ABORT_GRACE_SECONDS, 2 s here), synchronous
functions and long C calls included; the job ends at once, its process is gone, and the
next job (the retry of the same task too) runs on the same worker, never alongside it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.handler_fixtures import intervals, pid_exists, pids
from tests.harness import WorkerProc, wait_for
from tests.queue_helpers import children_of
from tickwork import Client, Job, JobStatus

SPIN = "tests.handler_fixtures:append_until_stopped"
SLEEP = "tests.handler_fixtures:sleep_in_one_call"
GRACE_S = 2.0
"""WORKER_ABORT_GRACE_SECONDS of the ``worker`` fixture."""


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _run_other_job(client: Client, record: Path) -> Job:
    """Run a quick job of another task and return it once it ended."""
    client.create_task(
        "other",
        "python",
        {"callable": SLEEP, "kwargs": {"path": str(record), "label": "other", "seconds": 0}},
    )
    (run,) = client.run("other")
    return client.wait(run.job_id, timeout=20)


def _gone(pid: int) -> bool:
    return not pid_exists(pid)


def test_a_timed_out_function_looping_in_python_is_stopped(
    api_client: Client, worker: WorkerProc, tmp_path: Path
) -> None:
    ticks = tmp_path / "ticks"
    api_client.create_task(
        "spin", "python", {"callable": SPIN, "kwargs": {"path": str(ticks)}}, timeout_seconds=1
    )
    (run,) = api_client.run("spin")
    job = api_client.wait(run.job_id, timeout=20)
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert job.error == "timed out after 1 s"

    (pid,) = pids(str(ticks))
    assert pid != worker.pid
    wait_for(lambda: _gone(pid), timeout_s=2, what="the job process to be gone")
    assert _lines(ticks).count("tick") >= 2  # it ran, appending, until stopped
    stopped = len(_lines(ticks))
    other = _run_other_job(api_client, tmp_path / "other")
    assert other.status == JobStatus.JOB_STATUS_SUCCEEDED, other.error
    assert len(_lines(ticks)) == stopped, "nothing appended after the stop"


def test_an_aborted_function_looping_in_python_is_stopped(
    api_client: Client, worker: WorkerProc, tmp_path: Path
) -> None:
    ticks = tmp_path / "ticks"
    api_client.create_task("spin", "python", {"callable": SPIN, "kwargs": {"path": str(ticks)}})
    (run,) = api_client.run("spin")
    wait_for(lambda: "tick" in _lines(ticks), what="the function to start")
    api_client.abort("spin")
    job = api_client.wait(run.job_id, timeout=20)
    assert job.status == JobStatus.JOB_STATUS_ABORTED

    (pid,) = pids(str(ticks))
    assert _gone(pid), "the job ended only once its process was gone"
    stopped = len(_lines(ticks))
    other = _run_other_job(api_client, tmp_path / "other")
    assert other.status == JobStatus.JOB_STATUS_SUCCEEDED, other.error
    assert len(_lines(ticks)) == stopped, "nothing appended after the stop"


def test_abort_of_a_sync_job_stuck_in_time_sleep_ends_aborted_within_the_grace(
    api_client: Client, worker: WorkerProc, tmp_path: Path
) -> None:
    record = tmp_path / "intervals"
    api_client.create_task(
        "stuck",
        "python",
        {"callable": SLEEP, "kwargs": {"path": str(record), "label": "stuck", "seconds": 600}},
    )
    (run,) = api_client.run("stuck")
    wait_for(lambda: "stuck" in intervals(str(record)), what="the job to start")
    (pid,) = pids(str(record))
    aborted = time.monotonic()
    api_client.abort("stuck")
    job = api_client.wait(run.job_id, timeout=20)
    assert time.monotonic() - aborted < GRACE_S
    assert job.status == JobStatus.JOB_STATUS_ABORTED, job.error
    assert _gone(pid)
    assert intervals(str(record))["stuck"] == [
        (intervals(str(record))["stuck"][0][0], float("inf"))
    ]
    assert worker.popen.poll() is None


def test_a_retry_starts_only_once_the_timed_out_attempt_s_process_is_gone(
    api_client: Client, worker: WorkerProc, tmp_path: Path
) -> None:
    record = tmp_path / "intervals"
    # Each attempt sleeps 3 s in one C call and times out after 1 s; the retry is ready
    # about 1 s after the timeout.
    api_client.create_task(
        "stuck",
        "python",
        {"callable": SLEEP, "kwargs": {"path": str(record), "label": "stuck", "seconds": 3}},
        timeout_seconds=1,
        max_attempts=2,
        backoff_base_seconds=1,
        backoff_cap_seconds=1,
    )
    api_client.create_task(
        "other",
        "python",
        {"callable": SLEEP, "kwargs": {"path": str(record), "label": "other", "seconds": 0}},
    )
    (first,) = api_client.run("stuck")
    wait_for(lambda: "stuck" in intervals(str(record)), what="attempt 1 to start")
    (other,) = api_client.run("other")

    attempt1 = api_client.wait(first.job_id, timeout=20)
    assert attempt1.status == JobStatus.JOB_STATUS_FAILED
    assert attempt1.error == "timed out after 1 s"
    run_s = attempt1.finish_time.ToDatetime() - attempt1.start_time.ToDatetime()
    assert run_s.total_seconds() < 2.5

    def retry_ended() -> Job | None:
        jobs = api_client.list_jobs(task="stuck")
        ended = [j for j in jobs if j.attempt == 2 and j.status == JobStatus.JOB_STATUS_FAILED]
        return ended[0] if ended else None

    retry = wait_for(retry_ended, timeout_s=30, what="attempt 2 to time out")
    assert retry.retry_of_job_id == attempt1.id
    assert api_client.wait(other.job_id, timeout=5).status == JobStatus.JOB_STATUS_SUCCEEDED

    found = intervals(str(record))
    assert len(found["stuck"]) == 2 and len(found["other"]) == 1
    # Both attempts were killed in their C call: neither returned.
    assert [end for _, end in found["stuck"]] == [float("inf"), float("inf")]
    assert all(_gone(pid) for pid in pids(str(record)))
    # Attempt 1 ran its whole timeout, and no job started before its process was gone. The
    # service's own times, not the jobs' records: a busy machine delays a job process's
    # first line, not the timeout's clock.
    assert run_s.total_seconds() >= 1.0, "attempt 1 was stopped before its timeout"
    after = attempt1.finish_time.ToDatetime()
    assert api_client.get_job(other.job_id).start_time.ToDatetime() >= after
    assert retry.start_time.ToDatetime() >= after


def test_a_job_s_timeout_covers_the_wait_for_its_job_process(
    api_client: Client, worker: WorkerProc, tmp_path: Path
) -> None:
    """With the worker's job process server frozen (SIGSTOP: swapping, a debugger), a
    job's timeout still runs out: the job fails "timed out" instead of staying RUNNING for
    as long as the freeze lasts, and once the server resumes, the process it hands the
    late request runs nothing."""
    servers = wait_for(
        lambda: children_of(worker.pid, "worker_svc.handlers._zygote"),
        what="the worker's job process server",
    )
    record = tmp_path / "record"
    api_client.create_task(
        "late",
        "python",
        {"callable": SLEEP, "kwargs": {"path": str(record), "label": "late", "seconds": 0}},
        timeout_seconds=2,
    )
    os.kill(servers[0], signal.SIGSTOP)
    try:
        (run,) = api_client.run("late")
        job = api_client.wait(run.job_id, timeout=30)
    finally:
        os.kill(servers[0], signal.SIGCONT)
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert job.error == "timed out after 2 s"
    other = _run_other_job(api_client, tmp_path / "other")  # after the late request
    assert other.status == JobStatus.JOB_STATUS_SUCCEEDED, other.error
    assert intervals(str(record)) == {}, "the timed-out job ran after all"
