"""Commands that other packages add to the ``tickwork`` command line.

A package adds commands through an entry point of the group :data:`GROUP` whose object is
``add_commands(sub, net) -> None``: it adds its subparser(s) to ``sub`` (the command line's
subparsers) with ``parents=[net]`` where the command talks to a server (``net`` holds
``--server``, ``--token`` and the TLS options), and sets ``func`` to a
:data:`tickwork.cli.Command`. tickwork's own services add theirs this way (``serve`` and
``db`` from the scheduler service, ``worker`` from the worker service), so the command line
imports neither.

A command that is not installed, or whose entry point fails to load, still has a name: asking
for it says what is missing and exits 2, instead of a traceback or "invalid choice".
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, TextIO

from tickwork.cli._common import EXIT_USAGE

__all__ = ["GROUP", "AddCommands", "add_plugin_commands"]

GROUP = "tickwork.commands"

#: ``add_commands(sub, net)``: what an entry point of :data:`GROUP` names.
AddCommands = Callable[["argparse._SubParsersAction[Any]", argparse.ArgumentParser], None]

#: tickwork's own plugin commands, in the order ``--help`` lists them, and what adds each.
BUILT_IN = {
    "serve": "the scheduler service (scheduler_svc)",
    "worker": "the worker service (worker_svc)",
    "db": "the scheduler service (scheduler_svc)",
}


def add_plugin_commands(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add every installed plugin's commands, then a placeholder for each built-in one that
    none added (not installed, or its entry point failed to load)."""
    order = list(BUILT_IN)
    points = sorted(
        importlib.metadata.entry_points(group=GROUP),
        key=lambda p: (order.index(p.name) if p.name in order else len(order), p.name),
    )
    broken: dict[str, str] = {}
    for point in points:
        try:
            add: AddCommands = point.load()
        except Exception as err:  # one broken plugin must not take the command line down
            broken[point.name] = f"its entry point {point.value} failed to load: {err!r}"
            continue
        add(sub, net)
    for name, provider in BUILT_IN.items():
        if name not in sub.choices:
            why = broken.get(name, f"no entry point of group {GROUP} provides it")
            _add_placeholder(sub, name, f"`tickwork {name}` needs {provider}, not installed: {why}")


def _add_placeholder(sub: argparse._SubParsersAction[Any], name: str, message: str) -> None:
    p = sub.add_parser(name, add_help=False, help="(not installed)", description=message)
    p.set_defaults(func=partial(_missing, message), takes_any_arguments=True)


def _missing(message: str, args: argparse.Namespace, out: TextIO) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE
