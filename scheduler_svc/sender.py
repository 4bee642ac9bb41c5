"""The notification sender: delivers the outbox's events in the background.

Each pass routes the new events into deliveries, claims the due ones and sends each on its
own asyncio task, so a slow receiver delays neither the others nor anything else: a tick
or a job never waits for a notification. A failed attempt is tried again after an
exponential backoff with jitter (TICKWORK_NOTIFY_BACKOFF_SECONDS, doubling, at most
TICKWORK_NOTIFY_BACKOFF_CAP_SECONDS), up to TICKWORK_NOTIFY_MAX_ATTEMPTS attempts, then
recorded as given up. Everything is in the database, so a restart loses nothing: an event
committed and not yet sent is sent after the restart; a delivery claimed by a sender that
died mid-send is taken again once its claim runs out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import random
from collections.abc import Callable

from scheduler_svc import notify
from scheduler_svc.hub import Signal
from scheduler_svc.metrics import Metrics
from scheduler_svc.settings import NotifySettings, SmtpSettings
from scheduler_svc.storage_health import log_failure
from scheduler_svc.store import alerts
from scheduler_svc.store.outbox import DeliveryRecord, NotifierRecord, Outbox
from scheduler_svc.values import DeliveryStatus

log = logging.getLogger(__name__)

#: How long a claimed delivery is kept from other senders beyond its timeout, seconds.
CLAIM_MARGIN_S = 30.0


def retry_delay_s(attempts: int, settings: NotifySettings, rng: random.Random) -> float:
    """Seconds before the next attempt after ``attempts`` (>= 1) failed ones:
    ``base * 2^(attempts-1)`` capped, times a jitter uniform in [0.5, 1]."""
    ceiling = min(settings.backoff_cap_s, settings.backoff_base_s * 2.0 ** (attempts - 1))
    return float(ceiling * rng.uniform(0.5, 1.0))


class Sender:
    """The background loop of :mod:`scheduler_svc.sender`; ``wake`` fires when an event is
    written in this process (others are found within the poll interval)."""

    def __init__(
        self,
        outbox: Outbox,
        settings: NotifySettings,
        smtp: SmtpSettings,
        metrics: Metrics,
        clock: Callable[[], dt.datetime],
        wake: Signal,
        *,
        lease_ttl_s: float = 15.0,
        rng: random.Random | None = None,
    ) -> None:
        self.outbox = outbox
        self.settings = settings
        self.smtp = smtp
        self.metrics = metrics
        self.clock = clock
        self.wake = wake
        self.lease_ttl_s = lease_ttl_s
        self.rng = rng or random.Random()
        self._sending: dict[int, asyncio.Task[None]] = {}
        self._notifiers: dict[str, NotifierRecord] = {}
        self._started = clock()

    def _builtin(self) -> list[NotifierRecord]:
        builtin = notify.smtp_notifier(self.smtp)
        return [builtin] if builtin is not None else []

    async def run(self) -> None:
        """Pass after pass until cancelled; a failed pass is logged and the next one runs."""
        while True:
            ticket = self.wake.ticket()
            try:
                await self.pass_once()
            except Exception as err:
                log_failure(log, "notification pass failed", err)
            await ticket.wait(self.settings.poll_interval_s)

    async def pass_once(self) -> int:
        """Check the dead-man windows, the long runs, the start deadlines and whether
        ready jobs wait with no active worker (longer than ``lease_ttl_s``, and only once
        this sender has run that long: a restarted service's own workers get a lease TTL
        to connect before it judges that none holds a lease), route new events, then start
        sending every due delivery; how many started."""
        now = self.clock()
        await alerts.check_overdue(self.outbox.db, now)
        await alerts.check_long_runs(self.outbox.db, now)
        await alerts.check_start_deadlines(self.outbox.db, now)
        if (now - self._started).total_seconds() >= self.lease_ttl_s:
            await alerts.check_workers(self.outbox.db, now, self.lease_ttl_s)
        while await self.outbox.route(now, self._builtin) > 0:
            pass
        declared = {n.name: n for n in await self.outbox.list_notifiers()}
        self._notifiers = {n.name: n for n in self._builtin()} | declared
        longest = max(
            [
                float(n.config.get("timeout_seconds") or notify.DEFAULT_TIMEOUT_S)
                for n in declared.values()
            ]
            + [notify.DEFAULT_TIMEOUT_S, self.smtp.timeout_s]
        )
        due = await self.outbox.claim_due(
            now, longest + CLAIM_MARGIN_S, exclude=list(self._sending)
        )
        for delivery in due:
            task = asyncio.get_running_loop().create_task(
                self._send(delivery), name=f"notification-{delivery.id}"
            )
            self._sending[delivery.id] = task
            task.add_done_callback(functools.partial(self._sent, delivery.id))
        return len(due)

    def _sent(self, delivery_id: int, _task: asyncio.Task[None]) -> None:
        self._sending.pop(delivery_id, None)

    async def _send(self, delivery: DeliveryRecord) -> None:
        notifier = self._notifiers.get(delivery.notifier)
        if notifier is None:
            error = f"no notifier named {delivery.notifier!r} any more"
            retry_at = None
        else:
            error = await notify.deliver(notifier, delivery.event, self.smtp)
            attempts = delivery.attempts + 1
            retry_at = None
            if error and attempts < self.settings.max_attempts:
                delay = retry_delay_s(attempts, self.settings, self.rng)
                retry_at = self.clock() + dt.timedelta(seconds=delay)
        try:
            status = await self.outbox.record(
                delivery.id, self.clock(), error=error, retry_at=retry_at
            )
        except Exception as err:
            log_failure(log, f"recording notification delivery {delivery.id} failed", err)
            return
        outcome = {
            DeliveryStatus.SENT: "sent",
            DeliveryStatus.PENDING: "retried",
            DeliveryStatus.GIVEN_UP: "given_up",
        }[status]
        self.metrics.notifications.labels(delivery.notifier, outcome).inc()
        extra = {
            "notifier": delivery.notifier,
            "event_id": delivery.event.event_id,
            "kind": str(delivery.event.kind),
            "attempt": delivery.attempts + 1,
        }
        if status == DeliveryStatus.SENT:
            log.info("notification sent", extra=extra)
        elif status == DeliveryStatus.PENDING:
            log.warning("notification failed; will retry: %s", error, extra=extra)
        else:
            log.error("notification given up: %s", error, extra=extra)

    async def drain(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the sends under way (on shutdown)."""
        if self._sending:
            await asyncio.wait(list(self._sending.values()), timeout=timeout_s)
