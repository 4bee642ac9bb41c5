"""The stop of a real `tickwork serve` (and `tickwork worker`) as an orchestrator sees it: on
SIGTERM every service turns NOT_SERVING at once (an open Health/Watch stream gets it, then
ends), and the process exits within TICKWORK_SHUTDOWN_GRACE_SECONDS (default 25, below
Kubernetes' 30 s kill grace), a running job that will not stop included."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler_svc.errors import SettingsError
from scheduler_svc.server import SERVICE_NAMES
from scheduler_svc.settings import Settings
from tests.harness import Server, WorkerProc, free_port, wait_for
from tests.queue_helpers import wait_status
from tickwork import Client, JobStatus
from tickwork.errors import InvalidSetting
from worker_svc.settings import WorkerSettings

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
#: A shell job that ignores SIGTERM (its sleeps die, the loop goes on): only SIGKILL, at the
#: end of the abort grace, stops it.
STUBBORN = ["sh", "-c", 'trap "" TERM; while :; do sleep 0.1; done']
#: What a stop may take beyond its bound: the interpreter's own exit.
EXIT_SLACK_S = 3.0


@dataclass
class Watcher:
    """A Health/Watch stream read in a thread: the statuses it got and how it ended."""

    address: str
    service: str = ""
    statuses: list[int] = field(default_factory=list)
    ended: str = ""

    def start(self) -> Watcher:
        threading.Thread(target=self._read, daemon=True).start()
        wait_for(lambda: self.statuses, what=f"the first Watch answer for {self.service!r}")
        return self

    def done(self) -> str:
        """How the stream ended ("OK" or a status code's name); empty while it is open."""
        return self.ended

    def _read(self) -> None:
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest(service=self.service)
            try:
                for answer in stub.Watch(request, timeout=120):
                    self.statuses.append(answer.status)
                self.ended = "OK"
            except grpc.RpcError as err:
                self.ended = err.code().name


def health_list(address: str) -> dict[str, int]:
    with grpc.insecure_channel(address) as channel:
        answer = health_pb2_grpc.HealthStub(channel).List(health_pb2.HealthListRequest(), timeout=5)
    return {name: status.status for name, status in answer.statuses.items()}


def stopped_within(proc: Server | WorkerProc, signalled: float, bound_s: float) -> float:
    """Wait for ``proc`` to exit (failing past ``bound_s`` + slack); the seconds it took."""
    code = proc.popen.wait(bound_s + EXIT_SLACK_S + 10)
    took = time.monotonic() - signalled
    assert code == 0, proc.output()
    assert took <= bound_s + EXIT_SLACK_S, f"stopped after {took:.1f} s:\n{proc.output()}"
    return took


def test_the_finish_grace_is_cut_to_fit_the_bound() -> None:
    """bound - abort grace - 2 s report margin - 3 s close, never below 0; the same rule on
    the service and on a dedicated worker."""
    cases = [
        ({}, 15.0),  # defaults: min(15, 25 - 5 - 2 - 3)
        ({"TICKWORK_SHUTDOWN_GRACE_SECONDS": "12", "WORKER_ABORT_GRACE_SECONDS": "3"}, 4.0),
        ({"TICKWORK_SHUTDOWN_GRACE_SECONDS": "60", "WORKER_SHUTDOWN_GRACE_SECONDS": "30"}, 30.0),
        ({"TICKWORK_SHUTDOWN_GRACE_SECONDS": "6", "WORKER_ABORT_GRACE_SECONDS": "1"}, 0.0),
    ]
    for env, finish_s in cases:
        assert Settings.from_env(env).job_finish_grace_s == finish_s, env
        assert WorkerSettings.from_env(environ=env).job_finish_grace_s == finish_s, env
    with pytest.raises(SettingsError, match="TICKWORK_SHUTDOWN_GRACE_SECONDS: must be > 0"):
        Settings.from_env({"TICKWORK_SHUTDOWN_GRACE_SECONDS": "0"})
    with pytest.raises(InvalidSetting, match="TICKWORK_SHUTDOWN_GRACE_SECONDS: must be > 0"):
        WorkerSettings.from_env(environ={"TICKWORK_SHUTDOWN_GRACE_SECONDS": "-1"})


def test_a_bound_too_short_to_report_an_aborted_job_is_refused() -> None:
    """A bound shorter than the abort grace + the 2 s report margin + the 3 s close would
    end the process before an aborted job's outcome is recorded: the job would then fail
    "lease lost" and be retried. Refused, naming both settings, on the service and on a
    dedicated worker; just long enough is accepted."""
    short = {"TICKWORK_SHUTDOWN_GRACE_SECONDS": "1"}
    expected = (
        r"TICKWORK_SHUTDOWN_GRACE_SECONDS: must be at least 10 s \(WORKER_ABORT_GRACE_SECONDS, "
        r"5 s, .*got 1; lower WORKER_ABORT_GRACE_SECONDS"
    )
    with pytest.raises(SettingsError, match=expected):
        Settings.from_env(short)
    with pytest.raises(InvalidSetting, match=expected):
        WorkerSettings.from_env(environ=short)
    enough = {"TICKWORK_SHUTDOWN_GRACE_SECONDS": "5.5", "WORKER_ABORT_GRACE_SECONDS": "0.5"}
    assert Settings.from_env(enough).shutdown_grace_s == 5.5
    assert WorkerSettings.from_env(environ=enough).stop_bound_s == 5.5


def test_sigterm_turns_every_service_not_serving_and_a_watch_does_not_hold_the_stop(
    tmp_path: Path,
) -> None:
    # With the web console on: its stop runs beside the service's, within the same bound.
    console = f"127.0.0.1:{free_port()}"
    srv = Server(tmp_path, env={"TICKWORK_CONSOLE_LISTEN": console}).wait_healthy()
    try:
        wait_for(lambda: "tickwork console on" in srv.output(), what="the console")
        assert health_list(srv.address) == {name: SERVING for name in ("", *SERVICE_NAMES)}
        watchers = [Watcher(srv.address).start(), Watcher(srv.address, SERVICE_NAMES[0]).start()]
        srv.kill(signal.SIGTERM)
        signalled = time.monotonic()
        for watcher in watchers:
            wait_for(watcher.done, timeout_s=10, what="the Watch stream to end")
            assert watcher.statuses == [SERVING, NOT_SERVING]
            assert watcher.ended == "OK"
        # No job runs: the open watches do not keep it for the bound (once 45 s).
        assert stopped_within(srv, signalled, bound_s=5.0) < 5.0 + EXIT_SLACK_S
        # The console ended its own way: its shutdown was not cancelled under it.
        assert "Traceback" not in srv.output(), srv.output()
    finally:
        srv.stop()


def test_sigterm_on_serve_exits_within_the_bound_with_a_job_that_ignores_sigterm(
    tmp_path: Path,
) -> None:
    """The job's finish grace (WORKER_SHUTDOWN_GRACE_SECONDS, 60 here) is cut to fit the
    bound of 12 s: 12 - abort grace 3 - report margin 2 - close 3 = 4 s; the job is then
    aborted, SIGKILLed after its abort grace, recorded ABORTED, and the process exits."""
    env = {
        "WORKER_POLL_INTERVAL_SECONDS": "1",
        "TICKWORK_SHUTDOWN_GRACE_SECONDS": "12",
        "WORKER_SHUTDOWN_GRACE_SECONDS": "60",
        "WORKER_ABORT_GRACE_SECONDS": "3",
    }
    srv = Server(tmp_path, env=env, name="serve-1").wait_healthy()
    restarted: Server | None = None
    try:
        with Client(srv.address, timeout=10) as client:
            client.create_task("stubborn", "shell", {"argv": STUBBORN})
            (run,) = client.run("stubborn")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
        watcher = Watcher(srv.address).start()
        srv.kill(signal.SIGTERM)
        signalled = time.monotonic()
        wait_for(lambda: NOT_SERVING in watcher.statuses, timeout_s=2, what="NOT_SERVING")
        took = stopped_within(srv, signalled, bound_s=12.0)
        assert took >= 4.0  # the job had its finish grace
        restarted = Server(tmp_path, env=env, name="serve-2", port=srv.port).wait_healthy()
        with Client(restarted.address, timeout=10) as client:
            job = client.get_job(run.job_id)
        assert job.status == JobStatus.JOB_STATUS_ABORTED, job
        # The service and its embedded worker end the same grace: either says so first.
        assert job.error in (
            "service stopping (its shutdown grace of 4 s ran out)",
            "worker shutting down",
        ), job
    finally:
        srv.stop()
        if restarted is not None:
            restarted.stop()


def test_sigterm_on_a_dedicated_worker_exits_within_its_bound(tmp_path: Path) -> None:
    srv = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}).wait_healthy()
    worker: WorkerProc | None = None
    try:
        with Client(srv.address, timeout=10) as client:
            client.create_task("stubborn", "shell", {"argv": STUBBORN})
            worker = WorkerProc(
                tmp_path,
                srv.address,
                env={
                    "WORKER_POLL_INTERVAL_SECONDS": "1",
                    "TICKWORK_SHUTDOWN_GRACE_SECONDS": "10",
                    "WORKER_SHUTDOWN_GRACE_SECONDS": "60",
                    "WORKER_ABORT_GRACE_SECONDS": "2",
                },
            )
            (run,) = client.run("stubborn")
            wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
            worker.kill(signal.SIGTERM)
            signalled = time.monotonic()
            # 10 - abort grace 2 - report margin 2 - close 3: 3 s to finish, then aborted.
            took = stopped_within(worker, signalled, bound_s=10.0)
            assert took >= 3.0
            job = wait_status(client, run.job_id, JobStatus.JOB_STATUS_ABORTED)
            assert "worker shutting down" in job.error, job
    finally:
        if worker is not None:
            worker.stop()
        srv.stop()
