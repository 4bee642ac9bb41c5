"""In-process wake-ups: queue changes wake waiting worker polls, job changes wake watchers,
abort requests reach the stream of the worker that runs the job.

These are hints for latency only. Every waiter re-reads the database and also wakes on a
timeout, so a change made by another replica is seen within that timeout; on PostgreSQL,
:mod:`scheduler_svc.replicas` brings the other replicas' queue and schedule changes at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from contextlib import suppress


class Signal:
    """A broadcast wake-up: ``fire()`` wakes every waiter.

    To wait for a change without missing one, take a :meth:`ticket` *before* reading the
    state the change would show, then wait on the ticket: a fire in between (another task
    enqueued, say, while this one was querying) makes the wait return at once.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        """Wake every current waiter and every ticket taken so far."""
        self._event.set()
        self._event = asyncio.Event()

    def ticket(self) -> Ticket:
        """A ticket for the fires from now on."""
        return Ticket(self, self._event)

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for a fire from now on; True when woken."""
        return await self.ticket().wait(timeout_s)


class Ticket:
    """One generation of a :class:`Signal`, taken at a moment: ``wait`` returns as soon as
    the signal has fired since then (at once if it already has)."""

    def __init__(self, signal: Signal, event: asyncio.Event) -> None:
        self._signal = signal
        self._event = event

    def fire(self) -> None:
        """Fire the signal (wakes every waiter, not only this ticket's)."""
        self._signal.fire()

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds; True when woken, False on timeout."""
        if self._event.is_set():
            return True
        if timeout_s <= 0:
            return False
        with suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout_s)
            return True
        return False


class Hub:
    """The service's wake-ups, shared by servicers, the scheduler loop and the reaper.

    ``queue`` (enqueues, finished jobs, a released worker lease: worker polls wait on it),
    ``schedules`` (schedule changes: the scheduler loop waits on it) and ``job_signal(id)``
    return a :class:`Ticket` taken when read: read it before reading the state it guards.
    """

    def __init__(self) -> None:
        self._queue = Signal()
        self._schedules = Signal()
        #: Fired when a notification event was written in this process: wakes the sender.
        self.outbox = Signal()
        #: When the scheduler loop of this process, waiting, will tick next (aware UTC);
        #: None while it ticks or when there is no loop here.
        self.scheduler_wakes_at: dt.datetime | None = None
        #: True while the scheduler loop of this process records due fires: this process's
        #: worker streams hand out no job meanwhile, so on a shared core recording fires
        #: on time comes before running the jobs they queued. ``queue`` fires when it ends.
        self.firing = False
        self._jobs: dict[int, Signal] = {}
        self._abort_handlers: dict[int, Callable[[int, str], None]] = {}
        self._abort_handler_removed = Signal()

    @property
    def queue(self) -> Ticket:
        """A ticket for queue changes; ``hub.queue.fire()`` signals one."""
        return self._queue.ticket()

    @property
    def schedules(self) -> Ticket:
        """A ticket for schedule changes; ``hub.schedules.fire()`` signals one."""
        return self._schedules.ticket()

    def job_signal(self, job_id: int) -> Ticket:
        """A ticket for the next change of ``job_id``."""
        sig = self._jobs.get(job_id)
        if sig is None:
            sig = self._jobs[job_id] = Signal()
        return sig.ticket()

    def job_changed(self, job_id: int) -> None:
        """A job's row changed: wake its watchers."""
        sig = self._jobs.pop(job_id, None)
        if sig is not None:
            sig.fire()

    def on_abort(self, job_id: int, handler: Callable[[int, str], None] | None) -> None:
        """Register (or, with None, remove) the stream callback that aborts ``job_id``."""
        if handler is None:
            if self._abort_handlers.pop(job_id, None) is not None:
                self._abort_handler_removed.fire()
        else:
            self._abort_handlers[job_id] = handler

    def request_abort(self, job_id: int, reason: str) -> bool:
        """Tell the worker running ``job_id`` to stop; False if it runs on no local stream."""
        handler = self._abort_handlers.get(job_id)
        if handler is None:
            return False
        handler(job_id, reason)
        return True

    def running_jobs(self) -> list[int]:
        """Ids of the jobs that worker streams of this process have been assigned and not
        yet reported (those :meth:`request_abort` can reach)."""
        return list(self._abort_handlers)

    async def running_jobs_reported(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds until no worker stream of this process has a job
        unreported (each outcome recorded, or its stream ended). True when none has."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            ticket = self._abort_handler_removed.ticket()
            if not self._abort_handlers:
                return True
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 or not await ticket.wait(remaining):
                return not self._abort_handlers
