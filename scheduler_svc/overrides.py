"""Run-time param overrides: how RunTasks' ``params_override`` patches a task's params and
which of its paths an operator may set.

An override is a JSON Merge Patch (RFC 7396) over the task's params: an object is merged key
by key, any other value (a list, a string, null) replaces or, for null, removes the key. The
paths it sets are its leaves, dotted (``env.REGION``): a key whose value is not an object,
or whose value is an empty object (it may turn a missing or non-object value into ``{}``).
A task declares what an operator may set in ``overridable_params`` (dotted paths); a set
path is allowed when it equals a declared path or lies under one. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from scheduler_svc.errors import InvalidArgument, PermissionDenied, Reason

__all__ = [
    "MAX_OVERRIDABLE",
    "check_override",
    "merge_patch",
    "overridable_params",
    "set_paths",
]

#: Most paths a task may declare overridable.
MAX_OVERRIDABLE = 100
#: Longest declared path, in characters.
MAX_PATH_CHARS = 200
_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as RFC 7396 says; neither argument is changed.

    An object patch merges into ``target`` (a non-object target counts as ``{}``): a null
    value removes the key, any other value is merged the same way; a non-object patch
    replaces ``target`` whole."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def set_paths(patch: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted paths ``patch`` sets, depth first in key order (see the module)."""
    for key, value in patch.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from set_paths(value, f"{path}.")
        else:
            yield path


def _allowed(path: str, declared: Sequence[str]) -> bool:
    return any(path == d or path.startswith(f"{d}.") for d in declared)


def check_override(task_name: str, declared: Sequence[str], patch: dict[str, Any]) -> None:
    """Every path ``patch`` sets is ``declared`` (equal to or under a declared path).

    Raises:
        PermissionDenied: naming ``params_override.<path>`` of the first path that is not,
            with the paths the task declares.
    """
    for path in set_paths(patch):
        if not _allowed(path, declared):
            says = ", ".join(declared) if declared else "nothing (overridable_params is empty)"
            raise PermissionDenied(
                f'params_override.{path} is not overridable for task "{task_name}"; '
                f"the task declares: {says}",
                field=f"params_override.{path}",
                reason=Reason.PARAM_NOT_OVERRIDABLE,
            )


def overridable_params(values: Sequence[str], field: str = "task.overridable_params") -> list[str]:
    """The declared paths ``values``, checked, duplicates dropped (first kept).

    Raises:
        InvalidArgument: more than :data:`MAX_OVERRIDABLE`, or a path that is empty, longer
            than :data:`MAX_PATH_CHARS`, or not dot-separated names without spaces; naming
            ``field[i]``.
    """
    if len(values) > MAX_OVERRIDABLE:
        raise InvalidArgument(
            f"lists {len(values)} paths; at most {MAX_OVERRIDABLE}",
            field=field,
            reason=Reason.FIELD_INVALID,
        )
    for i, path in enumerate(values):
        if not path or len(path) > MAX_PATH_CHARS or not _PATH.match(path):
            raise InvalidArgument(
                f"expected a dotted param path of 1 to {MAX_PATH_CHARS} characters such as "
                "env.REGION (names separated by single dots, no spaces)",
                field=f"{field}[{i}]",
                reason=Reason.FIELD_INVALID,
            )
    return list(dict.fromkeys(values))
