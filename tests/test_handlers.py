"""Tests of worker_svc.handlers: shell and python handlers, the registry, params validation."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tickwork._context import ENV_NAMES
from worker_svc import handlers
from worker_svc.handlers import (
    OUTPUT_TAIL_CHARS,
    Handler,
    HandlerLoadError,
    HandlerResult,
    InvalidParams,
    JobContext,
    JobFailed,
    PythonHandler,
    ShellHandler,
    UnknownHandler,
    get_handler,
    handler_names,
)
from worker_svc.handlers._environment import BASE_VARIABLES
from worker_svc.handlers.python import job_environment

TESTS_DIR = Path(__file__).resolve().parent


class Recorder:
    """A ``ctx.log`` sink that remembers every line and the thread it was called from."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.threads: set[int] = set()

    def __call__(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))
        self.threads.add(threading.get_ident())

    def stream(self, name: str) -> list[str]:
        return [line for stream, line in self.lines if stream == name]


def make_ctx(log: Callable[[str, str], None], **overrides: Any) -> JobContext:
    fields: dict[str, Any] = {
        "job_id": 7,
        "task_id": 3,
        "task_name": "nightly",
        "attempt": 1,
        "timeout_s": None,
        "log": log,
    }
    fields.update(overrides)
    return JobContext(**fields)


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(0.01)


