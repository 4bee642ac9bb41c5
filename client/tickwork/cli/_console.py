"""``tickwork console``: the web console as a process of its own (split deployments)."""

from __future__ import annotations

import argparse
from typing import Any

from tickwork.console.command import add_parser


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``console``; ``net`` is the parent parser of the connection options."""
    add_parser(sub, [net])
