"""Commands plug into the ``tickwork`` command line through the entry point group
``tickwork.commands``: the services' own (serve, db, worker) as installed, another package's,
and what happens when one is missing or fails to load."""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import subprocess
import sys
from typing import Any, TextIO

import pytest

from tests.harness import REPO, base_env
from tickwork.cli import GROUP, main


def add_hello(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """A third party's plugin: ``tickwork hello NAME``."""
    p = sub.add_parser("hello", parents=[net], help="say hello")
    p.add_argument("name")
    p.set_defaults(func=_hello)


def _hello(args: argparse.Namespace, out: TextIO) -> int:
    print(f"hello {args.name} at {args.server}", file=out)
    return 0


def _installed(monkeypatch: pytest.MonkeyPatch, *points: tuple[str, str]) -> None:
    """Make these entry points the group's only ones, as if these were installed."""
    found = [importlib.metadata.EntryPoint(name, value, GROUP) for name, value in points]

    def entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        assert group == GROUP
        return found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_the_services_commands_are_installed_entry_points() -> None:
    points = {p.name: p.value for p in importlib.metadata.entry_points(group=GROUP)}
    assert points == {
        "serve": "scheduler_svc._cli:add_serve",
        "db": "scheduler_svc._cli:add_db",
        "worker": "worker_svc._cli:add_worker",
    }


def test_help_lists_the_plugins_commands_without_importing_a_service() -> None:
    code = (
        "import sys\nfrom tickwork.cli import build_parser\n"
        "text = build_parser().format_help()\n"
        "assert all(c in text for c in ('serve', 'worker', 'db')), text\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scheduler_svc.', 'worker_svc.'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=base_env()
    )
    assert result.returncode == 0, result.stderr
    # Only the plugins' own modules (and their packages' indexes) load: no server, no store.
    loaded = ast.literal_eval(result.stdout)
    assert "scheduler_svc.server" not in loaded and "scheduler_svc.store" not in loaded, loaded
    assert "scheduler_svc._cli" in loaded and "worker_svc._cli" in loaded, loaded


def test_a_command_that_is_not_installed_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _installed(monkeypatch)
    assert main(["serve", "--listen", "127.0.0.1:0"]) == 2
    assert capsys.readouterr().err == (
        "error: `tickwork serve` needs the scheduler service (scheduler_svc), not installed: "
        "no entry point of group tickwork.commands provides it\n"
    )
    assert main(["--help"]) == 0
    help_text = capsys.readouterr().out
    for command in ("serve", "worker", "db"):
        assert f"{command}  " in help_text and "(not installed)" in help_text
    assert main(["cron", "0 2 * * *", "--count", "1", "--after", "2026-01-01T00:00Z"]) == 0
    assert capsys.readouterr().out == "At 02:00 AM\n2026-01-01T02:00:00+00:00\n"


def test_a_plugin_that_fails_to_load_is_named_and_the_rest_works(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _installed(
        monkeypatch,
        ("worker", "tickwork_no_such_module:add_worker"),
        ("hello", f"{__name__}:add_hello"),
    )
    assert main(["worker", "--server", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "error: `tickwork worker` needs the worker service (worker_svc), not installed: its "
        "entry point tickwork_no_such_module:add_worker failed to load: ModuleNotFoundError("
    ), err
    assert "Traceback" not in err
    assert main(["hello", "you", "--server", "127.0.0.1:9"]) == 0
    assert capsys.readouterr().out == "hello you at 127.0.0.1:9\n"


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "usage: tickwork" in err and "invalid choice: 'nonesuch'" in err, err
    assert main(["cron", "0 2 * * *", "--bogus"]) == 2
    assert "error: unrecognized arguments: --bogus" in capsys.readouterr().err