def pid_exists(pid: int) -> bool:
    """Whether ``pid`` exists, zombies included (a child of ours must have been reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pid_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an orphan's reaping is up to pid 1)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def wait_not_running(pid: int, timeout_s: float = 2.0) -> None:
    await wait_until(lambda: not pid_running(pid), timeout_s)


def sh(script: str, **params: Any) -> dict[str, Any]:
    return {"argv": ["sh", "-c", script], **params}


# --------------------------------------------------------------------------- shell


async def test_shell_success_keeps_output_tail_and_streams_both_streams() -> None:
    log = Recorder()
    result = await ShellHandler().run(sh("echo one; echo two >&2; echo three"), make_ctx(log))

    assert isinstance(result, HandlerResult)
    assert log.stream("stdout") == ["one", "three"]
    assert log.stream("stderr") == ["two"]
    assert sorted(result.output_tail.split("\n")) == ["one", "three", "two"]


async def test_shell_streams_lines_in_order_while_running() -> None:
    log = Recorder()
    script = "import sys, time\nfor i in range(500): print(i, flush=True)\ntime.sleep(60)"
    task = asyncio.create_task(
        ShellHandler().run({"argv": [sys.executable, "-c", script]}, make_ctx(log))
    )
    try:
        await wait_until(lambda: len(log.lines) == 500)
        assert not task.done()  # the lines arrived before the process ended
        assert log.stream("stdout") == [str(i) for i in range(500)]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_shell_output_tail_is_bounded_to_the_last_characters() -> None:
    log = Recorder()
    script = "for i in range(20000): print(f'line {i}')"
    result = await ShellHandler().run({"argv": [sys.executable, "-c", script]}, make_ctx(log))

    assert len(log.lines) == 20000
    assert len(result.output_tail) == OUTPUT_TAIL_CHARS
    assert result.output_tail.endswith("line 19998\nline 19999")


async def test_shell_decodes_invalid_utf8_and_keeps_a_last_line_without_newline() -> None:
    log = Recorder()
    await ShellHandler().run(sh(r"printf 'caf\303\251\n\377x\nno newline'"), make_ctx(log))

    assert log.stream("stdout") == ["café", "\ufffdx", "no newline"]


@pytest.fixture
def real_tmp_path(tmp_path: Path) -> Path:
    """tmp_path with symlinks resolved, as ``pwd -P`` prints it."""
    return tmp_path.resolve()


async def test_shell_env_is_set_over_the_base_environment_and_cwd_is_used(
    real_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_SECRET_TEST", "leaked")
    monkeypatch.setenv("TERM", "dumb")
    log = Recorder()
    params = sh(
        'echo "$TASK_SET ${WORKER_SECRET_TEST:-unset} $TERM ${PASSED:-unset}"; pwd -P',
        env={"TASK_SET": "set"},
        cwd=str(real_tmp_path),
    )
    # No base given: the allow-list of the worker's environment, nothing else of it.
    await ShellHandler().run(params, make_ctx(log))
    assert log.stream("stdout") == ["set unset dumb unset", str(real_tmp_path)]
    # The worker's base (the allow-list and WORKER_PASS_ENV), never the rest.
    log = Recorder()
    base = {"PATH": os.environ["PATH"], "PASSED": "passed"}
    await ShellHandler().run(params, make_ctx(log, base_env=base))
    assert log.stream("stdout") == ["set unset  passed", str(real_tmp_path)]


async def test_shell_nonzero_exit_fails_with_code_and_stderr_tail() -> None:
    log = Recorder()
    script = "echo progress; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo err$i >&2; done; exit 3"
    with pytest.raises(JobFailed) as caught:
        await ShellHandler().run(sh(script), make_ctx(log))

    error = caught.value.error
    assert error.startswith("exit code 3: ")
    assert error.endswith("err12")
    assert "err3\n" in error and "err2\n" not in error  # the last ten stderr lines
    assert "progress" in caught.value.output_tail
    assert str(caught.value) == error


async def test_shell_killed_by_signal_names_the_signal() -> None:
    with pytest.raises(JobFailed, match=r"^exit code -9 \(killed by SIGKILL\)$"):
        await ShellHandler().run(sh("kill -9 $$"), make_ctx(Recorder()))


async def test_shell_cpu_limit_fails_the_job_saying_so() -> None:
    limits = handlers.ProcessLimits(cpu_limit_seconds=1)
    with pytest.raises(JobFailed) as caught:
        await ShellHandler().run(sh("while :; do :; done"), make_ctx(Recorder(), limits=limits))
    assert caught.value.error.startswith("cpu_limit_seconds reached (1 s of CPU time)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
async def test_shell_memory_limit_fails_the_job_saying_so() -> None:
    limits = handlers.ProcessLimits(memory_limit_bytes=300 * 1024 * 1024)
    grab = [sys.executable, "-c", "bytearray(600 * 1024 * 1024)"]
    with pytest.raises(JobFailed) as caught:
        await ShellHandler().run({"argv": grab}, make_ctx(Recorder(), limits=limits))
    assert caught.value.error.startswith("memory_limit_bytes reached (314572800 bytes)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
async def test_a_shell_program_that_cannot_even_start_under_its_memory_limit_says_so() -> None:
    """Too small a limit for the program to be loaded: the dynamic loader fails to map a
    library, or the program crashes; either way the error names the limit."""
    limits = handlers.ProcessLimits(memory_limit_bytes=8 * 1024 * 1024)
    with pytest.raises(JobFailed) as caught:
        await ShellHandler().run(
            {"argv": [sys.executable, "-c", "print(1)"]}, make_ctx(Recorder(), limits=limits)
        )
    assert caught.value.error.startswith("memory_limit_bytes"), caught.value.error
    assert "8388608 bytes" in caught.value.error


async def test_shell_job_gets_its_window_in_its_environment() -> None:
    env = {"TICKWORK_TRIGGER": "SCHEDULER", "TICKWORK_FIRE_TIME": "2026-03-29T01:00:00Z"}
    names = ("JOB_ID", "TASK", "ATTEMPT", "TRIGGER", "FIRE_TIME")
    script = "echo " + " ".join(f"$TICKWORK_{name}" for name in names)
    result = await ShellHandler().run(sh(script), make_ctx(Recorder(), env=env))
    assert result.output_tail == "7 nightly 1 SCHEDULER 2026-03-29T01:00:00Z"


def test_limits_name_what_a_platform_cannot_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    assert handlers.unsupported_limit("memory_limit_bytes") == ""
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "only enforced on Linux" in handlers.unsupported_limit("memory_limit_bytes")
    assert handlers.unsupported_limit("cpu_limit_seconds") == ""
    problem = handlers.ProcessLimits(memory_limit_bytes=1).problem()
    assert problem.startswith("memory_limit_bytes (RLIMIT_AS) is only enforced on Linux")


async def test_shell_missing_executable_is_named() -> None:
    with pytest.raises(JobFailed, match="executable not found: 'tickwork-no-such-program'"):
        await ShellHandler().run({"argv": ["tickwork-no-such-program", "x"]}, make_ctx(Recorder()))


async def test_shell_program_that_is_not_executable_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    (tmp_path / "folder").mkdir()
    for program in ("./notes.txt", "./folder"):
        with pytest.raises(JobFailed, match=f"executable not runnable: '{program}'"):
            await ShellHandler().run(
                {"argv": [program], "cwd": str(tmp_path)}, make_ctx(Recorder())
            )


async def test_shell_relative_program_and_path_entries_resolve_against_cwd(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "hello"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho hello from $0\n")
    script.chmod(0o755)
    log = Recorder()
    result = await ShellHandler().run({"argv": ["bin/hello"], "cwd": str(tmp_path)}, make_ctx(log))
    assert result.output_tail.strip() == "hello from bin/hello"  # argv[0] as given
    on_path = await ShellHandler().run(
        {"argv": ["hello"], "cwd": str(tmp_path), "env": {"PATH": f"bin:{os.defpath}"}},
        make_ctx(Recorder()),
    )
    assert on_path.output_tail.strip() == "hello from bin/hello"  # a script's $0: its path


async def test_shell_missing_cwd_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(JobFailed, match="working directory") as caught:
        await ShellHandler().run(sh("true", cwd=missing), make_ctx(Recorder()))
    assert missing in caught.value.error


@pytest.mark.parametrize("where", ["param", "ctx"])
async def test_shell_timeout_stops_the_process(where: str) -> None:
    # The timeout counts the wait for the job's keeper too: start the job process server
    # first, as a worker does when it starts.
    await ShellHandler().run(sh("true"), make_ctx(Recorder()))
    log = Recorder()
    params = sh("echo $$; exec sleep 60")
    ctx = make_ctx(log, timeout_s=0.3 if where == "ctx" else 600)
    if where == "param":
        params["timeout_seconds"] = 0.3
    started = time.monotonic()
    with pytest.raises(JobFailed, match=r"^timed out after 0\.3 s$") as caught:
        await ShellHandler().run(params, ctx)

    assert time.monotonic() - started < 3
    pid = int(log.stream("stdout")[0])
    assert not pid_exists(pid)
    assert caught.value.output_tail == str(pid)


async def test_shell_timeout_zero_param_overrides_ctx_timeout() -> None:
    result = await ShellHandler().run(
        sh("sleep 0.2; echo done", timeout_seconds=0), make_ctx(Recorder(), timeout_s=0.05)
    )
    assert result.output_tail == "done"


async def test_shell_abort_kills_sleep_promptly() -> None:
    log = Recorder()
    task = asyncio.create_task(
        ShellHandler().run(sh("echo $$; exec sleep 60"), make_ctx(log, abort_grace_s=5.0))
    )
    await wait_until(lambda: bool(log.lines))
    pid = int(log.lines[0][1])
    assert pid_running(pid)

    aborted = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert time.monotonic() - aborted < 1.5  # SIGTERM sufficed, no grace period waited
    assert not pid_exists(pid)


async def test_shell_abort_sigkills_a_group_that_ignores_sigterm_after_the_grace() -> None:
    log = Recorder()
    script = "trap '' TERM; sleep 60 & echo $$ $!; wait"
    task = asyncio.create_task(ShellHandler().run(sh(script), make_ctx(log, abort_grace_s=0.5)))
    await wait_until(lambda: bool(log.lines))
    shell_pid, child_pid = map(int, log.lines[0][1].split())

    aborted = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    elapsed = time.monotonic() - aborted

    assert 0.45 <= elapsed < 3
    assert not pid_exists(shell_pid)
    await wait_not_running(child_pid)


async def test_shell_second_cancel_during_grace_kills_at_once() -> None:
    log = Recorder()
    script = "trap '' TERM; echo $$; sleep 60"
    task = asyncio.create_task(ShellHandler().run(sh(script), make_ctx(log, abort_grace_s=30)))
    await wait_until(lambda: bool(log.lines))
    pid = int(log.lines[0][1])

    aborted = time.monotonic()
    task.cancel()
    await asyncio.sleep(0.1)  # let the handler enter its 30 s grace period
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert time.monotonic() - aborted < 2
    assert not pid_exists(pid)


_DIE_BEFORE_GUARD = """
import asyncio, os, signal, sys
from worker_svc.handlers import JobContext, ShellHandler, _jobproc

