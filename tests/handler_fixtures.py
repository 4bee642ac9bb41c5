"""Functions and handlers that tests/test_handlers.py runs through the handlers.

Imported by the ``python`` handler as ``handler_fixtures:<name>`` once the tests directory is on
``sys.path`` (the tests put it there with ``monkeypatch.syspath_prepend``). Each ``python`` job
runs in a job process of its own: a function reports through its output (or a file), and
nothing it sets here is seen by the test process or the next job.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tickwork import JobContext as Window
from worker_svc.handlers import HandlerResult, JobContext

NOT_CALLABLE = 42

REMEMBERED: list[str | None] = [None]
"""What :func:`remember` saw and set: a job process starts from a fresh copy."""


def add(a: int, b: int) -> int:
    """Return a + b (sync)."""
    return a + b


async def async_add(a: int, b: int) -> int:
    """Return a + b (async)."""
    await asyncio.sleep(0)
    return a + b


def returns_none() -> None:
    """Return nothing."""


def fail(message: str) -> None:
    """Raise ValueError(message)."""
    raise ValueError(message)


async def async_fail(message: str) -> None:
    """Raise RuntimeError(message) from a coroutine."""
    await asyncio.sleep(0)
    raise RuntimeError(message)


def raise_timeout() -> None:
    """Raise the function's own TimeoutError (not a handler timeout)."""
    raise TimeoutError("own timeout")


def greet(ctx: Window, greeting: str) -> str:
    """Log a greeting naming the job; return the task name (sync, with ctx)."""
    ctx.log("stdout", f"{greeting} job {ctx.job_id} attempt {ctx.attempt}")
    ctx.log("stderr", "a warning")
    return ctx.task_name


async def async_greet(greeting: str, *, ctx: Window) -> dict[str, Any]:
    """Log a greeting; return a dict (async, ctx keyword-only)."""
    ctx.log("stdout", greeting)
    return {"task_id": ctx.task_id}


def positional_only_ctx(ctx: Window, /, greeting: str) -> str:
    """Return the greeting and the job id (ctx positional-only)."""
    return f"{greeting} {ctx.job_id}"


def positional_only_ctx_second(first: int, ctx: Any = None, /) -> str:
    """A positional-only ``ctx`` after another parameter: not given the context."""
    return f"{first} {ctx}"


def takes_kwargs(**kwargs: Any) -> list[str]:
    """Return the sorted keyword names (``ctx`` is not passed to ``**kwargs``)."""
    return sorted(kwargs)


def log_lines(ctx: Window, count: int) -> int:
    """Log ``count`` numbered lines from the worker thread (sync)."""
    for i in range(count):
        ctx.log("stdout", f"line {i}")
    return count


def _print_pid() -> None:
    print(f"pid {os.getpid()}", flush=True)


async def wait_forever() -> None:
    """Print ``pid N``, then wait on the event loop forever."""
    _print_pid()
    await asyncio.Event().wait()


def spin() -> None:
    """Print ``pid N``, then loop in Python forever."""
    _print_pid()
    while True:
        time.sleep(0.01)


def sleep_forever() -> None:
    """Print ``pid N``, then sleep in one C call for 600 s."""
    _print_pid()
    time.sleep(600)


def ignore_sigterm() -> None:
    """Ignore SIGTERM, print ``pid N``, then sleep 600 s."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _print_pid()
    time.sleep(600)


def remember(value: str) -> str:
    """Print ``pid N``; return what REMEMBERED held before and after setting ``value``."""
    _print_pid()
    REMEMBERED.append(value)
    return repr(REMEMBERED)


def print_and_log() -> str:
    """``print`` a line and log a warning; return "done"."""
    print("printed")
    logging.getLogger("handler_fixtures").warning("logged")
    return "done"


def exit_with(code: int) -> None:
    """``sys.exit(code)``."""
    sys.exit(code)


def hard_exit(code: int) -> None:
    """``os._exit(code)``: no cleanup, no result."""
    os._exit(code)


def raise_keyboard_interrupt() -> None:
    """Raise KeyboardInterrupt, as Ctrl-C would."""
    raise KeyboardInterrupt


def raise_memory_error() -> None:
    """Raise MemoryError."""
    raise MemoryError


def segfault() -> None:
    """Crash in C: read address 0."""
    ctypes.string_at(0)


_LIST_FDS = """
import os
for name in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        print(name, os.readlink(f"/proc/self/fd/{name}"))
    except OSError:
        pass  # the directory listing's own descriptor, closed by now
