"""Slots: with TICKWORK_MAX_RUNNING_JOBS above 1 several jobs run at once, on one worker
(``--slots``) or several, each claim fenced by its slot's lease; a concurrency group and the
slot limit hold in the database; with the defaults nothing overlaps.

Overlap is judged from the jobs' own rows (started_at at the claim, finished_at at the
outcome, both the service's clock): intervals that all intersect ran at once."""

from __future__ import annotations

import datetime as dt
import itertools
import signal
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa

from scheduler_svc.db import Database
from scheduler_svc.errors import FailedPrecondition, SettingsError
from scheduler_svc.schema import jobs
from scheduler_svc.settings import Settings
from scheduler_svc.store import LEASE_LOST, Store
from scheduler_svc.values import JobStatus as StoreStatus
from scheduler_svc.values import Trigger
from tests.databases import run_sql
from tests.harness import Server, WorkerProc, wait_for
from tests.inprocess import inprocess
from tests.queue_helpers import processes_with, unique_sleep, wait_logged, wait_status
from tickwork import Client, JobStatus
from tickwork.apply import config_request, parse_config
from tickwork.errors import InvalidArgument, InvalidSetting
from tickwork.v1 import system_pb2, system_pb2_grpc
from worker_svc.settings import WorkerSettings

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)
LEASE_TTL_S = 2.0
HEARTBEAT_S = 0.5
#: Four 3-second jobs, each on a job process of its own.
JOB_S = 3


def slot_server(tmp_path: Path, database_url: str, max_running_jobs: int | None) -> Server:
    """A scheduler service without its worker (2 s leases, 0.5 s heartbeats, 1 s polls),
    with TICKWORK_MAX_RUNNING_JOBS ``max_running_jobs`` (None: the default)."""
    env = {
        "WORKER_IS_ENABLED": "false",
        "WORKER_POLL_INTERVAL_SECONDS": "1",
        "TICKWORK_LEASE_TTL_SECONDS": str(LEASE_TTL_S),
        "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": str(HEARTBEAT_S),
    }
    if max_running_jobs is not None:
        env["TICKWORK_MAX_RUNNING_JOBS"] = str(max_running_jobs)
    return Server(tmp_path, env=env, database_url=database_url, name="api").wait_healthy()


@pytest.fixture
def four_slots(tmp_path: Path, database_url: str) -> Iterator[Server]:
    srv = slot_server(tmp_path, database_url, 4)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def default_slots(tmp_path: Path, database_url: str) -> Iterator[Server]:
    srv = slot_server(tmp_path, database_url, None)
    try:
        yield srv
    finally:
        srv.stop()


def start_workers(
    tmp_path: Path, server: Server, slots: Sequence[int | None], prefix: str = "worker"
) -> list[WorkerProc]:
    """One worker per entry: ``--slots N``, or the default (no option) for None; its log
    is ``PREFIX-<i>.log``."""
    return [
        WorkerProc(
            tmp_path,
            server.address,
            env={"WORKER_POLL_INTERVAL_SECONDS": "1", "WORKER_ABORT_GRACE_SECONDS": "1"},
            name=f"{prefix}-{i}",
            args=[] if n is None else ["--slots", str(n)],
        )
        for i, n in enumerate(slots)
    ]


def stop_all(workers: Sequence[WorkerProc]) -> None:
    for w in workers:
        w.stop()


def sleep_task(client: Client, name: str, seconds: float, group: str = "") -> None:
    client.create_task(name, "shell", {"argv": ["sleep", str(seconds)]}, concurrency_group=group)


Span = tuple[int, dt.datetime, dt.datetime]


def spans(database_url: str, job_ids: Sequence[int]) -> dict[int, Span]:
    """(id, started_at, finished_at) of each finished job of ``job_ids``."""
    rows = run_sql(
        database_url,
        "SELECT id, started_at, finished_at FROM jobs WHERE finished_at IS NOT NULL",
    )
    out = {int(r[0]): (int(r[0]), _utc(r[1]), _utc(r[2])) for r in rows}
    return {i: out[i] for i in job_ids}