def killed_before_registering(key, pid, keeper):  # the worker dies right after the spawn
    with open(sys.argv[1], "w") as f:
        f.write(str(keeper))
    os.kill(os.getpid(), signal.SIGKILL)

_jobproc.guard_job = killed_before_registering
ctx = JobContext(job_id=1, task_id=1, task_name="t", attempt=1, timeout_s=None,
                 log=lambda stream, line: None)
asyncio.run(ShellHandler().run({"argv": ["touch", sys.argv[2]]}, ctx))
"""


async def test_shell_program_never_starts_if_the_worker_dies_before_guarding_it(
    tmp_path: Path,
) -> None:
    """The gap between getting a job's keeper and registering the job with the guard: a
    worker SIGKILLed there must not leave the program running unguarded (it would overlap
    the retry of its own job). The program needs the job's spec, which the worker
    writes only after the registration; the worker's death closes the spec pipe, and the
    job's keeper, which starts the program once it read the spec, exits."""
    pid_file, marker = tmp_path / "pid", tmp_path / "started"
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _DIE_BEFORE_GUARD,
        str(pid_file),
        str(marker),
        cwd=TESTS_DIR.parent,
    )
    assert await asyncio.wait_for(worker.wait(), 30) == -9
    keeper = int(pid_file.read_text())
    await wait_not_running(keeper, timeout_s=10)  # it saw the spec pipe close, then its server
    assert not marker.exists(), "the program ran although the worker died unguarded"


