"""`tickwork serve` refuses settings it cannot honour with one line and a non-zero exit:
a port outside 0..65535, a database driver it does not support, a DATABASE_URL whose port
is not a number from 1 to 65535 or that names no SQLite file, a database it cannot open,
a duration out of range, unusable SMTP settings, bad settings of its embedded worker, an
unknown log format, a port in use, a --config file it cannot read or parse.
The line is on stderr; all but the database's come before the database is touched.
No traceback, unless TICKWORK_LOG_LEVEL=DEBUG asks for it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.databases import PG_ADMIN
from tests.harness import REPO, Server, base_env, free_port, wait_for


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = base_env(DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tickwork.db'}")
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "serve", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=60,
    )


def serve_module(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m scheduler_svc --listen 127.0.0.1:0`` with ``env`` over the test's."""
    full = base_env(DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tickwork.db'}")
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "scheduler_svc", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=60,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line of an error on stderr (nothing on stdout, no traceback)."""
    output = result.stderr.strip()
    assert result.stdout == "", result
    assert "Traceback" not in output, output
    assert len(output.splitlines()) == 1, output
    return output


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "\u0665\u0660\u0660\u0665\u0661", "x"])
def test_a_port_outside_the_range_is_refused(tmp_path: Path, port: str) -> None:
    for result in (
        serve(tmp_path, "--listen", f"127.0.0.1:{port}"),
        serve(tmp_path, TICKWORK_LISTEN=f"127.0.0.1:{port}"),
        serve(tmp_path, "--listen", "127.0.0.1:0", TICKWORK_METRICS_LISTEN=f"127.0.0.1:{port}"),
    ):
        assert result.returncode == 2, result
        line = one_line(result)
        assert line.startswith("error: TICKWORK_") and "LISTEN" in line, line
        assert "port must be a number from 1 to 65535" in line, line


@pytest.mark.parametrize("url", ["mysql://u@127.0.0.1/db", "postgresql://u@127.0.0.1/db", "x"])
def test_an_unsupported_database_url_is_refused(tmp_path: Path, url: str) -> None:
    result = serve(tmp_path, "--listen", "127.0.0.1:0", DATABASE_URL=url)
    assert result.returncode == 2, result
    assert one_line(result).startswith("error: DATABASE_URL: "), result


def test_a_database_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    url = PG_ADMIN.replace("postgresql://", "postgresql+asyncpg://").rsplit("/", 1)[0]
    url += "/tickwork_no_such_database"
    result = serve(tmp_path, "--listen", "127.0.0.1:0", DATABASE_URL=url)
    assert result.returncode == 1, result
    line = one_line(result)
    assert line.startswith("error: cannot reach the database at postgresql+asyncpg://"), line
    assert 'database "tickwork_no_such_database" does not exist' in line, line
    debug = serve(tmp_path, "--listen", "127.0.0.1:0", DATABASE_URL=url, TICKWORK_LOG_LEVEL="DEBUG")
    assert debug.returncode == 1
    assert "Traceback" in debug.stdout + debug.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://127.0.0.1:notaport/test",
        "postgresql+asyncpg://h:99999/test",
        "postgresql+asyncpg://h:0/test",
        "postgresql+asyncpg://u:se/cret@[::1]:x/test",
        "postgresql+asyncpg://u:pass@word:secret@h:5432/test",  # the "@" is not encoded
    ],
)
def test_a_database_url_with_a_bad_port_is_refused(tmp_path: Path, url: str) -> None:
    for result in (
        serve(tmp_path, "--listen", "127.0.0.1:0", DATABASE_URL=url),
        serve_module(tmp_path, DATABASE_URL=url),
    ):
        assert result.returncode == 2, result
        line = one_line(result)
        assert line == "error: DATABASE_URL: the port (HOST:PORT) must be a number from 1 to 65535"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///",
        "sqlite:///:memory:",
        "sqlite+aiosqlite:///file::memory:?uri=true",
        "sqlite+aiosqlite:///file:x.db?mode=memory&uri=true",
    ],
)
def test_a_sqlite_url_without_a_file_is_refused(tmp_path: Path, url: str) -> None:
    for result in (
        serve(tmp_path, "--listen", "127.0.0.1:0", DATABASE_URL=url),
        serve_module(tmp_path, DATABASE_URL=url),
    ):
        assert result.returncode == 2, result
        line = one_line(result)
        assert line.startswith("error: DATABASE_URL: SQLite needs a database file"), line
        assert not list(tmp_path.iterdir()), "nothing is created"


def refused_up_front(result: subprocess.CompletedProcess[str], tmp_path: Path) -> str:
    """Exit 2 with one line on stderr, and no database created: the refusal came first."""
    assert result.returncode == 2, result
    line = one_line(result)
    assert not (tmp_path / "tickwork.db").exists(), "refused before touching the database"
    return line


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TICKWORK_SCHEDULER_LEASE_TTL_SECONDS": "0"}, "TICKWORK_SCHEDULER_LEASE_TTL_SECONDS: "),
        ({"TICKWORK_SCHEDULER_LEASE_TTL_SECONDS": "-1"}, "TICKWORK_SCHEDULER_LEASE_TTL_SECONDS: "),
        ({"TICKWORK_LEASE_TTL_SECONDS": "nan"}, "TICKWORK_LEASE_TTL_SECONDS: "),
        ({"SCHEDULER_POLL_INTERVAL_SECONDS": "inf"}, "SCHEDULER_POLL_INTERVAL_SECONDS: "),
        ({"SMTP_TIMEOUT_SECONDS": "0"}, "SMTP_TIMEOUT_SECONDS: must be > 0"),
        ({"SMTP_TIMEOUT_SECONDS": "-5"}, "SMTP_TIMEOUT_SECONDS: must be > 0"),
        ({"SMTP_PORT": "0"}, "SMTP_PORT: "),
        (
            {"SMTP_HOST": "mail", "SMTP_TO": "a@b", "SMTP_STARTTLS": "true", "SMTP_TLS": "true"},
            "SMTP_STARTTLS, SMTP_TLS: choose one",
        ),
        ({"SMTP_HOST": "mail"}, "SMTP_HOST, SMTP_TO: "),
        ({"SMTP_TO": "ops@example.com"}, "SMTP_TO, SMTP_HOST: "),
    ],
)
def test_a_setting_out_of_range_is_refused_up_front(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    line = refused_up_front(serve(tmp_path, "--listen", "127.0.0.1:0", **env), tmp_path)
    assert line.startswith(f"error: {expected}"), line


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WORKER_SHUTDOWN_GRACE_SECONDS": "-1"}, "WORKER_SHUTDOWN_GRACE_SECONDS: must be >= 0"),
        ({"WORKER_ABORT_GRACE_SECONDS": "abc"}, "WORKER_ABORT_GRACE_SECONDS: expected a number"),
        ({"WORKER_ABORT_GRACE_SECONDS": "nan"}, "WORKER_ABORT_GRACE_SECONDS: expected a number"),
        ({"WORKER_HANDLERS": "shel"}, "WORKER_HANDLERS: unknown handler 'shel'; known handlers: "),
        ({"WORKER_HANDLERS": "shell,bogus"}, "WORKER_HANDLERS: unknown handler 'bogus'"),
    ],
)
def test_the_embedded_workers_settings_are_checked_up_front(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    for result in (
        serve(tmp_path, "--listen", "127.0.0.1:0", **env),
        serve_module(tmp_path, **env),
    ):
        line = refused_up_front(result, tmp_path)
        assert line.startswith(f"error: {expected}"), line
        if "WORKER_HANDLERS" in line:
            assert "python, shell" in line, line


def test_a_standalone_servers_worker_settings_are_not_its_business(tmp_path: Path) -> None:
    """WORKER_IS_ENABLED=false: the service does not run a worker, so it does not read them."""
    result = serve(
        tmp_path,
        "--listen",
        "127.0.0.1:0",
        WORKER_IS_ENABLED="false",
        WORKER_HANDLERS="nonesuch",
        DATABASE_URL="mysql://x",  # stops it after the settings are read
    )
    assert "DATABASE_URL" in one_line(result)


@pytest.mark.parametrize("value", ["yaml", "JSONL"])
def test_an_unknown_log_format_is_refused(tmp_path: Path, value: str) -> None:
    line = refused_up_front(
        serve(tmp_path, "--listen", "127.0.0.1:0", TICKWORK_LOG_FORMAT=value), tmp_path
    )
    assert line == f"error: TICKWORK_LOG_FORMAT: expected one of text, json, got {value.lower()!r}"


@pytest.mark.parametrize("variable", ["TICKWORK_LISTEN", "TICKWORK_METRICS_LISTEN"])
def test_a_port_in_use_is_refused_in_one_line(tmp_path: Path, variable: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        env = {"TICKWORK_LISTEN": "127.0.0.1:0", variable: address}
        result = serve(tmp_path, **env)
    line = refused_up_front(result, tmp_path)  # no "E... add_port.cc" line of the gRPC core
    assert line.startswith(f"error: {variable}"), line
    assert line.endswith(f": cannot listen on {address}: Address already in use"), line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, ": cannot read: No such file or directory"),
        ("[[tasks]\nname = ", ": invalid TOML: "),
        ('[[tasks]]\nname = "t"\n', ": tasks[0].handler: required"),
    ],
)
def test_a_config_file_is_read_and_checked_up_front(
    tmp_path: Path, text: str | None, expected: str
) -> None:
    config = tmp_path / "tickwork.toml"
    if text is not None:
        config.write_text(text)
    line = refused_up_front(
        serve(tmp_path, "--listen", "127.0.0.1:0", "--config", str(config)), tmp_path
    )
    assert line.startswith(f"error: {config}{expected}"), line


def test_no_socket_directory_is_left_behind_when_the_config_is_refused(tmp_path: Path) -> None:
    """A config the server refuses (an unknown handler, checked only when applied) stops the
    service after it started: its /tmp/tickwork-*/grpc.sock directory goes with it."""
    config = tmp_path / "tickwork.toml"
    config.write_text('[[tasks]]\nname = "t"\nhandler = "no-such-handler"\n')
    # A short TMPDIR of its own (a unix socket path has at most 107 bytes).
    temp = Path(tempfile.mkdtemp(prefix="tw-"))
    try:
        result = serve(
            tmp_path, "--listen", "127.0.0.1:0", "--config", str(config), TMPDIR=str(temp)
        )
        assert result.returncode == 2, result
        assert "tickwork serving on" in result.stdout, result
        assert "Traceback" not in result.stderr, result.stderr
        assert "no-such-handler" in result.stderr, result.stderr
        assert list(temp.iterdir()) == []
    finally:
        shutil.rmtree(temp)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serving_on_shows_the_address_listened_on_and_json_logs_stay_json(
    tmp_path: Path, log_format: str
) -> None:
    port = free_port()
    server = Server(
        tmp_path,
        port=port,
        env={
            "TICKWORK_LISTEN": f"0.0.0.0:{port}",
            "TICKWORK_INSECURE": "true",
            "TICKWORK_LOG_FORMAT": log_format,
            "WORKER_IS_ENABLED": "false",
        },
    )
    try:
        server.wait_healthy()
        wait_for(lambda: "tickwork serving on" in server.output(), what="the serving line")
    finally:
        assert server.stop() == 0
    lines = server.output().splitlines()
    if log_format == "text":
        assert f"tickwork serving on 0.0.0.0:{port}" in lines, lines
        assert any(line.startswith("WARNING: --insecure: ") for line in lines), lines
        return
    records = [json.loads(line) for line in lines]  # every line: stdout and stderr are one log
    messages = [r["message"] for r in records]
    assert f"tickwork serving on 0.0.0.0:{port}" in messages, messages
    [serving] = [r for r in records if r["message"].startswith("tickwork serving on")]
    assert serving["address"] == f"0.0.0.0:{port}"
    assert any(r["level"] == "WARNING" and "--insecure" in r["message"] for r in records)
