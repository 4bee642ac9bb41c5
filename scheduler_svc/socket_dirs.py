"""The service's folder for its internal socket, and the folders dead services left behind.

A running service listens on a unix socket of its own (its scheduler loop, embedded worker
and console reach it there) in a folder it makes in the temp dir and removes when it stops.
A service that crashed or was SIGKILLed leaves its folder. So the folder's name says whose
it is, ``tickwork-PID-START-XXXXXXXX`` (the process id and its start time, in clock ticks
after boot, as :mod:`scheduler_svc.holders` reads them), and a service starting removes the
folders of that form, of its own user, whose process no longer runs: no pid, or a pid
reused by a process started at another time. A live service's folder is never removed.
A folder named ``tickwork-XXXXXXXX`` without an owner (as versions before this one made)
is removed when all it holds is a ``grpc.sock`` nobody listens on (connecting is refused).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import socket
import stat
import tempfile

from scheduler_svc.holders import is_running, this_process

__all__ = ["make_socket_dir", "remove_dead_socket_dirs"]

log = logging.getLogger(__name__)

_OWNED = re.compile(r"tickwork-(\d+)-(\d+)-[a-z0-9_]{8}")
_UNOWNED = re.compile(r"tickwork-[a-z0-9_]{8}")
_SOCKET = "grpc.sock"


def make_socket_dir() -> str:
    """Make this process's socket folder in the temp dir (mode 0700); its path.

    Raises:
        OSError: it could not be made.
    """
    me = this_process()
    return tempfile.mkdtemp(prefix=f"tickwork-{me.pid}-{me.started or 0}-")


def remove_dead_socket_dirs(temp_dir: str | None = None) -> list[str]:
    """Remove the socket folders in ``temp_dir`` (default: the temp dir) that dead services
    of this user left; the paths removed. Never raises: a folder that cannot be read or
    removed is left (and logged)."""
    where = temp_dir or tempfile.gettempdir()
    try:
        names = os.listdir(where)
    except OSError as exc:
        log.warning("cannot list %s for socket folders left by dead services: %s", where, exc)
        return []
    removed = []
    for name in names:
        path = os.path.join(where, name)
        try:
            if _is_dead(name, path):
                shutil.rmtree(path)
                removed.append(path)
        except OSError as exc:
            log.warning("cannot remove %s, left by a dead service: %s", path, exc)
    if removed:
        log.info("removed %d socket folder(s) left by dead services", len(removed))
    return removed


def _is_dead(name: str, path: str) -> bool:
    """Whether ``path`` is a socket folder of this user whose service no longer runs."""
    owned = _OWNED.fullmatch(name)
    if owned is None and _UNOWNED.fullmatch(name) is None:
        return False
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        return False
    if owned is not None:
        pid, started = int(owned.group(1)), int(owned.group(2))
        return not is_running(pid, started or None)
    return os.listdir(path) == [_SOCKET] and _refused(os.path.join(path, _SOCKET))


def _refused(path: str) -> bool:
    """Whether ``path`` is a unix socket nobody listens on."""
    if not stat.S_ISSOCK(os.lstat(path).st_mode):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED
    finally:
        with contextlib.suppress(OSError):
            probe.close()
    return False
