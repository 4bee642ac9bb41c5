"""Several ``tickwork serve`` replicas on one PostgreSQL database.

Exactly one replica holds the scheduler lease (a row in ``leases`` with an expiry and a
fencing token) and ticks; when it is SIGKILLed another takes over within the lease time and
every (schedule, fire time) is still recorded exactly once. The one-active-worker rule holds
across replicas because the worker lease is a database row too.

The process tests only make sense on PostgreSQL: SQLite is tickwork's embedded, single-process
database, so replicas sharing one is not a deployment we support. They get a PostgreSQL
database of their own (the ``pg_url`` fixture, not the sqlite/postgresql ``database_url``)
and are skipped when PostgreSQL is not among TICKWORK_TEST_BACKENDS. The in-process lease
tests at the end run on both backends.

Each replica logs "scheduler lease acquired" when it becomes the leader and "fires recorded"
(with their count) for every batch of fires it handles; the tests read those logs to see who
ticked.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import itertools
import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scheduler_svc.db import Database
from scheduler_svc.hub import Hub
from scheduler_svc.replicas import APPLICATION_NAME, RECONNECT_MIN_S, ReplicaWakeups
from scheduler_svc.scheduler import Scheduler
from scheduler_svc.store import LEASE_LOST
from tests.databases import BACKENDS, create_database, drop_database, run_sql, run_sql_async
from tests.harness import Server, WorkerProc, wait_for
from tests.inprocess import inprocess
from tests.pgproxy import PgProxy
from tickwork import Client, FireOutcome, JobStatus, SkipReason
from tickwork.v1 import queue_pb2

UTC = dt.UTC
SECOND = dt.timedelta(seconds=1)

LEASE_TTL_S = 2.0
"""Scheduler, worker and job lease TTL of the replicas under test."""
TAKEOVER_S = LEASE_TTL_S * 4 / 3
"""A standby tries the lease every third of the TTL: a crashed holder is replaced this fast."""
SLACK_S = 2.0
"""Allowance for a loaded machine on top of every protocol bound."""

REPLICA_ENV = {
    "WORKER_IS_ENABLED": "false",
    "TICKWORK_SCHEDULER_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
    "TICKWORK_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
    "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "0.5",
    "WORKER_POLL_INTERVAL_SECONDS": "1",
    "WORKER_SHUTDOWN_GRACE_SECONDS": "5",
    "WORKER_ABORT_GRACE_SECONDS": "1",
    "SCHEDULER_POLL_INTERVAL_SECONDS": "5",
}
OUTCOMES = {"ENQUEUED", "SKIPPED", "MISSED"}
SKIP_REASONS = {"ALREADY_QUEUED", "ALREADY_RUNNING", "TASK_DISABLED"}


# -- fixtures and helpers (test_soak.py uses them too) -----------------------------------


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL database for this test; the test is skipped without PostgreSQL."""
    if "postgresql" not in BACKENDS:
        pytest.skip("replicas need PostgreSQL, which TICKWORK_TEST_BACKENDS leaves out")
    url = create_database("postgresql", tmp_path)
    try:
        yield url
    finally:
        drop_database(url)


class Replicas:
    """``tickwork serve`` processes on one database, each on a port of its own that it
    keeps across restarts (so a worker's address stays valid). Logs: ``replicaN.log``."""

    def __init__(self, tmp: Path, url: str, count: int, env: dict[str, str]) -> None:
        self.tmp, self.url, self.env = tmp, url, env
        self.servers = [self._start(i) for i in range(count)]

    def _start(self, i: int, port: int | None = None) -> Server:
        return Server(self.tmp, env=self.env, database_url=self.url, name=f"replica{i}", port=port)

    def __getitem__(self, i: int) -> Server:
        return self.servers[i]

    def __len__(self) -> int:
        return len(self.servers)

    def wait_healthy(self) -> None:
        """Block until every replica serves (they were started together)."""
        for server in self.servers:
            server.wait_healthy()

    def alive(self, i: int) -> bool:
        return self.servers[i].popen.poll() is None

    def kill(self, i: int) -> None:
        """SIGKILL replica ``i`` and reap it."""
        self.servers[i].kill(signal.SIGKILL)
        self.servers[i].stop()  # closes its log file; the process is gone already

    def restart(self, i: int) -> Server:
        """Start replica ``i`` again on its port (it must be dead); returns it unhealthy yet."""
        assert not self.alive(i)
        self.servers[i] = self._start(i, self.servers[i].port)
        return self.servers[i]

    def index_of_pid(self, pid: int) -> int | None:
        for i, server in enumerate(self.servers):
            if server.pid == pid and self.alive(i):
                return i
        return None

    def addresses(self) -> str:
        """A gRPC target naming every replica: a worker given it uses whichever is up."""
        return "ipv4:" + ",".join(s.address for s in self.servers)

    def stop(self) -> list[int | None]:
        """SIGTERM every replica at once; their exit codes (None for those already gone)."""
        running = [server.popen.poll() is None for server in self.servers]
        for server, up in zip(self.servers, running, strict=True):
            if up:
                server.popen.send_signal(signal.SIGTERM)
        codes = [server.stop() for server in self.servers]
        return [code if up else None for code, up in zip(codes, running, strict=True)]


