"""Metric 5, bulk API: create N schedules through the gRPC API.

``tickwork serve`` (embedded, default settings, SQLite file, pinned) gets one task, then N
CreateSchedule calls from an AsyncClient keeping ``CONCURRENCY`` calls in flight (a bulk
import as a script would do it). Reported: schedules per second over the N calls, and the
service's peak resident memory (VmHWM of the server process) at the end.

Expressions cycle through a mix of daily and monthly ones in several zones, so none is due
during the run. Sizes: tiny 300, small 10,000, full 100,000.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from tickwork import AsyncClient

NAME = "bulk"
CONCURRENCY = 16

MIX = (
    ("0 3 * * *", "UTC"),
    ("30 2 * * *", "Europe/Berlin"),
    ("0 0 L * *", "America/New_York"),
    ("15 10 * * 1-5", "Asia/Tokyo"),
    ("0 0 1 1 *", "Australia/Sydney"),
)


async def _create(address: str, n: int) -> float:
    async with AsyncClient(address, timeout=120) as client:
        task = await client.create_task("bulk-task", "python", {"callable": "bench.noop:noop"})
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(i)

        async def worker() -> None:
            while True:
                try:
                    i = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                expr, tz = MIX[i % len(MIX)]
                await client.create_schedule(f"bulk-{i:07d}", [task.id], cron=expr, timezone=tz)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return time.perf_counter() - t0


def _run(cfg: Config, n: int, rep: int) -> Sample:
    path = cfg.workdir / f"bulk-{rep}.db"
    name = f"bulk-{rep}"
    try:
        with harness.tickwork_service(cfg, f"sqlite+aiosqlite:///{path}", name=name) as service:
            with harness.profiled(cfg, service.pid, name):
                cpu0 = harness.cpu_seconds(service.pid)
                elapsed = asyncio.run(_create(service.address, n))
                cpu = harness.cpu_seconds(service.pid) - cpu0
            rss = harness.peak_rss_mb(service.pid)
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {
        "schedules_per_s": n / elapsed,
        "peak_rss_mb": rss,
        "service_cpu_ms_per_schedule": 1000 * cpu / n,
    }


def run(cfg: Config) -> MetricResult:
    """Create N schedules per repetition, each repetition on a fresh service and database."""
    n: int = cfg.pick(300, 10_000, 100_000)
    samples = harness.interleave(cfg.reps, {"tickwork": lambda rep: _run(cfg, n, rep)})["tickwork"]
    rate = column(samples, "schedules_per_s")
    rss = column(samples, "peak_rss_mb")
    cpu = column(samples, "service_cpu_ms_per_schedule")
    figures = [
        Figure(
            NAME,
            f"CreateSchedule x {n:,}",
            "schedules/s",
            median(rate),
            target=">= 2,000/s",
            met=median(rate) >= 2000,
            tickwork_samples=rate,
        ),
        Figure(
            NAME,
            "peak RSS of the service",
            "MiB",
            median(rss),
            target="< 200 MB",
            met=median(rss) < 200 * 1e6 / 2**20,
            tickwork_samples=rss,
        ),
        Figure(NAME, "service CPU per schedule", "ms", median(cpu), tickwork_samples=cpu),
    ]
    return MetricResult(
        NAME, figures, {"schedules": n, "concurrency": CONCURRENCY, "samples": samples}
    )
