"""A write that held the write path for seconds gives the running leases a grace, as a
storage outage does (:mod:`scheduler_svc.outages`), with a clock the test moves."""

from __future__ import annotations

from scheduler_svc.outages import StorageOutages


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