def _utc(value: object) -> dt.datetime:
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def overlap(a: Span, b: Span) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def all_intersect(group: Sequence[Span]) -> bool:
    """Whether one instant lies in every interval: the latest start is before the earliest
    finish."""
    return max(s[1] for s in group) < min(s[2] for s in group)


def slots_of(database_url: str, job_ids: Sequence[int]) -> list[int]:
    rows = run_sql(database_url, "SELECT id, slot FROM jobs WHERE slot IS NOT NULL")
    by_id = {int(r[0]): int(r[1]) for r in rows}
    return sorted(by_id[i] for i in job_ids)


# ------------------------------------------------------------------ several jobs at once


@pytest.mark.parametrize("slots", [[4], [2, 2]], ids=["one-worker-4-slots", "two-workers-2-slots"])
def test_four_slots_run_four_jobs_at_once(
    tmp_path: Path, four_slots: Server, database_url: str, slots: list[int]
) -> None:
    with Client(four_slots.address) as client:
        names = [f"t{i}" for i in range(4)]
        for name in names:
            sleep_task(client, name, JOB_S)
        workers = start_workers(tmp_path, four_slots, slots)
        try:
            for w in workers:
                wait_logged(w, "as the active worker")
            runs = client.run(*names)
            ids = [r.job_id for r in runs]
            for job_id in ids:
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED)
        finally:
            stop_all(workers)
    got = spans(database_url, ids)
    assert all_intersect(list(got.values())), got
    assert slots_of(database_url, ids) == [0, 1, 2, 3]
    if len(slots) == 2:  # both workers ran jobs
        rows = run_sql(database_url, "SELECT DISTINCT worker_id FROM jobs")
        pids = {str(r[0]).split(":")[1] for r in rows}
        assert pids == {str(w.pid) for w in workers}


def test_two_tasks_in_one_concurrency_group_never_overlap(
    tmp_path: Path, four_slots: Server, database_url: str
) -> None:
    with Client(four_slots.address) as client:
        sleep_task(client, "load-a", 1.5, group="staging")
        sleep_task(client, "load-b", 1.5, group="staging")
        sleep_task(client, "report", 4)
        assert client.get_task("load-a").concurrency_group == "staging"
        workers = start_workers(tmp_path, four_slots, [4])
        try:
            wait_logged(workers[0], "as the active worker")
            runs = client.run("report", "load-a", "load-b")
            ids = [r.job_id for r in runs]
            for job_id in ids:
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED)
        finally:
            stop_all(workers)
    report, a, b = (spans(database_url, ids)[i] for i in ids)
    assert not overlap(a, b), (a, b)
    # Slots are on: the task outside the group ran beside both of them.
    assert overlap(report, a) and overlap(report, b), (report, a, b)
    groups = run_sql(database_url, "SELECT task_name, concurrency_group FROM jobs")
    assert sorted(groups) == [("load-a", "staging"), ("load-b", "staging"), ("report", "")]


def test_with_the_defaults_two_workers_never_overlap(
    tmp_path: Path, default_slots: Server, database_url: str
) -> None:
    with Client(default_slots.address) as client:
        names = [f"t{i}" for i in range(4)]
        for name in names:
            sleep_task(client, name, 0.5)
        workers = start_workers(tmp_path, default_slots, [None, None])
        try:
            wait_for(
                lambda: (
                    sum("as the active worker" in w.output() for w in workers) == 1
                    and sum("as the standby worker" in w.output() for w in workers) == 1
                ),
                what="one active worker and one standby",
            )
            ids = [r.job_id for r in client.run(*names)]
            for job_id in ids:
                wait_status(client, job_id, JobStatus.JOB_STATUS_SUCCEEDED)
        finally:
            stop_all(workers)
    got = sorted(spans(database_url, ids).values(), key=lambda s: s[1])
    for earlier, later in itertools.pairwise(got):
        assert earlier[2] <= later[1], (earlier, later)
    assert slots_of(database_url, ids) == [0, 0, 0, 0]


# ------------------------------------------------------- a killed worker with four jobs


