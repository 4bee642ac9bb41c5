"""A Node.js orchestrator (tests/node/orchestrator.js: @grpc/grpc-js and @grpc/proto-loader
over protos/) against a real `tickwork serve`, plaintext and over TLS with a bearer token:
it creates a task, runs it twice with one request_id (one job), watches it to the end,
reads a BadRequest field violation from an error's details, pages ListJobs and aborts a
running job. What the script saw is asserted here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.rpc import status_pb2

from tests.harness import REPO, Server
from tests.security import make_pki, role_tokens, tokens_file
from tickwork import Client, TlsConfig, Unavailable

NODE_DIR = REPO / "tests" / "node"
#: Where googleapis-common-protos installed google/rpc/*.proto (beside its modules).
GOOGLE_PROTOS_DIR = Path(status_pb2.__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def node() -> str:
    """The node binary, with tests/node's packages installed (`npm ci --prefix tests/node`,
    as .ci/run does); skipped without them, except in CI, where that is a failure."""
    binary = shutil.which("node")
    missing = (
        "node is not installed"
        if binary is None
        else "tests/node/node_modules is missing: run `npm ci --prefix tests/node`"
        if not (NODE_DIR / "node_modules").is_dir()
        else ""
    )
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} (CI installs it: .ci/run)")
        pytest.skip(missing)
    assert binary is not None
    return binary


@dataclass
class Target:
    """A running service and what a client needs for it."""

    server: Server
    token: str = ""
    ca_file: str = ""


def serving(server: Server, tls: TlsConfig | None, token: str, timeout_s: float = 30) -> None:
    """Poll ListTasks until it answers (the harness's health check is plaintext)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            raise AssertionError(f"server exited {server.popen.returncode}:\n{server.output()}")
        try:
            with Client(server.address, tls=tls, token=token or None, timeout=1) as c:
                c.list_tasks()
                return
        except Unavailable:
            time.sleep(0.1)
    raise AssertionError(f"server not serving after {timeout_s}s:\n{server.output()}")


@pytest.fixture(params=["plaintext", "tls-token"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    env = {"WORKER_POLL_INTERVAL_SECONDS": "1"}
    token = ca_file = ""
    tls = None
    if request.param == "tls-token":
        pki = make_pki(tmp_path / "pki")
        tokens = role_tokens()
        token, ca_file = tokens["admin"], str(pki.ca)
        tls = TlsConfig(ca_file=ca_file)
        env |= {
            "TICKWORK_TLS_CERT_FILE": str(pki.server_cert),
            "TICKWORK_TLS_KEY_FILE": str(pki.server_key),
            "TICKWORK_TOKENS_FILE": str(tokens_file(tmp_path / "tokens", tokens)),
        }
    srv = Server(tmp_path, env=env)
    try:
        serving(srv, tls, token)
        yield Target(srv, token, ca_file)
    finally:
        srv.stop()


def orchestrate(node: str, target: Target) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "TICKWORK_ADDRESS": target.server.address,
        "TICKWORK_TOKEN": target.token,
        "TICKWORK_CA_FILE": target.ca_file,
        "GOOGLE_PROTOS_DIR": str(GOOGLE_PROTOS_DIR),
    }
    result = subprocess.run(
        [node, str(NODE_DIR / "orchestrator.js")],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=NODE_DIR,
    )
    assert result.returncode == 0, f"{result.stderr}\n{target.server.output()}"
    seen: dict[str, Any] = json.loads(result.stdout)
    return seen


def test_a_node_orchestrator_drives_tickwork(node: str, target: Target) -> None:
    seen = orchestrate(node, target)

    # ids are strings in JSON (int64), enums their full names.
    assert seen["create"]["id_type"] == "string" and int(seen["create"]["id"]) > 0
    assert seen["create"]["enabled"] is True

    first, again = seen["run"]["job_ids"]
    assert first == again  # one job for one request_id
    assert seen["run"]["repeated"] == [False, True]

    assert seen["watch"]["statuses"][-1] == "JOB_STATUS_SUCCEEDED"
    assert set(seen["watch"]["statuses"]) <= {
        "JOB_STATUS_QUEUED",
        "JOB_STATUS_RUNNING",
        "JOB_STATUS_SUCCEEDED",
    }
    assert seen["watch"]["output"] == "from node"
    assert seen["watch"]["trigger"] == "TRIGGER_API"

    assert seen["bad_request"] == {
        "code": "INVALID_ARGUMENT",
        "reason": "FIELD_INVALID",
        "domain": "tickwork.dev",
        "field_violations": [
            {"field": "task.retry_policy.max_attempts", "description": "must be between 1 and 100"}
        ],
    }

    assert seen["abort"]["action"] == "ACTION_ABORT_REQUESTED"
    assert seen["abort"]["status"] == "JOB_STATUS_ABORTED"
    assert seen["abort"]["error"] == "aborted by operator"

    # Every job, one a page, newest first; and the statuses filter by enum name.
    jobs = [first, seen["abort"]["job_id"]]
    assert seen["list"]["ids"] == sorted(jobs, key=int, reverse=True)
    assert seen["list"]["pages"] == len(jobs)
    assert seen["list"]["succeeded"] == [first]

    # What the orchestrator did is what the Python SDK sees.
    tls = TlsConfig(ca_file=target.ca_file) if target.ca_file else None
    with Client(target.server.address, tls=tls, token=target.token or None) as client:
        assert [j.id for j in client.list_jobs()] == [int(j) for j in seen["list"]["ids"]]
