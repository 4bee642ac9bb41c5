"""Flag: a signal like ``asyncio.Event`` that is cheap to wait on together with others.

The worker waits, several times a job, for whichever comes first of a few events (a
message arrived, the stream broke, stop, abort now) and tasks (the job, its pump), with a
timeout. ``asyncio.wait`` over ``Event.wait()`` needs a task per event, and a loop turn
to cancel each afterwards; :func:`wait_any` uses one plain future for the whole wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

__all__ = ["Flag", "wait_any"]


class Flag:
    """A flag that is set or clear, and wakes its waiters when set (like asyncio.Event).

    Use it from the event loop's thread only.
    """

    __slots__ = ("_is_set", "_waiters")

    def __init__(self) -> None:
        self._is_set = False
        self._waiters: list[asyncio.Future[None]] = []

    def is_set(self) -> bool:
        """Whether the flag is set."""
        return self._is_set

    def set(self) -> None:
        """Set the flag and wake everything waiting for it. Idempotent."""
        if self._is_set:
            return
        self._is_set = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        """Clear the flag; later waits wait for the next ``set``."""
        self._is_set = False

    async def wait(self) -> None:
        """Return once the flag is set (at once when it is)."""
        await wait_any([self])


async def wait_any(
    flags: Sequence[Flag],
    futures: Sequence[asyncio.Future[Any]] = (),
    timeout_s: float | None = None,
) -> None:
    """Return as soon as one of ``flags`` is set or one of ``futures`` (tasks included) is
    done, or after ``timeout_s`` seconds (None: no limit), whichever comes first.

    Nothing is cancelled and nothing is returned: the caller looks at what it waited for.
    Cancelling the caller ends the wait.

    Args:
        flags (Sequence[Flag]): flags to wait for.
        futures (Sequence[asyncio.Future[Any]]): futures or tasks to wait for.
        timeout_s (float | None): the longest wait, seconds.
    """
    if any(flag.is_set() for flag in flags) or any(future.done() for future in futures):
        return
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    for flag in flags:
        flag._waiters.append(waiter)
    for future in futures:
        future.add_done_callback(wake)
    timer = None if timeout_s is None else loop.call_later(timeout_s, wake)
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
        for future in futures:
            future.remove_done_callback(wake)
        for flag in flags:
            with contextlib.suppress(ValueError):  # set() already let go of it
                flag._waiters.remove(waiter)
