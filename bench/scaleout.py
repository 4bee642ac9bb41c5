"""Metric scaleout: draining I/O-bound jobs with more slots, and the memory it takes.

Each job waits 0.5 s without using the CPU (:func:`bench.noop.wait`, like a task calling
an API), so a slot drains at most 2 jobs/s: scaling efficiency is the drain rate over
(slots x 2 jobs/s).

tickwork: ``tickwork serve`` on a fresh PostgreSQL database with its embedded worker off
and TICKWORK_MAX_RUNNING_JOBS at the most slots asked for; per configuration, dedicated
``tickwork worker --slots K`` processes (1 slot, 8 slots, 32 slots, and 32 as 4 workers of
8), started and connected before the clock starts. Timed: RunTasks for every job's task
(one job per task; chunks of 500), until the last job ended; the drain time is the latest
job's finish time minus the start. The 1-slot run drains fewer jobs (it would take 1,000 s
at full size). All must end SUCCEEDED.

Peer: procrastinate on the same PostgreSQL server with concurrency 8 and 32, the wait as an
``async def`` task (procrastinate runs sync tasks in threads and advises against
concurrency for blocking ones); timed: ``batch_defer_async`` of every job, until the last
``succeeded`` event.

CPU per job, over the drain: the service's, and the workers' with everything they started
(the guard, the job process server, the job processes), against procrastinate's worker's.
With every process on one core, this is what bounds the drain rate at 32 slots.

Memory: the peak RSS (VmHWM) of the 32-slot worker (and of its job process server, which
every job forks from), and of the service, over the whole run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass

import asyncpg

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from tickwork import Client, JobStatus

NAME = "scaleout"
WAIT = "bench.noop:wait"


@dataclass(frozen=True)
class Shape:
    """One run's configuration: ``workers`` workers of ``slots`` slots, ``jobs`` jobs."""

    workers: int
    slots: int
    jobs: int

    @property
    def key(self) -> str:
        """How its samples are named: ``1x8``, ``4x8``..."""
        return f"{self.workers}x{self.slots}"

    @property
    def total_slots(self) -> int:
        """Jobs that may run at once."""
        return self.workers * self.slots


@dataclass(frozen=True)
class Plan:
    """What a size runs."""

    wait_s: float
    shapes: tuple[Shape, ...]
    peer_concurrency: tuple[int, ...]
    peer_jobs: int


def plan(cfg: Config) -> Plan:
    """The configurations of this run's size."""
    if cfg.size == "tiny":
        return Plan(0.1, (Shape(1, 2, 8), Shape(2, 1, 8)), (2,), 8)
    jobs = cfg.pick(0, 200, 2000)
    one_slot = cfg.pick(0, 10, 100)
    shapes = (Shape(1, 1, one_slot), Shape(1, 8, jobs), Shape(1, 32, jobs), Shape(4, 8, jobs))
    return Plan(0.5, shapes, (8, 32), jobs)


def _worker_procs(cfg: Config, address: str, shape: Shape, name: str) -> list[harness.Proc]:
    procs = []
    for index in range(shape.workers):
        worker = ["worker", "--server", address, "--slots", str(shape.slots)]
        argv = harness.service_argv(cfg, [sys.executable, "-m", "tickwork.cli", *worker])
        env = harness.child_env(TICKWORK_SERVER=address)
        procs.append(harness.Proc(argv, env, cfg.workdir / f"{name}-w{index}.log"))
    return procs


