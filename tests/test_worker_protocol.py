"""The worker's side of the WorkerService.Connect protocol, against a scripted fake server.

Each test runs a real ``Worker`` (real shell handler, real subprocesses) against a real
``grpc.aio`` server on 127.0.0.1 whose ``Connect`` hands every stream to the test: the test
reads what the worker sends and writes the server's answers. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import struct_pb2

from tests.handler_fixtures import intervals as fixtures_intervals
from tickwork.v1 import job_pb2, worker_pb2, worker_pb2_grpc
from worker_svc import Worker, WorkerSettings, run_worker
from worker_svc._job_output import JobOutput

Request = worker_pb2.ConnectRequest
Response = worker_pb2.ConnectResponse

REPO = Path(__file__).resolve().parent.parent
DEADLINE_S = 10.0
"""Longest wait for anything the worker should do promptly."""


class FakeStream:
    """One Connect stream as the test sees it."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[Request] = asyncio.Queue()
        self.log: list[Request] = []
        """Every message the worker sent on this stream, in order."""
        self.responses: asyncio.Queue[Response | grpc.StatusCode | None] = asyncio.Queue()
        self.worker_done = asyncio.Event()
        """Set when the worker ended its side of the stream (half-close or cancel)."""

    async def expect(
        self, kind: str, *, skip: tuple[str, ...] = (), timeout_s: float = DEADLINE_S
    ) -> Request:
        """Return the next message of ``kind``, passing over those of the ``skip`` kinds."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                request = await asyncio.wait_for(self.requests.get(), max(0.0, remaining))
            except TimeoutError:
                pytest.fail(f"no {kind} from the worker within {timeout_s} s; got {self.kinds()}")
            got = request.WhichOneof("message")
            if got == kind:
                return request
            assert got in skip, f"expected {kind}, got {got}: {request}"

    def kinds(self) -> list[str | None]:
        """Return the kinds of the messages received so far."""
        return [request.WhichOneof("message") for request in self.log]

    def send(self, response: Response) -> None:
        """Send a message to the worker."""
        self.responses.put_nowait(response)

    def end(self, code: grpc.StatusCode | None = None) -> None:
        """End the stream: OK when ``code`` is None, else with that status."""
        self.responses.put_nowait(code)


class FakeWorkerService(worker_pb2_grpc.WorkerServiceServicer):
    """Hands each Connect stream to the test through ``streams``."""

    def __init__(self) -> None:
        self.streams: asyncio.Queue[FakeStream] = asyncio.Queue()
        self.opened: list[FakeStream] = []
        self.port = 0

    async def next_stream(self, timeout_s: float = DEADLINE_S) -> FakeStream:
        """Return the next stream a worker opens."""
        try:
            return await asyncio.wait_for(self.streams.get(), timeout_s)
        except TimeoutError:
            pytest.fail(f"the worker did not connect within {timeout_s} s")

    async def PurgeHistory(
        self, request: worker_pb2.PurgeHistoryRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> worker_pb2.PurgeHistoryResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")
        raise AssertionError("unreachable")

    async def Connect(  # type: ignore[override]
        self, request_iterator: AsyncIterator[Request], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        stream = FakeStream()
        self.opened.append(stream)
        self.streams.put_nowait(stream)

        async def read() -> None:
            try:
                async for request in request_iterator:
                    stream.log.append(request)
                    stream.requests.put_nowait(request)
            except Exception:  # the worker cancelled the stream
                pass
            finally:
                stream.worker_done.set()

        reader = asyncio.create_task(read())
        done = asyncio.ensure_future(stream.worker_done.wait())
        try:
            while True:
                item = asyncio.ensure_future(stream.responses.get())
                await asyncio.wait([item, done], return_when=asyncio.FIRST_COMPLETED)
                if not item.done():
                    item.cancel()
                    return  # the worker is done: end the stream
                response = item.result()
                if response is None:
                    return
                if isinstance(response, grpc.StatusCode):
                    await context.abort(response, "scripted break")
                await context.write(response)
        finally:
            done.cancel()
            reader.cancel()


def welcome(active: bool = True, heartbeat_s: float = 0.05) -> Response:
    return Response(
        welcome=Response.Welcome(
            active=active, heartbeat_interval_seconds=heartbeat_s, lease_ttl_seconds=1.0
        )
    )


def assign(
    job_id: int,
    argv: list[str] | None = None,
    *,
    handler: str = "shell",
    params: dict[str, Any] | None = None,
) -> Response:
    struct = struct_pb2.Struct()
    struct.update(params if params is not None else {"argv": argv})
    return Response(
        assign_job=Response.AssignJob(
            job=job_pb2.Job(
                id=job_id,
                task_id=100 + job_id,
                task_name=f"task-{job_id}",
                status=job_pb2.JOB_STATUS_RUNNING,
                attempt=1,
            ),
            handler=handler,
            params=struct,
            lease_token=f"lease-{job_id}",
        )
    )


def ack(job_id: int, accepted: bool = True) -> Response:
    return Response(outcome_ack=Response.OutcomeAck(job_id=job_id, accepted=accepted))


def abort(job_id: int, reason: str) -> Response:
    return Response(abort_job=Response.AbortJob(job_id=job_id, reason=reason))


NO_JOB = Response(no_job=Response.NoJob())


async def ack_then_no_job(stream: FakeStream, job_id: int, accepted: bool = True) -> None:
    """Ack the Outcome of ``job_id`` and answer its poll_next with NoJob; the worker then
    polls again."""
    stream.send(ack(job_id, accepted))
    stream.send(NO_JOB)
    await stream.expect("poll_job")


JOB_MESSAGES = ("heartbeat", "log_lines")


async def eventually(
    condition: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S
) -> None:
    """Wait until ``condition()`` holds, checking every 20 ms, failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


