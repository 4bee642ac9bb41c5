"""In-process wake-ups: queue changes wake waiting worker polls, job changes wake watchers,
abort requests reach the stream of the worker that runs the job.

These are hints for latency only. Every waiter re-reads the database and also wakes on a
timeout, so a change made by another replica is seen within that timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress


class Signal:
    """A broadcast wake-up: ``wait(timeout)`` returns when ``fire()`` is called or on timeout."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        """Wake every current waiter."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds; True when woken, False on timeout."""
        event = self._event
        if timeout_s <= 0:
            return False
        with suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)
            return True
        return False


class Hub:
    """The service's wake-ups, shared by servicers, the scheduler loop and the reaper."""

    def __init__(self) -> None:
        self.queue = Signal()
        self.schedules = Signal()
        self._jobs: dict[int, Signal] = {}
        self._abort_handlers: dict[int, Callable[[int, str], None]] = {}

    def job_signal(self, job_id: int) -> Signal:
        """The signal fired when ``job_id`` changes."""
        sig = self._jobs.get(job_id)
        if sig is None:
            sig = self._jobs[job_id] = Signal()
        return sig

    def job_changed(self, job_id: int) -> None:
        """A job's row changed: wake its watchers."""
        sig = self._jobs.pop(job_id, None)
        if sig is not None:
            sig.fire()

    def on_abort(self, job_id: int, handler: Callable[[int, str], None] | None) -> None:
        """Register (or, with None, remove) the stream callback that aborts ``job_id``."""
        if handler is None:
            self._abort_handlers.pop(job_id, None)
        else:
            self._abort_handlers[job_id] = handler

    def request_abort(self, job_id: int, reason: str) -> bool:
        """Tell the worker running ``job_id`` to stop; False if it runs on no local stream."""
        handler = self._abort_handlers.get(job_id)
        if handler is None:
            return False
        handler(job_id, reason)
        return True
