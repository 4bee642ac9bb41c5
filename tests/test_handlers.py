"""Tests of worker_svc.handlers: shell and python handlers, the registry, params validation."""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

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
    abandoned_calls,
    get_handler,
    handler_names,
)

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


async def test_shell_env_is_merged_over_the_environment_and_cwd_is_used(
    real_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKWORK_TEST_INHERITED", "inherited")
    log = Recorder()
    params = sh(
        'echo "$TICKWORK_TEST_SET $TICKWORK_TEST_INHERITED"; pwd -P',
        env={"TICKWORK_TEST_SET": "set"},
        cwd=str(real_tmp_path),
    )
    await ShellHandler().run(params, make_ctx(log))

    assert log.stream("stdout") == ["set inherited", str(real_tmp_path)]


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
from worker_svc.handlers import JobContext, ShellHandler, shell

def killed_before_registering(pgid):  # the worker dies right after the spawn
    with open(sys.argv[1], "w") as f:
        f.write(str(pgid))
    os.kill(os.getpid(), signal.SIGKILL)

shell.guard_group = killed_before_registering
ctx = JobContext(job_id=1, task_id=1, task_name="t", attempt=1, timeout_s=None,
                 log=lambda stream, line: None)
asyncio.run(ShellHandler().run({"argv": ["touch", sys.argv[2]]}, ctx))
"""


async def test_shell_program_never_starts_if_the_worker_dies_before_guarding_it(
    tmp_path: Path,
) -> None:
    """The gap between spawning a job's program and registering its group with the guard:
    a worker SIGKILLed there must not leave the program running unguarded (it would
    overlap the retry of its own job). The program waits behind a gate that only opens
    after the registration; the worker's death closes the gate."""
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
    gate = int(pid_file.read_text())
    await wait_not_running(gate, timeout_s=10)  # the gate's shell saw the pipe close
    assert not marker.exists(), "the program ran although the worker died unguarded"


async def test_shell_processes_left_behind_are_killed_when_the_job_ends() -> None:
    log = Recorder()
    started = time.monotonic()
    result = await ShellHandler().run(sh("sleep 60 & echo $!"), make_ctx(log))

    assert time.monotonic() - started < 1.5  # not held up by the leftover's open stdout
    await wait_not_running(int(result.output_tail))


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
        ({"argv": ["echo"], "timeout": 10}, "timeout"),
    ],
)
def test_shell_validate_names_the_bad_param(params: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidParams, match=f"'{param}'"):
        ShellHandler().validate(params)


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
    module = importlib.import_module("handler_fixtures")
    module.RELEASE.clear()
    module.EVENTS.clear()
    return module


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

    assert log.lines == [("stdout", "hello job 7 attempt 2"), ("stderr", "a warning")]
    assert log.threads == {threading.get_ident()}  # forwarded on the event loop thread
    assert result.output_tail == "hello job 7 attempt 2\na warning\nnightly"


@pytest.mark.usefixtures("fixtures")
async def test_python_async_function_gets_keyword_only_ctx() -> None:
    log = Recorder()
    result = await PythonHandler().run(py("async_greet", greeting="hi"), make_ctx(log))

    assert log.lines == [("stdout", "hi")]
    assert result.output_tail == "hi\n{'task_id': 3}"


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


async def test_python_async_timeout_cancels_the_coroutine(fixtures: ModuleType) -> None:
    log = Recorder()
    with pytest.raises(JobFailed, match=r"^timed out after 0\.2 s$") as caught:
        await PythonHandler().run(py("wait_forever"), make_ctx(log, timeout_s=0.2))

    assert fixtures.EVENTS == ["cancelled"]
    assert caught.value.output_tail == "waiting"


async def test_python_sync_timeout_stops_a_function_running_python_code(
    fixtures: ModuleType,
) -> None:
    with pytest.raises(
        JobFailed, match=r"^timed out after 0\.2 s \(the function was asked to stop\)$"
    ) as caught:
        await PythonHandler().run(py("spin"), make_ctx(Recorder(), timeout_s=0.2))

    assert caught.value.output_tail == "spinning"
    await wait_until(lambda: fixtures.EVENTS == ["stopped JobStopped"] and not abandoned_calls())


