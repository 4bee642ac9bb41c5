"""Layers point one way, read from the source: every import of every module (function-local
ones and those under ``TYPE_CHECKING`` too, and ``importlib.import_module("...")`` with a
literal name) is checked against the rules below.

- ``tickwork`` (the client: SDK, CLI, cron resolver, log setup) is the ground floor: it
  imports neither service. The services add their CLI commands through entry points.
- ``worker_svc`` stands on the client: it does not import ``scheduler_svc``.
- ``scheduler_svc`` stands on both. Inside it: servicers and the scheduler loop → app →
  store → db; a layer does not import one above it, and the scheduler loop and the
  servicers do not import each other.

A failure names the file and line, the import as written, and the rule it breaks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.harness import REPO

#: Source roots and the top-level package each holds.
ROOTS = {
    "tickwork": REPO / "client" / "tickwork",
    **{p: REPO / p for p in ("scheduler_svc", "worker_svc")},
}

#: Inside the scheduler service: (layer, module prefixes), lowest first. A module may import
#: its own layer and those below it, never one above. Modules of no layer are not checked.
SERVICE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("db", ("scheduler_svc.db",)),
    (
        "store",
        (
            "scheduler_svc.store",
            "scheduler_svc.bulk",
            "scheduler_svc.prepared",
            "scheduler_svc.records",
        ),
    ),
    ("app", ("scheduler_svc.app",)),
    ("servicers and the scheduler loop", ("scheduler_svc.servicers", "scheduler_svc.scheduler")),
)

#: Peers of one layer that do not import each other: what the scheduler loop and the
#: servicers both need lives below them.
PEERS = {
    "scheduler_svc.scheduler": ("scheduler_svc.servicers", "the servicers"),
    "scheduler_svc.servicers": ("scheduler_svc.scheduler", "the scheduler loop"),
}

#: Packages each top-level package must not import, and why.
FORBIDDEN = {
    "tickwork": {
        "scheduler_svc": "the client (tickwork) is the ground floor: it imports no service",
        "worker_svc": "the client (tickwork) is the ground floor: it imports no service",
    },
    "worker_svc": {
        "scheduler_svc": "the worker stands on the client only: it does not import the service",
    },
}


@dataclass(frozen=True)
class Import:
    """One import statement's target: the module it names, where, and how it was written."""

    module: str
    path: str
    line: int
    text: str


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def module_name(path: Path) -> str:
    """The dotted name of the module in ``path`` (a file under one of :data:`ROOTS`)."""
    for package, root in ROOTS.items():
        if path.is_relative_to(root):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(f"{path} is not under a source root")


