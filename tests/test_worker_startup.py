"""`tickwork worker` refuses settings it cannot honour before it connects: exit 2 and the
error naming the variable, through the worker's log (its own error path)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO, WorkerProc, base_env, free_port, wait_for


def worker(**env: str) -> subprocess.CompletedProcess[str]:
    # Nothing listens at --server: a worker that got past its settings would retry forever.
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "worker", "--server", f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        env=base_env(**env),
        cwd=REPO,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("value", "unknown"), [("shel", "'shel'"), ("shell,bogus", "'bogus'"), ("a, b", "'a', 'b'")]
)
def test_an_unknown_handler_is_refused(value: str, unknown: str) -> None:
    result = worker(WORKER_HANDLERS=value)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "WORKER_HANDLERS: unknown handler" in line and unknown in line, line
    assert "known handlers: " in line and "shell" in line, line


def test_a_negative_grace_is_refused() -> None:
    result = worker(WORKER_SHUTDOWN_GRACE_SECONDS="-1")
    assert result.returncode == 2, result
    [line] = result.stderr.strip().splitlines()
    assert "WORKER_SHUTDOWN_GRACE_SECONDS: must be >= 0, got -1" in line, line


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("REGION,TICKWORK_TOKEN", "TICKWORK_TOKEN is a setting of tickwork's"),
        ("DATABASE_URL", "DATABASE_URL is a setting of tickwork's"),
        ("SMTP_PASSWORD", "SMTP_PASSWORD is a setting of tickwork's"),
        ("A=B", "A=B is not a variable name"),
    ],
)
def test_pass_env_never_names_a_setting(value: str, error: str) -> None:
    result = worker(WORKER_PASS_ENV=value)
    assert result.returncode == 2, result
    [line] = result.stderr.strip().splitlines()
    assert f"WORKER_PASS_ENV: {error}" in line, line


def test_a_server_without_a_port_is_dialed_on_50051(tmp_path: Path) -> None:
    """As the CLI and the SDK: ``--server HOST`` means tickwork's port, not gRPC's 443."""
    proc = WorkerProc(tmp_path, "127.0.0.9")
    try:
        wait_for(lambda: "connecting to " in proc.output(), what="the worker to dial")
        assert "connecting to 127.0.0.9:50051 " in proc.output(), proc.output()
    finally:
        proc.stop()


@pytest.mark.parametrize(
    ("variable", "flag"),
    [
        ("TICKWORK_TLS_CA_FILE", "--tls-ca"),
        ("TICKWORK_TLS_CLIENT_CERT_FILE", "--tls-cert"),
        ("TICKWORK_TLS_CLIENT_KEY_FILE", "--tls-key"),
    ],
)
def test_an_unreadable_tls_file_is_refused(tmp_path: Path, variable: str, flag: str) -> None:
    """A TLS file the worker cannot read is a setting it cannot honour: exit 2 at start with
    one line naming the variable, not a crash with a traceback when it first dials."""
    pem = tmp_path / "present.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    env = {
        "TICKWORK_TLS_CLIENT_CERT_FILE": str(pem),
        "TICKWORK_TLS_CLIENT_KEY_FILE": str(pem),
        variable: str(tmp_path / "missing.pem"),
    }
    result = worker(**env)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"{variable} ({flag}): cannot read {tmp_path / 'missing.pem'}" in line, line


def test_an_unknown_log_format_is_refused() -> None:
    """As ``tickwork serve`` refuses it: a misspelt TICKWORK_LOG_FORMAT (say "jsonl") would
    otherwise give text lines to a log pipeline that expects JSON."""
    result = worker(TICKWORK_LOG_FORMAT="jsonl")
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "TICKWORK_LOG_FORMAT: expected one of text, json, got 'jsonl'" in line, line
