"""The ``tickwork`` command line without a server: ``cron`` previews, argument errors, and
the messages for an unreachable server or a bad config file."""

from __future__ import annotations

import importlib.metadata
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tickwork.cli import for_terminal, main

REPO = Path(__file__).resolve().parent.parent
GAP_NOTE = (
    "moved: the wall time does not exist on this day (DST gap); "
    "fires at the first instant after the gap"
)
FOLD_NOTE = (
    "single: the wall time occurs twice on this day (DST fall back); fires in the first pass only"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tickwork.cli ARGS`` from the repository root (bounded wait)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    paths = [str(REPO / "client"), str(REPO), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
        check=False,
    )


# -- cron ---------------------------------------------------------------------------------
#
# Europe/Berlin 2026: clocks go 02:00 CET -> 03:00 CEST on Sun 29 March (02:00-02:59 never
#   happens) and 03:00 CEST -> 02:00 CET on Sun 25 October (02:00-02:59 happens twice).
# America/New_York 2026: 02:00 EST -> 03:00 EDT on Sun 8 March; 02:00 EDT -> 01:00 EST on
#   Sun 1 November (01:00-01:59 happens twice).


def test_cron_describes_and_lists_fire_times_with_offsets() -> None:
    result = cli("cron", "0 2 * * *", "--tz", "Europe/Berlin", "--after", "2026-01-01T00:00:00Z")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "At 02:00 AM",
        "2026-01-01T02:00:00+01:00",
        "2026-01-02T02:00:00+01:00",
        "2026-01-03T02:00:00+01:00",
        "2026-01-04T02:00:00+01:00",
        "2026-01-05T02:00:00+01:00",
    ]
    assert result.stderr == ""


def test_cron_spring_forward_moves_a_fixed_time_past_the_gap() -> None:
    result = cli(
        "cron", "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2026-03-27T12:00:00+01:00",
        "--count", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "At 02:30 AM",
        "2026-03-28T02:30:00+01:00",
        f"2026-03-29T03:00:00+02:00  {GAP_NOTE}",
        "2026-03-30T02:30:00+02:00",
    ]


def test_cron_fall_back_fixed_time_fires_in_the_first_pass_only() -> None:
    result = cli(
        "cron", "30 1 * * *", "--tz", "America/New_York", "--after", "2026-10-31T12:00:00-04:00",
        "--count", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        f"2026-11-01T01:30:00-04:00  {FOLD_NOTE}",
        "2026-11-02T01:30:00-05:00",
    ]


def test_cron_fall_back_wildcard_fires_in_both_passes() -> None:
    result = cli(
        "cron", "0 * * * *", "--tz", "America/New_York", "--after", "2026-11-01T00:30:00-04:00",
        "--count", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]


