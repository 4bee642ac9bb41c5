"""An abort that comes right after a job was handed stops it at once, not after a grace.

The keeper drops the stop and kill signals pending when it takes a job's go (they were
sent for its last job). A stop the worker asks for right after handing a job (an abort
that follows the assignment at once) can reach the server before the keeper, slow to be
scheduled, took that go: the server holds it until the keeper says it is armed. These
tests drive the job process server over its socket, as the worker does, and freeze the
keeper (SIGSTOP) so that the window is as wide as a loaded machine makes it. And a job
aborted before the worker wrote its spec (the go-ahead) has its spec pipe closed at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness import REPO
from tests.queue_helpers import children_of
from worker_svc.handlers import _jobproc

_DEADLINE_S = 30.0


class _Server:
    """The job process server, spoken to over its socket like the worker does."""

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "worker_svc.handlers._zygote",
                str(theirs.fileno()),
                str(os.getpid()),
                "1",
            ],
            pass_fds=(theirs.fileno(),),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self.sock.settimeout(_DEADLINE_S)
        self.next_req = 0

    def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.sock.recv(4096))
        return message

    def start_program(self, argv: list[str], grace_s: float) -> tuple[int, int]:
        """Ask for a program job, write its spec (the go-ahead); its request and keeper."""
        self.next_req += 1
        req = self.next_req
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        spec_r, spec_w = os.pipe()
        log_r, log_w = os.pipe()
        message = json.dumps({"req": req, "grace_s": grace_s, "exec": True}).encode()
        socket.send_fds(self.sock, [message], [out_w, err_w, res_w, spec_r, log_w])
        for fd in (out_w, err_w, res_w, spec_r, log_w, out_r, err_r, res_r, log_r):
            os.close(fd)  # the job writes to closed pipes: it gets EPIPE, which is fine
        answer = self.receive()
        assert answer.get("req") == req, answer
        spec = {"argv": argv, "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}}
        os.write(spec_w, json.dumps(spec).encode())
        os.close(spec_w)
        return req, int(answer["keeper"])

    def barrier(self) -> None:
        """Return once the server handled every message sent before (a request it
        refuses at once is answered in order)."""
        self.next_req += 1
        self.sock.send(json.dumps({"req": self.next_req}).encode())
        assert self.receive() == {"req": self.next_req, "error": "expected 5 descriptors"}

    def end_of(self, req: int) -> dict[str, Any]:
        while True:
            message = self.receive()
            if message.get("end") == req:
                return message

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server() -> Iterator[_Server]:
    started = _Server()
    try:
        yield started
    finally:
        started.close()


def _idle_program_keepers(server_pid: int) -> list[int]:
    """The server's keepers with no child: keepers of programs between jobs (a keeper of
    python jobs has its next job's process forked ahead)."""
    return [pid for pid in children_of(server_pid) if not children_of(pid)]


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + _DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {_DEADLINE_S} s: {what}"
        time.sleep(0.01)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("kill", [False, True])
def test_a_stop_asked_before_the_keeper_took_the_go_stops_the_job(
    server: _Server, kill: bool
) -> None:
    req, _ = server.start_program(["true"], grace_s=30.0)
    assert server.end_of(req)["status"] == 0
    _wait_for(lambda: _idle_program_keepers(server.proc.pid), "a keeper of programs is free")
    frozen = _idle_program_keepers(server.proc.pid)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        req, keeper = server.start_program(["sleep", "600"], grace_s=30.0)
        assert keeper in frozen  # it has the go (queued), and has not taken it
        server.sock.send(json.dumps({"stop": req, "kill": kill}).encode())
        server.barrier()  # the server handled the stop while the keeper was frozen
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    started = time.monotonic()
    end = server.end_of(req)
    # Held back until the keeper was armed, the stop then applied: SIGTERM (or SIGKILL)
    # ends the sleep at once, well within the 30 s grace a lost stop would wait for.
    assert time.monotonic() - started < 20.0
    expected = signal.SIGKILL if kill else signal.SIGTERM
    assert os.WIFSIGNALED(end["status"]) and os.WTERMSIG(end["status"]) == expected, end


async def test_a_job_aborted_before_its_go_ahead_ends_at_once_not_after_the_grace() -> None:
    """Aborted after its keeper got the job but before the worker wrote the spec (the
    go-ahead): the spec pipe is closed at once, so the keeper starts nothing and the job
    ends without waiting for the stop rule's grace (30 s here)."""
    _jobproc.start_job_process_server(1)
    server = _jobproc._SERVER
    spec = {"kind": "exec", "argv": ["sleep", "600"], "env": {"PATH": os.environ["PATH"]}}
    job = asyncio.create_task(
        _jobproc.run_job_process(
            spec, job_id=1, on_line=lambda stream, line: None, timeout_s=None, grace_s=30.0
        )
    )
    deadline = time.monotonic() + _DEADLINE_S
    # The request was answered (its end is awaited) and the job is setting up its pipes:
    # the spec is written only after that.
    while not server._exit_waiters:
        assert not job.done() and time.monotonic() < deadline
        await asyncio.sleep(0)
    job.cancel()
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert time.monotonic() - started < 10.0