def holder_pid(holder: str) -> int:
    """The pid in a lease holder id ("host:pid:random", as schedulers and workers make them)."""
    return int(holder.rsplit(":", 2)[1])


def lease(url: str, name: str) -> tuple[str, int]:
    """(holder, fencing token) of lease ``name``, read straight from the database."""
    [(holder, token)] = run_sql(url, "SELECT holder, token FROM leases WHERE name = :n", n=name)
    return str(holder), int(token)


def wait_for_leader(replicas: Replicas, *, timeout_s: float) -> tuple[int, int]:
    """Wait until a live replica holds the scheduler lease; (its index, the token)."""

    def check() -> tuple[int, int] | None:
        holder, token = lease(replicas.url, "scheduler")
        index = replicas.index_of_pid(holder_pid(holder)) if holder else None
        return None if index is None else (index, token)

    return wait_for(check, timeout_s=timeout_s, interval_s=0.05, what="a live scheduler leader")


def fired_lines(server: Server) -> int:
    """How many fires this replica's scheduler recorded (the fires= of its "fires recorded"
    log lines, one per batch)."""
    return sum(
        int(m.group(1)) for m in re.finditer(r"fires recorded .*?\bfires=(\d+)", server.output())
    )


def utc(value: dt.datetime | str) -> dt.datetime:
    """A timestamp read with plain SQL (naive UTC; text on SQLite) as an aware datetime."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def whole_second(value: dt.datetime) -> dt.datetime:
    return value.replace(microsecond=0)


@dataclass(frozen=True)
class FireRow:
    schedule_id: int
    fire_time: dt.datetime
    outcome: str
    runs: tuple[tuple[int, int, str | None], ...]
    """Per task: (task_id, job_id, skip_reason or None)."""


@dataclass(frozen=True)
class JobRow:
    id: int
    task_id: int
    schedule_id: int | None
    fire_time: dt.datetime | None
    status: str
    trigger: str
    attempt: int
    retry_of_job_id: int | None
    error: str
    worker_id: str | None


def fire_rows(url: str) -> dict[int, list[FireRow]]:
    """Every recorded fire, by schedule id, in fire-time order."""
    rows = run_sql(
        url, "SELECT schedule_id, fire_time, outcome, runs FROM fires ORDER BY id"
    )  # insertion order: duplicates, if the constraint ever let one through, stay visible
    out: dict[int, list[FireRow]] = {}
    for schedule_id, fire_time, outcome, runs in rows:
        decoded: list[dict[str, Any]] = json.loads(runs) if isinstance(runs, str) else runs
        out.setdefault(int(schedule_id), []).append(
            FireRow(
                int(schedule_id),
                utc(fire_time),
                str(outcome),
                tuple((int(r["task_id"]), int(r["job_id"]), r["skip_reason"]) for r in decoded),
            )
        )
    for fires in out.values():
        fires.sort(key=lambda f: f.fire_time)
    return out


def job_rows(url: str) -> list[JobRow]:
    rows = run_sql(
        url,
        "SELECT id, task_id, schedule_id, fire_time, status, trigger, attempt, retry_of_job_id,"
        " error, worker_id FROM jobs ORDER BY id",
    )
    return [
        JobRow(
            int(r[0]),
            int(r[1]),
            r[2],
            None if r[3] is None else utc(r[3]),
            str(r[4]),
            str(r[5]),
            int(r[6]),
            r[7],
            str(r[8]),
            r[9],
        )
        for r in rows
    ]


def wait_until_fired(
    url: str, schedule_ids: Sequence[int], until: dt.datetime, timeout_s: float
) -> None:
    """Wait until every schedule has a fire at or after ``until``.

    A schedule's fires are committed in fire-time order (one leader advances next_run only
    after the fire is recorded; a catch-up records its windows in one transaction), so from
    then on its fires up to ``until`` are all in the database and final.
    """

    def check() -> bool:
        rows = run_sql(url, "SELECT schedule_id, max(fire_time) FROM fires GROUP BY schedule_id")
        latest = {int(s): utc(t) for s, t in rows}
        return all(s in latest and latest[s] >= until for s in schedule_ids)

    wait_for(
        check, timeout_s=timeout_s, interval_s=0.1, what=f"every schedule to fire up to {until}"
    )


def check_fire_records(
    fires: dict[int, list[FireRow]],
    jobs: Sequence[JobRow],
    first: dict[int, dt.datetime],
    until: dt.datetime,
) -> Counter[str]:
    """Assert that every second from each schedule's first fire time to ``until`` was
    recorded exactly once with what came of it, and that no fire enqueued a job twice.

    ``first`` maps schedule id to the next run the schedule got when it was created; each
    task belongs to one schedule (so a skip names a job of an earlier fire, or a manual one).
    Returns the outcomes counted (ENQUEUED, SKIPPED, MISSED and the skip reasons).
    """
    counts: Counter[str] = Counter()
    jobs_by_id = {j.id: j for j in jobs}
    for schedule_id, start in first.items():
        recorded = [f for f in fires.get(schedule_id, []) if f.fire_time <= until]
        expected = [start + k * SECOND for k in range(int((until - start) / SECOND) + 1)]
        times = [f.fire_time for f in recorded]
        missing = sorted(set(expected) - set(times))
        assert not missing, f"schedule {schedule_id}: fire times never recorded: {missing[:5]}"
        twice = [t for t, n in Counter(times).items() if n > 1]
        assert not twice, f"schedule {schedule_id}: fire times recorded twice: {twice[:5]}"
        assert times == expected, f"schedule {schedule_id}: unexpected fire times"
        for fire in recorded:
            assert fire.outcome in OUTCOMES, fire
            counts[fire.outcome] += 1
            if fire.outcome == "MISSED":
                assert fire.runs == (), fire
                continue
            assert fire.runs, fire
            for task_id, job_id, reason in fire.runs:
                if reason is None:
                    job = jobs_by_id[job_id]
                    assert (job.schedule_id, job.fire_time, job.task_id) == (
                        schedule_id,
                        fire.fire_time,
                        task_id,
                    ), f"{fire} names {job}"
                    assert job.attempt == 1 and job.trigger == "SCHEDULER", job
                else:
                    assert reason in SKIP_REASONS, fire
                    counts[reason] += 1
                    if reason != "TASK_DISABLED":  # the queued or running job is named
                        earlier = jobs_by_id[job_id]
                        assert earlier.task_id == task_id, f"{fire} names {earlier}"
                        assert earlier.fire_time is None or earlier.fire_time < fire.fire_time
            new_jobs = [r for r in fire.runs if r[2] is None]
            assert (fire.outcome == "ENQUEUED") == bool(new_jobs), fire
    # The other way round: one first-attempt scheduler job per enqueued (schedule, fire time).
    enqueued = Counter(
        (j.schedule_id, j.fire_time, j.task_id)
        for j in jobs
        if j.trigger == "SCHEDULER"
        and j.retry_of_job_id is None
        and j.fire_time is not None
        and j.fire_time <= until
        and j.schedule_id in first
    )
    twice_enqueued = [key for key, n in enqueued.items() if n > 1]
    assert not twice_enqueued, f"(schedule, fire time, task) enqueued twice: {twice_enqueued[:5]}"
    named = {
        (f.schedule_id, f.fire_time, task_id)
        for fs in fires.values()
        for f in fs
        if f.fire_time <= until
        for task_id, _, reason in f.runs
        if reason is None
    }
    assert set(enqueued) == named, "jobs and ENQUEUED fire records disagree"
    return counts


def check_list_fires(
    client: Client, fires: dict[int, list[FireRow]], schedule_ids: Sequence[int], until: dt.datetime
) -> None:
    """ListFires shows users exactly the records in the database (up to ``until``)."""
    for schedule_id in schedule_ids:
        shown = [
            (
                f.fire_time.ToDatetime(tzinfo=UTC),
                FireOutcome.Name(f.outcome).removeprefix("FIRE_OUTCOME_"),
                tuple(
                    (
                        r.task_id,
                        r.job_id,
                        SkipReason.Name(r.skip_reason).removeprefix("SKIP_REASON_")
                        if r.skipped
                        else None,
                    )
                    for r in f.runs
                ),
            )
            for f in reversed(client.list_fires(schedule_id, limit=1000))
            if f.fire_time.ToDatetime(tzinfo=UTC) <= until
        ]
        stored = [
            (f.fire_time, f.outcome, f.runs)
            for f in fires.get(schedule_id, [])
            if f.fire_time <= until
        ]
        assert shown == stored, f"schedule {schedule_id}: ListFires differs from the database"


def create_every_second_schedules(
    client: Client, count: int, handler: str, params: dict[str, Any]
) -> dict[int, dt.datetime]:
    """``count`` tasks (``handler`` with ``params``), each on its own schedule firing every
    second. Returns each schedule's id with its first fire time (its next run at creation).
    """
    first = {}
    for i in range(count):
        client.create_task(f"task-{i:03d}", handler, params)
        schedule = client.create_schedule(
            f"every-second-{i:03d}", [f"task-{i:03d}"], cron="* * * * * *"
        )
        first[schedule.id] = schedule.next_run_time.ToDatetime(tzinfo=UTC)
    return first


# -- the scheduler lease across processes ------------------------------------------------


def test_one_replica_ticks_and_another_takes_over_within_the_lease_time(
    tmp_path: Path, pg_url: str
) -> None:
    """Three replicas (embedded workers on, the default mode), three schedules firing every
    second. The leader is SIGKILLed twice; each time a standby takes over within the lease
    time, and across both handovers every second is recorded exactly once: nothing is
    enqueued twice and, the gap being shorter than the misfire grace, nothing is missed."""
    replicas = Replicas(tmp_path, pg_url, 3, {**REPLICA_ENV, "WORKER_IS_ENABLED": "true"})
    try:
        replicas.wait_healthy()
        with Client(replicas[0].address) as client:
            first = create_every_second_schedules(client, 3, "shell", {"argv": ["true"]})
        ids = list(first)
        leaders: list[int] = []
        tokens: list[int] = []
        kill_times: list[dt.datetime] = []
        killed_at = 0.0
        for handover in range(3):
            leader, token = wait_for_leader(replicas, timeout_s=30)
            if handover:
                taken_s = time.monotonic() - killed_at
                print(f"replica{leader} took over {taken_s:.2f} s after the kill")
                assert taken_s <= TAKEOVER_S + SLACK_S, f"takeover took {taken_s:.1f} s"
            leaders.append(leader)
            tokens.append(token)
            # The leader fires two more windows of every schedule; standbys fire nothing.
            wait_until_fired(
                pg_url, ids, whole_second(dt.datetime.now(UTC)) + 2 * SECOND, timeout_s=15
            )
            for i in range(len(replicas)):
                if replicas.alive(i) and i != leader:
                    assert fired_lines(replicas[i]) == 0, f"standby replica{i} ticked"
            assert fired_lines(replicas[leader]) > 0
            if handover < 2:
                kill_times.append(dt.datetime.now(UTC))
                killed_at = time.monotonic()
                replicas.kill(leader)
        assert len(set(leaders)) == 3, leaders
        assert tokens == sorted(tokens) and len(set(tokens)) == 3, tokens  # fencing tokens grow
        for i in range(len(replicas)):
            assert replicas[i].output().count("scheduler lease acquired") == 1
            assert "scheduler lease lost" not in replicas[i].output()

        # Check up to three seconds past the last handover (fires up to then are final).
        until = whole_second(kill_times[-1]) + 3 * SECOND
        wait_until_fired(pg_url, ids, until, timeout_s=10)
        fires = fire_rows(pg_url)
        counts = check_fire_records(fires, job_rows(pg_url), first, until)
        print(f"fires up to {until}: {dict(counts)}")
        assert counts["MISSED"] == 0, f"windows missed across a handover: {counts}"
        assert counts["ENQUEUED"] > 0
        with Client(replicas[leaders[-1]].address) as client:
            check_list_fires(client, fires, ids, until)
    finally:
        codes = replicas.stop()
    assert [c for c in codes if c is not None] == [0], codes


# -- the worker lease across processes ---------------------------------------------------

PROBE = """#!/bin/sh
# Appends "start PID T" and, when it ends (normally or on SIGTERM), "end PID T" to $1.
echo "start $$ $(date +%s.%N)" >> "$1"
trap 'echo "end $$ $(date +%s.%N)" >> "$1"; exit 143' TERM
sleep 0.3 &
wait $!
echo "end $$ $(date +%s.%N)" >> "$1"
"""


def probe_runs(path: Path) -> tuple[dict[int, float], dict[int, float]]:
    """The probe's (starts, ends) so far, each by pid (epoch seconds)."""
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for line in path.read_text().splitlines():
        kind, pid, when = line.split()
        (starts if kind == "start" else ends)[int(pid)] = float(when)
    return starts, ends


def wait_unfinished_runs_gone(path: Path) -> dict[int, float]:
    """Wait until every probe run without an end line is gone (SIGKILLed with its worker:
    no trap runs). Returns, for each, a time by which it had ended (epoch seconds)."""
    starts, ends = probe_runs(path)
    gone_by = {}
    for pid in starts.keys() - ends.keys():
        wait_for(
            functools.partial(lambda p: not pid_alive(p), pid),
            timeout_s=LEASE_TTL_S,
            what=f"run {pid} to end",
        )
        gone_by[pid] = time.time()
    return gone_by


def probe_intervals(path: Path, gone_by: dict[int, float]) -> list[tuple[float, float]]:
    """(start, end) of every probe run, by start time; a run killed without its end line
    ends at its ``gone_by`` time, and every other run must have ended."""
    starts, ends = probe_runs(path)
    ends = {**gone_by, **ends}
    assert starts.keys() == ends.keys(), f"runs that never ended: {starts.keys() - ends.keys()}"
    return sorted((starts[p], ends[p]) for p in starts)


def test_one_worker_is_active_across_replicas_and_a_standby_takes_over(
    tmp_path: Path, pg_url: str
) -> None:
    """Three replicas without embedded workers; three workers, each connected to a different
    replica. Only one runs jobs. SIGKILL it: a standby takes over. SIGKILL the replica the new
    active worker is connected to: its lease expires in the database and the last standby
    takes over. A probe task records when each run starts and ends: no two runs overlap."""
    probe = tmp_path / "probe.sh"
    probe.write_text(PROBE)
    runs_file = tmp_path / "runs.txt"
    replicas = Replicas(tmp_path, pg_url, 3, REPLICA_ENV)
    workers: list[WorkerProc] = []
    try:
        replicas.wait_healthy()
        with Client(replicas[0].address) as client:
            probe_params = {"argv": ["sh", str(probe), str(runs_file)]}
            first = create_every_second_schedules(client, 2, "shell", probe_params)
        for i in range(3):  # worker i talks to replica i only
            workers.append(
                WorkerProc(tmp_path, replicas[i].address, env=REPLICA_ENV, name=f"worker{i}")
            )

        def active_worker() -> int | None:
            holder, _ = lease(pg_url, "worker")
            pid = holder_pid(holder) if holder else None
            found = [i for i, w in enumerate(workers) if w.pid == pid and w.popen.poll() is None]
            return found[0] if found else None

        def succeeded_by(worker: int, count: int) -> bool:
            pid = f":{workers[worker].pid}:"
            done = [
                j
                for j in job_rows(pg_url)
                if j.status == "SUCCEEDED" and pid in (j.worker_id or "")
            ]
            return len(done) >= count

        def active_not_in(exclude: set[int]) -> int:
            def check() -> tuple[int] | None:
                a = active_worker()
                return None if a is None or a in exclude else (a,)

            return wait_for(check, timeout_s=30, interval_s=0.05, what="an active worker")[0]

        first_active = active_not_in(set())
        wait_for(
            lambda: succeeded_by(first_active, 3), timeout_s=20, what="jobs on the active worker"
        )
        assert all(
            f":{workers[first_active].pid}:" in (j.worker_id or "")
            for j in job_rows(pg_url)
            if j.worker_id
        )

        workers[first_active].kill(signal.SIGKILL)
        killed_at = time.monotonic()
        gone_by = wait_unfinished_runs_gone(runs_file)  # its job, if it was running one
        second_active = active_not_in({first_active})
        assert time.monotonic() - killed_at <= TAKEOVER_S + SLACK_S
        wait_for(
            lambda: succeeded_by(second_active, 3),
            timeout_s=20,
            what="jobs on the new active worker",
        )

        # Now the replica holding the active worker's stream dies: nothing releases the
        # worker lease, it expires in the database, and the last standby takes it. The
        # worker that lost its replica keeps retrying that address, a standby from now on.
        replicas.kill(second_active)
        killed_at = time.monotonic()
        third_active = active_not_in({first_active, second_active})
        assert time.monotonic() - killed_at <= LEASE_TTL_S + TAKEOVER_S + SLACK_S
        wait_for(
            lambda: succeeded_by(third_active, 3), timeout_s=20, what="jobs on the last worker"
        )
    finally:
        for worker in workers:
            worker.stop()
        replicas.stop()

    intervals = probe_intervals(runs_file, gone_by)
    assert len(intervals) >= 9
    for (s1, e1), (s2, e2) in itertools.pairwise(intervals):
        assert s2 >= e1, f"two jobs ran at once: [{s1}, {e1}] and [{s2}, {e2}]"
    jobs = job_rows(pg_url)
    assert not [j for j in jobs if j.status == "RUNNING"]
    # The job killed with the first worker (if it was running one) was recovered.
    lost = [j for j in jobs if j.error == LEASE_LOST]
    assert all(j.status == "FAILED" for j in lost)
    fires = fire_rows(pg_url)
    check_fire_records(fires, jobs, first, min(max(f.fire_time for f in fires[s]) for s in first))


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_the_process_of_a_killed_workers_job_ends_with_its_lease(
    tmp_path: Path, pg_url: str
) -> None:
    """When the active worker is SIGKILLed, its job is failed "lease lost" once the lease
    expires and the next job may start: the killed job's program must be gone by then, or
    two jobs run at once (the program runs in a session of its own, so it takes the
    worker's guard process to end it)."""
    pid_file = tmp_path / "pid"
    replicas = Replicas(tmp_path, pg_url, 1, REPLICA_ENV)
    worker = WorkerProc(tmp_path, replicas[0].address, env=REPLICA_ENV)
    pid = 0
    try:
        replicas.wait_healthy()
        with Client(replicas[0].address) as client:
            script = f'echo $$ > "{pid_file}"; exec sleep 60'
            client.create_task("long", "shell", {"argv": ["sh", "-c", script]})
            (run,) = client.run("long")
            pid = wait_for(
                lambda: pid_file.exists() and int(pid_file.read_text() or 0),
                what="the job's program to start",
            )
            # The worker logs the start once the program's group is in its guard's care.
            wait_for(lambda: f"as pid {pid}" in worker.output(), what="the worker to log it")
            worker.kill(signal.SIGKILL)
            job = client.wait(run.job_id, timeout=LEASE_TTL_S + SLACK_S + 5)
            assert job.error == LEASE_LOST
        assert not pid_alive(pid), f"pid {pid} of the lost job still runs"
    finally:
        if pid and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)  # the orphan this test made, by its pid
        worker.stop()
        replicas.stop()


# -- wake-ups across replicas (PostgreSQL LISTEN/NOTIFY) ----------------------------------

SLOW_POLLS = {
    "WORKER_POLL_INTERVAL_SECONDS": "60",
    "SCHEDULER_POLL_INTERVAL_SECONDS": "600",
    "TICKWORK_SCHEDULER_LEASE_TTL_SECONDS": "120",  # the ticking loop wakes every 40 s
}
"""Polls so slow that only a wake-up from the other replica explains a prompt start."""
PROMPT_S = 10.0
"""How soon "at once" must be on a loaded machine: far below either poll interval."""


def _listening(server: Server) -> bool:
    return "listening for other replicas' wake-ups" in server.output()


@contextmanager
def two_replicas(tmp_path: Path, pg_url: str) -> Iterator[tuple[Server, Server]]:
    """Replica A (scheduler loop and embedded worker) and replica B (API only), both
    listening for each other's wake-ups."""
    a = Server(tmp_path, env=SLOW_POLLS, database_url=pg_url, name="replicaA")
    b = Server(
        tmp_path,
        env={**SLOW_POLLS, "SCHEDULER_IS_ENABLED": "false", "WORKER_IS_ENABLED": "false"},
        database_url=pg_url,
        name="replicaB",
    )
    try:
        for server, name in ((a, "A"), (b, "B")):
            server.wait_healthy()
            wait_for(functools.partial(_listening, server), what=f"replica {name} to listen")
        yield a, b
    finally:
        for server in (a, b):
            server.stop()


