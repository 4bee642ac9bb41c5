"""A backfill of the most windows (10,000, BUFFER_ALL) on a real service process does not
stall it: health stays SERVING, the per-second schedule misses no fire, and a running job
of the backfilled task keeps its lease and succeeds."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler_svc.backfill import MAX_WINDOWS
from tests.harness import Server, wait_for
from tests.queue_helpers import wait_status
from tickwork import Client, JobStatus
from tickwork.v1.schedule_pb2 import FireOutcome

UTC = dt.UTC
#: How long the job that runs through the backfill sleeps, seconds.
JOB_S = 30


class HealthWatch:
    """Asks the service's health every 0.2 s on a thread of its own, until stopped, and
    keeps every answer that was not SERVING (a call that fails or takes 2 s included)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.checks = 0
        self.bad: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-watch", daemon=True)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not self._stop.wait(0.2):
                at = dt.datetime.now(UTC).isoformat()
                try:
                    status = stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0).status
                except grpc.RpcError as err:
                    self.bad.append(f"{at}: {err.code().name}")
                else:
                    if status != health_pb2.HealthCheckResponse.SERVING:
                        self.bad.append(f"{at}: {health_pb2.HealthCheckResponse.Name(status)}")
                self.checks += 1


@pytest.fixture
def busy_server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """The embedded service with two job slots (the long job and the per-second one),
    a 6 s lease renewed every second: a write path held for seconds would lose it."""
    srv = Server(
        tmp_path,
        env={
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "TICKWORK_MAX_RUNNING_JOBS": "2",
            "TICKWORK_LEASE_TTL_SECONDS": "6",
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "1",
        },
        database_url=database_url,
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def test_a_backfill_of_10000_windows_keeps_the_service_serving(
    tmp_path: Path, busy_server: Server
) -> None:
    marker = tmp_path / "long-ran"
    with Client(busy_server.address) as client:
        # Its first run sleeps; the backfilled runs after it find the marker and end.
        client.create_task(
            "long",
            "shell",
            {"argv": ["sh", "-c", f'mkdir "$0" || exit 0; sleep {JOB_S}', str(marker)]},
        )
        client.create_task("tick", "shell", {"argv": ["true"]})
        client.create_schedule(
            "every-minute",
            ["long"],
            cron="* * * * *",
            enabled=False,  # fires only through the backfill
            overlap_policy="BUFFER_ALL",
            max_buffered=MAX_WINDOWS,
        )
        client.create_schedule("every-second", ["tick"], cron="* * * * * *")
        (run,) = client.run("long")
        wait_status(client, run.job_id, JobStatus.JOB_STATUS_RUNNING)
        end = dt.datetime.now(UTC).replace(second=0, microsecond=0)
        start = end - dt.timedelta(minutes=MAX_WINDOWS)

        with HealthWatch(busy_server.address) as health:
            began = time.monotonic()
            done = client.backfill_schedule("every-minute", start, end, overlap_policy="BUFFER_ALL")
            backfill_s = time.monotonic() - began
            finished = wait_status(
                client, run.job_id, JobStatus.JOB_STATUS_SUCCEEDED, timeout_s=JOB_S + 30
            )
            wait_for(lambda: health.checks > 0, what="a health check")
        print(f"backfill of {len(done.windows)} windows: {backfill_s:.2f} s")

        assert len(done.windows) == MAX_WINDOWS
        assert all(w.runs[0].job_id and not w.runs[0].skipped for w in done.windows)
        assert finished.error == "" and finished.attempt == 1
        assert health.bad == [], f"{len(health.bad)} of {health.checks} checks: {health.bad[:5]}"
        fires = sorted(client.list_fires("every-second", limit=1000), key=lambda f: f.id)
        times = [f.fire_time.ToDatetime(tzinfo=UTC) for f in fires]
        assert [f for f in fires if f.outcome == FireOutcome.FIRE_OUTCOME_MISSED] == []
        gaps = [(a, b) for a, b in itertools.pairwise(times) if b - a != dt.timedelta(seconds=1)]
        assert gaps == [] and len(times) >= JOB_S, gaps
