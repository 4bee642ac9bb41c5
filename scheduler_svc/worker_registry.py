"""The worker streams open on this replica, as status pages show them.

Each :class:`~scheduler_svc.servicers.worker.WorkerSession` registers itself when its
stream opens and leaves when it ends; it records what a status page needs (connect time,
state changes, the last message) as :class:`WorkerSeen`. Nothing here decides anything:
the ``worker`` lease row does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field


@dataclass
class WorkerSeen:
    """What this replica saw of one worker stream. Times are aware UTC."""

    worker_id: str
    connect_time: dt.datetime
    active: bool = False
    state_time: dt.datetime | None = None
    last_message_time: dt.datetime | None = None
    slots: int = 1
    running_job_ids: set[int] = field(default_factory=set)

    def state(self, active: bool, now: dt.datetime) -> None:
        """Record the stream's state (active or standby) as of ``now``."""
        if self.state_time is None or active != self.active:
            self.active, self.state_time = active, now

    def message(self, now: dt.datetime) -> None:
        """Record that a message of the stream arrived at ``now``."""
        self.last_message_time = now


class WorkerRegistry:
    """The open worker streams of this replica, keyed by the session's lease holder name."""

    def __init__(self) -> None:
        self._seen: dict[str, WorkerSeen] = {}

    def open(self, holder: str, seen: WorkerSeen) -> None:
        """Register the stream of lease holder ``holder``."""
        self._seen[holder] = seen

    def close(self, holder: str) -> None:
        """Forget the stream of ``holder``; a second close is a no-op."""
        self._seen.pop(holder, None)

    def items(self) -> list[tuple[str, WorkerSeen]]:
        """(holder, what was seen) of every open stream, in the order they opened."""
        return list(self._seen.items())
