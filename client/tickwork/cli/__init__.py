"""The ``tickwork`` command line: apply config, and operate tasks, jobs and schedules; the
services add ``serve``, ``db`` and ``worker`` through entry points (:mod:`._plugins`).

``main(argv)`` returns the exit status: 0 on success, 1 on a failed operation, 2 on a usage
or validation error; ``tasks run --wait`` and ``jobs watch`` exit with the job's outcome
(:data:`WAIT_EXIT_CODES`: 0, 1, 3 aborted, 4 cancelled). Errors go to stderr as
``error: <STATUS>: <details>``; an unreachable server reads ``error: cannot reach tickwork
at HOST:PORT``. No traceback is shown for either.

What is printed goes through :func:`for_terminal`: control and format characters show as
escapes, piped output too. Text from the server that spans lines is shown with its
continuation lines indented, so it cannot pass for a line of the CLI's own.

One module per command group (``_tasks``, ``_jobs``, ``_schedules``, ``_apply``, ``_cron``,
``_health``, ``_token``), each with ``add_parsers(sub, net)``: the same shape as a plugin's
entry point. Plugins build on the names re-exported here.
"""

from tickwork.cli._common import (
    EXIT_ABORTED,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STILL_RUNNING,
    EXIT_USAGE,
    WAIT_EXIT_CODES,
    Command,
    client_from_args,
    tls_from_args,
)
from tickwork.cli._main import build_parser, main
from tickwork.cli._output import for_terminal
from tickwork.cli._plugins import GROUP, AddCommands
from tickwork.cli._tasks import new_output

__all__ = [
    "EXIT_ABORTED",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_STILL_RUNNING",
    "EXIT_USAGE",
    "GROUP",
    "WAIT_EXIT_CODES",
    "AddCommands",
    "Command",
    "build_parser",
    "client_from_args",
    "for_terminal",
    "main",
    "new_output",
    "tls_from_args",
]
