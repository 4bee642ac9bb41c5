"""Fault 4: a service killed with SIGKILL and restarted at once must not wait out its own
dead predecessor.

A lease records its holder's process (host, pid, boot id, start time). The restarted
service finds the scheduler lease and the worker slot lease held by a process of its own
host and boot that no longer runs: it takes both over at once and, before its first tick,
recovers the dead embedded worker's running job ("lease lost"). So its scheduler ticks and
its embedded worker is active within moments, not after the leases' TTLs, and the first
fire after the restart runs the task instead of being spent as "already running" against
the dead process's job.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import time
from pathlib import Path

from scheduler_svc.holders import this_process
from scheduler_svc.store import LEASE_LOST
from tests.databases import run_sql
from tests.faults.audit import audit, recording_job, spans, utc
from tests.harness import Server, free_port, wait_for
from tests.queue_helpers import wait_logged
from tickwork import Client, JobStatus

#: Longer than the defaults (15 s and 10 s), so that on a loaded machine, where a service
#: may take many seconds to start, waiting them out cannot pass for taking them over.
LEASE_TTL_S = 60.0
SCHEDULER_LEASE_TTL_S = 60.0
#: From the new service answering health checks to its first job running.
TAKEOVER_S = 8.0


def service(tmp_path: Path, database_url: str, name: str) -> Server:
    return Server(
        tmp_path,
        env={
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "TICKWORK_RETENTION_DAYS": "0",
            # A stop aborts the running job at once (and records it) within Server.stop's wait.
            "WORKER_SHUTDOWN_GRACE_SECONDS": "1",
            "TICKWORK_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
            "TICKWORK_SCHEDULER_LEASE_TTL_SECONDS": str(SCHEDULER_LEASE_TTL_S),
        },
        database_url=database_url,
        name=name,
        port=free_port(),
    )


def test_a_restarted_service_takes_over_its_dead_predecessor_s_leases_at_once(
    tmp_path: Path, database_url: str
) -> None:
    record = tmp_path / "record"
    first = service(tmp_path, database_url, "first").wait_healthy()
    second: Server | None = None
    try:
        with Client(first.address) as client:
            client.create_task("long", "shell", recording_job(record, 60))
            client.create_schedule(
                "every-second", ["long"], cron="* * * * * *", catch_up_policy="RUN_ONCE"
            )
            wait_for(lambda: spans(record), timeout_s=20, what="the scheduled job to start")
            (dead_job,) = client.list_jobs(task="long", statuses=[JobStatus.JOB_STATUS_RUNNING])
        first.kill(signal.SIGKILL)
        killed_at = dt.datetime.now(dt.UTC)
        second = service(tmp_path, database_url, "second").wait_healthy()
        healthy_at = time.monotonic()
        with Client(second.address) as client:

            def new_job_running() -> int | None:
                running = client.list_jobs(task="long", statuses=[JobStatus.JOB_STATUS_RUNNING])
                return next((j.id for j in running if j.id != dead_job.id), None)

            new_job = wait_for(new_job_running, timeout_s=30, what="a new job of the task")
            assert time.monotonic() - healthy_at < TAKEOVER_S
            failed = client.get_job(dead_job.id)
            assert failed.status == JobStatus.JOB_STATUS_FAILED
            assert failed.error == LEASE_LOST
        out = wait_logged(second, "as the active worker")
        assert "recovered the running jobs of a dead predecessor" in out
        assert "scheduler lease acquired" in out
        # The first fire the new service recorded (its catch-up) made a job: it was not
        # spent as "already running" against the dead process's job.
        fires = run_sql(database_url, "SELECT fire_time, outcome, recorded_at FROM fires")
        after = sorted((utc(f[0]), f[1]) for f in fires if utc(f[2]) >= killed_at)
        assert next(o for _, o in after if o != "MISSED") == "ENQUEUED", after
        # The predecessor's lease rows now name the new process.
        holders = run_sql(database_url, "SELECT name, holder_pid FROM leases ORDER BY name")
        assert dict(holders) == {"scheduler": second.pid, "worker": second.pid}
    finally:
        first.stop()
        if second is not None:
            second.stop()
    by_id = {s.job_id: s for s in spans(record)}
    old, new = by_id[dead_job.id], by_id[new_job]
    assert not old.ended and old.last < new.start  # died with its worker, before the new one
    audit(database_url, record, [dead_job.id, new_job]).assert_kept()


def test_a_holder_is_judged_dead_only_on_this_host_and_boot_and_by_its_start_time() -> None:
    me = this_process()
    assert me.host and me.boot_id and me.started is not None
    gone = subprocess.Popen(["true"])
    gone.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        live_started = wait_for(lambda: this_process_started(live.pid), what="its start time")
        assert me.finds_dead(me.host, gone.pid, me.boot_id, None)
        # A live pid is the holder only if it started when the holder did (pid reuse).
        assert not me.finds_dead(me.host, live.pid, me.boot_id, live_started)
        assert me.finds_dead(me.host, live.pid, me.boot_id, live_started + 1)
        # Never judged: this very process, another host, another boot, nothing recorded.
        assert not me.finds_dead(me.host, me.pid, me.boot_id, me.started)
        assert not me.finds_dead("elsewhere", gone.pid, me.boot_id, None)
        assert not me.finds_dead(me.host, gone.pid, "another-boot", None)
        assert not me.finds_dead(None, None, None, None)
    finally:
        live.kill()
        live.wait()


def this_process_started(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks after boot)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])
