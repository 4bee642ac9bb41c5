"""Finding a handler by name: the built-ins, then the ``tickwork.handlers`` entry points."""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

from ._base import Handler
from .python import PythonHandler
from .retention import RetentionHandler
from .shell import ShellHandler

__all__ = [
    "ENTRY_POINT_GROUP",
    "HandlerLoadError",
    "UnknownHandler",
    "get_handler",
    "handler_names",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "tickwork.handlers"
"""Packages add handlers with an entry point in this group: ``name = "pkg.module:Factory"``."""

_BUILTINS: dict[str, Callable[[], Handler]] = {
    ShellHandler.name: ShellHandler,
    PythonHandler.name: PythonHandler,
    RetentionHandler.name: RetentionHandler,
}


class UnknownHandler(KeyError):
    """No handler has this name. A ``KeyError``, hence a ``LookupError``.

    Attributes:
        name (str): the name asked for.
        known (list[str]): the names that exist, sorted.
    """

    def __init__(self, name: str, known: list[str]) -> None:
        """Create the error.

        Args:
            name (str): the name asked for.
            known (list[str]): the names that exist.
        """
        self.name = name
        self.known = sorted(known)
        self.message = f"unknown handler {name!r}; known handlers: {', '.join(self.known)}"
        super().__init__(self.message)

    def __str__(self) -> str:
        """Return the message (``KeyError`` would show it quoted)."""
        return self.message


class HandlerLoadError(LookupError):
    """An entry point names a handler that cannot be loaded or is not a ``Handler``.

    Attributes:
        name (str): the handler name.
    """

    def __init__(self, name: str, message: str) -> None:
        """Create the error.

        Args:
            name (str): the handler name.
            message (str): what went wrong, naming the entry point.
        """
        super().__init__(message)
        self.name = name


def _entry_points() -> dict[str, EntryPoint]:
    """The entry points of ``ENTRY_POINT_GROUP`` by name; the first one wins on duplicates."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def handler_names() -> list[str]:
    """Return the names of all handlers, built-in and from entry points.

    Returns:
        list[str]: sorted, without duplicates.
    """
    return sorted(set(_BUILTINS) | set(_entry_points()))


def get_handler(name: str) -> Handler:
    """Return a new instance of the handler called ``name``.

    Built-in handlers (``shell``, ``python``) take precedence over entry points of the same
    name. An entry point names a class or a factory callable with no arguments.

    Args:
        name (str): the handler name a Task refers to.

    Returns:
        Handler: the handler.

    Raises:
        UnknownHandler: no handler has this name (the message lists the known ones).
        HandlerLoadError: the entry point cannot be imported, fails to build the handler, or
            builds something that is not a Handler.
    """
    builtin = _BUILTINS.get(name)
    if builtin is not None:
        return builtin()
    entry_point = _entry_points().get(name)
    if entry_point is None:
        raise UnknownHandler(name, handler_names())
    where = f"entry point {name!r} ({entry_point.value}) of group {ENTRY_POINT_GROUP!r}"
    try:
        factory = entry_point.load()
        handler = factory()
    except Exception as exc:
        raise HandlerLoadError(
            name, f"cannot load handler {name!r}: {where}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(handler, Handler):
        raise HandlerLoadError(
            name,
            f"cannot load handler {name!r}: {where} gave a {type(handler).__name__}, "
            "not a Handler (name, validate, run)",
        )
    logger.debug("loaded handler %r from %s", name, entry_point.value)
    return handler