async def test_shell_processes_left_behind_are_killed_when_the_job_ends() -> None:
    await ShellHandler().run(sh("true"), make_ctx(Recorder()))  # the job process server up
    log = Recorder()
    started = time.monotonic()
    result = await ShellHandler().run(sh("sleep 60 & echo $!"), make_ctx(log))

    assert time.monotonic() - started < 1.5  # not held up by the leftover's open stdout
    await wait_not_running(int(result.output_tail))


async def test_what_a_job_left_that_ignores_sigterm_is_sigkilled_after_the_grace(
    tmp_path: Path,
) -> None:
    """The job's end applies the stop rule to what its program left behind, in a session
    of its own: SIGTERM, then SIGKILL once the grace has passed."""
    pid_file = tmp_path / "pid"
    stubborn = "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    stubborn += "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    script = (
        f'setsid "{sys.executable}" -c "{stubborn}" "{pid_file}" & '
        f'while [ ! -s "{pid_file}" ]; do sleep 0.05; done'
    )
    result = asyncio.create_task(
        ShellHandler().run(sh(script), make_ctx(Recorder(), abort_grace_s=1.0))
    )
    await wait_until(lambda: pid_file.exists() and bool(pid_file.read_text()), timeout_s=30)
    pid = int(pid_file.read_text())
    ended = time.monotonic()  # the program ends as soon as the pid is written
    await result
    assert time.monotonic() - ended >= 0.5  # the grace (1 s) was waited out, then SIGKILL
    assert not pid_running(pid)


