"""Jobs run in processes of their own, on real processes: a job process that dies fails
only its job while the service keeps answering; output streams as it is written and stays
bounded without newlines; a job knows the window it was fired for; limits are validated."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.handler_fixtures import pid_exists, pids
from tests.harness import REPO, Server, WorkerProc, wait_for
from tests.queue_helpers import children_of
from tickwork import Client, InvalidArgument, JobStatus
from tickwork._context import format_time
from tickwork.apply import ConfigError, apply_config, load_config
from tickwork.v1 import task_pb2, task_pb2_grpc

FIXTURES = "tests.handler_fixtures"
WAIT_S = 60

CRASHES: dict[str, tuple[str, dict[str, object], str]] = {
    "exit-code": ("exit_with", {"code": 3}, r"^exit code 3$"),
    "os-exit": ("hard_exit", {"code": 4}, r"^exit code 4$"),
    "keyboard-interrupt": (
        "raise_keyboard_interrupt",
        {},
        r"^exit code -2 \(killed by SIGINT\): .*KeyboardInterrupt",
    ),
    "memory-error": ("raise_memory_error", {}, r"^exit code 1: .*MemoryError"),
    "segfault": ("segfault", {}, r"^exit code -11 \(killed by SIGSEGV\)"),
    "sigkill": ("kill_self", {"signal_name": "SIGKILL"}, r"^exit code -9 \(killed by SIGKILL\)"),
}
"""Task name -> (fixture, its kwargs, the error its job fails with)."""


class Poller:
    """Calls ListTasks every 100 ms in a thread and keeps the longest wait for an answer."""

    def __init__(self, address: str) -> None:
        self._client = Client(address)
        self._stop = threading.Event()
        self.longest_s = 0.0
        self.calls = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._client.list_tasks()
            self.longest_s = max(self.longest_s, time.monotonic() - started)
            self.calls += 1
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()


def test_each_kind_of_dying_job_process_fails_only_its_job_and_serve_keeps_serving(
    tmp_path: Path,
) -> None:
    srv = Server(tmp_path)
    try:
        srv.wait_healthy()
        pid = srv.pid
        with Client(srv.address) as client:
            for name, (fixture, kwargs, _) in CRASHES.items():
                params = {"callable": f"{FIXTURES}:{fixture}", "kwargs": kwargs}
                client.create_task(name, "python", params)
            # A blocking async function blocks its own process only.
            blocking = {"record": str(tmp_path / "blocking"), "name": "b", "seconds": 3}
            client.create_task(
                "blocking", "python", {"callable": f"{FIXTURES}:blocking_async", "kwargs": blocking}
            )
            client.create_task("plain", "shell", {"argv": ["true"]})
            poller = Poller(srv.address)
            try:
                for name, (_, _, error) in CRASHES.items():
                    (run,) = client.run(name)
                    job = client.wait(run.job_id, timeout=WAIT_S)
                    assert job.status == JobStatus.JOB_STATUS_FAILED, (name, job)
                    assert re.match(error, job.error, re.DOTALL), (name, job.error)
                    (plain,) = client.run("plain")
                    done = client.wait(plain.job_id, timeout=WAIT_S)
                    assert done.status == JobStatus.JOB_STATUS_SUCCEEDED, (name, done)
                (run,) = client.run("blocking")
                job = client.wait(run.job_id, timeout=WAIT_S)
                assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
            finally:
                poller.stop()
        assert poller.calls >= 10
        assert poller.longest_s < 1.0, poller.longest_s
        assert srv.popen.poll() is None, srv.output()
        assert srv.pid == pid
        assert srv.output().count("connecting to ") == 1, "the embedded worker never restarted"
    finally:
        srv.stop()


def test_a_job_s_print_lines_appear_in_watch_job_as_they_are_written(tmp_path: Path) -> None:
    go = tmp_path / "go"
    srv = Server(tmp_path)
    try:
        srv.wait_healthy()
        with Client(srv.address) as client:
            client.create_task(
                "printer",
                "python",
                {"callable": f"{FIXTURES}:print_then_wait", "kwargs": {"go": str(go)}},
            )
            (run,) = client.run("printer")
            seen_first_while_running = False
            last = None
            for state in client.watch(run.job_id, timeout=WAIT_S):
                last = state
                lines = state.output_tail.splitlines()
                if "first" in lines and not go.exists():
                    assert state.status == JobStatus.JOB_STATUS_RUNNING
                    assert "second" not in lines
                    seen_first_while_running = True
                    go.touch()  # only now does the job print its second line
            assert seen_first_while_running
            assert last is not None and last.status == JobStatus.JOB_STATUS_SUCCEEDED
            assert last.output_tail.splitlines() == ["first", "second", "done"]
    finally:
        srv.stop()


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


@pytest.fixture
def api_and_worker(tmp_path: Path) -> Iterator[tuple[Server, WorkerProc]]:
    srv = Server(tmp_path, env={"WORKER_IS_ENABLED": "false"}, name="api")
    worker: WorkerProc | None = None
    try:
        srv.wait_healthy()
        worker = WorkerProc(tmp_path, srv.address)
        wait_for(lambda: "as the active worker" in worker.output(), what="the worker")
        yield srv, worker
    finally:
        if worker is not None:
            worker.stop()
        srv.stop()


def test_one_gigabyte_of_output_without_newlines_keeps_service_and_worker_memory_flat(
    api_and_worker: tuple[Server, WorkerProc],
) -> None:
    srv, worker = api_and_worker
    script = "head -c 1073741824 /dev/zero | tr '\\000' x; echo; echo end"
    with Client(srv.address) as client:
        client.create_task("flood", "shell", {"argv": ["sh", "-c", script]})
        (run,) = client.run("flood")
        job = client.wait(run.job_id, timeout=600)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    assert job.output_tail.endswith("x\nend"), job.output_tail[-100:]
    service_mb, worker_mb = _peak_rss_mb(srv.pid), _peak_rss_mb(worker.pid)
    assert service_mb < 150, f"service peak RSS {service_mb:.0f} MiB"
    assert worker_mb < 150, f"worker peak RSS {worker_mb:.0f} MiB"


def test_a_python_job_process_dies_with_its_worker(
    api_and_worker: tuple[Server, WorkerProc], tmp_path: Path
) -> None:
    srv, worker = api_and_worker
    record = tmp_path / "intervals"
    kwargs = {"path": str(record), "label": "long", "seconds": 600}
    with Client(srv.address) as client:
        client.create_task(
            "long", "python", {"callable": f"{FIXTURES}:sleep_in_one_call", "kwargs": kwargs}
        )
        client.run("long")
        (pid,) = wait_for(lambda: pids(str(record)), what="the job to start")
        assert pid_exists(pid)
        worker.kill()  # SIGKILL: no cleanup of its own
        wait_for(lambda: not pid_exists(pid), timeout_s=5, what="the job process to die")


_GUARD_SOURCE_MARK = "import os, select, signal, sys, time"
"""A piece of the guard's command line (``python -S -c <its program>``)."""


