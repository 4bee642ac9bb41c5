"""The queue: the order the worker takes jobs, skip logic in the database, promotion to the
manual lane, cancel and abort, and dispatch pushed to an idle worker (not polled)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
from asyncio import Task
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import sqlalchemy as sa
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy.ext.asyncio import create_async_engine

from scheduler_svc import values
from scheduler_svc.db import Database
from scheduler_svc.schema import jobs
from scheduler_svc.store import Store
from scheduler_svc.store.rows import job_row
from tests.harness import Server, WorkerProc, base_env, wait_for
from tests.inprocess import Harness, inprocess
from tests.queue_helpers import (
    Request,
    Response,
    claim,
    create_flaky,
    eventually,
    finish,
    inprocess_worker,
    raw_worker,
    wait_logged,
)
from tickwork import (
    Client,
    FailedPrecondition,
    FireOutcome,
    Job,
    JobStatus,
    SkipReason,
    TaskAbort,
    Trigger,
)
from worker_svc import Worker, WorkerSettings

UTC = dt.UTC
T = TypeVar("T")
T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)
FIRE = dt.datetime(2026, 6, 1, 10, 5, 0, tzinfo=UTC)


def at(seconds: float) -> dt.datetime:
    return FIRE + dt.timedelta(seconds=seconds)


async def queue_the_mix(h: Harness, ran: Path | None = None) -> list[str]:
    """Enqueue a mix of scheduler and manual jobs; return the task names in the order the
    queue contract says the worker must take them. Each job appends its task's name to the
    file ``ran`` (when given)."""
    priorities = {
        "sched-100-a": 100,
        "sched-100-b": 100,
        "sched-200": 200,
        "manual-50": 50,
        "manual-100-x": 100,
        "manual-100-y": 100,
        "manual-100-early": 100,
        "manual-300": 300,
    }
    ran_path = str(ran) if ran is not None else os.devnull
    params = {"callable": "tests.handler_fixtures:append_task_name", "kwargs": {"path": ran_path}}
    for name, priority in priorities.items():
        await h.client.create_task(name, "python", params, task_priority=priority)
    await h.client.create_schedule(
        "s", ["sched-200", "sched-100-b", "sched-100-a"], cron="*/5 * * * *"
    )
    await h.tick(FIRE)  # three scheduler jobs, one enqueue time, inserted in name order
    h.clock.set(at(1))
    await h.client.run("manual-50")
    h.clock.set(at(2))
    await h.client.run("manual-100-x", "manual-100-y")  # a tie in time: insertion order
    h.clock.set(at(3))
    await h.client.run("manual-300")
    h.clock.set(at(1.5))  # a replica whose clock lags: enqueue time wins over insertion
    await h.client.run("manual-100-early")
    return [
        "manual-300",  # manual lane first, then priority descending
        "manual-100-early",  # then enqueue time
        "manual-100-x",  # then insertion order
        "manual-100-y",
        "manual-50",
        "sched-200",  # a scheduler job of priority 200 after every manual job
        "sched-100-a",
        "sched-100-b",
    ]


async def test_the_worker_takes_jobs_in_queue_order(tmp_path: Path, database_url: str) -> None:
    ran = tmp_path / "ran"
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=0.5) as h:
        expected = await queue_the_mix(h, ran)
        queued = await h.service.app.store.queued_jobs_in_order(h.clock())
        assert [j.task_name for j in queued] == expected
        async with inprocess_worker(h.service.address):

            async def all_ran() -> bool:
                done = await h.client.list_jobs(statuses=[JobStatus.JOB_STATUS_SUCCEEDED])
                return len(done) == len(expected)

            await eventually(all_ran, what="every job to succeed")
        assert expected == ran.read_text().splitlines()


async def test_claims_take_one_job_at_a_time_in_order(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        expected = await queue_the_mix(h)
        taken = []
        for _ in expected:
            job = await claim(h)
            # One job at a time: the claim started that job only, and nothing else is
            # handed out while it runs.
            store = h.service.app.store
            assert [j.id for j in await store.list_jobs(statuses=["RUNNING"], limit=10)] == [job.id]
            assert await store.claim_next_job("other", h.clock(), 30) is None
            taken.append(job.task_name)
            await finish(h, job, "SUCCEEDED")
        assert taken == expected
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None


CONTENDER = r"""
import os, sys
from tickwork import Client

