"""Metric 2, fire lateness: N schedules of distinct tasks, all firing every period, K periods.

Per fire: enqueue lateness (job enqueued - fire time) and start lateness (job started - fire
time), as p50 / p99 / max over every fire of the window, and missed fires (expected fires
that enqueued no job: skipped because the previous job of the task was still queued or
running, missed, or never recorded).

tickwork: ``tickwork serve`` (embedded: scheduler loop + one worker) on a SQLite file. The
database is seeded directly (N no-op python tasks, N schedules), then every next run is set
to the first fire time T0. "Enqueued" is the job row's enqueued_at; "started" its
started_at (the job handed to the worker), both written by the service's clock.

Peer: APScheduler 3 (BackgroundScheduler, SQLAlchemyJobStore on a SQLite file, one
executor thread, misfire_grace_time=None), see :mod:`bench.peers.apscheduler_lateness`.
"Enqueued" is the job's submission to the executor; "started" is the function's entry.

Sizes: tiny 20 schedules on ``*/2 * * * * *`` for 3 fires; small 500 on ``* * * * *`` for
one minute; full 10,000 on ``* * * * *`` for three minutes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import harness, seed
from bench.harness import Config, Figure, MetricResult, Sample, column, median

NAME = "lateness"
UTC = dt.UTC


@dataclass(frozen=True)
class Spec:
    """One size of the metric."""

    count: int
    cron: str
    period_s: int
    fires: int
    lead_s: float
    drain_s: float


SPECS = {
    "tiny": Spec(20, "*/2 * * * * *", 2, 3, 2.0, 8.0),
    "small": Spec(500, "* * * * *", 60, 1, 8.0, 60.0),
    "full": Spec(10_000, "* * * * *", 60, 3, 30.0, 150.0),
}


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(expected: int, enqueue: list[float], start: list[float], not_started: int) -> Sample:
    """The sample of one run from its per-fire lateness lists (seconds); one entry of
    ``enqueue`` per fire that enqueued a job."""
    return {
        "enqueue_p50_s": percentile(enqueue, 50),
        "enqueue_p99_s": percentile(enqueue, 99),
        "enqueue_max_s": max(enqueue, default=float("nan")),
        "start_p50_s": percentile(start, 50),
        "start_p99_s": percentile(start, 99),
        "start_max_s": max(start, default=float("nan")),
        "missed": float(expected - len(enqueue)),
        "not_started": float(not_started),
        "expected": float(expected),
    }


#: Rows of the seeded schedules only (the service may create built-in ones, e.g. retention).
_OURS = "schedule_id IN (SELECT id FROM schedules WHERE name LIKE 's-%')"


def _db_time(when: dt.datetime) -> str:
    """A UTC instant as tickwork's SQLite rows store it (naive, microseconds)."""
    return when.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def _parse(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _tickwork(cfg: Config, spec: Spec, rep: int) -> Sample:
    path = cfg.workdir / f"lateness-tickwork-{rep}.db"
    url = f"sqlite+aiosqlite:///{path}"
    far = dt.datetime(2999, 1, 1, tzinfo=UTC)
    asyncio.run(
        seed.seed(
            url, task_count=spec.count, cron=[(spec.cron, "UTC")], next_runs=[far] * spec.count
        )
    )
    name = f"lateness-tickwork-{rep}"
    try:
        with harness.tickwork_service(cfg, url, name=name) as service:
            first = (int((time.time() + spec.lead_s) // spec.period_s) + 1) * spec.period_s
            t0 = dt.datetime.fromtimestamp(first, UTC)
            asyncio.run(seed.set_next_run(url, t0))
            window_end = t0 + dt.timedelta(seconds=spec.fires * spec.period_s)
            deadline = first + (spec.fires - 1) * spec.period_s + spec.drain_s
            expected = spec.count * spec.fires
            lo, hi = _db_time(t0), _db_time(window_end)
            with harness.profiled(cfg, service.pid, name):
                while time.time() < deadline:
                    time.sleep(0.5)
                    service.proc.check_alive()
                    with sqlite3.connect(path, timeout=30) as db:
                        fired = db.execute(
                            f"SELECT count(*) FROM fires WHERE {_OURS} "
                            "AND fire_time >= ? AND fire_time < ?",
                            (lo, hi),
                        ).fetchone()[0]
                        waiting = db.execute(
                            f"SELECT count(*) FROM jobs WHERE {_OURS} "
                            "AND fire_time >= ? AND fire_time < ? AND started_at IS NULL",
                            (lo, hi),
                        ).fetchone()[0]
                    if fired >= expected and waiting == 0:
                        break
            with sqlite3.connect(path, timeout=30) as db:
                rows = db.execute(
                    "SELECT fire_time, enqueued_at, started_at FROM jobs "
                    f"WHERE {_OURS} AND fire_time >= ? AND fire_time < ?",
                    (lo, hi),
                ).fetchall()
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    enqueue = [_parse(e) - _parse(f) for f, e, _ in rows]
    start = [_parse(s) - _parse(f) for f, _, s in rows if s is not None]
    return summarize(expected, enqueue, start, len(rows) - len(start))


def _apscheduler(cfg: Config, spec: Spec, rep: int) -> Sample:
    name = f"lateness-apscheduler-{rep}"
    db = cfg.workdir / f"{name}.db"
    spec_path = cfg.workdir / f"{name}.spec.json"
    out_path = cfg.workdir / f"{name}.out.json"
    spec_path.write_text(
        json.dumps(
            {
                "db": str(db),
                "count": spec.count,
                "cron": spec.cron,
                "period_s": spec.period_s,
                "fires": spec.fires,
                "lead_s": spec.lead_s,
                "drain_s": spec.drain_s,
            }
        )
    )
    argv = harness.service_argv(
        cfg,
        [sys.executable, "-m", "bench.peers.apscheduler_lateness", str(spec_path), str(out_path)],
    )
    proc = harness.Proc(argv, harness.child_env(), cfg.workdir / f"{name}.log")
    try:
        pid = proc.target_pid("bench.peers.apscheduler_lateness")
        budget = spec.lead_s + spec.period_s * (spec.fires + 1) + spec.drain_s + 600
        with harness.profiled(cfg, pid, name):
            try:
                proc.popen.wait(budget)
            except subprocess.TimeoutExpired:
                raise harness.BenchError(f"{name} did not finish in {budget:.0f}s") from None
        if proc.popen.returncode != 0 or not out_path.exists():
            raise harness.BenchError(f"{name} failed:\n{proc.output()[-4000:]}")
    finally:
        proc.stop()
        db.unlink(missing_ok=True)
    out = json.loads(out_path.read_text())
    if out["late_setup"]:
        raise harness.BenchError(f"{name}: adding the jobs outlasted lead_s={spec.lead_s}")
    if out["error"]:
        raise harness.BenchError(f"{name}: {out['error']} job runs raised")
    window = [r for r in out["runs"] if r[1] < out["window_end"]]
    missing = [r for r in window if not r[2]]
    if missing:
        raise harness.BenchError(f"{name}: {len(missing)} runs without a submission event")
    enqueue = [min(sub, st or sub) - fire for _, fire, sub, st in window]
    start = [st - fire for _, fire, _, st in window if st]
    return summarize(spec.count * spec.fires, enqueue, start, len(window) - len(start))


def run(cfg: Config) -> MetricResult:
    """Interleave tickwork and APScheduler."""
    harness.require("apscheduler", "sqlalchemy")
    spec: Spec = SPECS[cfg.size]
    samples = harness.interleave(
        cfg.reps,
        {
            "tickwork": lambda rep: _tickwork(cfg, spec, rep),
            "apscheduler": lambda rep: _apscheduler(cfg, spec, rep),
        },
    )
    figures = []
    for key, label in (
        ("enqueue_p50_s", "enqueue lateness p50"),
        ("enqueue_p99_s", "enqueue lateness p99"),
        ("enqueue_max_s", "enqueue lateness max"),
        ("start_p50_s", "start lateness p50"),
        ("start_p99_s", "start lateness p99"),
        ("start_max_s", "start lateness max"),
        ("missed", "missed fires"),
    ):
        ours = column(samples["tickwork"], key)
        theirs = column(samples["apscheduler"], key)
        fig = Figure(
            NAME,
            label,
            "fires" if key == "missed" else "s",
            median(ours),
            median(theirs),
            "APScheduler 3",
            tickwork_samples=ours,
            peer_samples=theirs,
        )
        if key == "enqueue_p99_s":
            fig.target = "< 1 s and < 0.5x peer"
            fig.met = fig.tickwork < 1.0 and fig.tickwork < 0.5 * (fig.peer or 0.0)
        elif key == "missed":
            fig.target = "0"
            fig.met = fig.tickwork == 0
        figures.append(fig)
    details = {"spec": spec.__dict__, "samples": samples}
    return MetricResult(NAME, figures, details)
