"""A handler that breaks its contract fails its own job, never the worker.

A third-party handler (a ``tickwork.handlers`` entry point) may return None, bytes or a
str instead of a HandlerResult, raise JobFailed with bytes or None, raise an exception
whose ``str()`` raises, call ``sys.exit`` or raise another BaseException. Each once
crashed the worker process, or the embedded worker of ``tickwork serve`` and with it the
whole service. Now the job ends FAILED with an error naming what the handler did, and the
next job runs on the same worker.

The handlers are in tests/odd_handlers.py, registered the way a package registers them:
a ``*.dist-info`` directory with an ``entry_points.txt``, found by importlib.metadata on
the processes' ``PYTHONPATH``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import Proc, Server, WorkerProc, wait_for
from tests.odd_handlers import ENTRY_POINTS
from tickwork import Client, Job, JobStatus
from worker_svc.handlers import ENTRY_POINT_GROUP

WAIT_S = 30

FAILED_WITH: dict[str, str] = {
    "odd-none": "handler 'odd-none' returned None, expected HandlerResult",
    "odd-bytes": "handler 'odd-bytes' returned bytes, expected HandlerResult",
    "odd-str": "handler 'odd-str' returned str, expected HandlerResult",
    "odd-bytes-tail": (
        "handler 'odd-bytes-tail' returned a HandlerResult whose output_tail is bytes, expected str"
    ),
    "odd-failed-none": "handler 'odd-failed-none' raised JobFailed whose error is None, "
    "expected str",
    "odd-failed-bytes": (
        "handler 'odd-failed-bytes' raised JobFailed whose error is bytes, expected str: "
        "disk \ufffd full"
    ),
    "odd-failed-bytes-tail": (
        "out of luck\n"
        "handler 'odd-failed-bytes-tail' raised JobFailed whose output_tail is bytes, "
        "expected str"
    ),
    "odd-failed-silently": (
        "handler 'odd-failed-silently' raised SilentJobFailed whose error is missing, expected str"
    ),
    "odd-unprintable": "Unprintable (and its str() raised RuntimeError)",
    "odd-exit": "handler 'odd-exit' raised SystemExit: 3",
    "odd-generator-exit": "handler 'odd-generator-exit' raised GeneratorExit",
    "odd-base-exception": "handler 'odd-base-exception' raised CustomBaseError: stop everything",
    "odd-cancelled": "handler 'odd-cancelled' raised CancelledError, but no abort was asked",
}
"""The error each odd handler's job fails with (all of ENTRY_POINTS but odd-logs-bytes)."""

TAILS: dict[str, str] = {
    "odd-none": "about to return None",
    "odd-bytes-tail": "tail \ufffd bytes",
    "odd-failed-bytes-tail": "last words",
}
"""The output tail of the jobs whose handler gave one, or logged a line."""


@pytest.fixture(scope="module")
def odd_distribution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding an installed-looking ``odd_handlers`` distribution whose
    entry points are the handlers of tests/odd_handlers.py; put it on PYTHONPATH."""
    site = tmp_path_factory.mktemp("site")
    dist_info = site / "odd_handlers-0.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd_handlers\nVersion: 0.0\n")
    lines = [f"[{ENTRY_POINT_GROUP}]"]
    lines += [f"{name} = tests.odd_handlers:{factory}" for name, factory in ENTRY_POINTS.items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


def create_tasks(client: Client) -> None:
    """One task per odd handler (named as the handler), and a plain shell task."""
    client.create_task("plain", "shell", {"argv": ["true"]})
    for name in ENTRY_POINTS:
        client.create_task(name, name, {})


def run_and_wait(client: Client, task: str) -> Job:
    (run,) = client.run(task)
    return client.wait(run.job_id, timeout=WAIT_S)


def connections(proc: Proc) -> int:
    """How many times the worker in ``proc`` connected (more than one: it started over)."""
    return proc.output().count("connecting to ")


def assert_failed_as_expected(job: Job, name: str) -> None:
    assert job.status == JobStatus.JOB_STATUS_FAILED, (name, job)
    assert job.error == FAILED_WITH[name], (name, job.error)
    if name in TAILS:
        assert TAILS[name] in job.output_tail, (name, job.output_tail)


def assert_logged_bytes_arrived_as_text(job: Job) -> None:
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert job.output_tail.splitlines() == ["caf\u00e9", "bad \ufffd byte", "", "last line"]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, odd_distribution: Path) -> Iterator[Server]:
    """A scheduler service without its embedded worker; it knows the odd handlers too (it
    validates a task's handler when the task is saved)."""
    tmp = tmp_path_factory.mktemp("api")
    srv = Server(
        tmp, env={"WORKER_IS_ENABLED": "false", "PYTHONPATH": str(odd_distribution)}, name="api"
    )
    try:
        srv.wait_healthy()
        with Client(srv.address) as client:
            create_tasks(client)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def odd_worker(
    tmp_path_factory: pytest.TempPathFactory, odd_distribution: Path, api: Server
) -> Iterator[WorkerProc]:
    """One ``tickwork worker`` process for all the tests of this module."""
    tmp = tmp_path_factory.mktemp("worker")
    proc = WorkerProc(tmp, api.address, env={"PYTHONPATH": str(odd_distribution)})
    try:
        wait_for(lambda: connections(proc), what="the worker to connect")
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def api_client(api: Server) -> Iterator[Client]:
    with Client(api.address) as client:
        yield client


def assert_still_the_same_worker(proc: WorkerProc, pid: int) -> None:
    assert proc.popen.poll() is None, proc.output()
    assert proc.pid == pid
    assert connections(proc) == 1, proc.output()


@pytest.mark.parametrize("name", sorted(FAILED_WITH))
def test_the_job_fails_naming_what_the_handler_did_and_the_worker_goes_on(
    api_client: Client, odd_worker: WorkerProc, name: str
) -> None:
    pid = odd_worker.pid
    assert_failed_as_expected(run_and_wait(api_client, name), name)
    assert run_and_wait(api_client, "plain").status == JobStatus.JOB_STATUS_SUCCEEDED
    assert_still_the_same_worker(odd_worker, pid)


def test_bytes_and_none_passed_to_ctx_log_arrive_as_text(
    api_client: Client, odd_worker: WorkerProc
) -> None:
    pid = odd_worker.pid
    assert_logged_bytes_arrived_as_text(run_and_wait(api_client, "odd-logs-bytes"))
    assert run_and_wait(api_client, "plain").status == JobStatus.JOB_STATUS_SUCCEEDED
    assert_still_the_same_worker(odd_worker, pid)


def test_the_embedded_worker_of_serve_survives_every_odd_handler(
    tmp_path: Path, odd_distribution: Path
) -> None:
    srv = Server(tmp_path, env={"PYTHONPATH": str(odd_distribution)})
    try:
        srv.wait_healthy()
        with Client(srv.address) as client:
            create_tasks(client)
            for name in FAILED_WITH:
                assert_failed_as_expected(run_and_wait(client, name), name)
            assert_logged_bytes_arrived_as_text(run_and_wait(client, "odd-logs-bytes"))
            assert run_and_wait(client, "plain").status == JobStatus.JOB_STATUS_SUCCEEDED
        assert srv.popen.poll() is None, srv.output()
        assert connections(srv) == 1, srv.output()
        assert "background task embedded-worker crashed" not in srv.output(), srv.output()
    finally:
        srv.stop()