address, task, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Client(address) as client:
    client.get_task(task)  # connected and warm
    print("ready", flush=True)
    os.read(fd, 1)  # blocks until the test closes the pipe: every process starts at once
    (run,) = client.run(task)
    print(run.job_id, run.skip_reason, flush=True)
"""


def test_fifty_concurrent_runs_from_separate_processes_make_one_job(
    api_server: Server, api_client: Client
) -> None:
    api_client.create_task("contended", "shell", {"argv": ["true"]})
    gate_r, gate_w = os.pipe()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, api_server.address, "contended", str(gate_r)],
            pass_fds=(gate_r,),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=base_env(),
        )
        for _ in range(50)
    ]
    try:
        os.close(gate_r)
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.stderr
        os.close(gate_w)  # go
        gate_w = -1
        answers = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            job_id, reason = out.split()
            answers.append((int(job_id), int(reason)))
    finally:
        if gate_w != -1:
            os.close(gate_w)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    jobs = api_client.list_jobs(task="contended")
    assert len(jobs) == 1
    assert {job_id for job_id, _ in answers} == {jobs[0].id}
    reasons = sorted(reason for _, reason in answers)
    assert (
        reasons
        == [SkipReason.SKIP_REASON_UNSPECIFIED] + [SkipReason.SKIP_REASON_ALREADY_QUEUED] * 49
    )


async def test_a_manual_run_promotes_a_scheduler_queued_job(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("report", "shell", {"argv": ["true"]}, task_priority=100)
        await h.client.create_task("urgent", "shell", {"argv": ["true"]}, task_priority=300)
        await h.client.create_schedule("s", ["report", "urgent"], cron="*/5 * * * *")
        await h.tick(FIRE)
        (queued,) = await h.client.list_jobs(task="report")
        assert queued.trigger == Trigger.TRIGGER_SCHEDULER

        (run,) = await h.client.run("report", trigger=Trigger.TRIGGER_MANUAL)
        assert run.job_id == queued.id and run.promoted and not run.skipped
        promoted = await h.client.get_job(queued.id)
        # It keeps its trigger: the scheduler started the chain (failure counting).
        assert promoted.trigger == Trigger.TRIGGER_SCHEDULER
        assert len(await h.client.list_jobs(task="report")) == 1
        # Asked again: it is the manual lane's job now, already queued.
        (again,) = await h.client.run("report")
        assert again.skipped and again.skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED
        assert again.job_id == queued.id and not again.promoted

        # The manual lane goes first, before the scheduler's priority-300 job.
        running = await claim(h)
        assert running.id == queued.id
        (while_running,) = await h.client.run("report")
        assert while_running.skipped
        assert while_running.skip_reason == SkipReason.SKIP_REASON_ALREADY_RUNNING
        assert while_running.job_id == running.id
        with pytest.raises(FailedPrecondition) as err:
            await h.client.cancel_job(running.id)
        assert "not QUEUED" in err.value.details
        assert (await h.client.get_job(running.id)).status == JobStatus.JOB_STATUS_RUNNING


async def test_cancel_job_cancels_a_queued_job_and_the_next_tick_enqueues_again(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("report", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["report"], cron="*/5 * * * *")
        await h.tick(FIRE)
        (job,) = await h.client.list_jobs()
        cancelled = await h.client.cancel_job(job.id)
        assert cancelled.status == JobStatus.JOB_STATUS_CANCELLED
        assert cancelled.HasField("finish_time")
        with pytest.raises(FailedPrecondition):
            await h.client.cancel_job(job.id)  # not queued any more
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None

        await h.tick(FIRE + dt.timedelta(minutes=5))
        jobs = await h.client.list_jobs()
        assert [j.status for j in jobs] == [
            JobStatus.JOB_STATUS_QUEUED,
            JobStatus.JOB_STATUS_CANCELLED,
        ]
        fires = await h.client.list_fires("s")
        assert [f.outcome for f in fires] == [FireOutcome.FIRE_OUTCOME_ENQUEUED] * 2


async def test_abort_tasks_cancels_queued_and_aborts_running_jobs(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=0.5) as h:
        await h.client.create_task("a-long", "shell", {"argv": ["sleep", "30"]})
        await h.client.create_task("b-next", "shell", {"argv": ["true"]})
        await h.client.create_task("c-idle", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["a-long", "b-next"], cron="*/5 * * * *")
        await h.tick(FIRE)
        long_job, next_job = sorted(await h.client.list_jobs(), key=lambda j: j.id)
        async with inprocess_worker(h.service.address):

            async def long_running() -> bool:
                job = await h.client.get_job(long_job.id)
                return job.status == JobStatus.JOB_STATUS_RUNNING

            await eventually(long_running, what="the long job to start")
            aborts = await h.client.abort("a-long", "b-next", "c-idle")
            assert [(a.job_id, a.action) for a in aborts] == [
                (long_job.id, TaskAbort.Action.ACTION_ABORT_REQUESTED),
                (next_job.id, TaskAbort.Action.ACTION_CANCELLED),
                (0, TaskAbort.Action.ACTION_NONE),
            ]
            aborted = await h.client.wait(long_job.id, timeout=10)
            assert aborted.status == JobStatus.JOB_STATUS_ABORTED
            assert aborted.error == "aborted by operator"
            cancelled = await h.client.get_job(next_job.id)
            assert cancelled.status == JobStatus.JOB_STATUS_CANCELLED
            assert not cancelled.HasField("start_time")

            # Nothing of the tasks is queued or running now: the next fire enqueues both.
            await h.tick(FIRE + dt.timedelta(minutes=5))
            latest = await h.client.list_fires("s", limit=1)
            assert latest[0].outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
            assert [r.skipped for r in latest[0].runs] == [False, False]
            assert {r.job_id for r in latest[0].runs}.isdisjoint({long_job.id, next_job.id})


async def test_an_enqueue_racing_a_waiting_poll_is_not_missed(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job is committed (and the wake-up fired) after the poll's query found nothing
    and before it started waiting: the poll still answers at once, not after 30 s."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=30) as h:
        task = await h.client.create_task("ping", "shell", {"argv": ["true"]})
        store = h.service.app.store
        real_next_ready_time = store.next_ready_time
        enqueued: list[int] = []

        async def enqueue_meanwhile(now: dt.datetime) -> dt.datetime | None:
            ready = await real_next_ready_time(now)
            if not enqueued:
                result = await h.service.app.enqueue([task.id], values.Trigger.API)
                enqueued.append(result.runs[0].job_id)
            return ready

        monkeypatch.setattr(store, "next_ready_time", enqueue_meanwhile)
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "assign_job"
            assert answer.assign_job.job.id == enqueued[0]


async def test_running_a_task_whose_retry_waits_wakes_a_waiting_poll(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RunTasks makes a retry waiting out its backoff ready now: the worker's poll, waiting
    for that backoff (or its 30 s interval), gets the job at once."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=30) as h:
        store = h.service.app.store
        real_next_ready_time = store.next_ready_time
        polled = asyncio.Event()

        async def next_ready_time(now: dt.datetime) -> dt.datetime | None:
            ready = await real_next_ready_time(now)
            polled.set()  # the poll found nothing ready and is about to wait until `ready`
            return ready

        monkeypatch.setattr(store, "next_ready_time", next_ready_time)
        # The jitter drawn at its ceiling: a backoff of 600 s, never under the poll's 30 s
        # (a uniform draw was under it one time in twenty).
        monkeypatch.setattr(store.rng, "uniform", lambda low, high: high)
        await create_flaky(h, 2, 600, 600)
        await h.client.run("flaky")
        retry = (await finish(h, await claim(h), "FAILED", "boom")).retry
        assert retry is not None and retry.not_before is not None
        assert retry.not_before > h.clock() + dt.timedelta(seconds=30)
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            await asyncio.wait_for(polled.wait(), 15)
            (run,) = await h.client.run("flaky")
            assert run.job_id == retry.id
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "assign_job"
            assert answer.assign_job.job.id == retry.id


async def test_an_outcome_with_poll_next_is_answered_with_the_next_job(
    tmp_path: Path, database_url: str
) -> None:
    """Outcome(poll_next) records the outcome and leases the next job in one step: the
    stream answers OutcomeAck then AssignJob, with no PollJob in between; with nothing
    queued, the poll it stands for is answered NoJob after the poll interval."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=0.5) as h:
        first = await h.client.create_task("first", "shell", {"argv": ["true"]})
        second = await h.client.create_task("second", "shell", {"argv": ["true"]})
        runs = await h.client.run(first.id, second.id)
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            job = (await w.expect("assign_job")).assign_job
            assert job.job.id == runs[0].job_id

            async def report(assign: Response.AssignJob) -> list[Response | None]:
                await w.succeed(assign)
                return [await w.receive(5), await w.receive(5)]

            ack, answer = await report(job)
            assert ack is not None and ack.outcome_ack.job_id == runs[0].job_id
            assert ack.outcome_ack.accepted
            assert answer is not None and answer.WhichOneof("message") == "assign_job"
            assert answer.assign_job.job.id == runs[1].job_id
            assert (await h.client.get_job(runs[0].job_id)).status == JobStatus.JOB_STATUS_SUCCEEDED
            running = await h.client.get_job(runs[1].job_id)
            assert running.status == JobStatus.JOB_STATUS_RUNNING

            ack, answer = await report(answer.assign_job)
            assert ack is not None and ack.outcome_ack.accepted
            assert answer is not None and answer.WhichOneof("message") == "no_job"


