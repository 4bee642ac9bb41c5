"""Metric 1, dispatch overhead: no-op jobs per second from enqueue to outcome recorded.

tickwork: ``tickwork serve`` in its default embedded mode (API + queue + scheduler loop +
one worker over the gRPC stream, one slot: one job at a time, each in its own job process
forked from the worker's job process server), on a SQLite file and on the local
PostgreSQL. The driver creates N no-op python tasks (not timed), then, timed: RunTasks for
all of them (chunks of 500 ids), and waits (WatchJob) until the last job's outcome is
recorded; the queue order makes the last job enqueued the last one run. All N must end
SUCCEEDED.

Peer: procrastinate, one worker with concurrency 1 on the same PostgreSQL server; timed:
``batch_defer_async`` of N no-op jobs (chunks of 500), then polling (every 5 ms) until
the last job is ``succeeded``.

Each run gets its own fresh database. Services are pinned to SERVICE_CPUS; the driver to
DRIVER_CPUS; PostgreSQL is unpinned, shared alike.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import asyncpg

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from tickwork import Client, JobStatus

NAME = "dispatch"
NOOP = "bench.noop:noop"


def _tickwork_run(cfg: Config, database_url: str, n: int, name: str) -> Sample:
    with (
        harness.tickwork_service(cfg, database_url, name=name) as service,
        Client(service.address, timeout=120) as client,
    ):
        ids = [
            client.create_task(f"noop-{i:06d}", "python", {"callable": NOOP}).id for i in range(n)
        ]
        warm = client.create_task("warm-up", "python", {"callable": NOOP})
        job = client.wait(client.run(warm.id)[0].job_id, timeout=60)
        if job.status != JobStatus.JOB_STATUS_SUCCEEDED:
            raise harness.BenchError(f"warm-up job ended {job.status}: {job.error}")
        with harness.profiled(cfg, service.pid, name):
            cpu0 = harness.cpu_seconds(service.pid)
            t0 = time.perf_counter()
            last = 0
            for start in range(0, n, 500):
                runs = client.run(*ids[start : start + 500])
                last = runs[-1].job_id
            job = client.wait(last, timeout=600)
            elapsed = time.perf_counter() - t0
            cpu = harness.cpu_seconds(service.pid) - cpu0
        done = client.list_jobs(statuses=["SUCCEEDED"], limit=n + 10)
        if job.status != JobStatus.JOB_STATUS_SUCCEEDED or len(done) != n + 1:
            raise harness.BenchError(
                f"{name}: {len(done) - 1} of {n} jobs succeeded; last ended {job.status}"
            )
    return {
        "jobs_per_s": n / elapsed,
        "elapsed_s": elapsed,
        "service_cpu_ms_per_job": 1000 * cpu / n,
    }


def _tickwork_sqlite(cfg: Config, n: int, rep: int) -> Sample:
    path = cfg.workdir / f"dispatch-sqlite-{rep}.db"
    try:
        return _tickwork_run(
            cfg, f"sqlite+aiosqlite:///{path}", n, f"dispatch-tickwork-sqlite-{rep}"
        )
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _tickwork_pg(cfg: Config, n: int, rep: int) -> Sample:
    with harness.pg_database("bench_tw") as dsn:
        return _tickwork_run(cfg, harness.sqlalchemy_url(dsn), n, f"dispatch-tickwork-pg-{rep}")


async def _wait_procrastinate(dsn: str, job_id: int, timeout_s: float) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = await conn.fetchval(
                "SELECT status FROM procrastinate_jobs WHERE id=$1", job_id
            )
            if status in ("succeeded", "failed", "aborted", "cancelled"):
                return str(status)
            await asyncio.sleep(0.005)
        return "timeout"
    finally:
        await conn.close()


async def _count_procrastinate(dsn: str, status: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM procrastinate_jobs WHERE status=$1", status)
        )
    finally:
        await conn.close()


def _procrastinate(cfg: Config, n: int, rep: int) -> Sample:
    from bench.peers import procrastinate_worker as pw

    with harness.pg_database("bench_pc") as dsn:
        asyncio.run(pw.apply_schema(dsn))
        name = f"dispatch-procrastinate-{rep}"
        argv = harness.service_argv(
            cfg, [sys.executable, "-m", "bench.peers.procrastinate_worker", dsn]
        )
        proc = harness.Proc(argv, harness.child_env(), cfg.workdir / f"{name}.log")
        try:
            pid = proc.target_pid("bench.peers.procrastinate_worker")
            warm = asyncio.run(pw.defer(dsn, 1))
            status = asyncio.run(_wait_procrastinate(dsn, warm[-1], 60))
            proc.check_alive()
            if status != "succeeded":
                raise harness.BenchError(f"procrastinate warm-up job: {status}\n{proc.output()}")
            with harness.profiled(cfg, pid, name):
                cpu0 = harness.cpu_seconds(pid)
                t0 = time.perf_counter()
                ids = asyncio.run(pw.defer(dsn, n))
                status = asyncio.run(_wait_procrastinate(dsn, ids[-1], 600))
                elapsed = time.perf_counter() - t0
                cpu = harness.cpu_seconds(pid) - cpu0
            done = asyncio.run(_count_procrastinate(dsn, "succeeded"))
            if status != "succeeded" or done != n + 1:
                raise harness.BenchError(f"procrastinate: {done - 1} of {n} jobs succeeded")
        finally:
            proc.stop()
    return {
        "jobs_per_s": n / elapsed,
        "elapsed_s": elapsed,
        "service_cpu_ms_per_job": 1000 * cpu / n,
    }


def run(cfg: Config) -> MetricResult:
    """Interleave tickwork (SQLite, PostgreSQL) and procrastinate (PostgreSQL)."""
    harness.require("procrastinate", "psycopg")
    n: int = cfg.pick(20, 1000, 5000)
    samples = harness.interleave(
        cfg.reps,
        {
            "tickwork-sqlite": lambda rep: _tickwork_sqlite(cfg, n, rep),
            "tickwork-postgresql": lambda rep: _tickwork_pg(cfg, n, rep),
            "procrastinate-postgresql": lambda rep: _procrastinate(cfg, n, rep),
        },
    )
    sqlite = column(samples["tickwork-sqlite"], "jobs_per_s")
    pg = column(samples["tickwork-postgresql"], "jobs_per_s")
    peer = column(samples["procrastinate-postgresql"], "jobs_per_s")
    figures = [
        Figure(
            NAME,
            "jobs/s, tickwork SQLite vs procrastinate PG",
            "jobs/s",
            median(sqlite),
            median(peer),
            "procrastinate",
            target=">= 2x procrastinate",
            met=median(sqlite) >= 2 * median(peer),
            tickwork_samples=sqlite,
            peer_samples=peer,
        ),
        Figure(
            NAME,
            "jobs/s, same PostgreSQL",
            "jobs/s",
            median(pg),
            median(peer),
            "procrastinate",
            target=">= 1.5x procrastinate",
            met=median(pg) >= 1.5 * median(peer),
            tickwork_samples=pg,
            peer_samples=peer,
        ),
        Figure(
            NAME,
            "service CPU per job, same PostgreSQL",
            "ms",
            median(column(samples["tickwork-postgresql"], "service_cpu_ms_per_job")),
            median(column(samples["procrastinate-postgresql"], "service_cpu_ms_per_job")),
            "procrastinate",
            tickwork_samples=column(samples["tickwork-postgresql"], "service_cpu_ms_per_job"),
            peer_samples=column(samples["procrastinate-postgresql"], "service_cpu_ms_per_job"),
        ),
    ]
    return MetricResult(NAME, figures, {"jobs": n, "samples": samples})
