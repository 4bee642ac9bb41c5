"""Work that must run to its end even when the task awaiting it is cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["shielded"]

_T = TypeVar("_T")


async def shielded(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion even if the caller is cancelled meanwhile.

    Args:
        coro (Coroutine[Any, Any, _T]): the work that must not be interrupted.

    Returns:
        _T: its result.

    Raises:
        asyncio.CancelledError: the caller was cancelled; raised after ``coro`` finished
            (unless the caller is cancelled a second time while waiting for it).
        Exception: whatever ``coro`` raised.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await asyncio.wait([task])
        raise