async def test_a_worker_that_reads_next_job_in_outcome_ack_gets_the_next_job_inside_it(
    tmp_path: Path, database_url: str
) -> None:
    """Hello(next_job_in_outcome_ack): the job an Outcome's poll_next took comes inside the
    OutcomeAck, and no AssignJob follows for it; with nothing queued the ack carries none
    and the poll is answered NoJob after the poll interval, as for older workers."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=0.5) as h:
        first = await h.client.create_task("first", "shell", {"argv": ["true"]})
        second = await h.client.create_task("second", "shell", {"argv": ["true"]})
        runs = await h.client.run(first.id, second.id)
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello(next_job_in_outcome_ack=True)).active
            await w.send(poll_job=Request.PollJob())
            job = (await w.expect("assign_job")).assign_job

            async def report(assign: Response.AssignJob) -> Response.OutcomeAck:
                await w.succeed(assign)
                return (await w.expect("outcome_ack")).outcome_ack

            ack = await report(job)
            assert ack.job_id == runs[0].job_id and ack.accepted
            assert ack.HasField("next_job")
            assert ack.next_job.job.id == runs[1].job_id
            assert ack.next_job.job.task_name == "second" and ack.next_job.handler == "shell"
            assert ack.next_job.lease_token
            assert (await w.receive(0.3)) is None  # no AssignJob follows
            running = await h.client.get_job(runs[1].job_id)
            assert running.status == JobStatus.JOB_STATUS_RUNNING

            ack = await report(ack.next_job)
            assert ack.accepted and not ack.HasField("next_job")
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "no_job"
            done = await h.client.get_job(runs[1].job_id)
            assert done.status == JobStatus.JOB_STATUS_SUCCEEDED


async def test_cancel_poll_is_answered_at_once(tmp_path: Path, database_url: str) -> None:
    """A stopping worker's CancelPoll gets its pending poll answered now (NoJob with an
    empty queue) instead of at the end of the 30 s poll interval; a CancelPoll with no
    poll pending changes nothing, and the next poll still gets a job."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=30) as h:
        task = await h.client.create_task("ping", "shell", {"argv": ["true"]})
        async with raw_worker(h.service.address, "w") as w:
            assert (await w.hello()).active
            await w.send(poll_job=Request.PollJob())
            assert await w.receive(0.3) is None, "the poll waits while the queue is empty"
            await w.send(cancel_poll=Request.CancelPoll())
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "no_job"
            await w.send(cancel_poll=Request.CancelPoll())  # none pending: ignored
            runs = await h.client.run(task.id)
            await w.send(poll_job=Request.PollJob())
            answer = await w.receive(5)
            assert answer is not None and answer.WhichOneof("message") == "assign_job"
            assert answer.assign_job.job.id == runs[0].job_id