def killable_task(client: Client, name: str, state: Path, record: Path, sleep_s: str) -> None:
    """A task whose first attempt writes its pid to ``state/NAME.pid`` and sleeps
    ``sleep_s``; a later attempt records in ``record`` whether that first attempt's
    process still lived when it started ("overlap NAME"), then sleeps 0.2 s."""
    script = (
        'n=$0; p="$1/$n.pid"; '
        'if [ ! -e "$p" ]; then echo $$ > "$p"; exec sleep "$3"; fi; '
        'if kill -0 "$(cat "$p")" 2>/dev/null; then echo "overlap $n" >> "$2"; fi; '
        'echo "retry $n" >> "$2"; sleep 0.2'
    )
    client.create_task(
        name,
        "shell",
        {"argv": ["sh", "-c", script, name, str(state), str(record), sleep_s]},
        max_attempts=2,
        backoff_base_seconds=1,
        backoff_cap_seconds=1,
    )


def test_sigkill_of_a_worker_with_four_running_jobs_recovers_all_four(
    tmp_path: Path, four_slots: Server, database_url: str
) -> None:
    state, record, sleep_s = tmp_path / "state", tmp_path / "record", unique_sleep()
    state.mkdir()
    names = [f"k{i}" for i in range(4)]
    with Client(four_slots.address) as client:
        for name in names:
            killable_task(client, name, state, record, sleep_s)
        # The standby holds no slot until the first worker's leases go; then it takes them
        # and runs the retries, which start only once the killed processes are gone.
        (first,) = start_workers(tmp_path, four_slots, [4])
        standby: WorkerProc | None = None
        try:
            wait_for(
                lambda: first.output().count("as the active worker") == 4,
                what="the first worker's four streams to hold the four slots",
            )
            (standby,) = start_workers(tmp_path, four_slots, [4], prefix="standby")
            wait_for(
                lambda: (
                    standby is not None and standby.output().count("as the standby worker") == 4
                ),
                what="the second worker's four streams to stand by",
            )
            ids = [r.job_id for r in client.run(*names)]
            for job_id in ids:
                wait_logged(first, f"job {job_id}: started")  # registered with the guard

            def four_processes() -> list[int] | None:
                found = processes_with(f"sleep {sleep_s}")
                return found if len(found) == 4 else None

            pids = wait_for(four_processes, what="four job processes")
            first.kill(signal.SIGKILL)
            for job_id in ids:
                failed = wait_status(client, job_id, JobStatus.JOB_STATUS_FAILED)
                assert failed.error == LEASE_LOST
            wait_for(
                lambda: not processes_with(f"sleep {sleep_s}"),
                timeout_s=3,
                what="the killed worker's four job processes to be gone",
            )
            retries = []
            for name in names:
                (retry,) = [j for j in client.list_jobs(task=name) if j.attempt == 2]
                retries.append(retry)
            for retry in retries:
                assert retry.attempt == 2 and retry.retry_of_job_id in ids
                wait_status(client, retry.id, JobStatus.JOB_STATUS_SUCCEEDED)
        finally:
            stop_all([first] if standby is None else [first, standby])
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), pid
    lines = record.read_text().splitlines()
    assert sorted(lines) == sorted(f"retry {n}" for n in names), lines  # no "overlap"
    got = spans(database_url, ids + [r.id for r in retries])
    for retry in retries:
        assert got[retry.retry_of_job_id][2] <= got[retry.id][1]
    ran_by = run_sql(
        database_url,
        "SELECT DISTINCT worker_id FROM jobs WHERE attempt = 2",
    )
    assert standby is not None
    assert ran_by and all(f":{standby.pid}:" in str(r[0]) for r in ran_by), ran_by


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rindex(")") + 2 :].split()[0]


# ------------------------------------------------------ the rules, in the database itself


async def _store(db: Database, groups: Sequence[str]) -> tuple[Store, list[int]]:
    s = Store(db)
    ids = []
    for i, group in enumerate(groups):
        values = {"name": f"t{i}", "handler": "shell", "params": {"argv": ["true"]}}
        task = await s.create_task({**values, "concurrency_group": group}, T0)
        ids.append(task.id)
    await s.enqueue(ids, Trigger.API, T0)
    return s, ids