async def within(awaitable: Awaitable[Any], what: str, timeout_s: float = DEADLINE_S) -> Any:
    try:
        return await asyncio.wait_for(awaitable, timeout_s)
    except TimeoutError:
        pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


async def start_server(service: FakeWorkerService, port: int = 0) -> grpc.aio.Server:
    server = grpc.aio.server()
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    service.port = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server


@pytest.fixture
async def service() -> AsyncIterator[FakeWorkerService]:
    service = FakeWorkerService()
    server = await start_server(service)
    yield service
    await server.stop(grace=None)


def fast_settings(port: int, **overrides: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "server": f"127.0.0.1:{port}",
        "poll_interval_s": 0.5,
        "shutdown_grace_s": 5.0,
        "abort_grace_s": 2.0,
        "reconnect_backoff_base_s": 0.05,
        "reconnect_backoff_cap_s": 0.2,
        "log_flush_interval_s": 0.05,
        "handshake_timeout_s": 5.0,
        "outcome_ack_timeout_s": 5.0,
    }
    values.update(overrides)
    return WorkerSettings(**values)


StartWorker = Callable[..., tuple[Worker, "asyncio.Task[None]"]]


@pytest.fixture
async def start_worker(service: FakeWorkerService) -> AsyncIterator[StartWorker]:
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    def start(**overrides: Any) -> tuple[Worker, asyncio.Task[None]]:
        worker = Worker(fast_settings(service.port, **overrides))
        task = asyncio.create_task(worker.run(), name="test-worker")
        started.append((worker, task))
        return worker, task

    yield start
    for worker, _ in started:
        worker.stop(abort_running=True)
    for stream in service.opened:
        stream.send(NO_JOB)  # answers a pending poll, so a stopping worker need not wait
    for _, task in started:
        done, _ = await asyncio.wait([task], timeout=DEADLINE_S)
        if not done:
            task.cancel()
            await asyncio.wait([task])
            pytest.fail("the worker did not stop within the deadline")
        if not task.cancelled():
            task.result()  # a crash of the worker fails the test


async def connect(service: FakeWorkerService, active: bool = True) -> FakeStream:
    """Accept the worker's stream: Hello -> Welcome -> PollJob."""
    stream = await service.next_stream()
    await stream.expect("hello")
    stream.send(welcome(active=active))
    await stream.expect("poll_job")
    return stream


