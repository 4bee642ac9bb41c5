"""worker_svc._flag: Flag and wait_any, the worker's waits without a task per event."""

from __future__ import annotations

import asyncio

import pytest

from worker_svc._flag import Flag, wait_any


async def test_set_wakes_every_waiter_and_stays_set_until_cleared() -> None:
    flag = Flag()
    waiters = [asyncio.create_task(flag.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)

    flag.set()
    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert flag.is_set()
    await asyncio.wait_for(flag.wait(), 5)  # set: returns at once

    flag.clear()
    again = asyncio.create_task(flag.wait())
    await asyncio.sleep(0)
    assert not again.done() and not flag.is_set()
    flag.set()
    await asyncio.wait_for(again, 5)


async def test_wait_any_returns_on_the_first_flag_and_lets_go_of_the_others() -> None:
    first, second = Flag(), Flag()
    wait = asyncio.create_task(wait_any([first, second]))
    await asyncio.sleep(0)
    assert not wait.done()

    second.set()
    await asyncio.wait_for(wait, 5)
    assert not first.is_set()
    assert first._waiters == [] and second._waiters == []


async def test_wait_any_returns_when_a_future_is_done_and_removes_its_callback() -> None:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    flag = Flag()
    wait = asyncio.create_task(wait_any([flag], [future]))
    await asyncio.sleep(0)
    assert not wait.done()

    future.set_result(1)
    await asyncio.wait_for(wait, 5)
    assert flag._waiters == []

    other: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    wait = asyncio.create_task(wait_any([], [other], timeout_s=0.01))
    await asyncio.wait_for(wait, 5)  # timed out
    assert not other.done()
    other.set_result(2)  # no callback of the finished wait is left to run


async def test_wait_any_times_out_and_returns_at_once_when_already_satisfied() -> None:
    loop = asyncio.get_running_loop()
    flag = Flag()
    started = loop.time()
    await asyncio.wait_for(wait_any([flag], timeout_s=0.05), 5)
    assert loop.time() - started >= 0.04
    assert not flag.is_set() and flag._waiters == []

    done: asyncio.Future[None] = loop.create_future()
    done.set_result(None)
    await asyncio.wait_for(wait_any([flag], [done]), 5)
    flag.set()
    await asyncio.wait_for(wait_any([flag]), 5)


async def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    flag = Flag()
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    wait = asyncio.create_task(wait_any([flag], [future], timeout_s=30))
    await asyncio.sleep(0)
    assert len(flag._waiters) == 1

    wait.cancel()
    with pytest.raises(asyncio.CancelledError):
        await wait
    assert flag._waiters == []
    future.set_result(None)
    flag.set()  # nothing of the cancelled wait is woken
