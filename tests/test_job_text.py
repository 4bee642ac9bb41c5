"""No text a job writes can keep its outcome from being recorded, or stop the worker.

A job's error and output are whatever the job wrote: megabytes, NUL bytes (which
PostgreSQL's text type refuses), bytes that are not UTF-8 (which a protobuf string cannot
carry). Each was once enough to make the outcome's report fail again and again, with the
worker stuck on it and every other job waiting. Now the worker bounds and cleans what it
reports, the store what it keeps, and the next job runs.
"""

from __future__ import annotations

import pytest

from scheduler_svc.store import ERROR_CHARS, OUTPUT_TAIL_CHARS
from tests.harness import Server
from tickwork import Client, Job, JobStatus

WAIT_S = 30


def fixture(name: str, **kwargs: object) -> dict[str, object]:
    return {"callable": f"tests.handler_fixtures:{name}", "kwargs": kwargs}


def run_then_check_the_worker_goes_on(client: Client, name: str) -> Job:
    """Run task ``name``, wait for its end, then check a plain job after it still runs."""
    (run,) = client.run(name)
    job = client.wait(run.job_id, timeout=WAIT_S)
    (after,) = client.run("plain")
    assert client.wait(after.job_id, timeout=WAIT_S).status == JobStatus.JOB_STATUS_SUCCEEDED
    return job


@pytest.fixture
def tw(server: Server) -> Client:
    client = Client(server.address)
    client.create_task("plain", "shell", {"argv": ["true"]})
    return client


def test_an_error_of_megabytes_is_kept_cut_in_the_middle(tw: Client) -> None:
    tw.create_task("huge-error", "python", fixture("fail_long", chars=5_000_000))
    job = run_then_check_the_worker_goes_on(tw, "huge-error")
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert ERROR_CHARS < len(job.error) < ERROR_CHARS + 100
    assert "HEAD" in job.error[:200] and job.error.endswith("xTAIL")
    assert "characters cut ...]" in job.error


def test_nul_in_a_jobs_error_and_output_is_stored_as_the_replacement_character(
    tw: Client,
) -> None:
    tw.create_task("nul-out", "shell", {"argv": ["printf", "a\\000b\\n"]})
    job = run_then_check_the_worker_goes_on(tw, "nul-out")
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert "a\ufffdb" in job.output_tail

    tw.create_task("nul-error", "python", fixture("fail_long", chars=3, char="\x00"))
    job = run_then_check_the_worker_goes_on(tw, "nul-error")
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert "HEAD\ufffd\ufffd\ufffdTAIL" in job.error


def test_an_error_that_is_not_utf8_is_reported_with_replacement(tw: Client) -> None:
    tw.create_task("not-utf8", "python", fixture("fail_not_utf8"))
    job = run_then_check_the_worker_goes_on(tw, "not-utf8")
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert "bad ? byte" in job.error


def test_a_logged_line_of_megabytes_is_sent_in_pieces(tw: Client) -> None:
    tw.create_task("long-line", "python", fixture("log_long", chars=6_000_000))
    job = run_then_check_the_worker_goes_on(tw, "long-line")
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert job.output_tail.endswith("after the long line\n") or job.output_tail.endswith(
        "after the long line"
    )
    assert len(job.output_tail) <= OUTPUT_TAIL_CHARS
