"""Every process a job starts is stopped with it, on real processes: a shell job that runs
``setsid sleep 600 &`` or a daemon's double fork, and a python job that starts
``Popen(["sleep", "600"], start_new_session=True)`` or double-forks, leave nothing running
when the job ends by itself, is aborted, times out, or its worker is SIGKILLed. The
processes are found by a mark in their environment, read from ``/proc``."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.handler_fixtures import pid_exists, pids
from tests.harness import Server, WorkerProc, wait_for
from tickwork import Client, JobStatus

GRACE_S = 2.0
"""The worker's WORKER_ABORT_GRACE_SECONDS."""
GONE_S = 15.0
"""How long the processes of a job whose worker was SIGKILLed may take to be gone."""
TIMEOUT_S = 8
"""The timed-out jobs' timeout: time enough to start what they leave on a loaded machine."""
_MARK = b"TICKWORK_TEST_MARK="

SHELL_STARTS = {
    "session": "setsid sleep 600 &",
    "daemon": "(setsid sleep 600 &);",  # the subshell exits: sleep is an orphan
}


def marked(mark: str) -> list[int]:
    """The live processes whose environment has ``TICKWORK_TEST_MARK=mark``."""
    needle = _MARK + mark.encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ + b"\0":
            found.append(int(name))
    return found


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Client, WorkerProc]]:
    """A scheduler service without a worker, a dedicated worker, and a client."""
    api = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}, name="api")
    worker = None
    try:
        api.wait_healthy()
        worker = WorkerProc(tmp_path, api.address, env={"WORKER_ABORT_GRACE_SECONDS": "2"})
        with Client(api.address) as client:
            yield client, worker
    finally:
        if worker is not None:
            worker.stop()
        api.stop()


def _create(client: Client, kind: str, how: str, mark: str, record: Path, then_s: float) -> str:
    """A task whose job leaves ``sleep 600`` running the way ``how`` says; its name."""
    name = f"{kind}-{how}"
    timeout = {"timeout_seconds": TIMEOUT_S} if then_s > TIMEOUT_S else {}
    if kind == "shell":
        script = f"{SHELL_STARTS[how]} echo started >> {record}; sleep {then_s}"
        params = {"argv": ["sh", "-c", script], "env": {"TICKWORK_TEST_MARK": mark}}
        client.create_task(name, "shell", params, **timeout)  # type: ignore[arg-type]
    else:
        kwargs = {"mark": mark, "how": how, "record": str(record), "then_s": then_s}
        params = {"callable": "tests.handler_fixtures:leave_detached", "kwargs": kwargs}
        client.create_task(name, "python", params, **timeout)  # type: ignore[arg-type]
    return name


def _started(record: Path) -> bool:
    return record.exists() and "started" in record.read_text()


KINDS = [(kind, how) for kind in ("shell", "python") for how in ("session", "daemon")]


@pytest.mark.parametrize(("kind", "how"), KINDS)
def test_what_a_job_left_running_is_stopped_when_it_ends(
    service: tuple[Client, WorkerProc], tmp_path: Path, kind: str, how: str
) -> None:
    client, _ = service
    mark, record = uuid.uuid4().hex, tmp_path / "record"
    name = _create(client, kind, how, mark, record, then_s=0)
    (run,) = client.run(name)
    job = client.wait(run.job_id, timeout=60)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert _started(record)
    # The job ends once nothing of it is left: no wait here.
    assert marked(mark) == []
    assert not [pid for pid in pids(str(record)) if pid_exists(pid)]


@pytest.mark.parametrize(("kind", "how"), KINDS)
def test_an_aborted_job_leaves_nothing_running(
    service: tuple[Client, WorkerProc], tmp_path: Path, kind: str, how: str
) -> None:
    client, _ = service
    mark, record = uuid.uuid4().hex, tmp_path / "record"
    name = _create(client, kind, how, mark, record, then_s=600)
    (run,) = client.run(name)
    wait_for(lambda: _started(record) and marked(mark), what="the detached sleep to start")
    client.abort(name)
    job = client.wait(run.job_id, timeout=60)
    assert job.status == JobStatus.JOB_STATUS_ABORTED, job.error
    assert marked(mark) == []
    assert not [pid for pid in pids(str(record)) if pid_exists(pid)]


@pytest.mark.parametrize(("kind", "how"), KINDS)
def test_a_timed_out_job_leaves_nothing_running(
    service: tuple[Client, WorkerProc], tmp_path: Path, kind: str, how: str
) -> None:
    client, _ = service
    mark, record = uuid.uuid4().hex, tmp_path / "record"
    name = _create(client, kind, how, mark, record, then_s=600)
    (run,) = client.run(name)
    job = client.wait(run.job_id, timeout=60)
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert job.error == f"timed out after {TIMEOUT_S} s"
    assert _started(record), "the job timed out before it started the detached sleep"
    assert marked(mark) == []
    assert not [pid for pid in pids(str(record)) if pid_exists(pid)]


@pytest.mark.parametrize(("kind", "how"), KINDS)
def test_the_processes_of_a_job_die_with_its_sigkilled_worker(
    service: tuple[Client, WorkerProc], tmp_path: Path, kind: str, how: str
) -> None:
    client, worker = service
    mark, record = uuid.uuid4().hex, tmp_path / "record"
    name = _create(client, kind, how, mark, record, then_s=600)
    client.run(name)
    wait_for(lambda: _started(record) and marked(mark), what="the detached sleep to start")
    job_process = pids(str(record))
    worker.kill(signal.SIGKILL)

    def gone() -> bool:
        return not marked(mark) and not [pid for pid in job_process if pid_exists(pid)]

    wait_for(gone, timeout_s=GONE_S, what="the job's processes to be gone")