def test_a_job_run_through_another_replica_starts_at_once(tmp_path: Path, pg_url: str) -> None:
    """RunTasks on replica B, while the active worker waits for a job on replica A with a
    60 s poll: A is told through PostgreSQL and the job runs at once, not a poll later."""
    with (
        two_replicas(tmp_path, pg_url) as (a, b),
        Client(a.address) as client_a,
        Client(b.address) as client_b,
    ):
        client_a.create_task("warm-up", "shell", {"argv": ["true"]})
        (warm,) = client_a.run("warm-up")  # the worker is connected and polls again after
        assert client_a.wait(warm.job_id, timeout=30).status == JobStatus.JOB_STATUS_SUCCEEDED
        client_b.create_task("elsewhere", "shell", {"argv": ["true"]})
        began = time.monotonic()
        (run,) = client_b.run("elsewhere")
        job = client_b.wait(run.job_id, timeout=PROMPT_S)
        assert job.status == JobStatus.JOB_STATUS_SUCCEEDED
        assert time.monotonic() - began < PROMPT_S


def test_a_schedule_created_through_another_replica_fires_on_time(
    tmp_path: Path, pg_url: str
) -> None:
    """A schedule created on replica B, while replica A ticks and sleeps up to its 600 s
    poll (and its lease renewal 40 s away): A is told, and the first fire is recorded on
    time, not up to a poll late."""
    with (
        two_replicas(tmp_path, pg_url) as (a, b),
        Client(b.address) as client_b,
    ):
        wait_for(lambda: "scheduler lease acquired" in a.output(), what="A to tick")
        client_b.create_task("every-second", "shell", {"argv": ["true"]})
        created = dt.datetime.now(UTC)
        client_b.create_schedule("every-second", ["every-second"], cron="* * * * * *")
        fires = wait_for(
            lambda: client_b.list_fires("every-second"),
            timeout_s=PROMPT_S,
            what="the schedule's first fire",
        )
        first = min(fires, key=lambda fire: fire.fire_time.ToDatetime())
        fire_time = first.fire_time.ToDatetime(tzinfo=UTC)
        assert created < fire_time <= created + 2 * SECOND
        assert first.record_time.ToDatetime(tzinfo=UTC) - fire_time < PROMPT_S * SECOND
        # The fire is visible once committed; A logs the batch just after the commit.
        wait_for(lambda: fired_lines(a) >= 1, what="A's 'fires recorded' line")
        assert fired_lines(b) == 0


