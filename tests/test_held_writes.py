"""A write that held the write path for seconds gives the running leases a grace, as a
storage outage does (:mod:`scheduler_svc.outages`), with a clock the test moves."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from pathlib import Path

import pytest

from scheduler_svc.outages import StorageOutages
from tests.inprocess import inprocess
from tests.queue_helpers import claim, eventually

NOW = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


class Clock:
    """Monotonic seconds the test sets."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_long_write_becomes_grace_counted_once() -> None:
    clock = Clock()
    outages = StorageOutages(held_s=2.0, clock=clock)
    long = outages.write_began(clock.now)
    clock.now += 1.0
    behind = outages.write_began(clock.now)  # a heartbeat waiting behind it
    clock.now += 0.5
    assert outages.grace_s() == 0.0  # 1.5 s under way: not held yet
    clock.now += 6.5
    # Still under way after 8 s: counted up to now, so a reaper pass meanwhile gives it.
    assert outages.grace_s() == 8.0
    outages.write_ended(long)
    outages.write_ended(behind)  # 7 s, all of it counted with the first already
    assert outages.grace_s() == 8.0
    outages.granted(8.0)
    assert outages.grace_s() == 0.0


def test_short_writes_give_no_grace() -> None:
    clock = Clock()
    outages = StorageOutages(held_s=2.0, clock=clock)
    for _ in range(5):
        ticket = outages.write_began(clock.now)
        clock.now += 1.9
        outages.write_ended(ticket)
    assert outages.grace_s() == 0.0


async def test_a_lease_that_expired_while_the_writer_was_held_is_not_reaped(
    tmp_path: Path, database_url: str
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's one writer thread is what a long write holds")
    async with inprocess(tmp_path, database_url, NOW) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.run("t")
        job = await claim(h, ttl_s=30.0)
        db = h.service.app.store.db
        db.outages.held_s = 0.2
        release = threading.Event()
        # A transaction that holds the one writer until the test lets it go.
        held = asyncio.create_task(db.write(lambda conn: release.wait(30)))
        try:
            await eventually(
                lambda: asyncio.sleep(0, db.outages.grace_s() >= 1.0), what="a 1 s hold"
            )
        finally:
            release.set()
        assert await held
        h.clock.advance(30.5)  # the lease's expiry passed meanwhile, by less than the hold
        assert await h.service.app.reap_expired_leases() == []
        renewed = await h.service.app.store.get_job(job.id)
        assert renewed.status == "RUNNING" and renewed.lease_expires_at is not None
        assert renewed.lease_expires_at > h.clock()
        # Without a hold the grace is spent: a lease that then expires is reaped.
        h.clock.advance(60)
        (lost,) = await h.service.app.reap_expired_leases()
        assert lost.job is not None and lost.job.id == job.id
