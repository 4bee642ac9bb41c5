"""The ``tickwork`` command line: run the service, apply config, and operate tasks, jobs and
schedules.

``main(argv)`` returns the exit status: 0 on success, 1 on a failed operation (including a
job that did not succeed under ``jobs watch``), 2 on a usage or validation error;
``tasks run --wait`` exits with the job's outcome (:data:`WAIT_EXIT_CODES`). Errors go to
stderr as ``error: <STATUS>: <details>``; an unreachable server reads ``error: cannot reach
tickwork at HOST:PORT``. No traceback is shown for either.

Control and format characters in what is printed (names, descriptions, errors, job output)
are shown as ``\\xNN`` / ``\\uNNNN`` escapes, so stored text cannot move the cursor, clear
the screen, retitle the window or reorder text with bidirectional overrides. This holds for
piped output too, which still reaches a terminal through ``less -R``, ``tee`` or a log file
read with ``cat``. Tab and newline are kept; text from the server that spans lines is shown
with its continuation lines indented, so it cannot pass for a line of the CLI's own.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO, cast
from zoneinfo import ZoneInfo

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from tickwork import _requests as rq
from tickwork._channel import TlsConfig
from tickwork._sync import Client
from tickwork._text import escape_controls
from tickwork.apply import ConfigError, apply_config, load_config
from tickwork.errors import InvalidArgument, JobTimeout, TickworkError, Unavailable, from_rpc_error
from tickwork.v1.common_pb2 import SkipReason, TaskRun, Trigger
from tickwork.v1.job_pb2 import Job, JobStatus
from tickwork.v1.schedule_pb2 import FireOutcome
from tickwork.v1.task_pb2 import Task, TaskAbort

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABORTED = 3
EXIT_CANCELLED = 4
EXIT_STILL_RUNNING = 5

#: ``tasks run --wait``: the exit status for each outcome of the (last attempt of the) job.
WAIT_EXIT_CODES = {
    JobStatus.JOB_STATUS_SUCCEEDED: EXIT_OK,
    JobStatus.JOB_STATUS_FAILED: EXIT_FAILED,
    JobStatus.JOB_STATUS_ABORTED: EXIT_ABORTED,
    JobStatus.JOB_STATUS_CANCELLED: EXIT_CANCELLED,
}

_SKIP_TEXT = {
    SkipReason.SKIP_REASON_ALREADY_QUEUED: "already queued",
    SkipReason.SKIP_REASON_ALREADY_RUNNING: "already running",
    SkipReason.SKIP_REASON_TASK_DISABLED: "task disabled",
}
# Same wording as the server's DescribeCron (scheduler_svc.servicers.schedules.DST_NOTES).
_DST_TEXT = {
    "MOVED_FROM_GAP": (
        "moved: the wall time does not exist on this day (DST gap); "
        "fires at the first instant after the gap"
    ),
    "FIRST_PASS_ONLY": (
        "single: the wall time occurs twice on this day (DST fall back); "
        "fires in the first pass only"
    ),
}

Command = Callable[[argparse.Namespace, TextIO], int]


# -- argument types -----------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"expected a positive 64-bit integer, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def _count(text: str) -> int:
    value = _positive_int(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"at most 1000, got {value}")
    return value


# -- parser -------------------------------------------------------------------------------


def _connection_options(parser: argparse.ArgumentParser, default: object) -> None:
    """--token and the TLS options (each also read from its environment variable)."""
    parser.add_argument(
        "--token",
        default=default,
        metavar="TOKEN",
        help="bearer token for a server with access control (default $TICKWORK_TOKEN)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        default=default if default is not None else False,
        help="connect with TLS, trusting the system's roots ($TICKWORK_TLS)",
    )
    for flag, env, what in (
        ("--tls-ca", "TICKWORK_TLS_CA_FILE", "CA certificate (PEM) that signed the server's"),
        ("--tls-cert", "TICKWORK_TLS_CLIENT_CERT_FILE", "client certificate (PEM), mutual TLS"),
        ("--tls-key", "TICKWORK_TLS_CLIENT_KEY_FILE", "client certificate's key (PEM)"),
    ):
        parser.add_argument(
            flag, default=default, metavar="FILE", help=f"{what}; implies --tls (${env})"
        )
    parser.add_argument(
        "--tls-server-name",
        default=default,
        metavar="NAME",
        help="name to verify in the server's certificate ($TICKWORK_TLS_SERVER_NAME)",
    )


def _tls(args: argparse.Namespace) -> TlsConfig | None:
    """TLS from the environment, overridden by the options given; None for plaintext."""
    from_env = TlsConfig.from_env()
    given = {
        field: value
        for field, value in (
            ("ca_file", args.tls_ca),
            ("cert_file", args.tls_cert),
            ("key_file", args.tls_key),
            ("server_name", args.tls_server_name),
        )
        if value
    }
    if not given and not args.tls:
        return from_env
    return dataclasses.replace(from_env or TlsConfig(), **given)


def _client(args: argparse.Namespace) -> Client:
    tls = _tls(args)
    return Client(args.server, token=args.token, tls=tls if tls is not None else False)


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
    _connection_options(parser, None)
    # Lets every networked subcommand take --server (and the others) after its name too.
    net = argparse.ArgumentParser(add_help=False)
    net.add_argument("--server", metavar="HOST:PORT", default=argparse.SUPPRESS, help=server_help)
    _connection_options(net, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "serve",
        help="run the scheduler service (API, queue, scheduler loop, embedded worker)",
        description="Run the scheduler service until SIGINT or SIGTERM.",
    )
    p.add_argument("--listen", metavar="HOST:PORT", help="address to listen on")
    p.add_argument("--config", metavar="FILE", help="TOML config to apply once started")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address even without access control or TLS "
        "(TICKWORK_INSECURE=true); anyone who reaches it can run commands",
    )
    p.add_argument(
        "--log-format", choices=("text", "json"), help="log lines (default $TICKWORK_LOG_FORMAT)"
    )
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser(
        "worker",
        parents=[net],
        help="run a dedicated worker",
        description="Run a worker that takes jobs from the scheduler service at --server.",
    )
    p.add_argument(
        "--log-format", choices=("text", "json"), help="log lines (default $TICKWORK_LOG_FORMAT)"
    )
    p.set_defaults(func=_cmd_worker)

    p = sub.add_parser(
        "health",
        parents=[net],
        help="check the service's gRPC health (for container health checks)",
        description="Ask the gRPC health service at --server; exit 0 when SERVING, 1 otherwise.",
    )
    p.add_argument("--timeout", type=_positive_seconds, default=3.0, metavar="S", help="default 3")
    p.set_defaults(func=_cmd_health)

    from tickwork.console.command import add_parser as add_console_parser

    add_console_parser(sub, [net])

    token = sub.add_parser("token", help="make access tokens")
    toksub = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    p = toksub.add_parser(
        "new",
        help="make a random token and its TICKWORK_TOKENS entry",
        description="Print a new random token (give it to the client as TICKWORK_TOKEN) and "
        "the entry for the server's TICKWORK_TOKENS or TICKWORK_TOKENS_FILE, which holds "
        "only its SHA-256. The token is not stored anywhere.",
    )
    p.add_argument("role", choices=("admin", "operator", "viewer", "worker"), metavar="ROLE")
    p.add_argument("--label", default="", help="a name shown in the server's logs")
    p.set_defaults(func=_cmd_token_new)

    db = sub.add_parser(
        "db",
        help="show or upgrade the database schema ($DATABASE_URL)",
        description="Operate the schema of the database at $DATABASE_URL (default "
        "sqlite+aiosqlite:///./tickwork.db), for operators who migrate explicitly; "
        "`tickwork serve` also upgrades on start.",
    )
    dsub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    p = dsub.add_parser(
        "upgrade",
        help="migrate the database to the newest schema this tickwork knows",
        description="Migrate the database to the newest schema revision this tickwork knows. "
        "Exit status 1 when the database is at a revision this tickwork does not know (a "
        "newer tickwork migrated it) or cannot be reached.",
    )
    p.set_defaults(func=_cmd_db_upgrade)
    p = dsub.add_parser(
        "current",
        help="show the database's schema revision",
        description="Print the database's schema revision and whether it is the newest this "
        "tickwork knows. Exit status 1 when the revision is unknown to this tickwork (a newer "
        "tickwork migrated it) or the database cannot be reached.",
    )
    p.set_defaults(func=_cmd_db_current)

    p = sub.add_parser(
        "apply",
        parents=[net],
        help="create or update tasks and schedules from a TOML file",
        description="Upsert the file's tasks and schedules by name (idempotent).",
    )
    p.add_argument("-f", "--file", metavar="FILE", required=True, help="TOML config file")
    p.set_defaults(func=_cmd_apply)

    tasks = sub.add_parser(
        "tasks", help="list, inspect, run, abort, enable, disable and delete tasks"
    )
    tsub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    p = tsub.add_parser("list", parents=[net], help="list tasks")
    p.set_defaults(func=_cmd_tasks_list)
    p = tsub.add_parser(
        "run",
        parents=[net],
        help="run a task now (manual lane)",
        description="Run a task now. With --wait, show the job's progress live (state, "
        "elapsed time, output as it arrives; a failed attempt's retry is followed; a "
        "service restart is waited out) and exit "
        "with its outcome: 0 SUCCEEDED, 1 FAILED, 3 ABORTED, 4 CANCELLED, 5 still running "
        "when --timeout ran out.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.add_argument("--wait", action="store_true", help="follow the job until it ends")
    p.add_argument(
        "--timeout", type=_seconds, metavar="S", help="with --wait: give up after S seconds"
    )
    p.set_defaults(func=_cmd_tasks_run)
    p = tsub.add_parser(
        "get",
        parents=[net],
        help="show every field of a task",
        description="Show every field of a task: params and retry policy as JSON, the "
        "whole disabled_reason when it was disabled after consecutive failures.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_cmd_tasks_get)
    p = tsub.add_parser(
        "abort",
        parents=[net],
        help="stop a task's running job, or cancel its queued one",
        description="Stop the task's job: a queued one is cancelled (CANCELLED), a running "
        "one is aborted (the worker stops its handler; shell: SIGTERM, then SIGKILL after "
        "WORKER_ABORT_GRACE_SECONDS) and ends ABORTED. Aborted jobs are not retried.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_cmd_tasks_abort)
    for action, enabled in (("enable", True), ("disable", False)):
        p = tsub.add_parser(action, parents=[net], help=f"{action} a task")
        p.add_argument("name", metavar="NAME", help="task name")
        p.set_defaults(func=_cmd_tasks_enable, enabled=enabled)
    p = tsub.add_parser(
        "delete",
        parents=[net],
        help="delete a task, its jobs and its place in schedules",
        description="Delete a task with all its jobs (their history too) and its place in "
        "schedules. Refused (FAILED_PRECONDITION) while it has a running job, or when it is "
        "the only task of a schedule: delete or change that schedule first.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_cmd_tasks_delete)

    jobs = sub.add_parser("jobs", help="list, inspect, watch and cancel jobs")
    jsub = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    p = jsub.add_parser("list", parents=[net], help="list jobs, newest first")
    p.add_argument("--task", metavar="NAME", help="only this task's jobs")
    p.add_argument(
        "--status",
        action="append",
        default=[],
        metavar="STATUS",
        help="only jobs in this state (QUEUED, RUNNING, SUCCEEDED, FAILED, ABORTED, "
        "CANCELLED); repeat or separate with commas",
    )
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="default 20")
    p.set_defaults(func=_cmd_jobs_list)
    p = jsub.add_parser("get", parents=[net], help="show every field of a job")
    p.add_argument("job_id", type=_positive_int, metavar="ID")
    p.set_defaults(func=_cmd_jobs_get)
    p = jsub.add_parser(
        "watch",
        parents=[net],
        help="print a job's state changes until it ends",
        description="Print one line per state change until the job ends. Exit status: 0 "
        "when it SUCCEEDED, 1 otherwise.",
    )
    p.add_argument("job_id", type=_positive_int, metavar="ID")
    p.set_defaults(func=_cmd_jobs_watch)
    p = jsub.add_parser("cancel", parents=[net], help="cancel a queued job")
    p.add_argument("job_id", type=_positive_int, metavar="ID")
    p.set_defaults(func=_cmd_jobs_cancel)

    schedules = sub.add_parser(
        "schedules", help="list, enable, disable and delete schedules; show their fires"
    )
    ssub = schedules.add_subparsers(dest="schedules_command", metavar="ACTION", required=True)
    p = ssub.add_parser("list", parents=[net], help="list schedules with their next run")
    p.set_defaults(func=_cmd_schedules_list)
    p = ssub.add_parser(
        "fires", parents=[net], help="what came of a schedule's fire times, newest first"
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="default 20")
    p.set_defaults(func=_cmd_schedules_fires)
    for action, enabled in (("enable", True), ("disable", False)):
        p = ssub.add_parser(
            action,
            parents=[net],
            help=f"{action} a schedule",
            description="Enable or disable a schedule. Its next run is computed from now: "
            "enabling never catches up the time it was disabled.",
        )
        p.add_argument("name", metavar="NAME", help="schedule name")
        p.set_defaults(func=_cmd_schedules_enable, enabled=enabled)
    p = ssub.add_parser(
        "delete",
        parents=[net],
        help="delete a schedule and its fire history (its tasks stay)",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.set_defaults(func=_cmd_schedules_delete)

    p = sub.add_parser(
        "cron",
        help="describe a cron expression and preview its fire times (offline)",
        description="Describe a cron expression and print its next fire times in ISO 8601 "
        "with the zone's offset, strictly after --after, each followed by its DST note if "
        "any. Works without a server.",
    )
    p.add_argument("expression", metavar="EXPR", help='e.g. "0 2 * * *" or "*/10 * * * * *"')
    p.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA time zone (default UTC)")
    p.add_argument(
        "--after",
        metavar="ISO8601",
        help="start instant (default now); without an offset it is read in --tz",
    )
    p.add_argument("--count", type=_count, default=5, metavar="N", help="default 5, max 1000")
    p.set_defaults(func=_cmd_cron)
    return parser


# -- entry point --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the ``tickwork`` command line.

    Args:
        argv (list[str] | None): the arguments after the program name; default ``sys.argv``.

    Returns:
        int: the exit status (0 ok, 1 failed, 2 usage or validation error).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    args.server = rq.resolve_server(args.server)
    command: Command = args.func
    try:
        return command(args, for_terminal(sys.stdout))
    except TickworkError as err:
        _print_error(err, args.server)
        return EXIT_USAGE if isinstance(err, InvalidArgument) else EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `tickwork jobs list | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


def _print_error(err: TickworkError, server: str) -> None:
    stderr = for_terminal(sys.stderr)
    if isinstance(err, Unavailable):
        print(f"error: cannot reach tickwork at {server} ({err})", file=stderr)
    elif isinstance(err, ConfigError):
        for line in str(err).splitlines():
            print(f"error: {line}", file=stderr)
    else:
        print(f"error: {err}", file=stderr)


class _TerminalSafe:
    """A text stream that shows control characters as escapes (see the module docstring)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(escape_controls(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def for_terminal(stream: TextIO) -> TextIO:
    """A stream that writes to ``stream`` with control characters (ANSI escape sequences,
    carriage returns, ...) as ``\\xNN`` text, whether or not ``stream`` is a terminal: piped
    output ends up on one often enough (``less -R``, ``tee``, a log file read with ``cat``).

    Args:
        stream (TextIO): e.g. ``sys.stdout``.

    Returns:
        TextIO: the stream to print to.
    """
    if isinstance(stream, _TerminalSafe):
        return stream
    return cast(TextIO, _TerminalSafe(stream))


# -- formatting ---------------------------------------------------------------------------


def _when(message: Message, field: str) -> str:
    """A Timestamp field as ``2026-03-29T01:00:00Z``, or ``-`` when unset."""
    if not message.HasField(field):
        return "-"
    ts: Timestamp = getattr(message, field)
    return _iso_utc(rq.to_datetime(ts))


def _iso_utc(value: datetime) -> str:
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Print left-aligned columns separated by two spaces; the last column is not padded."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip(), file=out)


def _first_line(text: str, width: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _status(job: Job) -> str:
    return rq.enum_label(JobStatus, job.status)


def _duration(job: Job) -> str:
    if not (job.HasField("start_time") and job.HasField("finish_time")):
        return ""
    elapsed = (rq.to_datetime(job.finish_time) - rq.to_datetime(job.start_time)).total_seconds()
    return f"{elapsed:.1f} s" if elapsed >= 1 else f"{elapsed * 1000:.0f} ms"


def _run_text(run: TaskRun) -> str:
    name = run.task_name or f"task {run.task_id}"
    if run.skipped:
        reason = _SKIP_TEXT.get(run.skip_reason, "skipped")
        return f"{name}: skipped ({reason}" + (f", job {run.job_id})" if run.job_id else ")")
    return f"{name}: job {run.job_id}" + (" (promoted)" if run.promoted else "")


# -- commands -----------------------------------------------------------------------------


def _cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from scheduler_svc.server import main as serve_main

    return serve_main(args.listen, args.config, insecure=args.insecure, log_format=args.log_format)


def _cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    import worker_svc

    return worker_svc.main(
        args.server, token=args.token, tls=_tls(args), log_format=args.log_format
    )


def _database_url() -> str:
    from scheduler_svc.settings import DEFAULT_DATABASE_URL

    return os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL


def _on_database(action: str) -> tuple[str | None, str | None]:
    """Run ``action`` ("current" or "upgrade") on $DATABASE_URL with scheduler_svc.migrate.

    Returns the revision before and after (None: empty database). Raises the scheduler
    service's TickworkError (unknown revision), SQLAlchemyError or OSError (unreachable).
    """
    import asyncio

    from scheduler_svc import migrate
    from scheduler_svc.db import Database

    async def go() -> tuple[str | None, str | None]:
        db = Database(_database_url())
        try:
            before = await migrate.current_revision(db)
            after = await migrate.upgrade(db) if action == "upgrade" else before
            return before, after
        finally:
            await db.dispose()

    return asyncio.run(go())


def _cmd_db(action: str, out: TextIO) -> int:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from scheduler_svc import errors, migrate
    from scheduler_svc.server import DatabaseUnreachable
    from scheduler_svc.settings import SettingsError, check_database_url

    try:
        check_database_url(_database_url())  # the one-line refusals of tickwork serve
        url = make_url(_database_url())
    except (ArgumentError, SettingsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    shown = url.render_as_string(hide_password=True)
    if action == "current" and url.get_backend_name() == "sqlite":
        path = url.database or ""
        if path and path != ":memory:" and not os.path.exists(path):
            print(f"none (no database file at {path}; run tickwork db upgrade)", file=out)
            return EXIT_OK
    try:
        before, after = _on_database(action)
    except errors.StorageError as err:
        print(f"error: {DatabaseUnreachable(_database_url(), err)}", file=sys.stderr)
        return EXIT_FAILED
    except errors.TickworkError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return EXIT_FAILED
    except (SQLAlchemyError, OSError) as err:
        # one line, as serve says it (SQLAlchemy's text adds a "Background on this error" line)
        print(f"error: {DatabaseUnreachable(_database_url(), err)}", file=sys.stderr)
        return EXIT_FAILED
    head = migrate.head_revision()
    if action == "upgrade":
        if before == after:
            print(f"database at {shown} already at revision {after} (head)", file=out)
        else:
            print(
                f"database at {shown} upgraded from {before or 'none'} to {after} (head)", file=out
            )
        return EXIT_OK
    if after is None:
        print("none (empty database; run tickwork db upgrade)", file=out)
    elif after == head:
        print(f"{after} (head)", file=out)
    elif after in migrate.known_revisions():
        print(f"{after} (behind head {head}; run tickwork db upgrade)", file=out)
    else:
        print(
            f"error: database schema is at revision {after}, which this tickwork does not "
            f"know (newest known: {head}); upgrade tickwork",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _cmd_db_upgrade(args: argparse.Namespace, out: TextIO) -> int:
    return _cmd_db("upgrade", out)


def _cmd_db_current(args: argparse.Namespace, out: TextIO) -> int:
    return _cmd_db("current", out)


def _cmd_apply(args: argparse.Namespace, out: TextIO) -> int:
    config = load_config(args.file)
    with _client(args) as client:
        report = apply_config(client, config)
    print(report, file=out)
    return EXIT_OK


def _cmd_tasks_list(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        tasks = client.list_tasks()
    rows = [
        [
            str(t.id),
            t.name,
            t.handler,
            "yes" if t.enabled else "no",
            str(t.task_priority),
            str(t.consecutive_failure_count),
            _first_line(t.disabled_reason or t.description),
        ]
        for t in tasks
    ]
    headers = ["ID", "NAME", "HANDLER", "ENABLED", "PRIORITY", "FAILURES", "NOTE"]
    _table(headers, rows, out)
    return EXIT_OK


def _cmd_tasks_run(args: argparse.Namespace, out: TextIO) -> int:
    if args.timeout is not None and not args.wait:
        raise InvalidArgument("--timeout: only with --wait")
    with _client(args) as client:
        [run] = client.run(args.name, trigger=Trigger.TRIGGER_MANUAL)
        if run.skipped:
            reason = _SKIP_TEXT.get(run.skip_reason, "skipped")
            suffix = f" (job {run.job_id})" if run.job_id else ""
            print(f"skipped: {reason}{suffix}", file=out)
        else:
            print(
                f"job {run.job_id}" + (" (promoted to the manual lane)" if run.promoted else ""),
                file=out,
            )
        out.flush()
        if not args.wait:
            return EXIT_OK
        if not run.job_id:
            return EXIT_FAILED
        return _follow(client, run.job_id, args.timeout, out)


def new_output(before: str, after: str) -> str:
    """The text appended between two snapshots of a job's output tail.

    The tail keeps the last few KB, so ``after`` may have lost a prefix of ``before``: the
    longest suffix of ``before`` that starts ``after`` is what both have in common.
    """
    if after.startswith(before):
        return after[len(before) :]
    if before.rstrip("\n").endswith(after.rstrip("\n")):
        return ""  # the final tail, as the worker reported it, repeats what was shown
    for start in range(1, len(before)):
        if after.startswith(before[start:]):
            return after[len(before) - start :]
    return after


def _follow(client: Client, job_id: int, timeout: float | None, out: TextIO) -> int:
    """Print a job's progress as it happens (state changes with the elapsed time, output
    lines as they arrive), follow its retries, and return its outcome's exit status."""
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {text}", file=out, flush=True)

    while True:
        last: Job | None = None
        shown = ""
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        try:
            for job in client.watch(job_id, timeout=remaining):
                if last is None or job.status != last.status:
                    extra = f" (attempt {job.attempt})" if job.attempt > 1 or last else ""
                    if rq.is_terminal(job):
                        took = _duration(job)
                        extra = f" (attempt {job.attempt}" + (f", {took})" if took else ")")
                    say(f"job {job.id} {_status(job)}{extra}")
                text = new_output(shown, job.output_tail)
                shown = job.output_tail
                for line in text.splitlines():
                    print(f"  | {line}", file=out, flush=True)
                last = job
        except JobTimeout:
            state = _status(last) if last is not None else "unknown"
            say(f"job {job_id} still {state} after {timeout:g} s; it goes on")
            return EXIT_STILL_RUNNING
        if last is None or not rq.is_terminal(last):
            return EXIT_FAILED
        if last.error:
            first, *more = last.error.rstrip().splitlines() or [""]
            print(f"error: {first}", file=out, flush=True)
            for line in more:  # indented: the job's text cannot pass for a line of ours
                print(f"       {line}", file=out, flush=True)
        retry = _retry_of(client, last)
        if retry is None:
            return WAIT_EXIT_CODES.get(last.status, EXIT_FAILED)
        when = _when(retry, "not_before_time")
        say(f"retry: job {retry.id} (attempt {retry.attempt}), not before {when}")
        job_id = retry.id


def _retry_of(client: Client, job: Job) -> Job | None:
    """The job queued as the retry of a failed ``job``, if there is one."""
    if job.status != JobStatus.JOB_STATUS_FAILED:
        return None
    for candidate in client.list_jobs(task=job.task_id, limit=20):
        if candidate.retry_of_job_id == job.id:
            return candidate
    return None


def _cmd_health(args: argparse.Namespace, out: TextIO) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with _client(args) as client:
        stub = health_pb2_grpc.HealthStub(client._channel)
        try:
            answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=args.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    print(status, file=out)
    return EXIT_OK if answer.status == health_pb2.HealthCheckResponse.SERVING else EXIT_FAILED


def _cmd_token_new(args: argparse.Namespace, out: TextIO) -> int:
    import hashlib
    import secrets

    token = "tw_" + secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    entry = f"{args.role}:{digest}" + (f":{args.label}" if args.label else "")
    print(f"token (give it to the client as TICKWORK_TOKEN; shown once): {token}", file=out)
    print(f"entry (for the server's TICKWORK_TOKENS_FILE or TICKWORK_TOKENS): {entry}", file=out)
    return EXIT_OK


def _cmd_tasks_enable(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        task: Task = (client.enable_task if args.enabled else client.disable_task)(args.name)
    print(f"task {task.name}: {'enabled' if task.enabled else 'disabled'}", file=out)
    return EXIT_OK


def _cmd_tasks_delete(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        client.delete_task(args.name)
    print(f"task {args.name}: deleted", file=out)
    return EXIT_OK


def _cmd_schedules_enable(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        schedule = client.update_schedule(args.name, enabled=args.enabled)
    state = "enabled" if schedule.enabled else "disabled"
    if schedule.HasField("next_run_time"):
        state += f", next run {_when(schedule, 'next_run_time')}"
    print(f"schedule {schedule.name}: {state}", file=out)
    return EXIT_OK


def _cmd_schedules_delete(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        client.delete_schedule(args.name)
    print(f"schedule {args.name}: deleted", file=out)
    return EXIT_OK


def _cmd_jobs_list(args: argparse.Namespace, out: TextIO) -> int:
    statuses = [s for text in args.status for s in text.split(",") if s.strip()]
    with _client(args) as client:
        jobs = client.list_jobs(task=args.task, statuses=statuses, limit=args.limit)
    rows = [
        [
            str(j.id),
            j.task_name,
            _status(j),
            rq.enum_label(Trigger, j.trigger),
            str(j.attempt),
            _when(j, "enqueue_time"),
            _when(j, "start_time"),
            _when(j, "finish_time"),
            _first_line(j.error),
        ]
        for j in jobs
    ]
    headers = [
        "ID", "TASK", "STATUS", "TRIGGER", "ATTEMPT", "ENQUEUED", "STARTED", "FINISHED", "ERROR",
    ]  # fmt: skip
    _table(headers, rows, out)
    return EXIT_OK


def _print_fields(message: Message, out: TextIO, skip: Sequence[str] = ()) -> None:
    """Print every field of ``message`` but ``skip``, one per line: ``name  value``.
    Times in UTC ISO 8601, enums by their short name, messages (params, retry policy) as
    one line of JSON; a value of several lines continues indented under the first."""
    fields = [f for f in message.DESCRIPTOR.fields if f.name not in skip]
    width = max(len(f.name) for f in message.DESCRIPTOR.fields)
    for f in fields:
        value = getattr(message, f.name)
        if isinstance(value, Timestamp):
            text = _when(message, f.name)
        elif isinstance(value, Message):
            # snake_case keys, as in an apply file (max_attempts, not maxAttempts)
            as_dict = json_format.MessageToDict(value, preserving_proto_field_name=True)
            text = json.dumps(as_dict, ensure_ascii=False)
        elif f.enum_type is not None:
            number = f.enum_type.values_by_number.get(value)
            prefix = f.enum_type.values[0].name.removesuffix("UNSPECIFIED")
            text = number.name.removeprefix(prefix) if number is not None else str(value)
        else:
            text = str(value)
        lines = text.rstrip().splitlines() or [""]
        print(f"{f.name.ljust(width)}  {lines[0]}", file=out)
        for line in lines[1:]:
            print(f"{'':{width}}  {line}", file=out)


def _cmd_tasks_get(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        task = client.get_task(args.name)
    _print_fields(task, out)
    return EXIT_OK


_ABORT_TEXT = {
    TaskAbort.Action.ACTION_CANCELLED: "queued job {job} cancelled",
    TaskAbort.Action.ACTION_ABORT_REQUESTED: "running job {job} told to abort "
    "(it ends ABORTED once the worker has stopped it)",
    TaskAbort.Action.ACTION_NONE: "nothing queued or running",
}


def _cmd_tasks_abort(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        [abort] = client.abort(args.name)
    text = _ABORT_TEXT.get(abort.action, "{job}").format(job=abort.job_id)
    print(f"task {args.name}: {text}", file=out)
    return EXIT_OK


def _cmd_jobs_get(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        job = client.get_job(args.job_id)
    _print_fields(job, out, skip=("output_tail",))
    print("output_tail:", file=out)
    for line in job.output_tail.rstrip().splitlines():
        print(f"  {line}", file=out)
    return EXIT_OK


def _cmd_jobs_watch(args: argparse.Namespace, out: TextIO) -> int:
    last: Job | None = None
    with _client(args) as client:
        for job in client.watch(args.job_id):
            if last is None or job.status != last.status:
                field = {
                    JobStatus.JOB_STATUS_QUEUED: "enqueue_time",
                    JobStatus.JOB_STATUS_RUNNING: "start_time",
                }.get(job.status, "finish_time")
                stamp = _when(job, field)
                if stamp == "-":
                    stamp = _iso_utc(datetime.now(UTC))
                line = f"{stamp}  job {job.id}  {job.task_name}  {_status(job)}"
                if job.status == JobStatus.JOB_STATUS_RUNNING:
                    line += f"  (attempt {job.attempt})"
                if rq.is_terminal(job) and job.error:
                    line += f"  {_first_line(job.error, 100)}"
                print(line, file=out, flush=True)
            last = job
    if last is None or not rq.is_terminal(last):
        return EXIT_FAILED
    return EXIT_OK if last.status == JobStatus.JOB_STATUS_SUCCEEDED else EXIT_FAILED


def _cmd_jobs_cancel(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        job = client.cancel_job(args.job_id)
    print(f"job {job.id} {_status(job)}", file=out)
    return EXIT_OK


def _cmd_schedules_list(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        schedules = client.list_schedules()
    rows = [
        [
            str(s.id),
            s.name,
            s.cron_description or s.cron_expression or f"every {s.interval_seconds} s",
            s.timezone,
            "yes" if s.enabled else "no",
            _when(s, "next_run_time"),
            ", ".join(s.task_names) or ", ".join(str(i) for i in s.task_ids),
        ]
        for s in schedules
    ]
    headers = ["ID", "NAME", "CRON", "TIMEZONE", "ENABLED", "NEXT RUN (UTC)", "TASKS"]
    _table(headers, rows, out)
    return EXIT_OK


def _cmd_schedules_fires(args: argparse.Namespace, out: TextIO) -> int:
    with _client(args) as client:
        fires = client.list_fires(args.name, limit=args.limit)
    rows = [
        [
            _when(f, "fire_time"),
            rq.enum_label(FireOutcome, f.outcome),
            "; ".join(_run_text(r) for r in f.runs) or "-",
        ]
        for f in fires
    ]
    _table(["FIRE TIME (UTC)", "OUTCOME", "TASKS"], rows, out)
    return EXIT_OK


def _cmd_cron(args: argparse.Namespace, out: TextIO) -> int:
    from scheduler_svc.cron import CronError, CronSchedule

    try:
        schedule = CronSchedule(args.expression, args.tz)
    except CronError as err:
        raise InvalidArgument(str(err)) from None
    after = datetime.now(UTC)
    if args.after is not None:
        try:
            after = datetime.fromisoformat(args.after)
        except ValueError:
            raise InvalidArgument(f"--after: not an ISO 8601 date-time: {args.after!r}") from None
        if after.tzinfo is None:
            after = after.replace(tzinfo=ZoneInfo(args.tz))
    print(schedule.describe(), file=out)
    zone = ZoneInfo(args.tz)
    for preview in schedule.next_fire_times(after, args.count):
        line = preview.fire_time.astimezone(zone).isoformat()
        note = _DST_TEXT.get(preview.dst_note.name)
        print(f"{line}  {note}" if note else line, file=out)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