"""


def inherited_fds() -> str:
    """Start a program that inherits every descriptor it may (``close_fds=False``, as
    ``os.system`` does) and return the ones above 2 it holds, ``"FD TARGET"`` per line."""
    import subprocess

    listed = subprocess.run(
        [sys.executable, "-c", _LIST_FDS], close_fds=False, capture_output=True, text=True
    )
    held = [line for line in listed.stdout.splitlines() if int(line.split()[0]) > 2]
    return "\n".join(held) or "none"


def fork_and_return(raise_in_child: bool) -> str:
    """Fork; the child returns ``"child"`` (or raises) out of the function at once, the
    parent once the child has exited, with ``"parent"``."""
    pid = os.fork()
    if pid == 0:
        if raise_in_child:
            raise RuntimeError("raised in the child")
        return "child"
    os.waitpid(pid, 0)
    return "parent"


def close_inherited_descriptors() -> str:
    """Close every descriptor above 2, as code that daemonizes does, then return."""
    os.closerange(3, 4096)
    return "closed"


def close_and_reopen_descriptors(path: str) -> str:
    """Close every descriptor above 2 and open ``path`` for writing a few times, so the
    lowest numbers (the job process's own, before) are a file of the function's."""
    os.closerange(3, 4096)
    for _ in range(8):
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    return "reopened"


def allocate(mib: int) -> int:
    """Allocate ``mib`` MiB (touching it); return ``mib``."""
    block = bytearray(mib * 1024 * 1024)
    return len(block) // (1024 * 1024)


def window(ctx: Window) -> str:
    """The job's TICKWORK_* variables and its context, one line each."""
    names = ("JOB_ID", "TASK", "ATTEMPT", "TRIGGER", "SCHEDULE", "FIRE_TIME", "PREVIOUS_FIRE_TIME")
    env = " ".join(os.environ.get(f"TICKWORK_{name}", "-") for name in names)
    previous = ctx.previous_fire_time.isoformat() if ctx.previous_fire_time else "-"
    fire = ctx.fire_time.isoformat().replace("+00:00", "Z") if ctx.fire_time else "-"
    return (
        f"env {env}\nctx {ctx.job_id} {ctx.task_id} {ctx.task} {ctx.trigger} "
        f"{ctx.schedule} {fire} {previous}"
    )


def busy_for(seconds: float) -> int:
    """Count in a Python loop for ``seconds``; return the count."""
    deadline = time.monotonic() + seconds
    count = 0
    while time.monotonic() < deadline:
        count += 1
    return count


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


def append_until_stopped(path: str) -> None:
    """Append "pid N", then "tick" to ``path`` every 10 ms, forever; append "stopped
    <ExcType>" when an exception ends it."""
    _append(path, f"pid {os.getpid()}")
    try:
        while True:
            _append(path, "tick")
            time.sleep(0.01)
    except BaseException as exc:
        _append(path, f"stopped {type(exc).__name__}")
        raise


def sleep_in_one_call(ctx: Window, path: str, label: str, seconds: float) -> str:
    """Append "start LABEL JOB_ID T PID", sleep ``seconds`` in one C call, then append "end
    LABEL JOB_ID T" however the call ended, unless its process is killed meanwhile (T:
    ``time.monotonic()``, one clock for every process of the machine)."""
    _append(path, f"start {label} {ctx.job_id} {time.monotonic()!r} {os.getpid()}")
    try:
        time.sleep(seconds)
    finally:
        _append(path, f"end {label} {ctx.job_id} {time.monotonic()!r}")
    return label


def intervals(path: str) -> dict[str, list[tuple[float, float]]]:
    """The (start, end) of each call of :func:`sleep_in_one_call` recorded in ``path``,
    by label, in the order they started; an unfinished call ends at infinity. Empty before
    the first call."""
    spans: dict[tuple[str, str], list[float]] = {}
    lines = Path(path).read_text().splitlines() if Path(path).exists() else []
    for line in lines:
        kind, label, job_id, at = line.split()[:4]
        if kind == "start":
            spans[(label, job_id)] = [float(at), float("inf")]
        else:
            spans[(label, job_id)][1] = float(at)
    found: dict[str, list[tuple[float, float]]] = {}
    for (label, _), (start, end) in sorted(spans.items(), key=lambda item: item[1][0]):
        found.setdefault(label, []).append((start, end))
    return found


class EchoHandler:
    """A third-party handler, loaded through an entry point."""

    name = "echo"

    def validate(self, params: dict[str, Any]) -> None:
        """Accept anything."""

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Return the params' text as the output."""
        return HandlerResult(output_tail=str(params.get("text", "")))


def not_a_handler() -> object:
    """A factory whose product is not a Handler."""
    return object()


def fail_long(chars: int, char: str = "x") -> None:
    """Raise ValueError whose message is ``chars`` characters, bracketed by HEAD and TAIL."""
    raise ValueError("HEAD" + char * chars + "TAIL")


def fail_not_utf8() -> None:
    """Raise ValueError whose message holds a lone surrogate (bytes that were not UTF-8,
    decoded with surrogateescape): text no protobuf string can carry as it is."""
    raise ValueError(b"bad \x80 byte".decode("utf-8", "surrogateescape"))


def log_long(ctx: Window, chars: int) -> None:
    """Log one line of ``chars`` characters, then a short one."""
    ctx.log("stdout", "y" * chars)
    ctx.log("stdout", "after the long line")


async def record_sleep(record: str, name: str, seconds: float) -> str:
    """Append ``start NAME`` to the file ``record``, sleep ``seconds``, then append ``end
    NAME`` (or ``aborted NAME`` when its process is stopped meanwhile: SIGTERM)."""

    def aborted(signum: int, frame: object) -> None:
        _append(record, f"aborted {name}")
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, aborted)
    _append(record, f"start {name}")
    await asyncio.sleep(seconds)
    _append(record, f"end {name}")
    return name


