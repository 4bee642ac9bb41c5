"""Handlers that break the handler contract, for tests/test_odd_handlers.py.

Each is a third-party handler as a package would register it: ``ENTRY_POINTS`` maps its
name to the factory (``tests.odd_handlers:<factory>``) that the test writes into the
``entry_points.txt`` of a tiny distribution put on the worker's ``PYTHONPATH``. Each
``run`` does one wrong thing (returns something that is not a HandlerResult, raises
JobFailed with bytes, raises SystemExit, ...); the worker must fail that job and go on.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from worker_svc.handlers import HandlerResult, JobContext, JobFailed

Behaviour = Callable[[JobContext], Awaitable[Any]]


class OddHandler:
    """A handler whose ``run`` is ``behaviour``; ``validate`` accepts any params."""

    def __init__(self, name: str, behaviour: Behaviour) -> None:
        self.name = name
        self._behaviour = behaviour

    def validate(self, params: dict[str, Any]) -> None:
        """Accept anything."""

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Do the odd thing; typed as the contract says, which it does not keep."""
        result: HandlerResult = await self._behaviour(ctx)
        return result


class Unprintable(Exception):
    """An exception whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class CustomBaseError(BaseException):
    """A BaseException that is not an Exception (as a library's own "exit" signal)."""


class SilentJobFailed(JobFailed):
    """A JobFailed subclass that never calls ``JobFailed.__init__``: no ``error``."""

    def __init__(self, code: int) -> None:
        self.code = code


async def _returns_none(ctx: JobContext) -> None:
    ctx.log("stdout", "about to return None")


async def _returns_bytes(ctx: JobContext) -> bytes:
    return b"done"


async def _returns_str(ctx: JobContext) -> str:
    return "done"


async def _returns_bytes_tail(ctx: JobContext) -> HandlerResult:
    return HandlerResult(output_tail=b"tail \xff bytes")  # type: ignore[arg-type]


async def _fails_with_none(ctx: JobContext) -> None:
    raise JobFailed(None)  # type: ignore[arg-type]


async def _fails_with_bytes(ctx: JobContext) -> None:
    raise JobFailed(b"disk \xff full")  # type: ignore[arg-type]


async def _fails_with_bytes_tail(ctx: JobContext) -> None:
    raise JobFailed("out of luck", b"last words")  # type: ignore[arg-type]


async def _fails_silently(ctx: JobContext) -> None:
    raise SilentJobFailed(7)


async def _raises_unprintable(ctx: JobContext) -> None:
    raise Unprintable()


async def _exits(ctx: JobContext) -> None:
    sys.exit(3)


async def _raises_generator_exit(ctx: JobContext) -> None:
    raise GeneratorExit


async def _raises_custom_base(ctx: JobContext) -> None:
    raise CustomBaseError("stop everything")


async def _awaits_a_cancelled_task(ctx: JobContext) -> None:
    inner = asyncio.ensure_future(asyncio.sleep(60))
    inner.cancel()  # by someone else than the worker: no abort was asked
    await inner


async def _logs_bytes(ctx: JobContext) -> HandlerResult:
    log: Callable[[Any, Any], None] = ctx.log
    log("stdout", b"caf\xc3\xa9")
    log(b"stderr", b"bad \xff byte")
    log("stdout", None)
    log("stdout", "last line")
    return HandlerResult(output_tail="")


ENTRY_POINTS: dict[str, str] = {
    "odd-none": "returns_none",
    "odd-bytes": "returns_bytes",
    "odd-str": "returns_str",
    "odd-bytes-tail": "returns_bytes_tail",
    "odd-failed-none": "fails_with_none",
    "odd-failed-bytes": "fails_with_bytes",
    "odd-failed-bytes-tail": "fails_with_bytes_tail",
    "odd-failed-silently": "fails_silently",
    "odd-unprintable": "raises_unprintable",
    "odd-exit": "exits",
    "odd-generator-exit": "raises_generator_exit",
    "odd-base-exception": "raises_custom_base",
    "odd-logs-bytes": "logs_bytes",
    "odd-cancelled": "awaits_a_cancelled_task",
}
"""Handler name -> the factory in this module that builds it."""


def returns_none() -> OddHandler:
    """``run`` returns None."""
    return OddHandler("odd-none", _returns_none)


def returns_bytes() -> OddHandler:
    """``run`` returns bytes."""
    return OddHandler("odd-bytes", _returns_bytes)


def returns_str() -> OddHandler:
    """``run`` returns a plain str."""
    return OddHandler("odd-str", _returns_str)


def returns_bytes_tail() -> OddHandler:
    """``run`` returns a HandlerResult whose output_tail is bytes."""
    return OddHandler("odd-bytes-tail", _returns_bytes_tail)


def fails_with_none() -> OddHandler:
    """``run`` raises ``JobFailed(None)``."""
    return OddHandler("odd-failed-none", _fails_with_none)


def fails_with_bytes() -> OddHandler:
    """``run`` raises ``JobFailed(b"...")``."""
    return OddHandler("odd-failed-bytes", _fails_with_bytes)


def fails_with_bytes_tail() -> OddHandler:
    """``run`` raises JobFailed with a str error and a bytes output_tail."""
    return OddHandler("odd-failed-bytes-tail", _fails_with_bytes_tail)


def fails_silently() -> OddHandler:
    """``run`` raises a JobFailed subclass that has no ``error`` attribute."""
    return OddHandler("odd-failed-silently", _fails_silently)


def raises_unprintable() -> OddHandler:
    """``run`` raises an exception whose ``str()`` raises."""
    return OddHandler("odd-unprintable", _raises_unprintable)


def exits() -> OddHandler:
    """``run`` calls ``sys.exit(3)``."""
    return OddHandler("odd-exit", _exits)


def raises_generator_exit() -> OddHandler:
    """``run`` raises GeneratorExit."""
    return OddHandler("odd-generator-exit", _raises_generator_exit)


def raises_custom_base() -> OddHandler:
    """``run`` raises a BaseException subclass of its own."""
    return OddHandler("odd-base-exception", _raises_custom_base)


def logs_bytes() -> OddHandler:
    """``run`` passes bytes and None to ``ctx.log``, then succeeds."""
    return OddHandler("odd-logs-bytes", _logs_bytes)


def awaits_a_cancelled_task() -> OddHandler:
    """``run`` lets out the CancelledError of a task it awaits, which another cancelled."""
    return OddHandler("odd-cancelled", _awaits_a_cancelled_task)