def imports(source: str, module: str, path: str, is_package: bool = False) -> Iterator[Import]:
    """Every module ``source`` (the text of ``module``) imports, anywhere in it.

    ``from a import b`` yields ``a.b`` as well as ``a``: ``b`` may be a module
    (``from scheduler_svc import store``).
    """
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Call)
            and _called_name(node.func)
            in ("importlib.import_module", "import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets = [node.args[0].value]
        text = lines[line - 1].strip() if targets else ""
        for target in targets:
            yield Import(target, path, line, text)


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""


def _service_layer(module: str) -> int | None:
    for rank, (_, prefixes) in enumerate(SERVICE_LAYERS):
        if any(_within(module, p) for p in prefixes):
            return rank
    return None


def violations(source: str, module: str, path: str, is_package: bool = False) -> list[str]:
    """What in ``source`` (the text of ``module``, at ``path``) breaks a layer rule: one
    line per import, ``PATH:LINE: `IMPORT` imports TARGET: RULE``."""
    found: dict[tuple[int, str], str] = {}
    top = module.split(".")[0]
    own = _service_layer(module)
    for imp in imports(source, module, path, is_package):
        rule = ""
        for package, why in FORBIDDEN.get(top, {}).items():
            if _within(imp.module, package):
                rule = why
        target = _service_layer(imp.module)
        if own is not None and target is not None and target > own:
            rule = (
                f"the {SERVICE_LAYERS[own][0]} layer must not import the "
                f"{SERVICE_LAYERS[target][0]} layer above it (inside scheduler_svc: servicers "
                "and the scheduler loop -> app -> store -> db)"
            )
        for peer, (other, name) in PEERS.items():
            if _within(module, peer) and _within(imp.module, other):
                rule = (
                    f"{'the scheduler loop' if peer.endswith('scheduler') else 'a servicer'} "
                    f"must not import {name}, its peer: what both need lives below them"
                )
        if rule:
            shown = imp.module.split(".")[: 2 if top == "scheduler_svc" else 1]
            key = (imp.line, ".".join(shown))
            found.setdefault(
                key, f"{imp.path}:{imp.line}: `{imp.text}` imports {imp.module}: {rule}"
            )
    return sorted(found.values())


def _sources() -> Iterator[Path]:
    for root in ROOTS.values():
        yield from sorted(root.rglob("*.py"))


def test_every_import_points_down() -> None:
    problems: list[str] = []
    checked = 0
    for path in _sources():
        shown = str(path.relative_to(REPO))
        is_package = path.name == "__init__.py"
        problems += violations(path.read_text(), module_name(path), shown, is_package)
        checked += 1
    assert checked > 50, f"only {checked} modules found: are the roots right?"
    assert not problems, "imports that point up:\n" + "\n".join(problems)


def test_the_service_layers_name_modules_that_exist() -> None:
    """A layer whose modules were all renamed away would check nothing."""
    modules = {module_name(p) for p in _sources()}
    for layer, prefixes in SERVICE_LAYERS:
        assert any(_within(m, p) for m in modules for p in prefixes), layer


def test_an_upward_import_is_named_with_its_file_line_and_rule() -> None:
    client = "import json\n\n\ndef serve() -> None:\n    from scheduler_svc.server import main\n"
    assert violations(client, "tickwork.cli._x", "client/tickwork/cli/_x.py") == [
        "client/tickwork/cli/_x.py:5: `from scheduler_svc.server import main` imports "
        "scheduler_svc.server: the client (tickwork) is the ground floor: it imports no service"
    ]
    worker = "import importlib\nimportlib.import_module('scheduler_svc.logs')\n"
    [line] = violations(worker, "worker_svc._main", "worker_svc/_main.py")
    assert line.startswith("worker_svc/_main.py:2: `importlib.import_module('scheduler_svc.logs')`")
    assert line.endswith("the worker stands on the client only: it does not import the service")


def test_an_import_across_the_service_layers_is_refused_upward_only() -> None:
    store = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scheduler_svc import app\n"
    )
    [line] = violations(store, "scheduler_svc.store", "scheduler_svc/store.py")
    assert line == (
        "scheduler_svc/store.py:3: `from scheduler_svc import app` imports scheduler_svc.app: "
        "the store layer must not import the app layer above it (inside scheduler_svc: "
        "servicers and the scheduler loop -> app -> store -> db)"
    )
    relative = "from ..servicers import _convert\n"
    [line] = violations(relative, "scheduler_svc.store.tasks", "scheduler_svc/store/tasks.py")
    assert line.startswith("scheduler_svc/store/tasks.py:1: `from ..servicers import _convert` ")
    assert "imports scheduler_svc.servicers: the store layer must not import" in line
    assert violations("from scheduler_svc import scheduler\n", "scheduler_svc.db", "db.py")
    assert violations("from scheduler_svc.store import Store\n", "scheduler_svc.db", "db.py")
    assert violations("from scheduler_svc.app import App\n", "scheduler_svc.store", "s.py")
    assert violations("import scheduler_svc.scheduler\n", "scheduler_svc.app", "a.py")
    [line] = violations(
        "from scheduler_svc.servicers._convert import ts\n", "scheduler_svc.scheduler", "s.py"
    )
    assert line == (
        "s.py:1: `from scheduler_svc.servicers._convert import ts` imports "
        "scheduler_svc.servicers._convert: the scheduler loop must not import the servicers, "
        "its peer: what both need lives below them"
    )
    downward = "from scheduler_svc.store import Store\nfrom scheduler_svc.db import Database\n"
    assert violations(downward, "scheduler_svc.app", "a.py") == []
    assert (
        violations("from scheduler_svc.app import App\n", "scheduler_svc.scheduler", "s.py") == []
    )
    assert violations("from worker_svc.handlers import get_handler\n", "scheduler_svc.x", "x") == []
