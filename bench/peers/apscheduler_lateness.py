"""APScheduler 3 side of the fire-lateness metric, run as its own (pinned) process.

``python -m bench.peers.apscheduler_lateness SPEC.json OUT.json``. SPEC holds ``db`` (SQLite
path), ``count``, ``cron`` (5 fields, or 6 with seconds first), ``period_s``, ``fires``,
``lead_s`` and ``drain_s``. A BackgroundScheduler with a SQLAlchemyJobStore on the SQLite
file, one executor thread (one job at a time, like tickwork's one worker) and
``misfire_grace_time=None`` runs ``count`` jobs (distinct ids), all first due at
``first_fire``: the first period boundary at least ``lead_s`` from now (the jobs are stored
by ``start()``, which must end before it). OUT gets ``first_fire``, ``window_end`` (after
``fires`` periods) and one record per run: job index, scheduled time, submitted time (when
the submission event is dispatched, right after the job was handed to the executor:
tickwork's "enqueued") and started time (the function entered),
plus the skipped (max instances), coalesced and missed counts. The process exits once every
fire before ``window_end`` is accounted for, or ``drain_s`` after the last one.

APScheduler 3 has no type hints, so it is imported through importlib and typed ``Any``.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import sys
import threading
import time
from typing import Any

_started: dict[int, float] = {}


def record(index: int) -> None:
    """The job: note when it started (then do nothing)."""
    _started[index] = time.time()


def _trigger(cron: str) -> Any:
    triggers = importlib.import_module("apscheduler.triggers.cron")
    fields = cron.split()
    if len(fields) == 5:
        return triggers.CronTrigger.from_crontab(cron, timezone=dt.UTC)
    second, minute, hour, day, month, dow = fields
    return triggers.CronTrigger(
        second=second,
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=dow,
        timezone=dt.UTC,
    )


def main() -> None:
    """Run the scheduler per SPEC and write OUT."""
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    background = importlib.import_module("apscheduler.schedulers.background")
    jobstores = importlib.import_module("apscheduler.jobstores.sqlalchemy")
    executors = importlib.import_module("apscheduler.executors.pool")
    events = importlib.import_module("apscheduler.events")

    count: int = spec["count"]
    period: float = spec["period_s"]
    first_ts = (int((time.time() + spec["lead_s"]) // period) + 1) * period
    first_fire = dt.datetime.fromtimestamp(first_ts, dt.UTC)
    window_end = first_ts + spec["fires"] * period
    expected = count * spec["fires"]
    deadline = window_end - period + spec["drain_s"]
    runs: list[tuple[int, float, float]] = []
    submitted: dict[tuple[int, float], float] = {}
    counters = {"max_instances": 0, "coalesced": 0, "missed": 0, "error": 0}
    accounted = [0]  # fires before window_end that ran, or were skipped / coalesced / missed
    lock = threading.Lock()
    done = threading.Event()

    def account(fires: int) -> None:
        accounted[0] += fires
        if accounted[0] >= expected:
            done.set()

    def on_event(event: Any) -> None:
        code = event.code
        index = int(event.job_id[4:])
        with lock:
            if code == events.EVENT_JOB_SUBMITTED:
                now = time.time()
                times = [t.timestamp() for t in event.scheduled_run_times]
                submitted[(index, times[-1])] = now
                extra = [t for t in times[:-1] if t < window_end]
                counters["coalesced"] += len(extra)
                account(len(extra))
            elif code in (events.EVENT_JOB_EXECUTED, events.EVENT_JOB_ERROR):
                fire = event.scheduled_run_time.timestamp()
                started = _started.get(index, 0.0)
                runs.append((index, fire, started))
                counters["error"] += code == events.EVENT_JOB_ERROR
                account(fire < window_end)
            elif code == events.EVENT_JOB_MAX_INSTANCES:
                skipped = [t for t in event.scheduled_run_times if t.timestamp() < window_end]
                counters["max_instances"] += len(skipped)
                account(len(skipped))
            elif code == events.EVENT_JOB_MISSED:
                counters["missed"] += 1
                account(event.scheduled_run_time.timestamp() < window_end)

    scheduler = background.BackgroundScheduler(
        jobstores={"default": jobstores.SQLAlchemyJobStore(url=f"sqlite:///{spec['db']}")},
        executors={"default": executors.ThreadPoolExecutor(1)},
        job_defaults={"misfire_grace_time": None},
        timezone=dt.UTC,
    )
    scheduler.add_listener(
        on_event,
        events.EVENT_JOB_SUBMITTED
        | events.EVENT_JOB_EXECUTED
        | events.EVENT_JOB_ERROR
        | events.EVENT_JOB_MAX_INSTANCES
        | events.EVENT_JOB_MISSED,
    )
    trigger = _trigger(spec["cron"])
    for i in range(count):
        scheduler.add_job(
            f"{__name__}:record",
            trigger,
            args=[i],
            id=f"job-{i}",
            next_run_time=first_fire,
            replace_existing=True,
        )
    scheduler.start()
    late_setup = time.time() > first_ts - 0.5
    print(f"ready; first fire {first_fire.isoformat()}", flush=True)
    if not late_setup:
        done.wait(max(0.0, deadline - time.time()))
    scheduler.shutdown(wait=False)
    with lock:
        out = {
            "first_fire": first_ts,
            "window_end": window_end,
            "late_setup": late_setup,
            "runs": [(i, fire, submitted.get((i, fire), 0.0), st) for i, fire, st in runs],
            **counters,
        }
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
