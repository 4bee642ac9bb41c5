"""Wake-ups between replicas on PostgreSQL: LISTEN/NOTIFY on one channel.

The :class:`~scheduler_svc.hub.Hub` wakes this process's worker polls and scheduler loop at
once. A change made through another replica (a RunTasks on the replica the active worker is
not connected to, a schedule created on a replica that does not tick) would otherwise be seen
at the next poll: up to WORKER_POLL_INTERVAL_SECONDS for a job, up to
SCHEDULER_POLL_INTERVAL_SECONDS (60 s by default) for a new schedule's first fire. Each
replica therefore LISTENs on :data:`CHANNEL` and sends a NOTIFY for the changes the others
act on:

* ``queue``: a job was enqueued, or the worker lease was let go (a standby may take over);
* ``schedules <ISO time>``: a schedule's next run moved, the earliest such time since the
  last notification; ``schedules`` alone: any change.

Payloads start with the sender's id, so a replica ignores its own. Notifications are hints
for latency only, as the hub's signals are: every waiter re-reads the database and wakes on
its poll interval anyway, so a notification lost (a dropped connection, pgbouncer in
transaction mode, which does not carry LISTEN) costs latency, never a job or a fire. Sending
runs in the background on the listening connection, off the request path: changes that come
while a NOTIFY is under way are merged into the next (at most one ``queue`` and one
``schedules`` each time), so a BatchCreateSchedules of 500 costs one NOTIFY, and a stream of
single CreateSchedule calls up to one each. After the listening connection is (re)opened,
local waiters are woken once, for whatever was missed. The connection shows in
``pg_stat_activity`` as application_name ``tickwork wake-ups``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from scheduler_svc.db import Database

log = logging.getLogger(__name__)

#: The LISTEN/NOTIFY channel of tickwork replicas (one per database).
CHANNEL = "tickwork_wakeups"
#: Seconds between keepalive queries on an idle listening connection, and the longest wait
#: for any statement's answer on it: a connection dropped without a FIN (a network
#: partition) is noticed within twice this time, and replaced after :data:`RECONNECT_MIN_S`.
KEEPALIVE_S = 5.0
#: How the listening connection shows in pg_stat_activity.
APPLICATION_NAME = "tickwork wake-ups"
#: Seconds before reconnecting, doubling up to :data:`RECONNECT_MAX_S` while attempts fail.
RECONNECT_MIN_S = 0.5
RECONNECT_MAX_S = 30.0


class ReplicaWakeups:
    """This replica's end of the wake-up channel.

    Args:
        database (Database): a PostgreSQL database (one connection is held for listening).
        on_queue (Callable[[], None]): called when another replica changed the queue.
        on_schedules (Callable[[dt.datetime | None], None]): called when another replica
            changed schedules, with the earliest next run among the changes (aware UTC), or
            None for a change of any kind.
    """

    def __init__(
        self,
        database: Database,
        on_queue: Callable[[], None],
        on_schedules: Callable[[dt.datetime | None], None],
    ) -> None:
        self._database = database
        self._on_queue = on_queue
        self._on_schedules = on_schedules
        self.sender_id = uuid.uuid4().hex[:12]
        self._queue_pending = False
        self._schedules_pending = False
        self._schedules_at: dt.datetime | None = None  # None with pending: any change
        self._wake = asyncio.Event()
        self._all_sent = asyncio.Event()  # nothing pending and no NOTIFY under way
        self._all_sent.set()
        self.connected = asyncio.Event()
        """Set while the listening connection is open (tests wait for it)."""

    # -- sending --------------------------------------------------------------------

    def queue_changed(self) -> None:
        """Tell the other replicas that the queue changed (sent in the background)."""
        self._queue_pending = True
        self._all_sent.clear()
        self._wake.set()

    def schedules_changed(self, next_run_at: dt.datetime | None = None) -> None:
        """Tell the other replicas that a schedule changed; ``next_run_at`` (aware UTC) is
        its next run when that is all that changed, None for any change."""
        if next_run_at is None or (self._schedules_pending and self._schedules_at is None):
            self._schedules_at = None
        elif not self._schedules_pending or (
            self._schedules_at is not None and next_run_at < self._schedules_at
        ):
            self._schedules_at = next_run_at
        self._schedules_pending = True
        self._all_sent.clear()
        self._wake.set()

    async def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds until what is pending has been sent (a stopping
        replica's last word: its worker lease let go); True when it was."""
        if not self.connected.is_set():
            return self._all_sent.is_set()
        try:
            async with asyncio.timeout(timeout_s):
                await self._all_sent.wait()
        except TimeoutError:
            return False
        return True

    def _take_payloads(self) -> list[str]:
        payloads = []
        if self._queue_pending:
            payloads.append(f"{self.sender_id} queue")
        if self._schedules_pending:
            at = self._schedules_at
            suffix = "" if at is None else " " + at.astimezone(dt.UTC).isoformat()
            payloads.append(f"{self.sender_id} schedules{suffix}")
        self._queue_pending = self._schedules_pending = False
        self._schedules_at = None
        return payloads

    def _put_back(self, payloads: list[str]) -> None:
        """Payloads not sent (the connection failed): send them after reconnecting."""
        for payload in payloads:
            kind, at = _parse(payload)
            if kind == "queue":
                self.queue_changed()
            elif kind == "schedules":
                self.schedules_changed(at)

    # -- receiving ------------------------------------------------------------------

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        """asyncpg's notification callback (on the event loop): act on another replica's
        notification, ignore this one's own."""
        if payload.partition(" ")[0] == self.sender_id:
            return
        kind, at = _parse(payload)
        if kind == "queue":
            self._on_queue()
        elif kind == "schedules":
            self._on_schedules(at)
        else:
            log.warning("ignoring an unknown wake-up %r on %s", payload, CHANNEL)

    # -- the connection ---------------------------------------------------------------

    async def run(self) -> None:
        """Listen and send until cancelled, reconnecting when the connection fails: at once
        after a connection that had been open, then with a backoff doubling up to
        :data:`RECONNECT_MAX_S`. Failures are logged, never raised."""
        delay_s = RECONNECT_MIN_S
        while True:
            try:
                await self._serve()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.connected.is_set():  # it had worked: start the backoff over
                    delay_s = RECONNECT_MIN_S
                log.warning(
                    "replica wake-ups: connection failed (%s: %s); retrying in %.1f s",
                    type(exc).__name__,
                    exc,
                    delay_s,
                )
            finally:
                self.connected.clear()
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, RECONNECT_MAX_S)

    async def _serve(self) -> None:
        """One connection's life: LISTEN, then send what is pending and keep it alive.

        Waits use ``asyncio.timeout``, not ``asyncio.wait_for``: on Python 3.11 the latter
        swallows a cancellation that arrives as its awaitable completes, and a stopping
        service would wait forever for this task.

        Raises:
            ConnectionError: the connection closed, or a statement had no answer within
                :data:`KEEPALIVE_S` (it is then closed).
            sa.exc.DBAPIError, OSError: no connection, or a statement failed.
        """
        async with self._database.autocommit_connection() as conn:
            raw: Any = (await conn.get_raw_connection()).driver_connection  # asyncpg's
            lost = asyncio.Event()

            def closed(_conn: Any) -> None:
                lost.set()
                self._wake.set()

            async def answered(statement: sa.Executable, **params: str) -> None:
                try:
                    async with asyncio.timeout(KEEPALIVE_S):
                        await conn.execute(statement, params)
                except TimeoutError:
                    raw.terminate()  # at once: closing politely would wait on the network
                    raise ConnectionError(f"no answer within {KEEPALIVE_S} s") from None

            raw.add_termination_listener(closed)
            name = sa.func.set_config("application_name", APPLICATION_NAME, False)
            await answered(sa.select(name))
            async with asyncio.timeout(KEEPALIVE_S):
                await raw.add_listener(CHANNEL, self._notified)
            self.connected.set()
            log.info("listening for other replicas' wake-ups on %s", CHANNEL)
            # Whatever the other replicas sent while this one was not listening.
            self._on_queue()
            self._on_schedules(None)
            notify = sa.select(sa.func.pg_notify(CHANNEL, sa.bindparam("payload")))
            while not lost.is_set():
                try:
                    async with asyncio.timeout(KEEPALIVE_S):
                        await self._wake.wait()
                except TimeoutError:
                    await answered(sa.select(1))  # keepalive: notice a dead connection
                    continue
                self._wake.clear()
                payloads = self._take_payloads()
                try:
                    for payload in payloads:
                        await answered(notify, payload=payload)
                except BaseException:
                    self._put_back(payloads)
                    raise
                if not (self._queue_pending or self._schedules_pending):
                    self._all_sent.set()
            raise ConnectionError("the listening connection was closed")


def _parse(payload: str) -> tuple[str, dt.datetime | None]:
    """``"<sender> <kind> [<ISO time>]"`` as (kind, time or None)."""
    _, _, message = payload.partition(" ")
    kind, _, at_text = message.partition(" ")
    try:
        at = dt.datetime.fromisoformat(at_text) if at_text else None
    except ValueError:
        at = None
    if at is not None and at.tzinfo is None:
        at = None  # only ever sent aware; anything else reads as "any change"
    return kind, at
