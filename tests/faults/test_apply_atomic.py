"""`tickwork apply -f` and `serve --config` are all or nothing, and say what they did.

Reproduces the fault "apply leaves half-applied state": a file whose later item only the
server refuses (an unknown handler, a priority of 5,000,000, an interval beyond ten years)
used to leave its earlier items created, a live schedule among them. Against a real
service (SQLite and PostgreSQL) and the real CLI processes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO, Proc, Server, base_env, free_port, wait_for
from tickwork import Client
from tickwork.apply import apply_config, load_config
from tickwork.errors import InvalidArgument

GOOD = """
[[tasks]]
name = "first"
handler = "shell"
params = { argv = ["true"] }

[[schedules]]
name = "live"
cron = "*/5 * * * * *"
tasks = ["first"]
"""

BAD_ITEMS = {
    "handler typo": ('[[tasks]]\nname = "second"\nhandler = "shel"\n', "tasks[1] (second).handler"),
    "priority": (
        '[[tasks]]\nname = "second"\nhandler = "shell"\ntask_priority = 5000000\n',
        "tasks[1] (second).task_priority",
    ),
    "interval": (
        '[[schedules]]\nname = "later"\ninterval_seconds = 400000000\ntasks = ["first"]\n',
        "schedules[1] (later).interval_seconds",
    ),
}


def cli(*args: str, address: str) -> subprocess.CompletedProcess[str]:
    """``python -m tickwork.cli ARGS --server ADDRESS`` (bounded wait)."""
    env = base_env(TICKWORK_SERVER=address)
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
        check=False,
    )


def stored(client: Client) -> tuple[list[str], list[str]]:
    """The names of every task (but the built-ins) and schedule stored."""
    tasks = [t.name for t in client.list_tasks() if not t.name.startswith("tickwork-")]
    schedules = [s.name for s in client.list_schedules() if not s.name.startswith("tickwork-")]
    return tasks, schedules


@pytest.mark.parametrize("bad", sorted(BAD_ITEMS))
def test_an_item_only_the_server_refuses_leaves_nothing_applied(
    api_server: Server, api_client: Client, tmp_path: Path, bad: str
) -> None:
    text, where = BAD_ITEMS[bad]
    path = tmp_path / "tickwork.toml"
    path.write_text(GOOD + text)
    result = cli("apply", "-f", str(path), address=api_server.address)
    assert result.returncode != 0, result
    assert where in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert stored(api_client) == ([], [])
    # The same through the SDK: the error names the item, nothing is stored.
    with pytest.raises(InvalidArgument, match=re.escape(where)):
        apply_config(api_client, load_config(path))
    assert stored(api_client) == ([], [])


def test_dry_run_prints_the_changes_and_writes_nothing(
    api_server: Server, api_client: Client, tmp_path: Path
) -> None:
    path = tmp_path / "tickwork.toml"
    path.write_text(GOOD)
    dry = cli("apply", "-f", str(path), "--dry-run", address=api_server.address)
    assert dry.returncode == 0, dry
    assert "task first: would be created" in dry.stdout, dry.stdout
    assert "schedule live: would be created" in dry.stdout
    assert "dry run, nothing written: 2 to create, 0 to update, 0 unchanged" in dry.stdout
    assert stored(api_client) == ([], [])

    run = cli("apply", "-f", str(path), address=api_server.address)
    assert run.returncode == 0, run
    assert run.stdout.splitlines()[0] == "task first: created", run.stdout
    assert "2 created, 0 updated, 0 unchanged" in run.stdout
    before = api_client.get_schedule("live")

    extra = '\n[[tasks]]\nname = "x"\nhandler = "shell"\nparams = { argv = ["true"] }\n'
    path.write_text(GOOD.replace("*/5 * * * * *", "0 0 * * * *") + extra)
    dry = cli("apply", "-f", str(path), "--dry-run", address=api_server.address)
    assert dry.returncode == 0, dry
    lines = dry.stdout.splitlines()
    assert "task first: unchanged" in lines
    assert "task x: would be created" in lines
    assert "schedule live: would be updated (cron_expression)" in lines, lines
    before_line = next(line for line in lines if "next fire times before" in line)
    after_line = next(line for line in lines if "next fire times after" in line)
    assert len(before_line.split(": ", 1)[1].split(", ")) == 3
    after_times = after_line.split(": ", 1)[1].split(", ")
    assert len(after_times) == 3 and all(t.endswith(":00:00Z") for t in after_times)
    # Nothing written: the schedule's timing and next run stand.
    after = api_client.get_schedule("live")
    assert after.cron_expression == "*/5 * * * * *"
    assert after.update_time == before.update_time
    assert "x" not in stored(api_client)[0]


def test_serve_config_is_all_or_nothing(tmp_path: Path) -> None:
    """`serve --config` applies through the same one transaction: a file the server refuses
    stops it with nothing stored."""
    db = tmp_path / "tickwork.db"
    env = {"WORKER_IS_ENABLED": "false"}
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD + BAD_ITEMS["priority"][0])
    full = base_env(DATABASE_URL=f"sqlite+aiosqlite:///{db}", **env)
    result = subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "serve", "--listen", "127.0.0.1:0", "--config",
         str(bad)],
        capture_output=True, text=True, env=full, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result
    assert "tasks[1] (second).task_priority" in result.stderr, result.stderr
    server = Server(tmp_path, env=env, database_url=f"sqlite+aiosqlite:///{db}")
    try:
        server.wait_healthy()
        with Client(server.address) as client:
            assert stored(client) == ([], [])  # not even bad.toml's first items
    finally:
        server.stop()


def test_serve_config_logs_what_it_applied(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    port = free_port()
    full = base_env(
        DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tickwork.db'}",
        TICKWORK_LISTEN=f"127.0.0.1:{port}",
        WORKER_IS_ENABLED="false",
    )
    proc = Proc(
        [sys.executable, "-m", "tickwork.cli", "serve", "--config", str(good)],
        full,
        tmp_path / "serve-config.log",
    )
    try:
        wait_for(lambda: "2 created, 0 updated, 0 unchanged" in proc.output(), timeout_s=30)
        assert "task first: created" in proc.output()
        assert "schedule live: created" in proc.output()
    finally:
        proc.stop()
