"""Whether the database takes writes: the state health checks, GetStatus and metrics show.

Every transaction :class:`scheduler_svc.db.Database` runs reports here. The state is
**failing** from the first write (or read) that fails on the database itself (a full disk,
a read-only file, a connection refused; not a unique violation, which is an answer) or
from a write that has not completed for :data:`STALL_S` seconds (a frozen filesystem, a
database that does not answer), and **ok** again once writes have committed with no
failure for :data:`RECOVER_S` seconds (on a full disk a small write may pass between failed
ones: the state does not flap with them). Each change of state is logged once, the
recovery with how many operations failed meanwhile; the failures in between are counted,
not logged (their tracebacks at DEBUG).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable

import grpc
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError

from scheduler_svc.errors import StorageError

log = logging.getLogger(__name__)

#: A write pending this long, seconds, makes the state failing.
STALL_S = 5.0
#: How a call failed by the database begins its message.
DATABASE_FAILS = "the database fails: "
#: Writes must commit with no failure this long, seconds, to end the failing state.
RECOVER_S = 2.0
#: Longest reason text kept (and sent to clients).
MAX_REASON_CHARS = 200


def is_storage_error(err: BaseException) -> bool:
    """True for a failure of the database itself (no connection, a dropped connection, a
    statement timeout, a full disk, a read-only file; not a constraint's answer, nor a value
    it cannot hold, such as a NUL in PostgreSQL's text), also as the service's own gRPC call
    (the scheduler loop's EnqueueFires) answers it. The one rule for both the health state
    and the outage grace (:mod:`scheduler_svc.outages`)."""
    if isinstance(err, StorageError | OSError | TimeoutError):
        return True
    if isinstance(err, grpc.aio.AioRpcError | grpc.RpcError) and hasattr(err, "code"):
        code = err.code()
        details = err.details() if hasattr(err, "details") else ""
        return bool(
            code == grpc.StatusCode.UNAVAILABLE and (details or "").startswith(DATABASE_FAILS)
        )
    return isinstance(err, DBAPIError) and not (
        isinstance(err, IntegrityError) or is_data_error(err)
    )


def is_data_error(err: BaseException) -> bool:
    """True for a value the database cannot hold (SQLSTATE class 22, "data exception": a
    NUL in PostgreSQL's text, a number out of range; SQLAlchemy's DataError): the request's
    data, which a check should have refused, not a failure of the database."""
    if isinstance(err, DataError):
        return True
    sqlstate = getattr(getattr(err, "orig", None), "sqlstate", None)
    return isinstance(err, DBAPIError) and isinstance(sqlstate, str) and sqlstate.startswith("22")


def reason_of(err: BaseException) -> str:
    """A one-line cause of a storage error without SQL or parameters, e.g. ``"database or
    disk is full"`` or ``"connection refused"``."""
    cause: BaseException = err
    if isinstance(err, DBAPIError) and err.orig is not None:
        cause = err.orig
    elif err.__cause__ is not None:
        cause = err.__cause__
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    if isinstance(err, StorageError) and err.__cause__ is None:
        text = err.text
    return text[:MAX_REASON_CHARS]


def log_failure(logger: logging.Logger, message: str, err: BaseException) -> None:
    """Log a loop's failed pass: a storage error at debug level (the state change is logged
    once by :class:`StorageHealth`), anything else with its traceback."""
    if is_storage_error(err):
        logger.debug("%s: %s", message, reason_of(err))
    else:
        logger.error(message, exc_info=err)


class StorageHealth:
    """The database's state as its transactions report it. Not thread-safe: used from the
    event loop only.

    Attributes:
        failing (bool): writes fail (or one has not completed for ``stall_s``).
        reason (str): why, while failing; "" when ok.
        failures (int): operations failed since the state became failing.
        failures_total (int): operations failed since start (the metric).
        changes (int): how many times the state changed.
    """

    def __init__(
        self,
        *,
        stall_s: float = STALL_S,
        recover_s: float = RECOVER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stall_s = stall_s
        self.recover_s = recover_s
        self.clock = clock
        self.failing = False
        self.reason = ""
        self.failures = 0
        self.failures_total = 0
        self.changes = 0
        self._since = clock()
        self._last_failure = float("-inf")
        self._last_success = float("-inf")
        self._pending: dict[int, float] = {}
        self._ids = itertools.count()
        self.listeners: list[Callable[[bool, str], None]] = []
        #: Log the changes of state (the service turns it on; a command such as
        #: ``tickwork db upgrade`` reports its one error itself).
        self.announce = False

    def begin(self, write: bool) -> int:
        """A transaction starts; return its ticket (writes are watched for stalls)."""
        ticket = next(self._ids)
        if write:
            self._pending[ticket] = self.clock()
        return ticket

    def end(self, ticket: int, write: bool, err: BaseException | None) -> None:
        """The transaction of ``ticket`` ended: committed (``err`` None), or raised ``err``."""
        self._pending.pop(ticket, None)
        now = self.clock()
        if err is not None and is_storage_error(err):
            self._last_failure = now
            self.failures_total += 1
            log.debug("database operation failed", exc_info=err)
            if self.failing:
                self.failures += 1
            else:
                self._change(True, reason_of(err))
                self.failures = 1
        elif write:
            self._last_success = now
            self._maybe_recover(now)

    def _maybe_recover(self, now: float) -> None:
        if (
            self.failing
            and self._last_success > self._last_failure
            and now - self._last_failure >= self.recover_s
            and not self._stalled()
        ):
            self._change(False, "")

    def _stalled(self) -> float:
        """Seconds the oldest pending write has waited, when over ``stall_s``; else 0."""
        if not self._pending:
            return 0.0
        waited = self.clock() - min(self._pending.values())
        return waited if waited >= self.stall_s else 0.0

    def check(self) -> bool:
        """Look for a stalled write (call periodically); return whether failing."""
        waited = self._stalled()
        if waited and not self.failing:
            self._last_failure = self.clock()
            self._change(True, f"a database write has not completed for {waited:.0f} s")
            self.failures = 1
        self._maybe_recover(self.clock())
        return self.failing

    def _change(self, failing: bool, reason: str) -> None:
        now = self.clock()
        if not self.announce:
            log.debug("database %s: %s", "failing" if failing else "recovered", reason)
        elif failing:
            log.error("database failing: %s; health NOT_SERVING until writes succeed again", reason)
        else:
            log.warning(
                "database recovered: writes succeed again after %d failed operations in "
                "%.1f s; health SERVING",
                self.failures,
                now - self._since,
            )
        self.failing = failing
        self.reason = reason
        self.changes += 1
        self._since = now
        for listener in list(self.listeners):
            listener(failing, reason)