async def test_an_idle_worker_stops_without_waiting_out_the_poll_interval(
    tmp_path: Path, database_url: str
) -> None:
    """The real worker against the real server: stop() while its poll waits (30 s poll
    interval) ends the run promptly, and the worker lease is released for the next one."""
    async with inprocess(tmp_path, database_url, T0, worker_poll_interval_s=30) as h:
        worker = Worker(WorkerSettings(server=h.service.address, poll_interval_s=30))
        run = asyncio.create_task(worker.run())
        registry = h.service.app.metrics.registry

        async def active() -> bool:
            return registry.get_sample_value("tickwork_workers", {"state": "active"}) == 1

        await eventually(active, what="the worker to become active")
        worker.stop()
        await asyncio.wait_for(run, 10)  # poll interval 30 s: it did not wait that out
        assert not await active()
        token = await h.service.app.store.acquire_lease("worker", "next", h.clock(), 30.0)
        assert token is not None, "the stopped worker still holds the worker lease"


@pytest.fixture
def slow_poll_server(tmp_path: Path, database_url: str) -> Iterator[Server]:
    """A scheduler service whose worker polls are answered only every 30 s."""
    srv = Server(
        tmp_path,
        env={"WORKER_IS_ENABLED": "false", "WORKER_POLL_INTERVAL_SECONDS": "30"},
        database_url=database_url,
        name="api",
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


def _seconds(value: Timestamp) -> float:
    return value.ToDatetime(tzinfo=UTC).timestamp()


def test_dispatch_is_pushed_and_retries_start_when_ready(
    tmp_path: Path, slow_poll_server: Server
) -> None:
    poll_interval_s = 30.0
    marker = tmp_path / "flaky-ran-once"
    with Client(slow_poll_server.address) as client:
        client.create_task("ping", "shell", {"argv": ["true"]})
        client.create_task(
            "flaky",
            "shell",
            {
                "argv": [
                    "sh",
                    "-c",
                    'if mkdir "$0" 2>/dev/null; then echo first attempt fails >&2; exit 3; fi',
                    str(marker),
                ]
            },
            max_attempts=2,
            backoff_base_seconds=1,
            backoff_cap_seconds=1,
        )
        worker = WorkerProc(
            tmp_path, slow_poll_server.address, env={"WORKER_POLL_INTERVAL_SECONDS": "1"}
        )
        try:
            wait_logged(worker, "as the active worker")
            # The worker is idle in a poll the server would answer only after 30 s: every
            # enqueue wakes it at once.
            for _ in range(3):
                (run,) = client.run("ping")
                job = client.wait(run.job_id, timeout=10)
                assert job.status == JobStatus.JOB_STATUS_SUCCEEDED
                latency = _seconds(job.start_time) - _seconds(job.enqueue_time)
                assert 0 <= latency < 1.0, latency

            (run,) = client.run("flaky")
            first = client.wait(run.job_id, timeout=10)
            assert first.status == JobStatus.JOB_STATUS_FAILED
            assert first.error == "exit code 3: first attempt fails"

            def retry_done() -> Job | None:
                jobs = client.list_jobs(task="flaky", statuses=["SUCCEEDED"])
                return jobs[0] if jobs else None

            retry = wait_for(retry_done, timeout_s=10, what="the retry to succeed")
            assert retry.retry_of_job_id == first.id and retry.attempt == 2
            not_before = _seconds(retry.not_before_time)
            # base = cap = 1 s: full jitter in [0, 1] and at least one second.
            assert not_before - _seconds(first.finish_time) == pytest.approx(1.0, abs=0.01)
            started = _seconds(retry.start_time)
            # Ready by time: not before not_before, and picked up well within the poll
            # interval (the server wakes the waiting poll at the earliest not_before).
            assert not_before <= started < not_before + min(3.0, poll_interval_s)
        finally:
            worker.stop()


async def test_a_task_named_twice_in_one_run_is_enqueued_once_and_then_skipped(
    tmp_path: Path, database_url: str
) -> None:
    """RunTasks answers one entry per request entry (ids first, then names): the first
    entry of a task enqueues, each repeat is skipped as already queued (or running) with
    that job's id, and the task gets one job."""
    import grpc

    from tickwork.v1 import task_pb2, task_pb2_grpc

    async with inprocess(tmp_path, database_url, T0) as h:
        hello = await h.client.create_task("hello", "shell", {"argv": ["true"]})
        other = await h.client.create_task("other", "shell", {"argv": ["true"]})
        async with grpc.aio.insecure_channel(h.service.address) as channel:
            stub = task_pb2_grpc.TaskServiceStub(channel)
            request = task_pb2.RunTasksRequest(
                task_ids=[hello.id, other.id], task_names=["hello", "other", "hello"]
            )
            runs = (await stub.RunTasks(request)).runs
            assert [r.task_id for r in runs] == [hello.id, other.id, hello.id, other.id, hello.id]
            first_hello, first_other = runs[0], runs[1]
            assert not first_hello.skipped and not first_other.skipped
            assert first_hello.job_id != first_other.job_id
            for repeat in runs[2:]:
                first = first_hello if repeat.task_id == hello.id else first_other
                assert repeat.skipped and repeat.job_id == first.job_id, repeat
                assert repeat.skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED
                assert not repeat.promoted
            assert len(await h.client.list_jobs(task="hello")) == 1

            running = await claim(h)
            assert running.task_id == hello.id
            runs = (await stub.RunTasks(task_pb2.RunTasksRequest(task_ids=[hello.id] * 2))).runs
            assert [(r.job_id, r.skipped, r.skip_reason) for r in runs] == [
                (running.id, True, SkipReason.SKIP_REASON_ALREADY_RUNNING)
            ] * 2


# -- lock order on PostgreSQL: calls naming the same tasks in other orders never deadlock --


async def _three_tasks(s: Store) -> list[int]:
    ids = []
    for name in ("a", "m", "z"):
        task = await s.create_task({"name": name, "handler": "shell", "params": {}}, T0)
        ids.append(task.id)
    return ids


async def _both_wait_on_the_blocker(db: Database, calls: list[Awaitable[T]]) -> list[Task[T]]:
    """Start ``calls`` and return once each waits on a lock (the blocker's)."""
    started = [asyncio.ensure_future(call) for call in calls]

    async def waiting() -> bool:
        rows: int = await db.read(
            lambda conn: conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()"
                )
            ).scalar_one()
        )
        return rows >= len(calls)

    await eventually(waiting, what="both calls waiting on the blocker")
    return started