async def test_hello_names_the_worker_and_its_handlers(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, _ = start_worker()
    stream = await service.next_stream()
    hello = (await stream.expect("hello")).hello
    assert hello.worker_id == worker.worker_id
    assert re.fullmatch(rf"[^:\s]+:{os.getpid()}:[0-9a-f]{{8}}", hello.worker_id)
    assert {"shell", "python"} <= set(hello.handlers)
    assert hello.next_job_in_outcome_ack


async def test_echo_job_sends_log_lines_then_outcome_then_polls_after_ack(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(7, ["echo", "hi"]))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome

    assert outcome.job_id == 7
    assert outcome.lease_token == "lease-7"
    assert outcome.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert outcome.error == ""
    assert "hi" in outcome.output_tail
    job_messages = stream.log[stream.kinds().index("poll_job") + 1 : -1]
    logged = [m.log_lines for m in job_messages if m.WhichOneof("message") == "log_lines"]
    assert [(m.job_id, m.lease_token, m.stream) for m in logged] == [(7, "lease-7", "stdout")]
    assert [line for m in logged for line in m.lines] == ["hi"]
    assert all(
        m.heartbeat.lease_token == "lease-7" for m in job_messages if m.HasField("heartbeat")
    )

    assert outcome.poll_next, "an idle worker's Outcome is also its next poll"
    assert stream.requests.empty(), "the worker must wait for OutcomeAck"
    stream.send(ack(7))
    # The Outcome was the poll: the next job is taken without a PollJob in between.
    stream.send(assign(70, ["echo", "next"]))
    second = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert (second.job_id, second.status) == (70, job_pb2.JOB_STATUS_SUCCEEDED)
    assert stream.kinds().count("poll_job") == 1
    await ack_then_no_job(stream, 70)


async def test_a_next_job_inside_the_outcome_ack_is_run_without_another_poll(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(9, ["echo", "first"]))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.poll_next

    carried = ack(9)
    carried.outcome_ack.next_job.CopyFrom(assign(71, ["echo", "carried"]).assign_job)
    stream.send(carried)
    second = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert (second.job_id, second.lease_token, second.status) == (
        71,
        "lease-71",
        job_pb2.JOB_STATUS_SUCCEEDED,
    )
    assert "carried" in second.output_tail
    assert stream.kinds().count("poll_job") == 1  # the Outcome was the poll, answered in the ack
    await ack_then_no_job(stream, 71)


async def test_heartbeats_while_running_and_abort_job_ends_aborted_quickly(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(8, ["sleep", "60"]))
    for _ in range(3):
        heartbeat = (await stream.expect("heartbeat", skip=JOB_MESSAGES)).heartbeat
        assert (heartbeat.job_id, heartbeat.lease_token) == (8, "lease-8")

    aborted_at = time.monotonic()
    stream.send(abort(8, "aborted by operator"))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES, timeout_s=5.0)).outcome
    assert time.monotonic() - aborted_at < 3.0
    assert outcome.status == job_pb2.JOB_STATUS_ABORTED
    assert outcome.error == "aborted by operator"
    await ack_then_no_job(stream, 8)


async def test_abort_right_after_assign_still_aborts(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(9, ["sleep", "60"]))
    stream.send(abort(9, "aborted by operator"))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES, timeout_s=5.0)).outcome
    assert (outcome.job_id, outcome.status) == (9, job_pb2.JOB_STATUS_ABORTED)
    assert outcome.error == "aborted by operator"
    await ack_then_no_job(stream, 9)


async def test_abort_of_another_job_is_ignored(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(10, ["sh", "-c", "sleep 0.3; echo done"]))
    await stream.expect("heartbeat", skip=JOB_MESSAGES)
    stream.send(abort(999, "not this one"))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_SUCCEEDED
    await ack_then_no_job(stream, 10)


async def test_failed_job_reports_the_error_and_stderr(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(11, ["sh", "-c", "echo oops >&2; exit 3"]))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_FAILED
    assert "exit code 3" in outcome.error
    stderr = [
        line
        for m in stream.log
        if m.HasField("log_lines") and m.log_lines.stream == "stderr"
        for line in m.log_lines.lines
    ]
    assert stderr == ["oops"]
    await ack_then_no_job(stream, 11, accepted=False)  # recorded as late: the worker just goes on


