"""Failpoints: named places where a test can make the process crash on purpose.

TICKWORK_FAILPOINTS="name[,name...]" arms them; an armed failpoint SIGKILLs its own process
when reached, exactly as a power cut or OOM kill would at that instant. Unset in production;
read once at import. Used by tests to prove that a crash in the middle of a tick fires no
window twice (failpoint ``after-enqueue``: the fire is recorded and enqueued, next_run is not
moved yet).
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

_ARMED = frozenset(
    name.strip() for name in os.environ.get("TICKWORK_FAILPOINTS", "").split(",") if name.strip()
)


def failpoint(name: str) -> None:
    """Crash the process here (SIGKILL) if the failpoint ``name`` is armed."""
    if name in _ARMED:
        log.critical("failpoint %s reached: killing the process", name)
        os.kill(os.getpid(), signal.SIGKILL)