def _wait_connected(procs: list[harness.Proc], slots: int, timeout_s: float = 120.0) -> None:
    """Until every worker's every slot holds its lease (its log says so) and its job
    process server has forked its first spare child (its imports are done)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in procs:
            proc.check_alive()
        if all(
            p.output().count("as the active worker") >= slots
            and len(harness.descendants(p.popen.pid)) >= 2
            for p in procs
        ):
            return
        time.sleep(0.05)
    raise harness.BenchError(f"workers not all active after {timeout_s}s:\n{procs[0].output()}")


def _drain_tickwork(client: Client, names: list[str], started: float, timeout_s: float) -> float:
    """Seconds from ``started`` (Unix time) to the last of ``names``' jobs' finish."""
    deadline = time.monotonic() + timeout_s
    while client.list_jobs(statuses=["QUEUED", "RUNNING"], limit=1):
        if time.monotonic() > deadline:
            raise harness.BenchError(f"jobs still queued or running after {timeout_s}s")
        time.sleep(0.2)
    wanted = set(names)
    jobs = [j for j in client.list_jobs(limit=len(names) + 10) if j.task_name in wanted]
    succeeded = [j for j in jobs if j.status == JobStatus.JOB_STATUS_SUCCEEDED]
    if len(succeeded) != len(names):
        failed = [j.error for j in jobs if j.status != JobStatus.JOB_STATUS_SUCCEEDED][:3]
        raise harness.BenchError(f"{len(succeeded)} of {len(names)} jobs succeeded: {failed}")
    return max(j.finish_time.seconds + j.finish_time.nanos / 1e9 for j in succeeded) - started


def _tickwork(cfg: Config, p: Plan, rep: int) -> Sample:
    sample: Sample = {}
    most = max(s.total_slots for s in p.shapes)
    env = {"WORKER_IS_ENABLED": "false", "TICKWORK_MAX_RUNNING_JOBS": str(most)}
    with (
        harness.pg_database("bench_so") as dsn,
        harness.tickwork_service(
            cfg, harness.sqlalchemy_url(dsn), name=f"scaleout-tickwork-{rep}", env=env
        ) as service,
        Client(service.address, timeout=120) as client,
    ):
        for shape in p.shapes:
            name = f"scaleout-tickwork-{rep}-{shape.key}"
            names = [f"{shape.key}-{i:05d}" for i in range(shape.jobs)]
            ids = [
                client.create_task(n, "python", {"callable": WAIT, "kwargs": {"seconds": p.wait_s}})
                for n in names
            ]
            procs = _worker_procs(cfg, service.address, shape, name)
            try:
                _wait_connected(procs, shape.slots)
                cpu0 = _cpu_of(service.pid, procs)
                started = time.time()
                for start in range(0, len(ids), 500):
                    client.run(*[t.id for t in ids[start : start + 500]])
                timeout_s = 60 + 3 * p.wait_s * shape.jobs / shape.total_slots
                elapsed = _drain_tickwork(client, names, started, timeout_s)
                cpu1 = _cpu_of(service.pid, procs)
                service_cpu, workers_cpu = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
                sample[f"service_cpu_ms_{shape.key}"] = 1000 * service_cpu / shape.jobs
                sample[f"workers_cpu_ms_{shape.key}"] = 1000 * workers_cpu / shape.jobs
                if shape.key == f"1x{most}":
                    worker = procs[0].target_pid("tickwork.cli")
                    sample["worker_peak_rss_mb"] = harness.peak_rss_mb(worker)
                    sample["job_server_peak_rss_mb"] = max(
                        (_rss_of(pid) for pid in harness.descendants(worker)), default=0.0
                    )
            finally:
                for proc in procs:
                    proc.stop()
            sample[f"rate_{shape.key}"] = shape.jobs / elapsed
            harness.log(f"    {shape.key}: {shape.jobs} jobs in {elapsed:.2f} s")
        sample["service_peak_rss_mb"] = harness.peak_rss_mb(service.pid)
    return sample


def _cpu_of(service_pid: int, workers: list[harness.Proc]) -> tuple[float, float]:
    """CPU seconds so far of the service, and of the workers with everything they started
    (the guard, the job process server, the job processes)."""
    return harness.cpu_seconds(service_pid), sum(
        harness.tree_cpu_seconds(proc.popen.pid) for proc in workers
    )


def _rss_of(pid: int) -> float:
    try:
        return harness.peak_rss_mb(pid)
    except (OSError, harness.BenchError):
        return 0.0


async def _drain_procrastinate(dsn: str, count: int, started: float, timeout_s: float) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        while await conn.fetchval(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        ):
            if time.monotonic() > deadline:
                raise harness.BenchError(f"procrastinate jobs left after {timeout_s}s")
            await asyncio.sleep(0.2)
        done = await conn.fetchval(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        )
        if done != count:
            raise harness.BenchError(f"procrastinate: {done} of {count} jobs succeeded")
        last = await conn.fetchval(
            "SELECT max(at) FROM procrastinate_events WHERE type = 'succeeded'"
        )
        return float(last.timestamp()) - started
    finally:
        await conn.close()


def _procrastinate(cfg: Config, p: Plan, rep: int) -> Sample:
    from bench.peers import procrastinate_worker as pw

    sample: Sample = {}
    for concurrency in p.peer_concurrency:
        with harness.pg_database("bench_so_pc") as dsn:
            asyncio.run(pw.apply_schema(dsn))
            name = f"scaleout-procrastinate-{rep}-{concurrency}"
            argv = harness.service_argv(
                cfg,
                [sys.executable, "-m", "bench.peers.procrastinate_worker", dsn, str(concurrency)],
            )
            proc = harness.Proc(argv, harness.child_env(), cfg.workdir / f"{name}.log")
            try:
                pid = proc.target_pid("bench.peers.procrastinate_worker")
                warm = asyncio.run(pw.defer(dsn, 1, task_name="wait", kwargs={"seconds": 0}))
                timeout_s = 60 + 3 * p.wait_s * p.peer_jobs / concurrency
                asyncio.run(_drain_procrastinate(dsn, len(warm), time.time(), 60))
                proc.check_alive()
                cpu0 = harness.tree_cpu_seconds(proc.popen.pid)
                started = time.time()
                asyncio.run(
                    pw.defer(dsn, p.peer_jobs, task_name="wait", kwargs={"seconds": p.wait_s})
                )
                elapsed = asyncio.run(
                    _drain_procrastinate(dsn, p.peer_jobs + 1, started, timeout_s)
                )
                cpu = harness.tree_cpu_seconds(proc.popen.pid) - cpu0
                sample[f"cpu_ms_{concurrency}"] = 1000 * cpu / p.peer_jobs
                if concurrency == max(p.peer_concurrency):
                    sample["worker_peak_rss_mb"] = harness.peak_rss_mb(pid)
            finally:
                proc.stop()
        sample[f"rate_{concurrency}"] = p.peer_jobs / elapsed
        harness.log(f"    concurrency {concurrency}: {p.peer_jobs} jobs in {elapsed:.2f} s")
    return sample


def run(cfg: Config) -> MetricResult:
    """Interleave tickwork's slot configurations and procrastinate's concurrencies."""
    harness.require("procrastinate", "psycopg")
    p = plan(cfg)
    samples = harness.interleave(
        cfg.reps,
        {
            "tickwork": lambda rep: _tickwork(cfg, p, rep),
            "procrastinate": lambda rep: _procrastinate(cfg, p, rep),
        },
    )
    tw, pc = samples["tickwork"], samples["procrastinate"]
    figures: list[Figure] = []
    most = max(s.total_slots for s in p.shapes)
    for shape in p.shapes:
        rates = column(tw, f"rate_{shape.key}")
        peer_key = f"rate_{shape.total_slots}"
        same = shape.total_slots in p.peer_concurrency
        peer = column(pc, peer_key) if same else []
        label = f"{shape.workers} worker{'s' if shape.workers > 1 else ''} x {shape.slots}"
        target = ""
        met = None
        if same:
            target = ">= procrastinate at the same concurrency"
            met = median(rates) >= median(peer)
        figures.append(
            Figure(
                NAME,
                f"drain rate, {label} slots, {shape.jobs} jobs of {p.wait_s:g} s",
                "jobs/s",
                median(rates),
                median(peer) if same else None,
                f"procrastinate concurrency {shape.total_slots}" if same else "",
                target=target,
                met=met,
                tickwork_samples=rates,
                peer_samples=peer,
            )
        )
        efficiency = [100 * r * p.wait_s / shape.total_slots for r in rates]
        peer_eff = [100 * r * p.wait_s / shape.total_slots for r in peer]
        eff_target = ">= 80 %" if shape.total_slots == most else ""
        figures.append(
            Figure(
                NAME,
                f"scaling efficiency, {label} slots",
                "%",
                median(efficiency),
                median(peer_eff) if same else None,
                f"procrastinate concurrency {shape.total_slots}" if same else "",
                target=eff_target,
                met=(median(efficiency) >= 80) if eff_target else None,
                tickwork_samples=efficiency,
                peer_samples=peer_eff,
            )
        )
    for shape in p.shapes:
        if shape.total_slots != most:
            continue
        label = f"{shape.workers} worker{'s' if shape.workers > 1 else ''} x {shape.slots}"
        service_cpu = column(tw, f"service_cpu_ms_{shape.key}")
        workers_cpu = column(tw, f"workers_cpu_ms_{shape.key}")
        total = [a + b for a, b in zip(service_cpu, workers_cpu, strict=True)]
        peer_cpu = column(pc, f"cpu_ms_{most}")
        figures.append(
            Figure(
                NAME,
                f"CPU per job, {label} slots: service + workers (their job processes too)",
                "ms",
                median(total),
                median(peer_cpu),
                f"procrastinate worker, concurrency {most}",
                tickwork_samples=total,
                peer_samples=peer_cpu,
            )
        )
        figures.append(
            Figure(
                NAME,
                f"CPU per job, {label} slots: the service's share",
                "ms",
                median(service_cpu),
                None,
                "",
                tickwork_samples=service_cpu,
            )
        )
    for key, what in (
        ("worker_peak_rss_mb", f"peak RSS, the {most}-slot worker"),
        ("job_server_peak_rss_mb", "peak RSS, its job process server"),
        ("service_peak_rss_mb", "peak RSS, the service (API and queue)"),
    ):
        values = column(tw, key)
        peer_values = column(pc, "worker_peak_rss_mb") if key == "worker_peak_rss_mb" else []
        figures.append(
            Figure(
                NAME,
                what,
                "MiB",
                median(values),
                median(peer_values) if peer_values else None,
                f"procrastinate worker, concurrency {max(p.peer_concurrency)}"
                if peer_values
                else "",
                tickwork_samples=values,
                peer_samples=peer_values,
            )
        )
    details = {
        "wait_s": p.wait_s,
        "shapes": [s.key for s in p.shapes],
        "jobs": {s.key: s.jobs for s in p.shapes},
        "peer_jobs": p.peer_jobs,
        "samples": samples,
    }
    return MetricResult(NAME, figures, details)
