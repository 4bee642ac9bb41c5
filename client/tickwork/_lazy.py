"""Lazy exports of a package (PEP 562): a public name is imported from its module when it
is first used, so that importing the package stays cheap (a job process imports what its
job uses and no more)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of package ``package``.

    Args:
        package (str): the package's ``__name__``, for the AttributeError's message.
        exports (Mapping[str, str]): each public name and the module it lives in.
        namespace (dict[str, Any]): the package's ``globals()``; a name, once imported, is
            kept there, so later uses do not come back here.

    Returns:
        tuple: ``(__getattr__, __dir__)``; ``__getattr__`` raises AttributeError for a
        name that is not exported.
    """

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_