async def test_python_sync_function_in_a_long_c_call_stops_once_the_call_returns(
    fixtures: ModuleType,
) -> None:
    try:
        with pytest.raises(JobFailed, match=r"^timed out after 0\.2 s \(the function was"):
            await PythonHandler().run(
                py("block_until_released"), make_ctx(Recorder(), timeout_s=0.2)
            )
        # Stuck in one C call (a lock wait): listed until it returns, not stopped yet.
        (call,) = abandoned_calls()
        assert (call.job_id, call.target) == (7, "handler_fixtures:block_until_released")
        assert not call.returned.done()
        assert fixtures.EVENTS == []
    finally:
        fixtures.RELEASE.set()
    await asyncio.wait_for(asyncio.shield(call.returned), 10)
    assert abandoned_calls() == []
    # The exception arrived as soon as the wait returned, before the function went on.
    assert fixtures.EVENTS == ["stopped JobStopped"]


async def test_python_a_function_that_swallows_the_stop_stays_listed_until_it_returns(
    fixtures: ModuleType,
) -> None:
    try:
        with pytest.raises(JobFailed, match="timed out"):
            await PythonHandler().run(py("swallow_stop"), make_ctx(Recorder(), timeout_s=0.2))
        await wait_until(lambda: fixtures.EVENTS == ["swallowed JobStopped"])
        (call,) = abandoned_calls()
        assert not call.returned.done()  # it goes on: only asked to stop, once
    finally:
        fixtures.RELEASE.set()
    await asyncio.wait_for(asyncio.shield(call.returned), 10)
    assert fixtures.EVENTS == ["swallowed JobStopped", "released"]
    assert abandoned_calls() == []


async def test_python_sync_calls_reuse_an_idle_thread_but_never_wait_for_a_busy_one(
    fixtures: ModuleType,
) -> None:
    handler = PythonHandler()
    first = await handler.run(py("thread_ident"), make_ctx(Recorder()))
    second = await handler.run(py("thread_ident"), make_ctx(Recorder()))
    assert second.output_tail == first.output_tail  # the thread of the first call, idle again
    try:
        with pytest.raises(JobFailed, match="timed out"):
            await handler.run(py("block_until_released"), make_ctx(Recorder(), timeout_s=0.2))
        # The abandoned call still holds its thread: the next call runs in another one
        # (the worker itself takes no job meanwhile; the handler does not refuse one).
        third = await handler.run(py("thread_ident"), make_ctx(Recorder(), timeout_s=5))
        assert third.output_tail != first.output_tail
    finally:
        fixtures.RELEASE.set()
    await wait_until(lambda: not abandoned_calls())
    # The stopped thread went back to the idle ones (last, so it is taken first), with no
    # exception left pending: it runs the next calls.
    fourth = await handler.run(py("thread_ident"), make_ctx(Recorder(), timeout_s=5))
    assert fourth.output_tail == first.output_tail
    assert (await handler.run(py("add", a=1, b=2), make_ctx(Recorder()))).output_tail == "3"


async def test_python_a_stop_racing_the_functions_return_never_leaks_out_of_the_call(
    fixtures: ModuleType,
) -> None:
    """Timeouts as long as the function: the stop often comes as the function returns.
    A JobStopped that arrived after the call would kill an idle thread (the next call in
    it would hang) or hit the next job's function."""
    handler = PythonHandler()
    outcomes: set[str] = set()
    for i in range(60):
        seconds = 0.002 + (i % 6) * 0.001
        try:
            await handler.run(
                py("busy_for", seconds=seconds), make_ctx(Recorder(), timeout_s=seconds)
            )
            outcomes.add("returned")
        except JobFailed:
            outcomes.add("timed out")
        await wait_until(lambda: not abandoned_calls())
        result = await asyncio.wait_for(
            handler.run(py("add", a=i, b=1), make_ctx(Recorder(), timeout_s=5)), 10
        )
        assert result.output_tail == str(i + 1)
    assert "timed out" in outcomes


async def test_python_abort_cancels_an_async_function(fixtures: ModuleType) -> None:
    log = Recorder()
    task = asyncio.create_task(PythonHandler().run(py("wait_forever"), make_ctx(log)))
    await wait_until(lambda: bool(log.lines))

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fixtures.EVENTS == ["cancelled"]


async def test_python_abort_of_a_sync_function_stops_it(fixtures: ModuleType) -> None:
    log = Recorder()
    task = asyncio.create_task(PythonHandler().run(py("spin"), make_ctx(log)))
    await wait_until(lambda: bool(log.lines))
    aborted = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - aborted < 1
    await wait_until(lambda: fixtures.EVENTS == ["stopped JobStopped"] and not abandoned_calls())


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