async def test_slot_leases_are_taken_lowest_first_and_fence_every_claim(
    database: Database,
) -> None:
    s, _ = await _store(database, ["", "", ""])
    assert await s.acquire_slot_lease("a", T0, 10, 2) == (0, 1)
    assert await s.acquire_slot_lease("b", T0, 10, 2) == (1, 1)
    assert await s.acquire_slot_lease("c", T0, 10, 2) is None  # both slots held
    assert await s.acquire_slot_lease("b", T0, 10, 2) == (1, 1)  # a renewal
    # A claim needs the slot's lease, under its token.
    assert await s.claim_next_job("c", T0, 10, worker_lease_holder="c", slot=0) is None
    stale = await s.claim_next_job("a", T0, 10, worker_lease_holder="a", slot=0, lease_token=7)
    assert stale is None
    a = await s.claim_next_job("a", T0, 10, worker_lease_holder="a", slot=0, lease_token=1)
    b = await s.claim_next_job("b", T0, 10, worker_lease_holder="b", slot=1, lease_token=1)
    assert a is not None and b is not None and (a[0].slot, b[0].slot) == (0, 1)
    # One job per slot: slot 0's holder takes nothing more while its job runs.
    assert await s.claim_next_job("a", T0, 10, worker_lease_holder="a", slot=0) is None
    # Once slot 1's lease expired, another holder takes it over with a new token.
    later = T0 + dt.timedelta(seconds=11)
    assert await s.acquire_slot_lease("c", later, 10, 2) == (0, 2)


async def test_a_group_runs_one_job_at_a_time_and_the_database_refuses_a_second(
    database: Database,
) -> None:
    s, _ = await _store(database, ["staging", "staging", ""])
    first = await s.claim_next_job("w0", T0, 10, slot=0)
    assert first is not None and first[0].concurrency_group == "staging"
    # The other job of the group is passed over for the free task.
    second = await s.claim_next_job("w1", T0, 10, slot=1)
    assert second is not None and second[0].task_name == "t2"
    assert await s.claim_next_job("w2", T0, 10, slot=2) is None
    waiting = await database.read(
        lambda conn: conn.scalar(sa.select(jobs.c.id).where(jobs.c.status == StoreStatus.QUEUED))
    )

    def start(slot: int, group: str) -> Callable[[sa.Connection], None]:
        def run(conn: sa.Connection) -> None:
            conn.execute(
                jobs.update()
                .where(jobs.c.id == waiting)
                .values(status=StoreStatus.RUNNING, slot=slot, concurrency_group=group)
            )

        return run

    # Written around the claim, a second running job in the group, or in a slot, is refused.
    with pytest.raises(sa.exc.IntegrityError):
        await database.write(start(5, "staging"))
    with pytest.raises(sa.exc.IntegrityError):
        await database.write(start(0, ""))
    await database.write(start(5, ""))  # a free slot, no group: the rows allow it


async def test_a_task_moved_into_a_group_while_its_job_runs_holds_the_group(
    database: Database,
) -> None:
    """Moving a task into a concurrency group while its job runs carries that job into the
    group, so the group's next job waits for it; moving it out frees the group. A move
    that would put two running jobs in one group is refused, naming the field."""
    s, (moved, member, other) = await _store(database, ["", "late", ""])
    first = await s.claim_next_job("w0", T0, 10, slot=0)
    assert first is not None and first[0].task_id == moved  # no group yet
    task, _ = await s.update_task(moved, {"concurrency_group": "late"}, T0)
    assert task.concurrency_group == "late"
    # The group's own job is passed over while the moved task's job runs.
    second = await s.claim_next_job("w1", T0, 10, slot=1)
    assert second is not None and second[0].task_id == other
    assert await s.claim_next_job("w2", T0, 10, slot=2) is None
    await s.update_task(moved, {"concurrency_group": ""}, T0)
    third = await s.claim_next_job("w2", T0, 10, slot=2)
    assert third is not None and third[0].task_id == member
    # Now a job of "late" runs beside the moved task's: it cannot join the group again.
    with pytest.raises(FailedPrecondition, match="cannot join concurrency group 'late'") as err:
        await s.update_task(moved, {"concurrency_group": "late"}, T0)
    assert err.value.field == "task.concurrency_group"
    assert (await s.get_task(moved)).concurrency_group == ""


