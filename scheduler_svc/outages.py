"""The service's own storage outages, as the service saw them: how long its database calls
failed, so that a lease nobody could renew meanwhile is not held against its worker.

Every transaction of :class:`scheduler_svc.db.Database` reports here how it ended. A call
that fails with a storage failure (:func:`scheduler_svc.storage_health.is_storage_error`: no
connection, a dropped connection, a statement timeout, an operational error of the database)
opens an outage at the time that call began; the first call that succeeds afterwards closes
it. The closed outages' lengths add up to the *grace* the reaper gives the running jobs'
leases before it expires any (:meth:`scheduler_svc.app.App.reap_expired_leases`): a lease's
clock stops while the storage it is written through is down. The grace is bounded by the
outages' real lengths, so a dead worker's job is still recovered, later by that much.
"""

from __future__ import annotations

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
                self._grace_s += time.monotonic() - self._failing_since
                self._failing_since = None

    def grace_s(self) -> float:
        """The outages' total length not yet given to leases, seconds, an outage still open
        counted up to now (the reaper's own transaction may be what closes it)."""
        with self._lock:
            if self._failing_since is None:
                return self._grace_s
            return self._grace_s + time.monotonic() - self._failing_since

    def granted(self, grace_s: float) -> None:
        """``grace_s`` (as :meth:`grace_s` returned it) was given to the running leases."""
        with self._lock:
            self._grace_s = max(0.0, self._grace_s - grace_s)
