"""Which process holds a lease, and whether that process is gone.

A lease row records its holder's process: the host name, the process id, the host's boot
id (``/proc/sys/kernel/random/boot_id``) and the process's start time (field 22 of
``/proc/<pid>/stat``, clock ticks after boot). A process that finds a lease held by a
process of its own host and boot that no longer runs (no such pid, or a pid reused by a
process that started at another time) knows the lease can never be renewed, and takes it
over at once rather than waiting for it to expire. A holder on another host, after another
boot, or not recorded is never judged: its lease expires as before.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HolderProcess", "is_running", "this_process"]

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class HolderProcess:
    """A lease holder's process.

    Attributes:
        host (str): host name.
        pid (int): process id.
        boot_id (str): the host's boot id; "" where the system has none.
        started (int | None): start time, clock ticks after boot; None where unknown.
    """

    host: str
    pid: int
    boot_id: str
    started: int | None

    def columns(self) -> dict[str, object]:
        """The ``leases`` columns that record this process."""
        return {
            "holder_host": self.host,
            "holder_pid": self.pid,
            "holder_boot_id": self.boot_id or None,
            "holder_started": self.started,
        }

    def finds_dead(
        self, host: str | None, pid: int | None, boot_id: str | None, started: int | None
    ) -> bool:
        """Whether the recorded holder (a lease row's columns) is a process of this host and
        boot, not this one, that no longer runs. Unknown values judge nothing (False)."""
        if not (host and pid and boot_id and self.boot_id):
            return False
        if (host, boot_id) != (self.host, self.boot_id) or pid == self.pid:
            return False
        return not is_running(pid, started)


def _start_time(pid: int) -> int | None:
    """Field 22 (starttime) of ``/proc/<pid>/stat``; None when unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        return int(fields[19])  # fields[0] is field 3
    except (IndexError, ValueError):
        return None


def is_running(pid: int, started: int | None) -> bool:
    """Whether process ``pid`` runs and, when ``started`` is known, is the process that
    started then (not a later one given the same pid). A zombie counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists (another user's)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rindex(")") + 2 :].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        pass
    if started is None:
        return True
    return _start_time(pid) == started


def this_process() -> HolderProcess:
    """The process this code runs in, as a lease holder."""
    try:
        boot_id = _BOOT_ID.read_text().strip()
    except OSError:
        boot_id = ""
    pid = os.getpid()
    return HolderProcess(socket.gethostname(), pid, boot_id, _start_time(pid))