def test_cron_six_fields_seconds_first_and_strictly_after() -> None:
    result = cli("cron", "*/10 * * * * *", "--after", "2026-05-01T12:00:00Z", "--count", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Every 10 seconds"
    # 12:00:00 itself matches but is not strictly after the start.
    assert lines[1:] == ["2026-05-01T12:00:10+00:00", "2026-05-01T12:00:20+00:00"]


def test_cron_after_without_offset_is_read_in_the_zone() -> None:
    result = cli(
        "cron", "0 9 * * *", "--tz", "Asia/Tokyo", "--after", "2026-06-01T08:00", "--count", "1"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["2026-06-01T09:00:00+09:00"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["0 0 30 2 *"], "can never fire"),
        (["61 * * * *"], "minute"),
        (["* * * *"], "expected 5 fields"),
        (["0 2 * * *", "--tz", "Mars/Olympus_Mons"], "timezone"),
        (["0 2 * * *", "--after", "tomorrow"], "--after"),
    ],
)
def test_cron_bad_input_exits_2_with_the_message(args: list[str], needle: str) -> None:
    result = cli("cron", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: INVALID_ARGUMENT: ")
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


# -- argument errors (in process) ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["tasks"],
        ["tasks", "run"],
        ["jobs", "get", "twelve"],
        ["jobs", "get", "0"],
        ["jobs", "list", "--limit", "-3"],
        ["tasks", "run", "x", "--wait", "--timeout", "soon"],
        ["apply"],
        ["cron", "0 2 * * *", "--count", "0"],
        ["health", "--timeout", "0"],
        ["health", "--timeout", "inf"],
        ["cron", "0 2 * * *", "--count", "1001"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: tickwork" in err
    assert "Traceback" not in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("serve", "worker", "apply", "tasks", "jobs", "schedules", "cron"):
        assert command in out


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"tickwork {importlib.metadata.version('tickwork')}\n"


def test_bad_status_name_is_a_validation_error(capsys: pytest.CaptureFixture[str]) -> None:
    # Rejected before any call: the server address does not matter.
    assert main(["--server", "127.0.0.1:1", "jobs", "list", "--status", "DONE"]) == 2
    assert "status: expected one of QUEUED, RUNNING" in capsys.readouterr().err


def test_timeout_needs_wait(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--server", "127.0.0.1:1", "tasks", "run", "x", "--timeout", "5"]) == 2
    assert capsys.readouterr().err == "error: INVALID_ARGUMENT: --timeout: only with --wait\n"


def test_bad_config_file_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[tasks]]\nname = "a"\nhandler = "shell"\n[[tasks]]\nname = "b"\n')
    assert main(["--server", "127.0.0.1:1", "apply", "-f", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: tasks[1].handler: required\n"


def test_a_config_file_that_is_not_utf8_exits_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('[[tasks]]\nname = "caf\u00e9"\nhandler = "shell"\n'.encode("latin-1"))
    assert main(["--server", "127.0.0.1:1", "apply", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: not UTF-8 text (byte 0xe9 at offset 21)\n", err


# -- unreachable server -------------------------------------------------------------------


def test_unreachable_server_is_one_line_not_a_traceback() -> None:
    result = cli("--server", "127.0.0.1:1", "tasks", "list")
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach tickwork at 127.0.0.1:1")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "list"],
        ["jobs", "get", "1"],
        ["schedules", "list"],
        ["tasks", "run", "x", "--wait"],
        ["jobs", "watch", "3"],
    ],
)
def test_server_from_environment(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TICKWORK_SERVER", "127.0.0.1:1")
    assert main(argv) == 1
    assert capsys.readouterr().err.startswith("error: cannot reach tickwork at 127.0.0.1:1 ")


def test_server_option_after_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list", "--server", "127.0.0.1:1"]) == 1
    assert "cannot reach tickwork at 127.0.0.1:1 " in capsys.readouterr().err


class _Terminal(io.StringIO):
    """A captured stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_control_characters_reach_a_terminal_as_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text from the server (here an error echoing a zone name) cannot drive the terminal:
    ESC, CR and the C1 controls print as \\xNN; tabs, newlines and non-ASCII letters stay."""
    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    assert main(["cron", "0 2 * * *", "--tz", "Evil\x1b]0;owned\x07\x1b[2J"]) == 2
    printed = stderr.getvalue()
    assert "\x1b" not in printed and "\x07" not in printed
    assert "Evil\\x1b]0;owned\\x07\\x1b[2J" in printed
    out = _Terminal()
    print("a\tb\r\u009b é \u202eevil\u202c \u200b", file=for_terminal(out))
    assert out.getvalue() == "a\tb\\x0d\\x9b é \\u202eevil\\u202c \\u200b\n"


def test_text_log_lines_escape_control_and_format_characters() -> None:
    """A job error or task name written to the service's text log can neither drive the
    terminal that tails it nor forge a log line; a traceback keeps its own lines."""
    import logging

    from tickwork.logs import KeyValueFormatter

    record = logging.makeLogRecord(
        {
            "msg": "job 7 ended FAILED: %s",
            "args": ("exit 3\x1b[2J\u202e\n2026-01-01 INFO forged",),
            "levelname": "INFO",
        }
    )
    record.task_name = "t\x07\nx"
    line = KeyValueFormatter("%(message)s").format(record)
    assert line == (
        "job 7 ended FAILED: exit 3\\x1b[2J\\u202e\\n2026-01-01 INFO forged task_name=t\\x07\\nx"
    )
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = logging.makeLogRecord({"msg": "failed", "exc_info": sys.exc_info()})
    text = KeyValueFormatter("%(message)s").format(failed)
    assert text.startswith("failed\nTraceback") and text.endswith("ValueError: boom")


def test_piped_output_is_escaped_too() -> None:
    """Piped output reaches a terminal often enough (less -R, tee, cat of a log)."""
    piped = io.StringIO()
    print("a\tb\x1b[2J\r\nc", file=for_terminal(piped))
    assert piped.getvalue() == "a\tb\\x1b[2J\\x0d\nc\n"
    assert for_terminal(for_terminal(piped)).write("\x07") == len("\\x07")


def test_escape_controls_agrees_with_its_table_on_every_code_point() -> None:
    """The fast path (text with nothing to escape is returned as it is) misses nothing: each
    code point of the planes that hold controls and format characters, alone and between
    letters, comes out as the translation table says."""
    from tickwork._text import _escapes, escape_controls

    table = _escapes()
    for code in [*range(0x20000), *range(0xE0000, 0xE1000)]:
        char = chr(code)
        assert escape_controls(char) == char.translate(table), hex(code)
        assert escape_controls(f"a{char}b") == f"a{char}b".translate(table), hex(code)


def test_log_time_stamps_match_the_standard_formatter_across_seconds() -> None:
    """The time stamp formatted once a second is the standard one for every record, as the
    clock crosses a second, goes back (an NTP step) and jumps."""
    import logging

    from tickwork.logs import JsonFormatter, KeyValueFormatter

    standard = logging.Formatter()
    ours = [KeyValueFormatter("%(asctime)s %(message)s"), JsonFormatter()]
    for created in [
        1_764_520_000.001,
        1_764_520_000.999,
        1_764_520_001.0,
        1_764_519_999.5,
        1_764_520_001.25,
        1_800_000_000.75,
    ]:
        record = logging.makeLogRecord(
            {"msg": "m", "created": created, "msecs": (created - int(created)) * 1000}
        )
        for formatter in ours:
            assert formatter.formatTime(record) == standard.formatTime(record), created


@pytest.mark.parametrize(
    ("given", "dialed"),
    [
        ("127.0.0.9", "127.0.0.9:50051"),
        ("[::1]", "[::1]:50051"),
        ("127.0.0.9:7", "127.0.0.9:7"),
        ("[::1]:7", "[::1]:7"),
        ("unix:/tmp/tickwork.sock", "unix:/tmp/tickwork.sock"),
        ("dns:///localhost:7", "dns:///localhost:7"),
    ],
)
def test_a_server_without_a_port_is_dialed_on_50051_not_443(given: str, dialed: str) -> None:
    """``--server localhost`` means tickwork's port, as the service listens on it by
    default; gRPC alone would dial 443."""
    result = cli("--server", given, "tasks", "list")
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach tickwork at {dialed} "), result.stderr


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ("", "server: empty"),
        ("  ", "server: empty"),
        ("127.0.0.1:70000", "port must be a number from 1 to 65535, got '127.0.0.1:70000'"),
        ("127.0.0.1:0", "port must be a number from 1 to 65535"),
        ("host:http", "port must be a number from 1 to 65535"),
        ("[::1]:65536", "port must be a number from 1 to 65535"),
    ],
)
def test_a_server_address_that_cannot_be_dialed_is_a_usage_error(given: str, needle: str) -> None:
    """An empty ``--server`` is not the default, and a port outside 1..65535 is not taken
    modulo 65536: both exit 2 naming the option, before anything is dialed."""
    result = cli("--server", given, "tasks", "list")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: INVALID_ARGUMENT: server: "), result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_the_sdk_refuses_a_port_outside_the_range() -> None:
    from tickwork import Client, InvalidArgument

    with pytest.raises(InvalidArgument, match="server: port must be"):
        Client("127.0.0.1:70000")


@pytest.mark.parametrize("command", [["tasks", "get"], ["schedules", "fires"]])
def test_a_name_that_is_not_utf8_is_a_usage_error_not_a_traceback(command: list[str]) -> None:
    """Command-line bytes that do not decode reach Python as lone surrogates, which no
    protobuf string can carry: exit 2 naming the argument, before anything is dialed."""
    result = subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "--server", "127.0.0.1:1", *command, b"\xff"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO / 'client'}{os.pathsep}{REPO}"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    what = command[0].rstrip("s")
    assert result.stderr.startswith(f"error: INVALID_ARGUMENT: {what}: name is not valid UTF-8")
    assert "Traceback" not in result.stderr
