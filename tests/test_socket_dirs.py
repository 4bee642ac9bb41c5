"""Socket folders left in the temp dir by services that died are removed when a service
starts, on a real ``tickwork serve``; a live service's folder is never touched."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_svc.holders import this_process
from tests.harness import Server, wait_for


def _stale_socket(folder: Path) -> None:
    """Leave ``folder/grpc.sock`` as a dead listener leaves it: bound, nobody listening."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "grpc.sock"))
    listener.close()


@pytest.fixture
def temp() -> Iterator[Path]:
    """A temp dir of the service's own, with a short path: a unix socket's path has at most
    107 characters, more than the test's own tmp_path leaves."""
    folder = Path(tempfile.mkdtemp(prefix="tw"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_starting_service_removes_the_socket_folders_of_dead_services_only(
    tmp_path: Path, temp: Path
) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(gone.stdout)
    me = this_process()
    dead = temp / f"tickwork-{dead_pid}-12345-abcd1234"
    reused = temp / f"tickwork-{me.pid}-{(me.started or 0) + 1}-reused00"  # another start
    alive = temp / f"tickwork-{me.pid}-{me.started}-alive000"
    unowned_dead = temp / "tickwork-old0dead"
    unowned_live = temp / "tickwork-old0live"
    other = temp / "tickwork-notes"
    for folder in (dead, reused, alive, unowned_dead, unowned_live, other):
        folder.mkdir()
    for folder in (dead, reused, alive):
        (folder / "grpc.sock").touch()
    _stale_socket(unowned_dead)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(unowned_live / "grpc.sock"))
    listening.listen()
    srv = Server(tmp_path, env={"TMPDIR": str(temp)})
    try:
        srv.wait_healthy()
        left = sorted(path.name for path in temp.iterdir())
        own = f"tickwork-{srv.pid}-"
        assert [name for name in left if name.startswith(own)], left
        assert sorted(name for name in left if not name.startswith(own)) == sorted(
            [alive.name, unowned_live.name, other.name]
        )
        assert (alive / "grpc.sock").exists()
    finally:
        srv.stop()
        listening.close()
    wait_for(
        lambda: not [p for p in temp.iterdir() if p.name.startswith(f"tickwork-{srv.pid}-")],
        what="the stopped service's own folder to be removed",
    )
    assert os.path.isdir(alive)
