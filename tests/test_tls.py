"""TLS and mutual TLS on real processes, with certificates made by the test; and the refusal
to serve a non-loopback address without access control or TLS."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import REPO, Proc, Server, WorkerProc, base_env, free_port, wait_for
from tests.security import Pki, make_pki, role_tokens, tokens_file
from tickwork import Client, DeadlineExceeded, JobStatus, TlsConfig, Unavailable


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def mtls_env(pki: Pki) -> dict[str, str]:
    """Server variables: TLS with the server certificate; clients need the CA's certificate."""
    return {
        "TICKWORK_TLS_CERT_FILE": str(pki.server_cert),
        "TICKWORK_TLS_KEY_FILE": str(pki.server_key),
        "TICKWORK_TLS_CLIENT_CA_FILE": str(pki.ca),
    }


def client_tls(pki: Pki) -> TlsConfig:
    return TlsConfig(
        ca_file=str(pki.ca), cert_file=str(pki.client_cert), key_file=str(pki.client_key)
    )


def wait_serving(server: Server, tls: TlsConfig, timeout_s: float = 30) -> None:
    """Poll ListTasks over TLS until it answers (the harness's check is plaintext)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            raise AssertionError(f"server exited {server.popen.returncode}:\n{server.output()}")
        try:
            with Client(server.address, tls=tls, timeout=1) as c:
                c.list_tasks()
                return
        except (Unavailable, DeadlineExceeded):  # not up yet, or a busy machine's handshake
            time.sleep(0.1)
    raise AssertionError(f"server not serving TLS after {timeout_s}s:\n{server.output()}")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=base_env(**(env or {})),
        cwd=REPO,
    )


@pytest.fixture
def mtls_server(tmp_path: Path, pki: Pki) -> Iterator[Server]:
    """The embedded service on mutual TLS (its own loops reach it over its unix socket)."""
    srv = Server(tmp_path, env={**mtls_env(pki), "WORKER_POLL_INTERVAL_SECONDS": "1"})
    try:
        wait_serving(srv, client_tls(pki))
        yield srv
    finally:
        srv.stop()


def test_mutual_tls_for_sdk_cli_and_embedded_worker(mtls_server: Server, pki: Pki) -> None:
    with Client(mtls_server.address, tls=client_tls(pki)) as tw:
        tw.create_task("secure", "shell", {"argv": ["echo", "over tls"]})
        [run] = tw.run("secure")
        job = tw.wait(run.job_id, timeout=20)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED
    assert "over tls" in job.output_tail

    address = mtls_server.address
    files = ["--tls-ca", str(pki.ca), "--tls-cert", str(pki.client_cert)]
    ok = cli("--server", address, *files, "--tls-key", str(pki.client_key), "tasks", "list")
    assert ok.returncode == 0, ok.stderr
    assert "secure" in ok.stdout
    env_ok = cli(
        "tasks",
        "list",
        env={
            "TICKWORK_SERVER": address,
            "TICKWORK_TLS_CA_FILE": str(pki.ca),
            "TICKWORK_TLS_CLIENT_CERT_FILE": str(pki.client_cert),
            "TICKWORK_TLS_CLIENT_KEY_FILE": str(pki.client_key),
        },
    )
    assert env_ok.returncode == 0, env_ok.stderr
    for refused in (
        cli("--server", address, "tasks", "list"),  # plaintext
        cli("--server", address, "--tls-ca", str(pki.ca), "tasks", "list"),  # no client cert
        cli(
            "--server",
            address,
            "--tls-ca",
            str(pki.ca),
            "--tls-cert",
            str(pki.stranger_cert),
            "--tls-key",
            str(pki.stranger_key),
            "tasks",
            "list",
        ),  # a client certificate from another CA
    ):
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"error: cannot reach tickwork at {address}")
    health = cli("--server", address, *files, "--tls-key", str(pki.client_key), "health")
    assert health.returncode == 0 and health.stdout.strip() == "SERVING"


def test_dedicated_worker_with_a_client_certificate(tmp_path: Path, pki: Pki) -> None:
    tokens = role_tokens()
    env = {
        **mtls_env(pki),
        "WORKER_IS_ENABLED": "false",
        "TICKWORK_TOKENS_FILE": str(tokens_file(tmp_path / "tokens", tokens)),
    }
    api = Server(tmp_path, env=env, name="api")
    workers: list[Proc] = []
    try:
        tls = client_tls(pki)
        wait_for(
            lambda: "tickwork listening" in api.output(), timeout_s=30, what="the api to start"
        )
        worker_env = {
            "TICKWORK_TOKEN": tokens["worker"],
            "TICKWORK_TLS_CA_FILE": str(pki.ca),
        }
        # Without a client certificate the handshake fails and the worker keeps retrying.
        workers.append(WorkerProc(tmp_path, api.address, env=worker_env, name="no-cert"))
        wait_for(
            lambda: "reconnecting" in workers[0].output(),
            timeout_s=20,
            what="the certificate-less worker to be refused",
        )
        workers[0].stop()
        worker_env["TICKWORK_TLS_CLIENT_CERT_FILE"] = str(pki.client_cert)
        worker_env["TICKWORK_TLS_CLIENT_KEY_FILE"] = str(pki.client_key)
        workers.append(WorkerProc(tmp_path, api.address, env=worker_env, name="worker"))
        with Client(api.address, tls=tls, token=tokens["admin"]) as tw:
            tw.create_task("remote", "shell", {"argv": ["echo", "mtls worker"]})
            [run] = tw.run("remote")
            job = tw.wait(run.job_id, timeout=30)
        assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job
        assert "mtls worker" in job.output_tail
    finally:
        for proc in workers:
            proc.stop()
        api.stop()


def serve_on_all_addresses(tmp_path: Path, name: str, *args: str, **env: str) -> tuple[Proc, int]:
    port = free_port()
    full = base_env(
        DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'open.db'}",
        TICKWORK_LISTEN=f"0.0.0.0:{port}",
        **env,
    )
    argv = [sys.executable, "-m", "tickwork.cli", "serve", *args]
    return Proc(argv, full, tmp_path / f"{name}.log"), port


def test_non_loopback_without_tokens_or_tls_is_refused_unless_insecure(tmp_path: Path) -> None:
    refused, _ = serve_on_all_addresses(tmp_path, "refused")
    assert refused.popen.wait(30) == 2
    out = refused.output()
    assert "refusing to serve on 0.0.0.0:" in out and "--insecure" in out
    refused.stop()

    insecure, port = serve_on_all_addresses(
        tmp_path, "insecure", "--insecure", WORKER_IS_ENABLED="false"
    )
    try:
        wait_for(lambda: "tickwork serving on" in insecure.output(), timeout_s=30, what="serve")
        with Client(f"127.0.0.1:{port}", tls=False) as tw:
            assert tw.list_tasks() is not None
        out = insecure.output()
        assert "WARNING: --insecure" in out and "INSECURE: serving on 0.0.0.0" in out
    finally:
        insecure.stop()

    tokens = role_tokens()
    with_tokens, port = serve_on_all_addresses(
        tmp_path,
        "tokens",
        WORKER_IS_ENABLED="false",
        TICKWORK_TOKENS_FILE=str(tokens_file(tmp_path / "tokens", tokens)),
    )
    try:
        wait_for(lambda: "tickwork serving on" in with_tokens.output(), timeout_s=30, what="serve")
        assert "INSECURE" not in with_tokens.output()
    finally:
        with_tokens.stop()
