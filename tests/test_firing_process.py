"""Firing on real processes: a crash in the middle of a tick fires no window twice, a new
schedule wakes the loop at once, and due schedules are found through the next-run index."""

from __future__ import annotations

import datetime as dt
import re
import signal
from collections import Counter
from pathlib import Path

from tests.databases import run_sql
from tests.harness import Server, wait_for
from tickwork import Client, FireOutcome

UTC = dt.UTC


def test_sigkill_in_the_middle_of_a_tick_then_restart_fires_no_window_twice(
    tmp_path: Path, database_url: str
) -> None:
    # The failpoint kills the server right after Enqueue recorded the fire and enqueued the
    # job, before the schedule's next run moved: the restarted server sees the same window
    # due again.
    crashing = Server(
        tmp_path,
        database_url=database_url,
        name="crashing",
        env={"WORKER_IS_ENABLED": "false", "TICKWORK_FAILPOINTS": "after-enqueue"},
    ).wait_healthy()
    with Client(crashing.address) as client:
        client.create_task("t", "shell", {"argv": ["true"]})
        client.create_schedule("every-5s", ["t"], cron="*/5 * * * * *")
    wait_for(lambda: crashing.popen.poll() is not None, timeout_s=15, what="the failpoint")
    assert crashing.popen.returncode == -signal.SIGKILL
    crashing.stop()
    ((stuck_next, recorded),) = run_sql(
        database_url,
        "SELECT s.next_run_at, f.fire_time FROM schedules s JOIN fires f ON f.schedule_id = s.id",
    )
    fire_time = dt.datetime.fromisoformat(str(recorded))  # naive UTC on both backends
    assert dt.datetime.fromisoformat(str(stuck_next)) == fire_time  # the window is still due

    restarted = Server(
        tmp_path,
        database_url=database_url,
        name="restarted",
        env={"WORKER_IS_ENABLED": "false"},
    ).wait_healthy()
    try:
        with Client(restarted.address) as client:
            wait_for(
                lambda: len(client.list_fires("every-5s")) >= 2,
                timeout_s=15,
                what="the restarted scheduler to move past the crashed window",
            )
            fires = client.list_fires("every-5s")
            jobs = client.list_jobs(task="t", limit=1000)
    finally:
        restarted.stop()
    times = Counter(f.fire_time.ToDatetime() for f in fires)
    assert all(n == 1 for n in times.values()), times
    per_window = Counter(j.fire_time.ToDatetime() for j in jobs)
    assert all(n == 1 for n in per_window.values()), per_window
    crashed_window = [f for f in fires if f.fire_time.ToDatetime() == fire_time]
    assert len(crashed_window) == 1
    assert crashed_window[0].outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED


def test_a_new_schedule_wakes_the_loop_without_waiting_for_the_poll_interval(
    tmp_path: Path, database_url: str
) -> None:
    srv = Server(
        tmp_path,
        database_url=database_url,
        env={"WORKER_IS_ENABLED": "false", "SCHEDULER_POLL_INTERVAL_SECONDS": "300"},
    ).wait_healthy()
    try:
        with Client(srv.address) as client:
            client.create_task("t", "shell", {"argv": ["true"]})
            client.create_schedule("every-second", ["t"], cron="* * * * * *")
            (job,) = wait_for(
                lambda: client.list_jobs(task="t"), timeout_s=10, what="the first fire"
            )
    finally:
        srv.stop()
    lateness = job.enqueue_time.ToDatetime() - job.fire_time.ToDatetime()
    # Well under the 300 s poll interval: the loop woke for the new schedule and then at its
    # first fire time. (The lateness figure itself is measured by bench/, not asserted here.)
    assert dt.timedelta(0) <= lateness < dt.timedelta(seconds=5)


def test_due_schedules_are_found_through_the_next_run_index(tmp_path: Path) -> None:
    """The store's due-schedule query is served by ix_schedules_due (SQLite's plan), so a
    tick's cost grows with the due schedules, not with all schedules."""
    from sqlalchemy.dialects import sqlite

    from scheduler_svc.store import due_schedules_query

    srv = Server(tmp_path, env={"WORKER_IS_ENABLED": "false", "SCHEDULER_IS_ENABLED": "false"})
    srv.wait_healthy()
    srv.stop()
    query = due_schedules_query(dt.datetime(2026, 1, 1, tzinfo=UTC), 500)
    sql = str(query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    plan = run_sql(srv.database_url, f"EXPLAIN QUERY PLAN {sql}")
    details = " ".join(str(row[-1]) for row in plan)
    assert "ix_schedules_due" in details, details


def test_fires_are_logged_one_line_per_batch_and_each_at_debug(tmp_path: Path) -> None:
    srv = Server(
        tmp_path,
        env={"WORKER_IS_ENABLED": "false", "TICKWORK_LOG_LEVEL": "debug"},
    ).wait_healthy()
    try:
        with Client(srv.address) as client:
            client.create_task("t", "shell", {"argv": ["true"]})
            client.create_task("u", "shell", {"argv": ["true"]})
            client.create_schedule("every-second", ["t"], cron="* * * * * *")
            client.create_schedule("also", ["u"], cron="* * * * * *")
            # Both fire every second: one batch holds the two fires of a second.
            wait_for(
                lambda: [s for s in srv.output().splitlines() if "fires=2" in s],
                timeout_s=10,
                what="a batch of both schedules' fires to be logged",
            )
    finally:
        srv.stop()
    summary = next(line for line in srv.output().splitlines() if "fires=2" in line)
    assert "fires recorded" in summary, summary
    # Without a worker a task's earlier job may still be queued: that fire is skipped.
    counts = {k: int(v) for k, v in re.findall(r"\b(enqueued|skipped)=(\d+)", summary)}
    assert counts["enqueued"] >= 1 and counts["enqueued"] + counts["skipped"] == 2, summary
    assert " INFO " in summary, summary
    fired = [line for line in srv.output().splitlines() if "schedule fired" in line]
    assert fired and all(" DEBUG " in line for line in fired), fired[:2]


def test_an_unknown_log_level_is_refused_naming_the_variable(tmp_path: Path) -> None:
    srv = Server(tmp_path, env={"TICKWORK_LOG_LEVEL": "chatty"})
    try:
        code = srv.popen.wait(30)
    finally:
        srv.stop()
    assert code == 2
    assert "TICKWORK_LOG_LEVEL: expected one of DEBUG, INFO, WARNING, ERROR" in srv.output()
