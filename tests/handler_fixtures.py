"""Functions and handlers that tests/test_handlers.py runs through the handlers.

Imported by the ``python`` handler as ``handler_fixtures:<name>`` once the tests directory is on
``sys.path`` (the tests put it there with ``monkeypatch.syspath_prepend``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from worker_svc.handlers import HandlerResult, JobContext

NOT_CALLABLE = 42

RELEASE = threading.Event()
"""Set by a test to let ``block_until_released`` return."""

EVENTS: list[str] = []
"""What the functions below report about themselves (started, cancelled, ...)."""


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


def greet(ctx: JobContext, greeting: str) -> str:
    """Log a greeting naming the job; return the task name (sync, with ctx)."""
    ctx.log("stdout", f"{greeting} job {ctx.job_id} attempt {ctx.attempt}")
    ctx.log("stderr", "a warning")
    return ctx.task_name


async def async_greet(greeting: str, *, ctx: JobContext) -> dict[str, Any]:
    """Log a greeting; return a dict (async, ctx keyword-only)."""
    ctx.log("stdout", greeting)
    return {"task_id": ctx.task_id}


def takes_kwargs(**kwargs: Any) -> list[str]:
    """Return the sorted keyword names (``ctx`` is not passed to ``**kwargs``)."""
    return sorted(kwargs)


def log_lines(ctx: JobContext, count: int) -> int:
    """Log ``count`` numbered lines from the worker thread (sync)."""
    for i in range(count):
        ctx.log("stdout", f"line {i}")
    return count


async def wait_forever(ctx: JobContext) -> None:
    """Log "waiting", then wait until cancelled; record the cancellation."""
    ctx.log("stdout", "waiting")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        EVENTS.append("cancelled")
        raise


def block_until_released(ctx: JobContext) -> str:
    """Log "blocking", then block this thread until RELEASE is set (at most 30 s: one C
    call, which nothing interrupts); record "stopped <ExcType>" if an exception ends it."""
    ctx.log("stdout", "blocking")
    try:
        released = RELEASE.wait(timeout=30)
    except BaseException as exc:
        EVENTS.append(f"stopped {type(exc).__name__}")
        raise
    EVENTS.append("released" if released else "gave up")
    return "released"


def spin(ctx: JobContext) -> None:
    """Log "spinning", then loop in Python (10 ms sleeps) until an exception ends the loop;
    record "stopped <ExcType>"."""
    ctx.log("stdout", "spinning")
    try:
        while not RELEASE.is_set():
            time.sleep(0.01)
    except BaseException as exc:
        EVENTS.append(f"stopped {type(exc).__name__}")
        raise
    EVENTS.append("released")


def swallow_stop(ctx: JobContext) -> str:
    """Loop in Python until RELEASE is set, swallowing every exception raised meanwhile
    (a function the worker cannot stop); record each as "swallowed <ExcType>"."""
    ctx.log("stdout", "looping")
    while not RELEASE.is_set():
        try:
            time.sleep(0.01)
        except BaseException as exc:
            EVENTS.append(f"swallowed {type(exc).__name__}")
    EVENTS.append("released")
    return "released"


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
    """Append "tick" to ``path`` every 10 ms, forever (Python code: it can be stopped);
    append "stopped <ExcType>" when an exception ends it."""
    try:
        while True:
            _append(path, "tick")
            time.sleep(0.01)
    except BaseException as exc:
        _append(path, f"stopped {type(exc).__name__}")
        raise


def sleep_in_one_call(ctx: JobContext, path: str, label: str, seconds: float) -> str:
    """Append "start LABEL JOB_ID T", sleep ``seconds`` in one C call (which nothing
    interrupts), then append "end LABEL JOB_ID T" however the call ended (T:
    ``time.monotonic()``, the same clock for every job of one worker process)."""
    _append(path, f"start {label} {ctx.job_id} {time.monotonic()!r}")
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
        kind, label, job_id, at = line.split()
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


def thread_ident() -> int:
    """The identifier of the thread that runs this (sync) call."""
    return threading.get_ident()


def fail_long(chars: int, char: str = "x") -> None:
    """Raise ValueError whose message is ``chars`` characters, bracketed by HEAD and TAIL."""
    raise ValueError("HEAD" + char * chars + "TAIL")


def fail_not_utf8() -> None:
    """Raise ValueError whose message holds a lone surrogate (bytes that were not UTF-8,
    decoded with surrogateescape): text no protobuf string can carry as it is."""
    raise ValueError(b"bad \x80 byte".decode("utf-8", "surrogateescape"))


def log_long(ctx: JobContext, chars: int) -> None:
    """Log one line of ``chars`` characters, then a short one."""
    ctx.log("stdout", "y" * chars)
    ctx.log("stdout", "after the long line")


async def record_sleep(record: str, name: str, seconds: float) -> str:
    """Append ``start NAME`` to the file ``record``, sleep ``seconds`` on the worker's event
    loop (so a stopped worker process stops it too), then append ``end NAME`` (or
    ``aborted NAME`` when the job is aborted meanwhile)."""
    _append(record, f"start {name}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _append(record, f"aborted {name}")
        raise
    _append(record, f"end {name}")
    return name


async def blocking_async(record: str, name: str, seconds: float) -> None:
    """Append ``start NAME TIME`` to ``record``, block the worker's event loop for
    ``seconds`` (``time.sleep`` in an ``async def``), then append ``end NAME TIME``."""
    _append(record, f"start {name} {time.time():.3f}")
    time.sleep(seconds)  # noqa: ASYNC251 - the mistake this fixture makes on purpose
    _append(record, f"end {name} {time.time():.3f}")
