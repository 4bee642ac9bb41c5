"""Soak: three replicas on one PostgreSQL database, one worker, a hundred schedules firing
every second for thirty seconds, replicas SIGKILLed and restarted at random.

Afterwards every expected (schedule, fire time) is recorded exactly once with what came of
it (enqueued as job N, skipped and why, or missed under the catch-up policy), no fire
enqueued a job twice, ListFires shows users the same records, and no job is left RUNNING.

"Left RUNNING" is judged honestly: a replica killed under the worker breaks its stream, the
worker stops the job but cannot report it, and the job stays RUNNING in the database until
its lease expires. So the check comes after the worker was stopped (it reports its last
job) and a live replica had a lease TTL to reap: then every job has ended, those of lost
streams as FAILED "lease lost".

PostgreSQL only: SQLite is single-process, so replicas on it are not a deployment. The
random choices come from TICKWORK_SOAK_SEED (default below); a failure prints the seed and
the kill/restart events to replay it.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections import Counter
from pathlib import Path

from scheduler_svc.store import LEASE_LOST
from tests.databases import run_sql
from tests.harness import WorkerProc, wait_for
from tests.test_replicas import (  # noqa: F401 - pg_url is a fixture
    LEASE_TTL_S,
    REPLICA_ENV,
    SECOND,
    SLACK_S,
    UTC,
    Replicas,
    check_fire_records,
    check_list_fires,
    create_every_second_schedules,
    fire_rows,
    job_rows,
    pg_url,
    wait_until_fired,
    whole_second,
)
from tickwork import Client

SEED = int(os.environ.get("TICKWORK_SOAK_SEED", "5"))
SCHEDULES = 100
SOAK_S = 30.0
EVENT_EVERY_S = (1.5, 4.0)
"""Seconds between two kill-or-restart events, drawn uniformly."""


def running_jobs(url: str) -> int:
    [(count,)] = run_sql(url, "SELECT count(*) FROM jobs WHERE status = 'RUNNING'")
    return int(count)


def test_soak_replicas_killed_at_random(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    rng = random.Random(SEED)
    events: list[str] = [f"seed {SEED}"]
    replicas = Replicas(tmp_path, pg_url, 3, REPLICA_ENV)
    worker: WorkerProc | None = None
    try:
        replicas.wait_healthy()
        with Client(replicas[0].address) as client:
            first = create_every_second_schedules(
                client, SCHEDULES, "python", {"callable": "tests.handler_fixtures:returns_none"}
            )
        ids = list(first)
        # The worker names every replica and uses whichever is up.
        worker = WorkerProc(tmp_path, replicas.addresses(), env=REPLICA_ENV)

        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < SOAK_S:
            # Pacing the chaos, not waiting for a condition.
            time.sleep(min(rng.uniform(*EVENT_EVERY_S), max(0.0, SOAK_S - elapsed)))
            alive = [i for i in range(len(replicas)) if replicas.alive(i)]
            dead = [i for i in range(len(replicas)) if i not in alive]
            if dead and (len(alive) == 1 or rng.random() < 0.5):
                i = rng.choice(dead)
                replicas.restart(i).wait_healthy()
                events.append(f"{time.monotonic() - started:5.1f} s restart replica{i}")
            elif len(alive) > 1:
                i = rng.choice(alive)
                replicas.kill(i)
                events.append(f"{time.monotonic() - started:5.1f} s SIGKILL replica{i}")
        until = whole_second(dt.datetime.now(UTC)) - SECOND
        print("\n".join(events))

        # The worker reports its last job and leaves; then the expired leases are reaped.
        assert worker.stop() == 0, worker.output()[-3000:]
        wait_until_fired(pg_url, ids, until, timeout_s=30)
        wait_for(
            lambda: running_jobs(pg_url) == 0,
            timeout_s=LEASE_TTL_S * 2 + SLACK_S,
            what="no job RUNNING once the worker stopped and the leases expired",
        )
        live = next(i for i in range(len(replicas)) if replicas.alive(i))
        with Client(replicas[live].address) as client:
            check_list_fires(client, fire_rows(pg_url), ids, until)
    finally:
        if worker is not None:
            worker.stop()
        codes = replicas.stop()
    assert all(code == 0 for code in codes if code is not None), codes

    # Nothing runs now: the records are final. Every schedule is checked up to the latest
    # second all of them reached, which is at least the end of the soak.
    fires = fire_rows(pg_url)
    jobs = job_rows(pg_url)
    covered = min(max(f.fire_time for f in fires[s]) for s in ids)
    assert covered >= until
    counts = check_fire_records(fires, jobs, first, covered)
    statuses = Counter(j.status for j in jobs)
    lost = [j for j in jobs if j.error == LEASE_LOST]
    print(f"fires: {dict(counts)}; jobs: {dict(statuses)}; lease lost: {len(lost)}")
    assert statuses["RUNNING"] == 0, "\n".join(events)
    assert all(j.status == "FAILED" for j in lost)
    assert counts["ENQUEUED"] >= SOAK_S and statuses["SUCCEEDED"] >= SOAK_S, counts
