"""The ``tickwork`` parser and entry point: global options, the command groups, plugin
commands, and how errors are shown."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys

from tickwork import _requests as rq
from tickwork.apply import ConfigError
from tickwork.cli import (
    _apply,
    _console,
    _cron,
    _health,
    _jobs,
    _notifiers,
    _schedules,
    _tasks,
    _token,
)
from tickwork.cli._common import EXIT_FAILED, EXIT_USAGE, Command, connection_options
from tickwork.cli._output import for_terminal
from tickwork.cli._plugins import add_plugin_commands
from tickwork.errors import DatabaseUnavailable, InvalidArgument, TickworkError, Unavailable

#: The command groups of this package, in the order ``--help`` lists them after the plugins'.
_GROUPS = (_health, _console, _token, _apply, _tasks, _jobs, _schedules, _notifiers, _cron)


def _installed_version() -> str:
    """The installed distribution's version (pyproject.toml's), or "unknown" when tickwork
    runs from a source tree that was never installed."""
    try:
        return importlib.metadata.version("tickwork")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser (exposed for documentation and tests)."""
    server_help = f"tickwork API address (default: ${rq.SERVER_ENV} or {rq.DEFAULT_SERVER})"
    parser = argparse.ArgumentParser(
        prog="tickwork",
        description="tickwork: run tasks on cron and interval schedules, and on demand.",
    )
    parser.add_argument("--server", metavar="HOST:PORT", default=None, help=server_help)
    parser.add_argument("--version", action="version", version=f"tickwork {_installed_version()}")
    connection_options(parser, None)
    # Lets every networked subcommand take --server (and the others) after its name too.
    net = argparse.ArgumentParser(add_help=False)
    net.add_argument("--server", metavar="HOST:PORT", default=argparse.SUPPRESS, help=server_help)
    connection_options(net, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_plugin_commands(sub, net)
    for group in _GROUPS:
        group.add_parsers(sub, net)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``tickwork`` command line.

    Args:
        argv (list[str] | None): the arguments after the program name; default ``sys.argv``.

    Returns:
        int: the exit status (0 ok, 1 failed, 2 usage or validation error).
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "takes_any_arguments", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")  # as parse_args says it
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        args.server = rq.resolve_server(args.server)
    except InvalidArgument as err:
        print(f"error: {err}", file=for_terminal(sys.stderr))
        return EXIT_USAGE
    command: Command = args.func
    try:
        return command(args, for_terminal(sys.stdout))
    except TickworkError as err:
        _print_error(err, args.server)
        return EXIT_USAGE if isinstance(err, InvalidArgument) else EXIT_FAILED
    except UnicodeEncodeError as err:  # undecodable argv bytes, kept as lone surrogates
        bad = err.object[err.start : err.end]
        print(f"error: an argument is not valid UTF-8 text ({bad!r})", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `tickwork jobs list | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


def _print_error(err: TickworkError, server: str) -> None:
    stderr = for_terminal(sys.stderr)
    if isinstance(err, DatabaseUnavailable):
        print(f"error: {err}", file=stderr)
    elif isinstance(err, Unavailable):
        print(f"error: cannot reach tickwork at {server} ({err})", file=stderr)
    elif isinstance(err, ConfigError):
        for line in str(err).splitlines():
            print(f"error: {line}", file=stderr)
    else:
        print(f"error: {err}", file=stderr)
