"""Metric 5, bulk API: create N schedules through the gRPC API.

``tickwork serve`` (embedded, default settings, SQLite file, pinned) gets one task, then N
schedules, two ways, each on a fresh service and database, interleaved:

- ``CreateSchedule``: N calls from an AsyncClient keeping ``CONCURRENCY`` calls in flight
  (a script importing one by one);
- ``BatchCreateSchedules``: N / ``BATCH`` calls of ``BATCH`` schedules, one at a time
  (``AsyncClient.create_schedules``, the bulk import API).

Reported: schedules per second over the N, and the service's peak resident memory (VmHWM
of the server process) at the end.

Expressions cycle through a mix of daily and monthly ones in several zones, so none is due
during the run. Sizes: tiny 1,000, small 10,000, full 100,000.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from tickwork import AsyncClient, NewSchedule

NAME = "bulk"
CONCURRENCY = 16
BATCH = 500

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


async def _create_batched(address: str, n: int) -> float:
    async with AsyncClient(address, timeout=120) as client:
        task = await client.create_task("bulk-task", "python", {"callable": "bench.noop:noop"})
        items: list[NewSchedule] = []
        for i in range(n):
            expr, tz = MIX[i % len(MIX)]
            items.append(
                {"name": f"bulk-{i:07d}", "tasks": [task.id], "cron": expr, "timezone": tz}
            )
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            await client.create_schedules(items[start : start + BATCH])
        return time.perf_counter() - t0


def _run(cfg: Config, n: int, rep: int, *, batched: bool) -> Sample:
    name = f"bulk-{'batch' if batched else 'single'}-{rep}"
    path = cfg.workdir / f"{name}.db"
    try:
        with harness.tickwork_service(cfg, f"sqlite+aiosqlite:///{path}", name=name) as service:
            with harness.profiled(cfg, service.pid, name):
                cpu0 = harness.cpu_seconds(service.pid)
                create = _create_batched if batched else _create
                elapsed = asyncio.run(create(service.address, n))
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
    """Create N schedules per repetition and way, each on a fresh service and database."""
    n: int = cfg.pick(1000, 10_000, 100_000)
    samples = harness.interleave(
        cfg.reps,
        {
            "CreateSchedule": lambda rep: _run(cfg, n, rep, batched=False),
            "BatchCreateSchedules": lambda rep: _run(cfg, n, rep, batched=True),
        },
    )
    figures = []
    for way, label in (
        ("CreateSchedule", f"CreateSchedule x {n:,}, {CONCURRENCY} in flight"),
        ("BatchCreateSchedules", f"BatchCreateSchedules, {n:,} in calls of {BATCH}"),
    ):
        rate = column(samples[way], "schedules_per_s")
        rss = column(samples[way], "peak_rss_mb")
        cpu = column(samples[way], "service_cpu_ms_per_schedule")
        figures += [
            Figure(
                NAME,
                label,
                "schedules/s",
                median(rate),
                target=">= 2,000/s",
                met=median(rate) >= 2000,
                tickwork_samples=rate,
            ),
            Figure(
                NAME,
                f"peak RSS of the service ({way})",
                "MiB",
                median(rss),
                target="< 200 MB",
                met=median(rss) < 200 * 1e6 / 2**20,
                tickwork_samples=rss,
            ),
            Figure(
                NAME, f"service CPU per schedule ({way})", "ms", median(cpu), tickwork_samples=cpu
            ),
        ]
    details = {"schedules": n, "concurrency": CONCURRENCY, "batch": BATCH, "samples": samples}
    return MetricResult(NAME, figures, details)
