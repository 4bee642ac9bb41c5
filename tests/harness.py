"""Real processes for tests: a tickwork server and workers on 127.0.0.1 with free ports."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    check: Callable[[], T | None],
    *,
    timeout_s: float = 15.0,
    interval_s: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last value: {last!r}")


def healthy(address: str) -> bool:
    """True when the server at ``address`` answers the gRPC health check with SERVING."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            resp = stub.Check(health_pb2.HealthCheckRequest(), timeout=0.5)
        except grpc.RpcError:
            return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


class Proc:
    """A child process with its output in a log file."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            argv, env=dict(env), stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig``; SIGKILL also waits for the process to be gone."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        if sig == signal.SIGKILL:
            self.popen.wait(10)

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL. Returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._log.close()
        return self.popen.returncode


def base_env(**extra: str) -> dict[str, str]:
    """The test environment: this interpreter's PATH and no TICKWORK_* from the caller.

    The web console is off (TICKWORK_CONSOLE_LISTEN empty), so that servers started side by
    side do not all ask for its default port; a test of the console gives it a free port.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["TICKWORK_CONSOLE_LISTEN"] = ""
    env.update(extra)
    return env


class Server(Proc):
    """``tickwork serve`` on 127.0.0.1.

    Without ``port`` it listens on port 0 and its address is read from its own "tickwork
    serving on HOST:PORT" line: a port picked by the test and bound later by the server
    could be taken meanwhile by another test's server, whose health check would then
    answer for this one."""

    def __init__(
        self,
        tmp: Path,
        *,
        env: Mapping[str, str] | None = None,
        database_url: str | None = None,
        name: str = "server",
        port: int | None = None,
    ) -> None:
        self._port = port
        self.database_url = database_url or f"sqlite+aiosqlite:///{tmp / 'tickwork.db'}"
        full_env = base_env(
            DATABASE_URL=self.database_url, TICKWORK_LISTEN=f"127.0.0.1:{port or 0}"
        )
        full_env.update(env or {})
        super().__init__(
            [sys.executable, "-m", "tickwork.cli", "serve"], full_env, tmp / f"{name}.log"
        )

    @property
    def port(self) -> int:
        """The port it listens on; waits (up to 60 s) for it to say so when it was 0."""
        deadline = time.monotonic() + 60.0
        while (port := self._known_port()) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"server not serving after 60s:\n{self.output()}")
            time.sleep(0.02)
        return port

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def _known_port(self) -> int | None:
        """The port when known (given, or read from its "serving on" line), else None.
        Raises AssertionError, with its log, when the server exited before saying it."""
        if self._port is None:
            if found := _SERVING.search(self.output()):
                self._port = int(found.group(1))
            elif self.popen.poll() is not None:
                raise AssertionError(f"server exited {self.popen.returncode}:\n{self.output()}")
        return self._port

    def wait_healthy(self, timeout_s: float = 30.0) -> Server:
        """Block until the health check answers SERVING (fails with the server's log)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise AssertionError(f"server exited {self.popen.returncode}:\n{self.output()}")
            port = self._known_port()
            if port is not None and healthy(f"127.0.0.1:{port}"):
                return self
            time.sleep(0.05)
        raise AssertionError(f"server not healthy after {timeout_s}s:\n{self.output()}")


_SERVING = re.compile(r"tickwork serving on [^\s\"]*:(\d+)")


class WorkerProc(Proc):
    """``tickwork worker --server ADDRESS [ARGS...]``."""

    def __init__(
        self,
        tmp: Path,
        address: str,
        *,
        env: Mapping[str, str] | None = None,
        name: str = "worker",
        args: Sequence[str] = (),
    ) -> None:
        full_env = base_env(**(env or {}))
        super().__init__(
            [sys.executable, "-m", "tickwork.cli", "worker", "--server", address, *args],
            full_env,
            tmp / f"{name}.log",
        )