async def test_a_killed_keeper_leaves_nothing_of_its_job_running(tmp_path: Path) -> None:
    """A job process that kills its own keeper dies with it; what it started in a session
    of its own is handed to the job process server, which kills it."""
    record = tmp_path / "record"
    params = {
        "callable": "tests.handler_fixtures:kill_own_keeper",
        "kwargs": {"record": str(record)},
    }
    with pytest.raises(JobFailed, match="how the job's process ended is unknown"):
        await PythonHandler().run(params, make_ctx(Recorder()))
    (sleeper,) = [int(line.split()[1]) for line in record.read_text().splitlines()]
    await wait_not_running(sleeper, timeout_s=10)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "argv"),
        ({"argv": []}, "argv"),
        ({"argv": "echo hi"}, "argv"),
        ({"argv": ["echo", 1]}, "argv"),
        ({"argv": [""]}, "argv"),
        ({"argv": ["echo"], "env": ["A=1"]}, "env"),
        ({"argv": ["echo"], "env": {"A": 1}}, "env.A"),
        ({"argv": ["echo"], "env": {"A=B": "1"}}, "env"),
        ({"argv": ["echo"], "cwd": 5}, "cwd"),
        ({"argv": ["echo"], "cwd": ""}, "cwd"),
        ({"argv": ["echo"], "timeout_seconds": -1}, "timeout_seconds"),
        ({"argv": ["echo"], "timeout_seconds": "10"}, "timeout_seconds"),
        ({"argv": ["echo"], "timeout_seconds": True}, "timeout_seconds"),
        ({"argv": ["echo"], "timeout_seconds": float("inf")}, "timeout_seconds"),
        ({"argv": ["echo"], "timeout_seconds": 1e308}, "timeout_seconds"),
        ({"argv": ["echo"], "timeout_seconds": 10 * 366 * 86400 + 1}, "timeout_seconds"),
        ({"argv": ["echo"], "timeout": 10}, "timeout"),
    ],
)
def test_shell_validate_names_the_bad_param(params: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidParams, match=f"'{param}'"):
        ShellHandler().validate(params)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_shell_env_may_not_set_a_job_variable(name: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        ShellHandler().validate({"argv": ["echo"], "env": {"REGION": "eu", name: "1"}})
    assert str(caught.value) == (
        f"param env.{name}: tickwork sets {name} for every job; a task may not set it"
    )


def test_shell_validate_does_no_io() -> None:
    ShellHandler().validate(
        {
            "argv": ["tickwork-no-such-program"],
            "env": {"A": "1"},
            "cwd": "/tickwork/no/such/dir",
            "timeout_seconds": 2.5,
        }
    )


async def test_shell_run_rejects_invalid_params() -> None:
    with pytest.raises(InvalidParams, match="'argv'"):
        await ShellHandler().run({"argv": []}, make_ctx(Recorder()))


# --------------------------------------------------------------------------- python


@pytest.fixture
def fixtures(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The handler_fixtures module, importable by the python handler as 'handler_fixtures'."""
    monkeypatch.syspath_prepend(str(TESTS_DIR))
    return importlib.import_module("handler_fixtures")


def py(name: str, **kwargs: Any) -> dict[str, Any]:
    return {"callable": f"handler_fixtures:{name}", "kwargs": kwargs}


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize("name", ["add", "async_add"])
async def test_python_sync_and_async_return_value_is_the_output(name: str) -> None:
    result = await PythonHandler().run(py(name, a=2, b=3), make_ctx(Recorder()))
    assert result.output_tail == "5"


@pytest.mark.usefixtures("fixtures")
async def test_python_none_result_and_missing_kwargs() -> None:
    result = await PythonHandler().run(
        {"callable": "handler_fixtures:returns_none"}, make_ctx(Recorder())
    )
    assert result.output_tail == ""


@pytest.mark.usefixtures("fixtures")
async def test_python_sync_function_gets_ctx_and_its_log_lines() -> None:
    log = Recorder()
    result = await PythonHandler().run(py("greet", greeting="hello"), make_ctx(log, attempt=2))

    # Two pipes: each stream keeps its order; how they interleave is up to the scheduler.
    assert log.stream("stdout") == ["hello job 7 attempt 2"]
    assert log.stream("stderr") == ["a warning"]
    assert log.threads == {threading.get_ident()}  # forwarded on the event loop thread
    *output, returned = result.output_tail.splitlines()
    assert sorted(output) == ["a warning", "hello job 7 attempt 2"]
    assert returned == "nightly"


@pytest.mark.usefixtures("fixtures")
async def test_python_async_function_gets_keyword_only_ctx() -> None:
    log = Recorder()
    result = await PythonHandler().run(py("async_greet", greeting="hi"), make_ctx(log))

    assert log.lines == [("stdout", "hi")]
    assert result.output_tail == "hi\n{'task_id': 3}"


@pytest.mark.usefixtures("fixtures")
async def test_python_positional_only_ctx_first_gets_the_context() -> None:
    ctx = make_ctx(Recorder())
    result = await PythonHandler().run(py("positional_only_ctx", greeting="hi"), ctx)
    assert result.output_tail == f"hi {ctx.job_id}"
    # Only as the first parameter: after another one, kwargs could not give what precedes.
    with pytest.raises(InvalidParams, match="param 'kwargs' does not fit"):
        await PythonHandler().run(py("positional_only_ctx_second", first=1), ctx)


@pytest.mark.usefixtures("fixtures")
async def test_python_var_kwargs_do_not_receive_ctx() -> None:
    result = await PythonHandler().run(py("takes_kwargs", x=1), make_ctx(Recorder()))
    assert result.output_tail == "['x']"


@pytest.mark.usefixtures("fixtures")
async def test_python_log_lines_from_a_thread_arrive_in_order() -> None:
    log = Recorder()
    await PythonHandler().run(py("log_lines", count=300), make_ctx(log))

    assert log.stream("stdout") == [f"line {i}" for i in range(300)]
    assert log.threads == {threading.get_ident()}


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize(
    ("name", "error"), [("fail", "ValueError: boom"), ("async_fail", "RuntimeError: boom")]
)
async def test_python_exception_fails_with_type_message_and_traceback(
    name: str, error: str
) -> None:
    with pytest.raises(JobFailed) as caught:
        await PythonHandler().run(py(name, message="boom"), make_ctx(Recorder()))

    assert caught.value.error == error
    tail = caught.value.output_tail
    assert tail.startswith("Traceback (most recent call last):")
    assert "handler_fixtures.py" in tail
    assert "worker_svc" not in tail  # the handler's own frames are left out
    assert tail.endswith(error)


@pytest.mark.usefixtures("fixtures")
async def test_python_own_timeout_error_is_a_failure_not_a_timeout() -> None:
    with pytest.raises(JobFailed, match=r"^TimeoutError: own timeout$"):
        await PythonHandler().run(py("raise_timeout"), make_ctx(Recorder(), timeout_s=60))


def started_pid(log: Recorder) -> int | None:
    """The pid a fixture printed as ``pid N``, once it has."""
    for line in log.stream("stdout"):
        if line.startswith("pid "):
            return int(line.split()[1])
    return None


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize("name", ["wait_forever", "spin", "sleep_forever"])
async def test_python_timeout_stops_the_job_process_sync_functions_included(name: str) -> None:
    log = Recorder()
    started = time.monotonic()
    with pytest.raises(JobFailed, match=r"^timed out after 0\.5 s$") as caught:
        await PythonHandler().run(py(name), make_ctx(log, timeout_s=0.5))

    assert time.monotonic() - started < 3
    pid = started_pid(log)
    assert pid is not None and pid != os.getpid(), log.lines
    assert not pid_exists(pid), "the job process is gone (and was reaped)"
    assert caught.value.output_tail.startswith(f"pid {pid}")


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize("name", ["wait_forever", "spin", "sleep_forever"])
async def test_python_abort_stops_the_job_process_at_once(name: str) -> None:
    log = Recorder()
    task = asyncio.create_task(PythonHandler().run(py(name), make_ctx(log)))
    await wait_until(lambda: started_pid(log) is not None)
    aborted = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - aborted < 1
    pid = started_pid(log)
    assert pid is not None and not pid_exists(pid)


@pytest.mark.usefixtures("fixtures")
async def test_python_a_function_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    log = Recorder()
    task = asyncio.create_task(
        PythonHandler().run(py("ignore_sigterm"), make_ctx(log, abort_grace_s=0.5))
    )
    await wait_until(lambda: started_pid(log) is not None)
    aborted = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 0.5 <= time.monotonic() - aborted < 2
    pid = started_pid(log)
    assert pid is not None and not pid_exists(pid)


@pytest.mark.usefixtures("fixtures")
async def test_python_each_job_runs_in_a_fresh_process_no_state_carries_over() -> None:
    handler = PythonHandler()
    first = await handler.run(py("remember", value="first"), make_ctx(Recorder()))
    second = await handler.run(py("remember", value="second"), make_ctx(Recorder()))
    assert first.output_tail.splitlines()[-1] == "[None, 'first']"
    assert second.output_tail.splitlines()[-1] == "[None, 'second']", "nothing of job 1 left"
    pids = {int(r.output_tail.split()[1]) for r in (first, second)}
    assert len(pids) == 2 and os.getpid() not in pids


@pytest.mark.usefixtures("fixtures")
async def test_python_print_and_logging_are_the_jobs_output() -> None:
    log = Recorder()
    result = await PythonHandler().run(py("print_and_log"), make_ctx(log))
    assert log.stream("stdout") == ["printed"]
    assert log.stream("stderr") == ["WARNING handler_fixtures: logged"]
    assert result.output_tail.splitlines()[-1] == "done"


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize(
    ("name", "kwargs", "error"),
    [
        ("exit_with", {"code": 3}, r"^exit code 3$"),
        ("hard_exit", {"code": 4}, r"^exit code 4$"),
        (
            "raise_keyboard_interrupt",
            {},
            r"^exit code -2 \(killed by SIGINT\): .*KeyboardInterrupt",
        ),
        ("raise_memory_error", {}, r"^exit code 1: .*MemoryError"),
        ("segfault", {}, r"^exit code -11 \(killed by SIGSEGV\)"),
    ],
)
async def test_python_a_job_process_that_dies_fails_its_job_naming_the_exit(
    name: str, kwargs: dict[str, Any], error: str
) -> None:
    with pytest.raises(JobFailed) as caught:
        await PythonHandler().run(py(name, **kwargs), make_ctx(Recorder()))
    assert re.match(error, caught.value.error, re.DOTALL), caught.value.error
    result = await PythonHandler().run(py("add", a=1, b=2), make_ctx(Recorder()))
    assert result.output_tail == "3", "the next job runs as usual"


@pytest.mark.usefixtures("fixtures")
async def test_python_job_gets_its_window_in_env_and_ctx() -> None:
    fire = "2026-03-29T01:00:00Z"
    env = {
        "TICKWORK_TRIGGER": "SCHEDULER",
        "TICKWORK_SCHEDULE": "nightly",
        "TICKWORK_FIRE_TIME": fire,
        "TICKWORK_PREVIOUS_FIRE_TIME": "2026-03-28T01:00:00Z",
    }
    result = await PythonHandler().run(py("window"), make_ctx(Recorder(), env=env))
    lines = result.output_tail.splitlines()
    assert lines[0] == f"env 7 nightly 1 SCHEDULER nightly {fire} 2026-03-28T01:00:00Z"
    assert lines[1] == f"ctx 7 3 nightly SCHEDULER nightly {fire} 2026-03-28T01:00:00+00:00"


@pytest.mark.usefixtures("fixtures")
async def test_python_job_environment_is_exactly_the_job_s_even_as_the_worker_s_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    handler = PythonHandler()
    path = tmp_path / "env.json"
    await handler.run(py("write_environment", path=str(path)), make_ctx(Recorder()))
    # The job process server started with the environment above; the worker's changes since
    # (a variable gone, one added, one changed) are the job's.
    gone = next(name for name in json.loads(path.read_text()) if name not in ENV_NAMES)
    monkeypatch.delenv(gone)
    monkeypatch.setenv("TICKWORK_TEST_ADDED", "added")
    monkeypatch.setenv("TZ", "before")
    ctx = make_ctx(Recorder(), env={"TICKWORK_TRIGGER": "API"})
    monkeypatch.setenv("TZ", "Europe/Paris")
    await handler.run(py("write_environment", path=str(path)), ctx)
    got = json.loads(path.read_text())
    assert got == job_environment(ctx)
    # Only the allow-list of the worker's environment reaches a job.
    assert gone not in got and "TICKWORK_TEST_ADDED" not in got
    assert got["TZ"] == "Europe/Paris" and got["TICKWORK_TRIGGER"] == "API"
    assert set(got) <= {*BASE_VARIABLES, *ENV_NAMES}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
@pytest.mark.usefixtures("fixtures")
async def test_python_memory_limit_fails_the_job_saying_so() -> None:
    limits = handlers.ProcessLimits(memory_limit_bytes=300 * 1024 * 1024)
    with pytest.raises(JobFailed) as caught:
        await PythonHandler().run(py("allocate", mib=600), make_ctx(Recorder(), limits=limits))
    assert caught.value.error.startswith("memory_limit_bytes reached (314572800 bytes)")
    small = await PythonHandler().run(py("allocate", mib=10), make_ctx(Recorder(), limits=limits))
    assert small.output_tail == "10"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
async def test_python_memory_limit_reached_while_importing_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's module allocates more than the limit when it is imported: the job fails
    naming the limit, as it does when the function allocates."""
    (tmp_path / "big_at_import.py").write_text(
        "BLOCK = bytearray(600 * 1024 * 1024)\n\ndef run() -> None:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    limits = handlers.ProcessLimits(memory_limit_bytes=300 * 1024 * 1024)
    with pytest.raises(JobFailed) as caught:
        await PythonHandler().run(
            {"callable": "big_at_import:run"}, make_ctx(Recorder(), limits=limits)
        )
    assert caught.value.error.startswith(
        "memory_limit_bytes reached (314572800 bytes): cannot import module 'big_at_import'"
    ), caught.value.error


@pytest.mark.usefixtures("fixtures")
async def test_python_cpu_limit_fails_the_job_saying_so() -> None:
    limits = handlers.ProcessLimits(cpu_limit_seconds=1)
    with pytest.raises(JobFailed) as caught:
        await PythonHandler().run(py("busy_for", seconds=30), make_ctx(Recorder(), limits=limits))
    assert caught.value.error.startswith("cpu_limit_seconds reached (1 s of CPU time)")


@pytest.mark.usefixtures("fixtures")
async def test_python_largest_cpu_limit_applies() -> None:
    """int64's largest cpu_limit_seconds, which the service refuses but a row written
    directly may hold: its hard limit (a second above) is capped, so the job runs."""
    limits = handlers.ProcessLimits(cpu_limit_seconds=2**63 - 1)
    result = await PythonHandler().run(py("allocate", mib=1), make_ctx(Recorder(), limits=limits))
    assert result.output_tail == "1"


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tickwork_no_such_module:fn", "cannot import module 'tickwork_no_such_module': "),
        ("handler_fixtures:missing", "has no attribute 'missing'"),
        ("handler_fixtures:NOT_CALLABLE", "handler_fixtures:NOT_CALLABLE is not callable"),
    ],
)
async def test_python_unresolvable_callable_fails(target: str, message: str) -> None:
    with pytest.raises(JobFailed) as caught:
        await PythonHandler().run({"callable": target}, make_ctx(Recorder()))
    assert message in caught.value.error


@pytest.mark.usefixtures("fixtures")
@pytest.mark.parametrize(
    ("params", "message"),
    [
        (py("add", a=1), "'kwargs' does not fit handler_fixtures:add"),
        (py("greet", greeting="x", ctx=1), "'kwargs.ctx'"),
    ],
)
async def test_python_kwargs_that_do_not_fit_are_invalid(
    params: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidParams, match=message):
        await PythonHandler().run(params, make_ctx(Recorder()))


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "callable"),
        ({"callable": 5}, "callable"),
        ({"callable": "module_only"}, "callable"),
        ({"callable": "mod:"}, "callable"),
        ({"callable": ":fn"}, "callable"),
        ({"callable": "a..b:fn"}, "callable"),
        ({"callable": "mod:fn-x"}, "callable"),
        ({"callable": "mod:fn:x"}, "callable"),
        ({"callable": "class:fn"}, "callable"),
        ({"callable": "mod:fn", "kwargs": [1]}, "kwargs"),
        ({"callable": "mod:fn", "kwargs": {"not a name": 1}}, "kwargs"),
        ({"callable": "mod:fn", "args": [1]}, "args"),
    ],
)
def test_python_validate_names_the_bad_param(params: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidParams, match=f"'{param}'"):
        PythonHandler().validate(params)