# ---------------------------------------------------------------- settings and bad input


@pytest.mark.parametrize("raw", ["0", "-1", "1025", "two"])
def test_max_running_jobs_out_of_range_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError, match=r"^TICKWORK_MAX_RUNNING_JOBS: "):
        Settings.from_env({"TICKWORK_MAX_RUNNING_JOBS": raw})
    assert Settings.from_env({}).max_running_jobs == 1
    assert Settings.from_env({"TICKWORK_MAX_RUNNING_JOBS": "8"}).max_running_jobs == 8


@pytest.mark.parametrize("raw", ["0", "257", "2.5", "x"])
def test_worker_slots_out_of_range_are_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(InvalidSetting, match=r"^INVALID_ARGUMENT: WORKER_SLOTS: "):
        WorkerSettings.from_env(environ={"WORKER_SLOTS": raw})
    assert WorkerSettings.from_env(environ={}).slots == 1
    assert WorkerSettings.from_env(environ={"WORKER_SLOTS": "3"}).slots == 3
    # --slots wins over the variable; the embedded worker reads the variable too.
    assert WorkerSettings.from_env(environ={"WORKER_SLOTS": "3"}, slots=5).slots == 5
    assert WorkerSettings.embedded("unix:/x", "", {"WORKER_SLOTS": "4"}).slots == 4


async def test_a_concurrency_group_is_a_label_trimmed_and_updatable(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        task = await h.client.create_task(
            "t", "shell", {"argv": ["true"]}, concurrency_group="  staging "
        )
        assert task.concurrency_group == "staging"
        for bad, why in (("a\x00b", "control"), ("x" * 201, "at most 200")):
            with pytest.raises(InvalidArgument, match=f"task.concurrency_group: .*{why}"):
                await h.client.create_task("u", "shell", {"argv": ["true"]}, concurrency_group=bad)
        updated = await h.client.update_task("t", concurrency_group="")
        assert updated.concurrency_group == ""
        assert (await h.client.update_task("t", concurrency_group="b")).concurrency_group == "b"


def test_an_apply_file_sets_and_compares_the_concurrency_group() -> None:
    config = parse_config(
        {
            "tasks": [
                {"name": "a", "handler": "shell", "concurrency_group": "staging"},
                {"name": "b", "handler": "shell"},
            ]
        }
    )
    a, b = config.tasks
    assert (a.concurrency_group, b.concurrency_group) == ("staging", "")
    sent = config_request(config)
    assert [t.concurrency_group for t in sent.tasks] == ["staging", ""]
    with pytest.raises(InvalidArgument, match=r"tasks\[0\]\.concurrency_group"):
        parse_config({"tasks": [{"name": "a", "handler": "shell", "concurrency_group": 3}]})


def test_the_status_lists_each_slot_stream_active_with_its_slot(tmp_path: Path) -> None:
    """Three slots, a worker of two and a worker of two: three streams are active (one slot
    each, whichever lease row they hold), the fourth stands by."""
    srv = slot_server(tmp_path, f"sqlite:///{tmp_path / 'status.db'}", 3)
    workers: list[WorkerProc] = []
    try:
        workers += start_workers(tmp_path, srv, [2])
        wait_for(lambda: workers[0].output().count("as the active worker") == 2)
        workers += start_workers(tmp_path, srv, [2], prefix="second")

        def listed() -> list[tuple[int, int]] | None:
            got = sorted((int(w.state), w.slots) for w in status(srv.address).workers)
            return got if len(got) == 4 else None

        active, standby = system_pb2.WORKER_STATE_ACTIVE, system_pb2.WORKER_STATE_STANDBY
        wait_for(
            lambda: listed() == [(active, 1), (active, 1), (active, 1), (standby, 1)],
            what="three active slot streams and one standby",
        )
    finally:
        stop_all(workers)
        srv.stop()


def status(address: str) -> system_pb2.GetStatusResponse:
    with grpc.insecure_channel(address) as channel:
        stub = system_pb2_grpc.SystemServiceStub(channel)
        return stub.GetStatus(system_pb2.GetStatusRequest(), timeout=10)