# -- the scheduler lease in one process (both backends) ---------------------------------

T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)


async def lease_row(url: str) -> tuple[str, int, dt.datetime]:
    [(holder, token, expires)] = await run_sql_async(
        url, "SELECT holder, token, expires_at FROM leases WHERE name = 'scheduler'"
    )
    return str(holder), int(token), utc(expires)


async def test_a_stopping_scheduler_hands_its_lease_over_at_once(
    tmp_path: Path, database_url: str
) -> None:
    """A graceful stop (SIGTERM, a deploy) releases the scheduler lease: another replica
    takes it at its next try, not when the lease would have expired. Two Scheduler objects
    on one database stand for two replicas."""
    async with inprocess(tmp_path, database_url, T0, scheduler_lease_ttl_s=300.0) as h:
        a = h.scheduler
        b = Scheduler(a.settings, a.store, a.queue, clock=h.clock, hub=Hub(), holder_id="b")
        await a.tick(T0)
        assert a.lease_token is not None
        await b.tick(T0)
        assert b.lease_token is None  # a holds it for 300 s

        loop = asyncio.create_task(a.run())
        await asyncio.sleep(0)
        a.stop()
        await asyncio.wait_for(loop, 10)
        holder, token, expires = await lease_row(database_url)
        assert holder == a.holder_id and expires < T0 and a.lease_token is None

        await b.tick(h.clock.advance(1))
        assert b.lease_token == token + 1  # a new holder, a new fencing token