async def test_unknown_handler_fails_the_job(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(assign(12, handler="no-such-handler", params={}))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_FAILED
    assert outcome.error.startswith("UnknownHandler: ")
    assert "no-such-handler" in outcome.error
    await ack_then_no_job(stream, 12)


async def test_no_job_makes_the_worker_poll_again(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service)
    stream.send(NO_JOB)
    await stream.expect("poll_job")
    stream.send(NO_JOB)
    await stream.expect("poll_job")
    assert stream.kinds() == ["hello", "poll_job", "poll_job", "poll_job"]


async def test_standby_worker_waits_for_its_poll_answer_then_runs_jobs(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    stream = await connect(service, active=False)
    stream.send(NO_JOB)  # the real server answers a standby's polls with NoJob
    await stream.expect("poll_job")
    assert stream.kinds() == ["hello", "poll_job", "poll_job"]
    stream.send(assign(13, ["echo", "now active"]))  # the server made this worker active
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_SUCCEEDED
    await ack_then_no_job(stream, 13)


async def test_reconnects_when_the_stream_breaks_while_idle(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, _ = start_worker()
    first = await connect(service)
    first.end(grpc.StatusCode.UNAVAILABLE)
    second = await service.next_stream()
    assert (await second.expect("hello")).hello.worker_id == worker.worker_id
    second.send(welcome())
    await second.expect("poll_job")


async def test_reconnects_when_the_server_ends_the_stream(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    first = await connect(service)
    first.end()
    second = await service.next_stream()
    await second.expect("hello")


async def test_stream_broken_while_a_job_runs_kills_the_job_then_reconnects(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    start_worker()
    first = await connect(service)
    first.send(assign(14, ["sh", "-c", "echo $$; exec sleep 60"]))
    lines = (await first.expect("log_lines", skip=("heartbeat",))).log_lines.lines
    pid = int(lines[0])
    os.kill(pid, 0)  # running

    first.end(grpc.StatusCode.UNAVAILABLE)
    second = await service.next_stream()
    await second.expect("hello")

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    await eventually(gone, f"process {pid} of the lost job to be gone")
    assert "outcome" not in first.kinds()  # the lease expires on the server instead
    second.send(welcome())
    await second.expect("poll_job")


async def test_an_outcome_the_stream_lost_before_its_ack_is_reported_again_on_the_next(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    """The server may or may not have recorded it (a database error mid-finish ends the
    stream as surely as a network break): the worker reports the same outcome first
    thing on the new stream, without poll_next, and polls only once it is acknowledged."""
    start_worker()
    first = await connect(service)
    first.send(assign(15, ["echo", "done"]))
    lost = (await first.expect("outcome", skip=JOB_MESSAGES)).outcome
    first.end(grpc.StatusCode.UNAVAILABLE)  # no OutcomeAck

    second = await service.next_stream()
    await second.expect("hello")
    second.send(welcome())
    again = (await second.expect("outcome")).outcome
    assert (again.job_id, again.lease_token, again.status, again.output_tail) == (
        lost.job_id,
        lost.lease_token,
        lost.status,
        lost.output_tail,
    )
    assert not again.poll_next
    assert second.kinds() == ["hello", "outcome"]  # before any poll
    second.send(ack(15))
    await second.expect("poll_job")

    third_job = assign(16, ["echo", "next"])
    second.send(third_job)
    assert (await second.expect("outcome", skip=JOB_MESSAGES)).outcome.job_id == 16
    await ack_then_no_job(second, 16)
    assert [m.outcome.job_id for m in second.log if m.HasField("outcome")] == [15, 16]


async def test_reconnects_with_backoff_until_the_server_is_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="worker_svc")
    service = FakeWorkerService()
    server = await start_server(service)
    port = service.port
    await server.stop(grace=None)  # nothing listens on the port now

    worker = Worker(fast_settings(port))
    task = asyncio.create_task(worker.run())
    try:

        def failures() -> int:
            return sum("reconnecting in" in record.getMessage() for record in caplog.records)

        await eventually(lambda: failures() >= 3, "three failed connection attempts")
        assert all(
            record.levelno == logging.WARNING
            for record in caplog.records
            if "reconnecting in" in record.getMessage()
        )

        server = await start_server(service, port)
        try:
            stream = await service.next_stream()
            await stream.expect("hello")
            stream.send(welcome())
            await stream.expect("poll_job")
            worker.stop()
            stream.send(NO_JOB)
            await within(task, "the worker to stop")
        finally:
            await server.stop(grace=None)
    finally:
        worker.stop()
        task.cancel()
        await asyncio.wait([task])


async def test_stop_while_idle_cancels_the_poll_and_closes_after_its_answer(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, task = start_worker(poll_interval_s=30.0)
    stream = await connect(service)
    worker.stop()
    await stream.expect("cancel_poll")
    assert not task.done(), "the worker waits for the cancelled poll's answer"
    stream.send(NO_JOB)
    await within(task, "the worker to stop", timeout_s=3.0)
    await within(stream.worker_done.wait(), "the worker to close its stream")
    assert stream.kinds() == ["hello", "poll_job", "cancel_poll"]


async def test_stop_with_a_cancelled_poll_unanswered_waits_the_poll_interval(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    # A server older than CancelPoll ignores it: the worker gives up on the answer after
    # the poll interval and a second.
    worker, task = start_worker(poll_interval_s=0.5)
    await connect(service)
    stopped_at = time.monotonic()
    worker.stop()
    await within(task, "the worker to stop")
    assert 1.5 <= time.monotonic() - stopped_at < 5.0


async def test_stopping_standby_worker_leaves_at_once(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, task = start_worker(poll_interval_s=30.0)
    stream = await connect(service, active=False)
    worker.stop()
    await within(task, "the standby worker to stop", timeout_s=3.0)
    await within(stream.worker_done.wait(), "the worker to close its stream")


def python_job(job_id: int, timeout_s: float, callable_: str, **kwargs: Any) -> Response:
    """AssignJob of a ``python`` job calling ``tests.handler_fixtures:<callable_>``."""
    response = assign(
        job_id,
        handler="python",
        params={"callable": f"tests.handler_fixtures:{callable_}", "kwargs": kwargs},
    )
    response.assign_job.timeout_seconds = timeout_s
    return response


async def test_a_timed_out_python_function_is_stopped_before_its_outcome_and_the_next_poll(
    service: FakeWorkerService, start_worker: StartWorker, tmp_path: Path
) -> None:
    record = str(tmp_path / "intervals")
    start_worker()
    stream = await connect(service)  # heartbeat interval 0.05 s
    # One long C call in a job process: the timeout stops the process, the call with it.
    stream.send(python_job(30, 0.3, "sleep_in_one_call", path=record, label="a", seconds=60))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_FAILED
    assert outcome.error == "timed out after 0.3 s"
    assert outcome.poll_next, "the function is gone: the next job may come at once"
    ((_, end),) = fixtures_intervals(record)["a"]
    assert end == float("inf"), "the call never returned: its process was stopped"
    stream.send(ack(30))

    # The worker goes on as usual.
    stream.send(assign(31, ["echo", "next"]))
    second = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert (second.job_id, second.status, second.poll_next) == (
        31,
        job_pb2.JOB_STATUS_SUCCEEDED,
        True,
    )
    await ack_then_no_job(stream, 31)


async def test_abort_of_a_python_function_stuck_in_a_c_call_ends_it_at_once(
    service: FakeWorkerService, start_worker: StartWorker, tmp_path: Path
) -> None:
    record = str(tmp_path / "intervals")
    worker, task = start_worker()
    stream = await connect(service)
    stream.send(python_job(32, 0, "sleep_in_one_call", path=record, label="a", seconds=600))
    await eventually(lambda: "a" in fixtures_intervals(record), "the function to start")
    aborted = time.monotonic()
    stream.send(abort(32, "aborted by operator"))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert (outcome.status, outcome.error) == (job_pb2.JOB_STATUS_ABORTED, "aborted by operator")
    assert time.monotonic() - aborted < 2
    assert outcome.poll_next
    stream.send(ack(32))
    await stream.expect("poll_job")
    worker.stop()
    await within(task, "the worker to stop", timeout_s=5.0)


async def test_stop_lets_the_running_job_finish_within_the_grace(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, task = start_worker(shutdown_grace_s=10.0)
    stream = await connect(service)
    stream.send(assign(15, ["sh", "-c", "sleep 0.5; echo finished"]))
    await stream.expect("heartbeat", skip=JOB_MESSAGES)
    worker.stop()
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert "finished" in outcome.output_tail
    assert not outcome.poll_next, "a stopping worker asks for no next job"
    assert not task.done(), "the worker must wait for OutcomeAck"
    stream.send(ack(15))
    await within(task, "the worker to stop")
    await within(stream.worker_done.wait(), "the worker to close its stream")
    assert stream.kinds()[-1] == "outcome"  # no poll after stop


async def test_stop_aborts_the_running_job_after_the_grace(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, task = start_worker(shutdown_grace_s=0.3)
    stream = await connect(service)
    stream.send(assign(16, ["sleep", "60"]))
    await stream.expect("heartbeat", skip=JOB_MESSAGES)
    stopped_at = time.monotonic()
    worker.stop()
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES, timeout_s=5.0)).outcome
    assert 0.3 <= time.monotonic() - stopped_at < 3.0
    assert outcome.status == job_pb2.JOB_STATUS_ABORTED
    assert outcome.error == "worker shutting down"
    assert not outcome.poll_next
    stream.send(ack(16))
    await within(task, "the worker to stop")
    assert stream.kinds()[-1] == "outcome"


async def test_an_outcome_left_unanswered_is_followed_by_a_poll(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    # A server older than poll_next acks the Outcome and never answers it as a poll: the
    # worker polls again after its poll interval (and a second) instead of idling forever.
    start_worker(poll_interval_s=0.5)
    stream = await connect(service)
    stream.send(assign(22, ["echo", "hi"]))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.poll_next
    stream.send(ack(22))
    started = time.monotonic()
    await stream.expect("poll_job", timeout_s=5.0)
    assert 0.5 <= time.monotonic() - started < 4.0


async def test_stop_after_an_outcome_with_poll_next_runs_the_job_it_was_answered(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    # The server leases the next job in the transaction that records the outcome; a stop
    # that lands between the Outcome and its answer must not leave that job unstarted
    # (it would stay RUNNING until its lease expired, then fail).
    worker, task = start_worker()
    stream = await connect(service)
    stream.send(assign(20, ["echo", "first"]))
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.poll_next
    worker.stop()
    stream.send(ack(20))
    await stream.expect("cancel_poll")
    stream.send(assign(21, ["echo", "leased with the outcome"]))
    second = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert (second.job_id, second.status) == (21, job_pb2.JOB_STATUS_SUCCEEDED)
    assert "leased with the outcome" in second.output_tail
    assert not second.poll_next
    stream.send(ack(21))
    await within(task, "the worker to stop")
    assert stream.kinds()[-1] == "outcome"


async def test_stop_while_polling_runs_a_job_assigned_at_that_moment(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    worker, task = start_worker()
    stream = await connect(service)
    worker.stop()
    await stream.expect("cancel_poll")
    stream.send(assign(17, ["echo", "last one"]))  # the server had taken it already
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_SUCCEEDED
    stream.send(ack(17))
    await within(task, "the worker to stop")


async def test_cancelling_run_still_reports_the_outcome(
    service: FakeWorkerService, start_worker: StartWorker
) -> None:
    _, task = start_worker()
    stream = await connect(service)
    stream.send(assign(18, ["sleep", "60"]))
    await stream.expect("heartbeat", skip=JOB_MESSAGES)
    task.cancel()
    outcome = (await stream.expect("outcome", skip=JOB_MESSAGES, timeout_s=5.0)).outcome
    assert outcome.status == job_pb2.JOB_STATUS_ABORTED
    assert outcome.error == "worker cancelled"
    stream.send(ack(18))
    done, _ = await asyncio.wait([task], timeout=DEADLINE_S)
    assert done and task.cancelled()


async def test_cancelling_run_worker_is_a_graceful_stop(service: FakeWorkerService) -> None:
    task = asyncio.create_task(run_worker(fast_settings(service.port, shutdown_grace_s=0.2)))
    try:
        stream = await connect(service)
        stream.send(assign(19, ["sleep", "60"]))
        await stream.expect("heartbeat", skip=JOB_MESSAGES)
        task.cancel()
        outcome = (await stream.expect("outcome", skip=JOB_MESSAGES, timeout_s=5.0)).outcome
        assert outcome.status == job_pb2.JOB_STATUS_ABORTED
        assert outcome.error == "worker shutting down"
        stream.send(ack(19))
        await within(stream.worker_done.wait(), "the worker to close its stream")
        done, _ = await asyncio.wait([task], timeout=DEADLINE_S)
        assert done and task.cancelled()
    finally:
        task.cancel()
        await asyncio.wait([task])


async def test_python_module_exits_0_on_sigterm(service: FakeWorkerService) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'client'}{os.pathsep}{REPO}"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "worker_svc",
        "--server",
        f"127.0.0.1:{service.port}",
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stream = await service.next_stream(timeout_s=30.0)
        hello = (await stream.expect("hello")).hello
        assert f":{proc.pid}:" in hello.worker_id
        stream.send(welcome())
        await stream.expect("poll_job")
        proc.send_signal(signal.SIGTERM)
        stream.send(NO_JOB)
        assert await within(proc.wait(), "the worker process to exit") == 0
        assert proc.stderr is not None
        stderr = (await proc.stderr.read()).decode()
        assert "received SIGTERM" in stderr
        assert "worker stopped" in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_python_module_exits_2_on_invalid_settings() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'client'}{os.pathsep}{REPO}",
        "WORKER_SHUTDOWN_GRACE_SECONDS": "soon",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "worker_svc",
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await within(proc.communicate(), "the worker process to exit", timeout_s=30.0)
    assert proc.returncode == 2
    assert "WORKER_SHUTDOWN_GRACE_SECONDS" in stderr.decode()


def test_settings_from_env() -> None:
    settings = WorkerSettings.from_env(
        environ={
            "TICKWORK_SERVER": "scheduler:6000",
            "WORKER_POLL_INTERVAL_SECONDS": "1.5",
            "WORKER_SHUTDOWN_GRACE_SECONDS": "0",
            "WORKER_ABORT_GRACE_SECONDS": "",
        }
    )
    assert settings.server == "scheduler:6000"
    assert settings.poll_interval_s == 1.5
    assert settings.shutdown_grace_s == 0.0
    assert settings.abort_grace_s == 5.0
    assert WorkerSettings.from_env("other:1", environ={"TICKWORK_SERVER": "x:2"}).server == (
        "other:1"
    )
    defaults = WorkerSettings.from_env(environ={})
    assert defaults == WorkerSettings()
    assert (defaults.server, defaults.poll_interval_s) == ("127.0.0.1:50051", 3.0)
    assert (defaults.shutdown_grace_s, defaults.abort_grace_s) == (15.0, 5.0)
    assert (defaults.reconnect_backoff_base_s, defaults.reconnect_backoff_cap_s) == (0.5, 10.0)
    assert defaults.log_flush_interval_s == 0.2


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"poll_interval_s": 0.0}, "poll_interval_s"),
        ({"shutdown_grace_s": -1.0}, "shutdown_grace_s"),
        ({"abort_grace_s": float("nan")}, "abort_grace_s"),
        ({"reconnect_backoff_cap_s": 0.1}, "reconnect_backoff_cap_s"),
        ({"server": ""}, "server"),
    ],
)
def test_settings_are_validated(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        WorkerSettings(**changes)


def test_settings_from_env_names_the_bad_variable() -> None:
    with pytest.raises(ValueError, match="WORKER_POLL_INTERVAL_SECONDS"):
        WorkerSettings.from_env(environ={"WORKER_POLL_INTERVAL_SECONDS": "3s"})


def test_job_output_batches_by_stream_and_bounds_memory() -> None:
    output = JobOutput()
    for line in ("a", "b"):
        output.add("stdout", line)
    output.add("stderr", "c")
    output.add("stdout", "d")
    assert output.take_batches() == [("stdout", ["a", "b"]), ("stderr", ["c"]), ("stdout", ["d"])]
    assert output.take_batches() == []
    for i in range(10_005):
        output.add("stdout", str(i))
    batches = output.take_batches()
    assert batches[0] == ("stderr", ["[tickwork: 5 lines of output were dropped before sending]"])
    sent = [line for _, lines in batches[1:] for line in lines]
    assert sent[0] == "5" and sent[-1] == "10004" and len(sent) == 10_000
    assert all(len(lines) <= 500 for _, lines in batches)
    assert len(output.tail()) <= 4096 and output.tail().endswith("10003\n10004")
