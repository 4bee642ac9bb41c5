"""Metric 3, tick cost against the number of stored enabled schedules, none due.

For each count M a SQLite database is built once (migrated, then M schedules inserted
directly, each enabled with next_run_at spread over the coming year, so none is due).

- CPU per tick: in the driver process, ``Scheduler.tick(now)`` with the real store on that
  database (the queue is never called: nothing is due), warm-up ticks first; CPU is
  ``time.process_time`` (every thread of the process, the database threads too) per tick.
- Idle CPU: ``tickwork serve`` (embedded, default settings) on that database, pinned; after
  a settling pause, its CPU time over a quiet interval, as a percentage of one core.

Counts: tiny 100 / 1,000; small 1,000 / 100,000; full 1,000 / 100,000 / 1,000,000.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
from collections.abc import Callable
from pathlib import Path

from bench import harness, seed
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from scheduler_svc.db import Database
from scheduler_svc.hub import Hub
from scheduler_svc.scheduler import Scheduler
from scheduler_svc.settings import Settings
from scheduler_svc.store import Store
from tickwork.v1 import queue_pb2

NAME = "tick"
UTC = dt.UTC

#: Expressions of the seeded schedules (none is due: next runs are set in the future).
EXPRESSIONS = (
    ("0 3 * * *", "UTC"),
    ("*/5 * * * *", "Europe/Berlin"),
    ("0 0 L * *", "America/New_York"),
    ("30 2 * * 1-5", "Asia/Tokyo"),
)


class _NoQueue:
    """A QueueService that must not be called: nothing is due."""

    async def EnqueueFires(
        self, request: queue_pb2.EnqueueFiresRequest
    ) -> queue_pb2.EnqueueFiresResponse:
        raise AssertionError("a schedule was due in the tick benchmark")


def _build(path: Path, count: int) -> str:
    url = f"sqlite+aiosqlite:///{path}"
    rng = random.Random(count)
    start = dt.datetime.now(UTC) + dt.timedelta(days=1)
    next_runs = [start + dt.timedelta(seconds=rng.randrange(365 * 86400)) for _ in range(count)]
    t0 = time.perf_counter()
    asyncio.run(
        seed.seed(url, task_count=1, cron=EXPRESSIONS, next_runs=next_runs, one_task_each=False)
    )
    harness.log(f"  built {count:,} schedules in {time.perf_counter() - t0:.1f}s")
    return url


async def _ticks(url: str, ticks: int) -> Sample:
    db = Database(url)
    try:
        settings = Settings.from_env({}, database_url=url)
        scheduler = Scheduler(
            settings, Store(db), _NoQueue(), clock=lambda: dt.datetime.now(UTC), hub=Hub()
        )
        for _ in range(5):
            await scheduler.tick(dt.datetime.now(UTC))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(ticks):
            await scheduler.tick(dt.datetime.now(UTC))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        await db.dispose()
    return {"tick_cpu_ms": 1000 * cpu / ticks, "tick_wall_ms": 1000 * wall / ticks}


def _idle(cfg: Config, url: str, name: str, settle_s: float, measure_s: float) -> float:
    with harness.tickwork_service(cfg, url, name=name) as service:
        time.sleep(settle_s)
        with harness.profiled(cfg, service.pid, name):
            cpu0, wall0 = harness.cpu_seconds(service.pid), time.perf_counter()
            time.sleep(measure_s)
            cpu = harness.cpu_seconds(service.pid) - cpu0
            wall = time.perf_counter() - wall0
    return 100 * cpu / wall


def run(cfg: Config) -> MetricResult:
    """Build the databases, then interleave the counts."""
    counts: tuple[int, ...] = cfg.pick((100, 1000), (1000, 100_000), (1000, 100_000, 1_000_000))
    ticks: int = cfg.pick(20, 200, 200)
    settle_s, measure_s = cfg.pick((0.5, 2.0), (5.0, 20.0), (5.0, 30.0))
    urls = {n: _build(cfg.workdir / f"tick-{n}.db", n) for n in counts}

    def runner(n: int) -> Callable[[int], Sample]:
        def one(rep: int) -> Sample:
            sample = asyncio.run(_ticks(urls[n], ticks))
            sample["idle_cpu_pct"] = _idle(
                cfg, urls[n], f"tick-idle-{n}-{rep}", settle_s, measure_s
            )
            return sample

        return one

    samples = harness.interleave(cfg.reps, {f"{n:,}": runner(n) for n in counts})
    small, big = f"{counts[0]:,}", f"{counts[-1]:,}"
    figures = []
    for n in counts:
        key = f"{n:,}"
        cpu = column(samples[key], "tick_cpu_ms")
        fig = Figure(
            NAME, f"CPU per tick, {key} schedules", "ms", median(cpu), tickwork_samples=cpu
        )
        if key == big:
            base = median(column(samples[small], "tick_cpu_ms"))
            fig.peer, fig.peer_name = base, f"tickwork at {small}"
            fig.target = f"< 5 ms and <= 2x the {small} figure"
            fig.met = fig.tickwork < 5 and fig.tickwork <= 2 * base
            fig.peer_samples = column(samples[small], "tick_cpu_ms")
        figures.append(fig)
    for n in counts:
        key = f"{n:,}"
        idle = column(samples[key], "idle_cpu_pct")
        figures.append(
            Figure(
                NAME,
                f"idle CPU of the service, {key} schedules",
                "% of a core",
                median(idle),
                target="< 1%",
                met=median(idle) < 1,
                tickwork_samples=idle,
            )
        )
    wall = {k: median(column(v, "tick_wall_ms")) for k, v in samples.items()}
    return MetricResult(NAME, figures, {"counts": counts, "tick_wall_ms": wall, "samples": samples})
