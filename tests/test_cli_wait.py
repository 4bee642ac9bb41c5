"""`tickwork tasks run NAME --wait`: live progress, retries followed, the outcome as the exit
status (0 succeeded, 1 failed, 3 aborted, 5 still running at --timeout); `jobs watch`
exits with the same statuses."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import REPO, Server, base_env, wait_for
from tickwork import Client, JobStatus
from tickwork.cli import new_output


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path, env={"WORKER_POLL_INTERVAL_SECONDS": "1"})
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def run_wait(address: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tickwork.cli", "tasks", "run", *args, "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=base_env(TICKWORK_SERVER=address),
        cwd=REPO,
    )


def test_output_arrives_live_and_retries_are_followed(embedded: Server) -> None:
    with Client(embedded.address) as tw:
        script = "echo first; sleep 2; echo second; exit 3"
        tw.create_task(
            "flaky", "shell", {"argv": ["sh", "-c", script]}, max_attempts=2, backoff_base_seconds=1
        )
        proc = run_wait(embedded.address, "flaky")
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line.rstrip("\n"))
            if line.strip() == "| first":
                break
        else:
            pytest.fail(f"no live output line: {lines}")
        # The first line arrived while the job was still running.
        [job] = tw.list_jobs(task="flaky")
        assert job.status == JobStatus.JOB_STATUS_RUNNING
        rest, _ = proc.communicate(timeout=60)
    text = "\n".join(lines) + "\n" + rest
    assert proc.returncode == 1, text
    assert lines[0] == f"job {job.id}"
    assert f"] job {job.id} RUNNING" in text
    assert f"] job {job.id} FAILED (attempt 1, " in text
    assert "error: exit code 3" in text
    assert "] retry: job " in text and "(attempt 2)" in text
    assert text.count("| second") == 2  # both attempts' output, each line once
    assert text.count("| first") == 2


def test_abort_and_timeout_exit_statuses(embedded: Server) -> None:
    with Client(embedded.address) as tw:
        tw.create_task("nap", "shell", {"argv": ["sleep", "30"]})
        proc = run_wait(embedded.address, "nap")
        wait_for(
            lambda: [
                j for j in tw.list_jobs(task="nap") if j.status == JobStatus.JOB_STATUS_RUNNING
            ],
            what="the nap to run",
        )
        tw.abort("nap")
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 3, out
        assert "ABORTED" in out
        # `jobs watch` of the ended job exits with the same outcome status.
        [aborted] = tw.list_jobs(task="nap")
        watched = subprocess.run(
            [sys.executable, "-m", "tickwork.cli", "jobs", "watch", str(aborted.id)],
            capture_output=True,
            text=True,
            env=base_env(TICKWORK_SERVER=embedded.address),
            cwd=REPO,
            timeout=30,
        )
        assert watched.returncode == 3, watched.stdout + watched.stderr

        timed = run_wait(embedded.address, "nap", "--timeout", "1")
        out, _ = timed.communicate(timeout=30)
        assert timed.returncode == 5, out
        assert "still RUNNING after 1 s; it goes on" in out or "still QUEUED" in out
        tw.abort("nap")

        tw.create_task("fine", "shell", {"argv": ["echo", "done"]})
        ok = run_wait(embedded.address, "fine")
        out, _ = ok.communicate(timeout=30)
        assert ok.returncode == 0, out
        assert "| done" in out and "SUCCEEDED" in out


def test_new_output_between_tail_snapshots() -> None:
    assert new_output("", "a\n") == "a\n"
    assert new_output("a\n", "a\nb\n") == "b\n"
    # The tail dropped its start: only what follows the overlap is new.
    assert new_output("a\nb\nc\n", "b\nc\nd\n") == "d\n"
    assert new_output("a\n", "a\n") == ""
    assert new_output("xyz\n", "q\n") == "q\n"
    assert new_output("a\nb\n", "a\nb") == ""  # the final tail without its last newline


def test_server_text_with_control_characters_prints_escaped(embedded: Server) -> None:
    """A job's output and error and a task's description are anyone's text: piped or not,
    the CLI shows their control characters as visible escapes (ESC as \\x1b, CR as \\x0d),
    and a line of theirs cannot pass for a line of the CLI's own."""
    script = r"printf '\033[2J'; printf '\033[31mRED\033]0;pwned\007\r\nFAKE LINE' >&2; exit 3"
    with Client(embedded.address) as tw:
        tw.create_task(
            "loud", "shell", {"argv": ["sh", "-c", script]}, description="say \x1b[5mhi\x1b[0m"
        )
        proc = run_wait(embedded.address, "loud")
        waited, _ = proc.communicate(timeout=60)
        assert proc.returncode == 1, waited
        [job] = tw.list_jobs(task="loud")

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tickwork.cli", *args],
            capture_output=True,
            text=True,
            env=base_env(TICKWORK_SERVER=embedded.address),
            cwd=REPO,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = cli("tasks", "list")
    assert "say \\x1b[5mhi\\x1b[0m" in listed
    for text in (waited, listed, cli("jobs", "list"), cli("jobs", "get", str(job.id))):
        assert not any(c in text for c in "\x1b\x07\r"), repr(text)
        assert not any(line.startswith("FAKE LINE") for line in text.splitlines()), text
    assert "\\x1b[2J" in waited  # the job's output, shown escaped


def test_wait_follows_the_job_through_a_service_restart(tmp_path: Path) -> None:
    """`--wait` on a queued job while the service restarts: the watch waits for the service
    and goes on, and the exit status is the job's, not "cannot reach tickwork"."""
    first = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}, name="before").wait_healthy()
    second: Server | None = None
    proc: subprocess.Popen[str] | None = None
    try:
        with Client(first.address) as tw:
            tw.create_task("later", "shell", {"argv": ["echo", "ran after the restart"]})
        proc = run_wait(first.address, "later")
        assert proc.stdout is not None
        line = proc.stdout.readline()
        while "QUEUED" not in line:  # no worker: it stays queued
            assert line, "the CLI ended before showing the queued job"
            line = proc.stdout.readline()
        # The watch does not hold the shutdown (for the 45 s grace jobs may get): it is
        # ended UNAVAILABLE, and the CLI watches again.
        stopping = time.monotonic()
        assert first.stop(timeout_s=30) == 0
        assert time.monotonic() - stopping < 10
        assert proc.poll() is None, proc.communicate()
        second = Server(
            tmp_path, env={"WORKER_POLL_INTERVAL_SECONDS": "1"}, name="after", port=first.port
        ).wait_healthy()
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, rest
        assert "SUCCEEDED" in rest and "| ran after the restart" in rest, rest
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        first.stop()
        if second is not None:
            second.stop()
