"""The service's own storage outages, as the service saw them: how long its database calls
failed, so that a lease nobody could renew meanwhile is not held against its worker.

Every transaction of :class:`scheduler_svc.db.Database` reports here how it ended. A call
that fails with a storage failure (:func:`scheduler_svc.storage_health.is_storage_error`: no
connection, a dropped connection, a statement timeout, an operational error of the database)
opens an outage at the time that call began; the first call that succeeds afterwards closes
it. The closed outages' lengths add up to the *grace*, time already counted never twice
(calls that failed together, or one that began before the last outage closed, overlap);
the reaper gives it to the running jobs' leases before it expires any
(:meth:`scheduler_svc.app.App.reap_expired_leases`): a lease nobody could renew while the
storage was down is not held against its worker. The grace is bounded by the outages' real
lengths, so a dead worker's job is still recovered, later by at most that much.

A write that took :data:`HELD_S` seconds or more, its wait for the writer included (a
long transaction held SQLite's one write thread, or row locks on PostgreSQL), counts the
same way from its start to its end: the heartbeats behind it could not renew their leases
either, and the service being busy is not held against the workers. A write still under
way that long counts up to now, as an open outage does.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable

__all__ = ["HELD_S", "StorageOutages"]

#: A write that takes this long, seconds, held the write path: its length is grace.
HELD_S = 3.0


class StorageOutages:
    """Outage bookkeeping of one process's database (thread-safe: SQLite's calls end on
    its threads). Times are :func:`time.monotonic` seconds."""

    def __init__(self, held_s: float = HELD_S, clock: Callable[[], float] = time.monotonic) -> None:
        """``held_s``: see :data:`HELD_S`; ``clock``: monotonic seconds, as the callers'
        ``began``."""
        self.held_s = held_s
        self.clock = clock
        self._lock = threading.Lock()
        self._writes: dict[int, float] = {}
        """The writes under way: their start, by ticket."""
        self._tickets = itertools.count()
        self._failing_since: float | None = None
        self._grace_s = 0.0
        self._counted_until = -math.inf
        """Up to when time is counted in the grace already (the last outage's close)."""

    def failed(self, began: float) -> None:
        """A call that began at ``began`` failed with a storage failure."""
        with self._lock:
            if self._failing_since is None or began < self._failing_since:
                self._failing_since = began

    def succeeded(self) -> None:
        """A call succeeded: an open outage closes now, and its length becomes grace."""
        if self._failing_since is None:  # the common case, without the lock
            return
        with self._lock:
            if self._failing_since is not None:
                now = self.clock()
                self._grace_s += self._uncounted(now)
                self._counted_until = now
                self._failing_since = None

    def write_began(self, began: float) -> int:
        """A write began at ``began``; its ticket for :meth:`write_ended`."""
        with self._lock:
            ticket = next(self._tickets)
            self._writes[ticket] = began
            return ticket

    def write_ended(self, ticket: int) -> None:
        """The write of ``ticket`` ended (however): one that took :attr:`held_s` or more
        held the write path, and its length not counted before becomes grace."""
        with self._lock:
            began = self._writes.pop(ticket, None)
            now = self.clock()
            if began is not None and now - began >= self.held_s:
                self._grace_s += max(0.0, now - max(began, self._counted_until))
                self._counted_until = max(self._counted_until, now)

    def _uncounted(self, now: float) -> float:
        """The open outage's length up to ``now`` not counted before (call with the lock)."""
        assert self._failing_since is not None
        return max(0.0, now - max(self._failing_since, self._counted_until))

    def _held(self, now: float) -> float:
        """How long the oldest write under way has held the write path up to ``now``, not
        counted before, when it is :attr:`held_s` or more (call with the lock)."""
        if not self._writes:
            return 0.0
        began = min(self._writes.values())
        if now - began < self.held_s:
            return 0.0
        return max(0.0, now - max(began, self._counted_until))

    def grace_s(self) -> float:
        """The outages' (and long writes') total length not yet given to leases, seconds,
        an outage still open or a write still under way counted up to now (the reaper's
        own transaction may be what closes it)."""
        with self._lock:
            now = self.clock()
            open_s = self._uncounted(now) if self._failing_since is not None else 0.0
            return self._grace_s + max(open_s, self._held(now))

    def granted(self, grace_s: float) -> None:
        """``grace_s`` (as :meth:`grace_s` returned it) was given to the running leases."""
        with self._lock:
            self._grace_s = max(0.0, self._grace_s - grace_s)
