"""A synchronous python job that times out or is aborted, on real processes: its function
is stopped, and until it has returned the worker runs no other job (not even the retry of
the same task), so that two jobs never run at once."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.handler_fixtures import intervals
from tests.harness import WorkerProc, wait_for
from tickwork import Client, Job, JobStatus

SPIN = "tests.handler_fixtures:append_until_stopped"
SLEEP = "tests.handler_fixtures:sleep_in_one_call"


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
    assert job.error == "timed out after 1 s (the function was asked to stop)"

    stopped = wait_for(
        lambda: _lines(ticks)[-1:] == ["stopped JobStopped"], what="the function to stop"
    )
    assert stopped
    assert _lines(ticks).count("tick") >= 2  # it ran, appending, until stopped
    other = _run_other_job(api_client, tmp_path / "other")
    assert other.status == JobStatus.JOB_STATUS_SUCCEEDED, other.error
    assert _lines(ticks)[-1] == "stopped JobStopped", "nothing appended after the stop"


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

    wait_for(lambda: _lines(ticks)[-1:] == ["stopped JobStopped"], what="the function to stop")
    other = _run_other_job(api_client, tmp_path / "other")
    assert other.status == JobStatus.JOB_STATUS_SUCCEEDED, other.error
    assert _lines(ticks)[-1] == "stopped JobStopped", "nothing appended after the stop"


def test_no_job_starts_before_a_function_stuck_in_a_c_call_has_returned(
    api_client: Client, worker: WorkerProc, tmp_path: Path
) -> None:
    record = tmp_path / "intervals"
    # Each attempt sleeps 3 s in one C call (the stop only lands once it returns) and
    # times out after 1 s; the retry is ready about 1 s after the timeout.
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
    (other,) = api_client.run("other")  # ready now: only the worker holds it back

    attempt1 = api_client.wait(first.job_id, timeout=20)
    assert attempt1.status == JobStatus.JOB_STATUS_FAILED
    assert attempt1.error == "timed out after 1 s (the function was asked to stop)"
    # Reported at the timeout, not when the function returned.
    run_s = attempt1.finish_time.ToDatetime() - attempt1.start_time.ToDatetime()
    assert run_s.total_seconds() < 2.5

    def retry_ended() -> Job | None:
        jobs = api_client.list_jobs(task="stuck")
        ended = [j for j in jobs if j.attempt == 2 and j.status == JobStatus.JOB_STATUS_FAILED]
        return ended[0] if ended else None

    retry = wait_for(retry_ended, timeout_s=30, what="attempt 2 to time out")
    assert retry.retry_of_job_id == attempt1.id
    assert api_client.wait(other.job_id, timeout=5).status == JobStatus.JOB_STATUS_SUCCEEDED

    def all_returned() -> dict[str, list[tuple[float, float]]] | None:
        found = intervals(str(record))
        calls = [span for spans in found.values() for span in spans]
        return found if len(calls) == 3 and all(end < float("inf") for _, end in calls) else None

    found = wait_for(all_returned, timeout_s=30, what="every call to return")
    assert len(found["stuck"]) == 2 and len(found["other"]) == 1
    spans = sorted(span for by_label in found.values() for span in by_label)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"two jobs ran at once: {found}"
    log = worker.output()
    assert f"the worker waits for {SLEEP} of job {attempt1.id} to return" in log
