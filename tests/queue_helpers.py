"""Helpers shared by the queue, retry, auto-disable, lease and shutdown tests.

In-process pieces drive the real service with a :class:`~tests.inprocess.FakeClock`
(``claim``/``finish`` call the same store and App functions the worker stream calls);
process pieces read the logs of real ``tickwork`` processes. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TypeVar

import grpc
import grpc.aio

from scheduler_svc import values
from scheduler_svc.records import FinishResult, JobRecord
from tests.harness import Proc, wait_for
from tests.inprocess import Harness
from tickwork import Client, Job, JobStatus
from tickwork.v1 import worker_pb2, worker_pb2_grpc
from worker_svc import Worker, WorkerSettings

T = TypeVar("T")
Request = worker_pb2.ConnectRequest
Response = worker_pb2.ConnectResponse

#: Longest wait for anything that should happen promptly.
DEADLINE_S = 15.0


async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout_s: float = DEADLINE_S,
    what: str = "condition",
) -> T:
    """Await ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last value: {last!r}")


async def claim(h: Harness, worker_id: str = "test-worker", ttl_s: float = 30.0) -> JobRecord:
    """Take the next job as the worker stream would, at the harness clock's now."""
    claimed = await h.service.app.store.claim_next_job(worker_id, h.clock(), ttl_s)
    assert claimed is not None, "no job was ready"
    return claimed[0]


async def create_flaky(
    h: Harness, max_attempts: int, backoff_base_seconds: float, backoff_cap_seconds: float
) -> None:
    """Create the task ``flaky``: a shell ``false`` (it always fails) with this retry policy
    (seconds)."""
    await h.client.create_task(
        "flaky",
        "shell",
        {"argv": ["false"]},
        max_attempts=max_attempts,
        backoff_base_seconds=backoff_base_seconds,
        backoff_cap_seconds=backoff_cap_seconds,
    )


async def finish(h: Harness, job: JobRecord, status: str, error: str = "") -> FinishResult:
    """Report a claimed job's outcome as the worker stream would."""
    return await h.service.app.finish_job(
        job.id, job.lease_token or "", values.JobStatus(status), error, ""
    )


@asynccontextmanager
async def inprocess_worker(address: str, poll_interval_s: float = 0.5) -> AsyncIterator[Worker]:
    """A real :class:`Worker` on this event loop, connected to ``address``; stopped on exit
    (a running job is aborted and reported)."""
    worker = Worker(
        WorkerSettings(server=address, poll_interval_s=poll_interval_s, abort_grace_s=1.0)
    )
    task = asyncio.create_task(worker.run(), name="test-worker")
    try:
        yield worker
    finally:
        worker.stop(abort_running=True)
        await asyncio.wait_for(task, poll_interval_s + 10)


class RawWorker:
    """A worker stream driven message by message (the server's side is the real one)."""

    def __init__(self, address: str, worker_id: str) -> None:
        self.worker_id = worker_id
        self.channel = grpc.aio.insecure_channel(address)
        stub = worker_pb2_grpc.WorkerServiceStub(self.channel)
        self.call = stub.Connect(None)
        self.inbox: asyncio.Queue[Response | None] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with suppress(grpc.RpcError, asyncio.CancelledError):
            while True:
                msg = await self.call.read()
                if not isinstance(msg, Response):
                    break
                self.inbox.put_nowait(msg)
        self.inbox.put_nowait(None)

    async def send(self, **message: object) -> None:
        await self.call.write(Request(**message))  # type: ignore[arg-type]

    async def receive(self, timeout_s: float = DEADLINE_S) -> Response | None:
        """The next message, or None when none came within ``timeout_s``."""
        try:
            return await asyncio.wait_for(self.inbox.get(), timeout_s)
        except TimeoutError:
            return None

    async def expect(self, kind: str, timeout_s: float = DEADLINE_S) -> Response:
        """The next message of ``kind``, skipping NoJob answers (and re-polling after one)."""
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            msg = await self.receive(remaining)
            assert msg is not None, f"stream ended or no {kind} within {timeout_s}s"
            got = msg.WhichOneof("message")
            if got == kind:
                return msg
            assert got == "no_job", f"expected {kind}, got {msg}"
            await self.send(poll_job=Request.PollJob())
        raise AssertionError(f"no {kind} within {timeout_s}s")

    async def hello(self, *, next_job_in_outcome_ack: bool = False) -> Response.Welcome:
        """Say Hello (as a worker that predates next_job_in_outcome_ack, by default)."""
        await self.send(
            hello=Request.Hello(
                worker_id=self.worker_id,
                handlers=["shell"],
                next_job_in_outcome_ack=next_job_in_outcome_ack,
            )
        )
        return (await self.expect("welcome")).welcome

    async def succeed(self, assign: Response.AssignJob, *, poll_next: bool = True) -> None:
        """Report the assigned job SUCCEEDED (an Outcome, asking for the next job)."""
        await self.send(
            outcome=Request.Outcome(
                job_id=assign.job.id,
                lease_token=assign.lease_token,
                status=JobStatus.JOB_STATUS_SUCCEEDED,
                poll_next=poll_next,
            )
        )

    async def close(self) -> None:
        self.call.cancel()
        self._reader.cancel()
        with suppress(asyncio.CancelledError):
            await self._reader
        await self.channel.close(None)


@asynccontextmanager
async def raw_worker(address: str, worker_id: str) -> AsyncIterator[RawWorker]:
    w = RawWorker(address, worker_id)
    try:
        yield w
    finally:
        await w.close()


def wait_logged(proc: Proc, text: str, *, timeout_s: float = DEADLINE_S) -> str:
    """Wait until ``proc`` has logged ``text``; return its output."""

    def logged() -> str | None:
        out = proc.output()
        return out if text in out else None

    return wait_for(logged, timeout_s=timeout_s, what=f"{text!r} in {proc.log_path.name}")


def wait_status(client: Client, job_id: int, status: int, timeout_s: float = DEADLINE_S) -> Job:
    """Wait until job ``job_id`` has ``status``; return it."""

    def reached() -> Job | None:
        job = client.get_job(job_id)
        return job if job.status == status else None

    return wait_for(reached, timeout_s=timeout_s, what=f"job {job_id} to be {status}")


def unique_sleep() -> str:
    """A sleep duration no other process on this machine has on its command line."""
    return f"{29 + random.random():.6f}"


def _live_processes() -> Iterator[tuple[int, int, bytes]]:
    """(pid, parent pid, command line) of every live (non-zombie) process, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state != "Z":
            yield int(entry), int(ppid), cmdline


def processes_with(token: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``token``."""
    return [pid for pid, _, cmdline in _live_processes() if token.encode() in cmdline]


def children_of(pid: int, token: str = "") -> list[int]:
    """Pids of the live child processes of ``pid`` whose command line contains ``token``."""
    return [
        child
        for child, ppid, cmdline in _live_processes()
        if ppid == pid and token.encode() in cmdline
    ]