async def blocking_async(record: str, name: str, seconds: float) -> None:
    """Append ``start NAME TIME`` to ``record``, block its event loop for ``seconds``
    (``time.sleep`` in an ``async def``), then append ``end NAME TIME``."""
    _append(record, f"start {name} {time.time():.3f}")
    time.sleep(seconds)  # noqa: ASYNC251 - the mistake this fixture makes on purpose
    _append(record, f"end {name} {time.time():.3f}")


def pids(path: str) -> list[int]:
    """The pids :func:`sleep_in_one_call` and :func:`append_until_stopped` recorded in
    ``path``, in order."""
    lines = Path(path).read_text().splitlines() if Path(path).exists() else []
    found = []
    for line in lines:
        words = line.split()
        if words[0] == "pid":
            found.append(int(words[1]))
        elif words[0] == "start":
            found.append(int(words[4]))
    return found


def pid_exists(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_self(signal_name: str) -> None:
    """Send this process the signal named ``signal_name`` (``"SIGKILL"``)."""
    os.kill(os.getpid(), signal.Signals[signal_name])


def print_then_wait(go: str) -> str:
    """Print "first", wait (at most 30 s) until the file ``go`` exists, print "second"."""
    print("first")
    deadline = time.monotonic() + 30
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("second")
    return "done"


def record_window(ctx: Window, path: str) -> str:
    """Append one line to ``path``: attempt, then TICKWORK_FIRE_TIME and
    TICKWORK_PREVIOUS_FIRE_TIME (``-`` when unset), then the same from ``ctx``; fail on the
    first attempt."""
    env = [os.environ.get(f"TICKWORK_{n}", "-") for n in ("FIRE_TIME", "PREVIOUS_FIRE_TIME")]
    fire = ctx.fire_time.isoformat() if ctx.fire_time else "-"
    previous = ctx.previous_fire_time.isoformat() if ctx.previous_fire_time else "-"
    _append(path, f"{ctx.attempt} {env[0]} {env[1]} {fire} {previous} {ctx.schedule}")
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails")
    return "ok"


def append_task_name(ctx: Window, path: str) -> None:
    """Append the job's task name to the file ``path``."""
    _append(path, ctx.task_name)


def write_environment(path: str) -> None:
    """Write the job process's whole environment to ``path`` as JSON."""
    Path(path).write_text(json.dumps(dict(os.environ)))


def leave_detached(mark: str, how: str, record: str, then_s: float) -> str:
    """Start ``sleep 600`` detached from this job process, with ``TICKWORK_TEST_MARK=mark``
    in its environment and this process's stdout: in a session of its own (``how``
    ``"session"``, as ``Popen(start_new_session=True)``) or as a daemon (``"daemon"``: a
    double fork whose middle process calls setsid and exits). Append ``pid PID`` (this
    process) and ``started`` to ``record``, then sleep ``then_s`` seconds."""
    import subprocess

    env = {**os.environ, "TICKWORK_TEST_MARK": mark}
    if how == "session":
        subprocess.Popen(["sleep", "600"], start_new_session=True, env=env)
    else:
        middle = os.fork()
        if middle == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvpe("sleep", ["sleep", "600"], env)
            os._exit(0)
        os.waitpid(middle, 0)
    _append(record, f"pid {os.getpid()}")
    _append(record, "started")
    time.sleep(then_s)
    return "left"


def kill_own_keeper(record: str) -> None:
    """Start ``sleep 600`` in a session of its own, append ``pid PID`` (the sleep's) to
    ``record``, then SIGKILL this job process's parent (its keeper) and wait."""
    import subprocess

    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    _append(record, f"pid {sleeper.pid}")
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)
