"""The work the benchmarks run (imported by workers): nothing, or a wait like an API call."""

from __future__ import annotations

import asyncio
import time


def noop() -> None:
    """Do nothing: the benchmark measures the scheduler, not the task."""


def wait(seconds: float) -> None:
    """Block for ``seconds`` without using the CPU, as a task waiting on an API does."""
    time.sleep(seconds)


async def wait_async(seconds: float) -> None:
    """:func:`wait` for an asyncio worker (procrastinate runs sync tasks in threads)."""
    await asyncio.sleep(seconds)