def test_python_validate_does_not_import() -> None:
    PythonHandler().validate({"callable": "tickwork_unimported.sub:Klass.method", "kwargs": {}})
    assert "tickwork_unimported" not in sys.modules


# --------------------------------------------------------------------------- registry


def test_builtin_handlers_are_registered() -> None:
    assert {"python", "shell"} <= set(handler_names())
    assert handler_names() == sorted(handler_names())
    shell, python = get_handler("shell"), get_handler("python")
    assert isinstance(shell, ShellHandler) and shell.name == "shell"
    assert isinstance(python, PythonHandler) and python.name == "python"
    assert isinstance(shell, Handler)


def test_unknown_handler_names_it_and_the_known_ones() -> None:
    with pytest.raises(UnknownHandler) as caught:
        get_handler("nope")

    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, LookupError)
    assert caught.value.name == "nope"
    assert str(caught.value).startswith("unknown handler 'nope'; known handlers: ")
    assert "python, shell" in str(caught.value)


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> list[EntryPoint]:
    """Entry points of the tickwork.handlers group, as the registry will see them."""
    monkeypatch.syspath_prepend(str(TESTS_DIR))
    found: list[EntryPoint] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        assert group == handlers.ENTRY_POINT_GROUP
        return found

    monkeypatch.setattr("worker_svc.handlers._registry.entry_points", fake_entry_points)
    return found