async def test_aborts_naming_tasks_in_other_orders_do_not_deadlock(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    # Each abort locked the tasks' jobs one by one in request order: a..z against z..a
    # deadlocked, and PostgreSQL failed one of them after a second (UNAVAILABLE).
    if not database.dialect.row_locks:
        pytest.skip("SQLite runs one write transaction at a time")
    s = Store(database)
    a, m, z = await _three_tasks(s)
    runs = (await s.enqueue([a, m, z], values.Trigger.API, T0)).runs
    blocker = create_async_engine(database.url)
    try:
        async with blocker.connect() as conn, conn.begin() as tx:
            # Another transaction holds m's job: both aborts take their first job and wait.
            await conn.execute(
                sa.select(jobs.c.id).where(jobs.c.id == runs[1].job_id).with_for_update()
            )
            calls = await _both_wait_on_the_blocker(
                database, [s.abort_tasks([a, m, z], T0), s.abort_tasks([z, m, a], T0)]
            )
            await tx.rollback()
        first, second = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        await blocker.dispose()
    assert not isinstance(first, BaseException), first
    assert not isinstance(second, BaseException), second
    # Not by running a deadlock's victim again (Database's retry): by never deadlocking.
    assert "deadlock" not in caplog.text
    assert {action for _, _, action, _ in first + second} == {"CANCELLED", "NONE"}
    cancelled = sorted(job for _, job, action, _ in first + second if action == "CANCELLED")
    assert cancelled == sorted(r.job_id for r in runs)


async def test_runs_naming_tasks_in_other_orders_do_not_deadlock(database: Database) -> None:
    # A run inserts its new jobs in request order (their queue order), each against the
    # one-active-job-per-task index. Two runs of [a, m, z] and [z, m, a], both inserting m
    # behind a transaction that holds an uncommitted job of m, then waited for each other
    # (a's job against z's): PostgreSQL failed one after a second (UNAVAILABLE).
    if not database.dialect.row_locks:
        pytest.skip("SQLite runs one write transaction at a time")
    s = Store(database)
    a, m, z = await _three_tasks(s)
    blocker = create_async_engine(database.url)
    try:
        async with blocker.connect() as conn, conn.begin() as tx:
            task_m = await s.get_task(m)
            await conn.execute(jobs.insert().values(job_row(task_m, trigger="API", lane=0, now=T0)))
            calls = await _both_wait_on_the_blocker(
                database,
                [
                    s.enqueue([a, m, z], values.Trigger.API, T0),
                    s.enqueue([z, m, a], values.Trigger.API, T0),
                ],
            )
            await tx.rollback()
        first, second = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        await blocker.dispose()
    assert not isinstance(first, BaseException), first
    assert not isinstance(second, BaseException), second
    # One job per task, the same one reported to both.
    assert {r.task_id: r.job_id for r in first.runs} == {r.task_id: r.job_id for r in second.runs}
    queued = await s.queued_jobs_in_order(T0)
    assert sorted(j.task_id for j in queued) == [a, m, z]