def test_a_guard_that_dies_is_replaced_and_the_running_job_still_dies_with_its_worker(
    api_and_worker: tuple[Server, WorkerProc], tmp_path: Path
) -> None:
    """The guard (the process that SIGKILLs a dead worker's job process groups) is SIGKILLed
    while a shell job runs: the worker starts a new one at once, told of the running group,
    so the worker's own SIGKILL a moment later still takes the job's program with it."""
    srv, worker = api_and_worker
    pid_file = tmp_path / "sleep.pid"
    with Client(srv.address) as client:
        client.create_task(
            "sleeper", "shell", {"argv": ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 120"]}
        )
        client.run("sleeper")
        pid = wait_for(
            lambda: (
                int(pid_file.read_text()) if pid_file.exists() and pid_file.read_text() else None
            ),
            what="the job's program to start",
        )
        (guard,) = wait_for(lambda: children_of(worker.pid, _GUARD_SOURCE_MARK), what="the guard")
        os.kill(guard, signal.SIGKILL)
        wait_for(
            lambda: [g for g in children_of(worker.pid, _GUARD_SOURCE_MARK) if g != guard],
            timeout_s=10,
            what="a new guard",
        )
        assert pid_exists(pid)
        worker.kill()  # SIGKILL: no cleanup of its own
        wait_for(lambda: not pid_exists(pid), timeout_s=5, what="the job's program to die")
        assert "the process-group guard" in worker.output()


def _fire_seconds(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """Two fire times 4 s apart, in one minute, the first at least 3 s from ``now``."""
    first = (now + dt.timedelta(seconds=3)).replace(microsecond=0)
    if first.second > 55:
        first = (first + dt.timedelta(minutes=1)).replace(second=1)
    return first, first + dt.timedelta(seconds=4)


def test_a_scheduled_job_and_its_retry_know_the_window_it_was_fired_for(tmp_path: Path) -> None:
    record = tmp_path / "windows"
    srv = Server(tmp_path, env={"SCHEDULER_POLL_INTERVAL_SECONDS": "1"})
    try:
        srv.wait_healthy()
        with Client(srv.address) as client:
            task = client.create_task(
                "windowed",
                "python",
                {"callable": f"{FIXTURES}:record_window", "kwargs": {"path": str(record)}},
                max_attempts=2,
                backoff_base_seconds=1,
                backoff_cap_seconds=1,
            )
            first, second = _fire_seconds(dt.datetime.now(dt.UTC))
            cron = f"{first.second},{second.second} {first.minute} {first.hour} * * *"
            client.create_schedule("twice", [task.id], cron=cron)

            def both_retried() -> list[list[str]] | None:
                lines = (
                    [line.split() for line in record.read_text().splitlines()]
                    if (record.exists())
                    else []
                )
                return lines if [line[0] for line in lines] == ["1", "2", "1", "2"] else None

            lines = wait_for(both_retried, timeout_s=60, what="both fires and their retries")
            fires = sorted(client.list_fires("twice"), key=lambda f: f.fire_time.ToDatetime())
        fire_times = [format_time(f.fire_time.ToDatetime(dt.UTC)) for f in fires]
        assert fire_times == [format_time(first), format_time(second)]
        for attempt in lines[:2]:  # the first fire: no fire before it
            assert attempt[1:] == [fire_times[0], "-", first.isoformat(), "-", "twice"]
        for attempt in lines[2:]:  # the second: the first is its previous one
            assert attempt[1:] == [
                fire_times[1],
                fire_times[0],
                second.isoformat(),
                first.isoformat(),
                "twice",
            ]
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("memory_limit_bytes", -1, "must be >= 0"),
        ("cpu_limit_seconds", -5, "must be >= 0"),
        # RLIMIT_CPU's hard limit is a second above the soft one: int64's largest value
        # would overflow it in every job process, so it is refused on save.
        ("cpu_limit_seconds", 2**63 - 1, "must be at most 316224000 seconds"),
    ],
)
def test_a_negative_or_huge_limit_is_invalid_argument_naming_the_field(
    api_server: Server, field: str, value: int, message: str
) -> None:
    task = task_pb2.Task(name="limited", handler="shell")
    task.params.update({"argv": ["true"]})
    setattr(task, field, value)
    with grpc.insecure_channel(api_server.address) as channel:
        stub = task_pb2_grpc.TaskServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.CreateTask(task_pb2.CreateTaskRequest(task=task), timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (caught.value.details() or "").startswith(f"task.{field}: {message}")
        task.name = "limited-ok"
        setattr(task, field, 3)
        created = stub.CreateTask(task_pb2.CreateTaskRequest(task=task), timeout=10).task
        assert getattr(created, field) == 3


LIMITED_TOML = """
[[tasks]]
name = "limited"
handler = "shell"
params = { argv = ["true"] }
memory_limit_bytes = 314572800
cpu_limit_seconds = 7
"""


def test_the_sdk_and_apply_set_and_clear_the_limits(api_server: Server, tmp_path: Path) -> None:
    with Client(api_server.address) as client:
        created = client.create_task(
            "sdk", "shell", {"argv": ["true"]}, memory_limit_bytes=1 << 30, cpu_limit_seconds=5
        )
        assert (created.memory_limit_bytes, created.cpu_limit_seconds) == (1 << 30, 5)
        updated = client.update_task("sdk", cpu_limit_seconds=9)
        assert (updated.memory_limit_bytes, updated.cpu_limit_seconds) == (1 << 30, 9)
        with pytest.raises(InvalidArgument) as refused:
            client.update_task("sdk", memory_limit_bytes=-1)
        assert refused.value.details.startswith("task.memory_limit_bytes: must be >= 0")

        path = tmp_path / "limited.toml"
        path.write_text(LIMITED_TOML)
        assert [c.action for c in apply_config(client, load_config(path)).changes] == ["created"]
        task = client.get_task("limited")
        assert (task.memory_limit_bytes, task.cpu_limit_seconds) == (314572800, 7)
        again = apply_config(client, load_config(path)).changes
        assert [c.action for c in again] == ["unchanged"]
        # A key left out is set to its default, as every other key of a task is.
        path.write_text(LIMITED_TOML.replace("cpu_limit_seconds = 7\n", ""))
        [change] = apply_config(client, load_config(path)).changes
        assert (change.action, change.fields) == ("updated", ("cpu_limit_seconds",))
        assert client.get_task("limited").cpu_limit_seconds == 0

    path.write_text(LIMITED_TOML.replace("= 7", "= -7").replace("314572800", '"300M"'))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "tasks[0].cpu_limit_seconds: must be >= 0 (0 means no limit), got -7" in str(
        caught.value
    )
    assert "tasks[0].memory_limit_bytes: expected an integer, got string '300M'" in str(
        caught.value
    )


def test_the_job_process_server_keeps_a_spare_per_slot_and_a_lost_spare_costs_no_job(
    api_server: Server, tmp_path: Path
) -> None:
    worker = WorkerProc(tmp_path, api_server.address, args=["--slots", "3"], name="three")
    try:

        def job_server() -> int | None:
            servers = children_of(worker.pid, "worker_svc.handlers._zygote")
            return servers[0] if servers else None

        server_pid = wait_for(job_server, what="the worker's job process server")

        def spare_job_processes() -> list[int]:
            """The job processes forked ahead: one below each keeper (the server's
            children) that has no job."""
            return [pid for keeper in children_of(server_pid) for pid in children_of(keeper)]

        def three_spares() -> list[int] | None:
            found = spare_job_processes()
            return found if len(found) == 3 else None

        spares = wait_for(three_spares, what="three spare job processes")
        for pid in spares:  # spares lost without a job: the next jobs get fresh ones
            os.kill(pid, signal.SIGKILL)
        # Dead (a zombie at most) before the jobs come: a spare SIGKILLed after it took a
        # job is a killed job process, which fails its job as it should.
        wait_for(lambda: not set(spares) & set(spare_job_processes()), what="the spares to die")
        with Client(api_server.address) as client:
            for name in ("a", "b", "c"):
                client.create_task(
                    name, "python", {"callable": f"{FIXTURES}:add", "kwargs": {"a": 1, "b": 2}}
                )
            jobs = client.run("a", "b", "c")
            ended = [client.wait(run.job_id, timeout=30) for run in jobs]
        assert [job.status for job in ended] == [JobStatus.JOB_STATUS_SUCCEEDED] * 3
        assert not set(spares) & set(spare_job_processes())
        wait_for(lambda: len(spare_job_processes()) >= 3, what="the spares forked again")
    finally:
        worker.stop()


_TWO_JOBS = """
import asyncio
from worker_svc.handlers import JobContext, PythonHandler

async def main():
    handler = PythonHandler()
    ctx = JobContext(job_id=1, task_id=1, task_name="fds", attempt=1, timeout_s=None,
                     log=lambda stream, line: None)
    for _ in range(2):
        result = await handler.run({"callable": "tests.handler_fixtures:inherited_fds"}, ctx)
        print(repr(result.output_tail))

asyncio.run(main())
"""


def test_a_program_a_job_starts_inherits_only_its_standard_streams() -> None:
    """The first job of a new job process server gets a child forked for it (no spare is
    ready yet), the second a spare: in neither does a program the job starts with every
    descriptor it may inherit get the job's result, spec or log pipes, another request's
    pipes or another spare's channel."""
    ran = subprocess.run(
        [sys.executable, "-c", _TWO_JOBS], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["'none'", "'none'"], ran.stdout


_ODD_ENDINGS = """
import asyncio, sys
from worker_svc.handlers import JobContext, JobFailed, PythonHandler

async def main():
    ctx = JobContext(job_id=1, task_id=1, task_name="odd", attempt=1, timeout_s=None,
                     log=lambda stream, line: None)
    for name, kwargs in [
        ("fork_and_return", {"raise_in_child": False}),
        ("fork_and_return", {"raise_in_child": True}),
        ("close_inherited_descriptors", {}),
        ("close_and_reopen_descriptors", {"path": sys.argv[1]}),
    ]:
        params = {"callable": f"tests.handler_fixtures:{name}", "kwargs": kwargs}
        try:
            tail = (await PythonHandler().run(params, ctx)).output_tail
            print("ok", tail.splitlines()[-1])  # the return value (after a child's traceback)
        except JobFailed as exc:
            print("failed", exc.error.splitlines()[0])

asyncio.run(main())
"""


def test_a_function_that_forks_or_closes_its_descriptors_gets_its_own_outcome(
    tmp_path: Path,
) -> None:
    """A process the function forks that returns (or raises) out of it does not report an
    outcome: the job's is its job process's. A function that closes the job process's
    result pipe fails saying so, and never has the outcome written into a file it opened
    in the pipe's place."""
    reopened = tmp_path / "reopened"
    ran = subprocess.run(
        [sys.executable, "-c", _ODD_ENDINGS, str(reopened)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    closed = "failed exit code 1: tickwork: the function returned, but how it ended cannot"
    lines = ran.stdout.splitlines()
    assert lines[:2] == ["ok parent", "ok parent"], ran.stdout
    assert [line[: len(closed)] for line in lines[2:]] == [closed, closed], ran.stdout
    assert reopened.read_text() == ""


_GIVEN_UP = """
import asyncio, os, signal, time
from worker_svc.handlers import JobContext, JobFailed, PythonHandler, _jobproc

async def main():
    server = _jobproc._SERVER
    _jobproc.start_job_process_server(1)
    ctx = JobContext(job_id=1, task_id=1, task_name="late", attempt=1, timeout_s=0.5,
                     log=lambda stream, line: None)
    add = {"callable": "tests.handler_fixtures:add", "kwargs": {"a": 1, "b": 2}}
    os.kill(server._proc.pid, signal.SIGSTOP)
    try:
        await PythonHandler().run(add, ctx)
    except JobFailed as exc:
        print(exc.error)
    os.kill(server._proc.pid, signal.SIGCONT)
    ctx = JobContext(job_id=2, task_id=1, task_name="late", attempt=1, timeout_s=None,
                     log=lambda stream, line: None)
    print((await PythonHandler().run(add, ctx)).output_tail)
    deadline = time.monotonic() + 10
    abandoned = getattr(server, "_abandoned", set())
    while (server._exited or abandoned) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    print(sorted(server._exited), sorted(abandoned))

asyncio.run(main())
"""


def test_the_end_of_a_job_process_whose_request_was_given_up_is_not_kept() -> None:
    """A job that timed out waiting for its job process (the server frozen) gives its
    request up; the process the server forks for it later ends without running anything,
    and its end is dropped, not kept for a later job process that gets the same pid."""
    ran = subprocess.run(
        [sys.executable, "-c", _GIVEN_UP], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["timed out after 0.5 s", "3", "[] []"], ran.stdout