async def test_entry_point_handlers_are_found(entry_points: list[EntryPoint]) -> None:
    group = handlers.ENTRY_POINT_GROUP
    entry_points.append(EntryPoint("echo", "handler_fixtures:EchoHandler", group))
    entry_points.append(EntryPoint("shell", "handler_fixtures:EchoHandler", group))

    assert handler_names() == ["echo", "python", "shell", "tickwork.retention"]
    echo = get_handler("echo")
    result = await echo.run({"text": "hi"}, make_ctx(Recorder()))
    assert result.output_tail == "hi"
    assert isinstance(get_handler("shell"), ShellHandler)  # built-ins take precedence


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("tickwork_no_such_module:Handler", "ModuleNotFoundError"),
        ("handler_fixtures:not_a_handler", "not a Handler"),
    ],
)
def test_broken_entry_point_is_a_load_error(
    entry_points: list[EntryPoint], value: str, message: str
) -> None:
    entry_points.append(EntryPoint("broken", value, handlers.ENTRY_POINT_GROUP))
    with pytest.raises(HandlerLoadError, match=message) as caught:
        get_handler("broken")
    assert isinstance(caught.value, LookupError)
    assert "'broken'" in str(caught.value)


# --------------------------------------------------------------------------- base types


def test_job_failed_carries_error_and_tail() -> None:
    failure = InvalidParams("param 'argv' is bad")
    assert isinstance(failure, JobFailed)
    assert failure.error == str(failure) == "param 'argv' is bad"
    assert failure.output_tail == ""
    assert JobFailed("x", "tail").output_tail == "tail"
