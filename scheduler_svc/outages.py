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
"""

from __future__ import annotations

import math
import threading
import time

__all__ = ["StorageOutages"]


class StorageOutages:
    """Outage bookkeeping of one process's database (thread-safe: SQLite's calls end on
    its threads). Times are :func:`time.monotonic` seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
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
                now = time.monotonic()
                self._grace_s += self._uncounted(now)
                self._counted_until = now
                self._failing_since = None

    def _uncounted(self, now: float) -> float:
        """The open outage's length up to ``now`` not counted before (call with the lock)."""
        assert self._failing_since is not None
        return max(0.0, now - max(self._failing_since, self._counted_until))

    def grace_s(self) -> float:
        """The outages' total length not yet given to leases, seconds, an outage still open
        counted up to now (the reaper's own transaction may be what closes it)."""
        with self._lock:
            if self._failing_since is None:
                return self._grace_s
            return self._grace_s + self._uncounted(time.monotonic())

    def granted(self, grace_s: float) -> None:
        """``grace_s`` (as :meth:`grace_s` returned it) was given to the running leases."""
        with self._lock:
            self._grace_s = max(0.0, self._grace_s - grace_s)