class StealingQueue:
    """A QueueService stand-in for a long tick: every EnqueueFires takes ``cost_s`` of the
    fake clock, and after the first one another replica takes the (by then expired) lease."""

    def __init__(self, inner: Any, clock: Any, thief: Scheduler, cost_s: float) -> None:
        self.inner, self.clock, self.thief, self.cost_s = inner, clock, thief, cost_s
        self.calls = 0

    async def EnqueueFires(
        self, request: queue_pb2.EnqueueFiresRequest
    ) -> queue_pb2.EnqueueFiresResponse:
        self.calls += 1
        response: queue_pb2.EnqueueFiresResponse = await self.inner.EnqueueFires(request)
        self.clock.advance(self.cost_s)
        if self.calls == 1:
            await self.thief.store.acquire_lease(
                "scheduler",
                self.thief.holder_id,
                self.clock(),
                self.thief.settings.scheduler_lease_ttl_s,
            )
        return response


async def test_a_tick_that_outlives_its_lease_stops_firing(
    tmp_path: Path, database_url: str
) -> None:
    """A pass with many due schedules renews the lease as it goes; when the lease was lost
    meanwhile (the pass took longer than the TTL and another replica took over), the pass
    stops instead of ticking alongside the new leader."""
    async with inprocess(tmp_path, database_url, T0, scheduler_lease_ttl_s=3.0) as h:
        for i in range(5):
            await h.client.create_task(f"t{i}", "shell", {"argv": ["true"]})
            await h.client.create_schedule(f"s{i}", [f"t{i}"], cron="0 * * * * *")
        a = h.scheduler
        thief = Scheduler(a.settings, a.store, a.queue, clock=h.clock, hub=Hub(), holder_id="b")
        queue = a.queue = StealingQueue(a.queue, h.clock, thief, cost_s=4.0)
        a.fires_per_call = 1  # one schedule per call, so the pass spans several calls
        await a.tick(h.clock.set(T0 + dt.timedelta(seconds=60)))
        assert a.lease_token is None
        assert queue.calls == 1  # the other four were left to the new leader
        holder, _, _ = await lease_row(database_url)
        assert holder == "b"


