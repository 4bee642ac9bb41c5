"""Metric isolation: what a job's own process costs, next to a bare process spawn.

Measured in one process pinned to one core, with everything it starts (the job process
server, the guard, the job processes) on that core too, one job at a time:

- tickwork: a no-op python job (:func:`bench.noop.noop`) through the python handler, as
  the worker runs it: a job process from the job process server, its pipes, the guard's
  registration, the call, the result, the exit and the reaping;
- reference: ``/bin/true`` started and waited for with asyncio's subprocess support (a
  fork and exec of a tiny program; no interpreter, no imports).

Reported per job: the median wall time, and the CPU time of every process involved
(this one, the job process server and the job processes it reaped), which on one busy
core is what limits the jobs per second.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median

NAME = "isolation"
NOOP = "bench.noop:noop"
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it has reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / _CLK_TCK


def _own_cpu_s() -> float:
    self_ = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime


async def _measure(n: int, one: Callable[[], Awaitable[None]], server_pid: int) -> Sample:
    for _ in range(5):  # warm up: imports, the server's first fork, caches
        await one()
    times = []
    cpu0 = _own_cpu_s() + (_tree_cpu_s(server_pid) if server_pid else 0.0)
    t0 = time.perf_counter()
    for _ in range(n):
        start = time.perf_counter()
        await one()
        times.append(time.perf_counter() - start)
    elapsed = time.perf_counter() - t0
    cpu = _own_cpu_s() + (_tree_cpu_s(server_pid) if server_pid else 0.0) - cpu0
    times.sort()
    return {
        "median_ms": 1000 * statistics.median(times),
        "p90_ms": 1000 * times[int(0.9 * (len(times) - 1))],
        "cpu_ms_per_job": 1000 * cpu / n,
        "jobs_per_s": n / elapsed,
    }


async def _python_jobs(n: int) -> Sample:
    from worker_svc.handlers import JobContext, PythonHandler
    from worker_svc.handlers._jobproc import _SERVER, start_job_process_server

    start_job_process_server()
    handler = PythonHandler()
    lines: list[tuple[str, str]] = []
    ctx = JobContext(
        job_id=1,
        task_id=1,
        task_name="noop",
        attempt=1,
        timeout_s=None,
        log=lambda stream, line: lines.append((stream, line)),
    )

    async def one() -> None:
        await handler.run({"callable": NOOP}, ctx)

    await one()
    server = _SERVER._proc
    if server is None:
        raise harness.BenchError("the job process server did not start")
    sample = await _measure(n, one, server.pid)
    if lines:
        raise harness.BenchError(f"a no-op job wrote output: {lines[:3]}")
    return sample


async def _bare_spawns(n: int) -> Sample:
    async def one() -> None:
        proc = await asyncio.create_subprocess_exec("/bin/true")
        if await proc.wait() != 0:
            raise harness.BenchError("/bin/true failed")

    return await _measure(n, one, 0)


def run(cfg: Config) -> MetricResult:
    """Interleave no-op python jobs and bare spawns, one at a time, on the driver's core."""
    n: int = cfg.pick(20, 200, 1000)
    samples = harness.interleave(
        cfg.reps,
        {
            "python-job": lambda rep: asyncio.run(_python_jobs(n)),
            "bare-spawn": lambda rep: asyncio.run(_bare_spawns(n)),
        },
    )
    job, bare = samples["python-job"], samples["bare-spawn"]
    peer = "bare spawn of /bin/true"
    figures = [
        Figure(
            NAME,
            "no-op python job in its own process, wall time per job (median)",
            "ms",
            median(column(job, "median_ms")),
            median(column(bare, "median_ms")),
            peer,
            tickwork_samples=column(job, "median_ms"),
            peer_samples=column(bare, "median_ms"),
        ),
        Figure(
            NAME,
            "no-op python job in its own process, CPU per job (all processes)",
            "ms",
            median(column(job, "cpu_ms_per_job")),
            median(column(bare, "cpu_ms_per_job")),
            peer,
            tickwork_samples=column(job, "cpu_ms_per_job"),
            peer_samples=column(bare, "cpu_ms_per_job"),
        ),
    ]
    return MetricResult(NAME, figures, {"jobs": n, "samples": samples})