async def test_wake_ups_go_on_after_the_listening_connection_is_dropped(pg_url: str) -> None:
    """Two replicas' ends of the channel, in one process: each hears the other, never
    itself; schedule changes carry the earliest next run; when the server drops every
    connection, each end reconnects, wakes its own waiters once for what it missed, and
    hears the other again."""
    heard: dict[str, list[str]] = {"a": [], "b": []}
    databases = [Database(pg_url), Database(pg_url)]

    def listener(name: str) -> tuple[Callable[[], None], Callable[[dt.datetime | None], None]]:
        def on_queue() -> None:
            heard[name].append("queue")

        def on_schedules(at: dt.datetime | None) -> None:
            heard[name].append(f"schedules {at}")

        return on_queue, on_schedules

    ends = {
        name: ReplicaWakeups(database, *listener(name))
        for name, database in zip("ab", databases, strict=True)
    }
    runs = [asyncio.create_task(end.run()) for end in ends.values()]

    async def until(check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 15
        while not check():
            assert time.monotonic() < deadline, f"not within 15 s: {what}"
            await asyncio.sleep(0.01)

    caught_up = ["queue", "schedules None"]  # what an end tells its waiters on (re)connecting
    try:
        await until(lambda: heard["a"] == caught_up and heard["b"] == caught_up, "connected")
        for calls in heard.values():
            calls.clear()
        later, sooner = T0 + dt.timedelta(hours=1), T0
        ends["b"].schedules_changed(later)
        ends["b"].schedules_changed(sooner)
        ends["b"].queue_changed()
        await until(lambda: len(heard["a"]) == 2, "a to hear b")
        assert sorted(heard["a"]) == ["queue", f"schedules {sooner}"]
        assert heard["b"] == []

        heard["a"].clear()
        await run_sql_async(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        await until(lambda: heard["a"] == caught_up and heard["b"] == caught_up, "reconnected")
        for calls in heard.values():
            calls.clear()
        ends["a"].queue_changed()
        await until(lambda: heard["b"] == ["queue"], "b to hear a again")
        assert heard["a"] == []
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        for database in databases:
            await database.dispose()


class _Listener:
    """One replica's end of the wake-up channel in this process, recording what it wakes."""

    def __init__(self, url: str) -> None:
        self.database = Database(url)
        self.heard: list[str] = []
        self.end = ReplicaWakeups(
            self.database, functools.partial(self.heard.append, "queue"), self._schedules
        )
        self._run: asyncio.Task[None] | None = None

    def _schedules(self, at: dt.datetime | None) -> None:
        self.heard.append(f"schedules {at}")

    async def reconnected(self, timeout_s: float) -> None:
        """Wait until the end has (re)connected: it wakes its waiters once when it does."""
        deadline = time.monotonic() + timeout_s
        while self.heard[-2:] != ["queue", "schedules None"]:
            assert time.monotonic() < deadline, f"no reconnection within {timeout_s} s"
            await asyncio.sleep(0.01)
        self.heard.clear()

    async def __aenter__(self) -> _Listener:
        self._run = asyncio.create_task(self.end.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._run is not None
        self._run.cancel()
        await asyncio.gather(self._run, return_exceptions=True)
        await self.database.dispose()


async def test_the_listener_reconnects_at_once_however_often_it_was_dropped(
    pg_url: str,
) -> None:
    """Dropped eight times in a row, each time after it had reconnected, the listening
    connection comes back after the shortest backoff each time (the backoff grows only
    while reconnecting fails); operators find it in pg_stat_activity by its name."""
    async with _Listener(pg_url) as listener:
        await listener.reconnected(15)
        for _ in range(8):
            [(dropped,)] = await run_sql_async(
                pg_url,
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = :name",
                name=APPLICATION_NAME,
            )
            assert dropped == 1
            await listener.reconnected(RECONNECT_MIN_S + 3)


async def test_a_listening_connection_that_stops_answering_is_replaced(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network partition drops packets without closing anything: the keepalive, answered
    by nobody, gives up after KEEPALIVE_S, and the end reconnects."""
    monkeypatch.setattr("scheduler_svc.replicas.KEEPALIVE_S", 0.3)
    async with PgProxy.to(pg_url).running() as proxy, _Listener(proxy.url(pg_url)) as listener:
        await listener.reconnected(15)
        proxy.hold()  # what the end sends on its connection goes nowhere from now on
        await listener.reconnected(15)


async def test_a_stopping_end_flushes_what_it_has_to_say(pg_url: str) -> None:
    """A replica that stops right after letting the worker lease go still tells the others:
    flush() returns once the NOTIFY is sent, so cancelling the end afterwards loses nothing
    (cancelled at once, the notification was never sent)."""
    async with _Listener(pg_url) as a, _Listener(pg_url) as b:
        await a.reconnected(15)
        await b.reconnected(15)
        b.end.queue_changed()
        assert await b.end.flush(timeout_s=5)
        assert b._run is not None
        b._run.cancel()
        deadline = time.monotonic() + 15
        while a.heard != ["queue"]:
            assert time.monotonic() < deadline, f"a heard {a.heard}"
            await asyncio.sleep(0.01)
