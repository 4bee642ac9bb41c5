"""tickwork worker service: the worker loop, its stream protocol and the task handlers.

``Worker`` serves jobs over one ``WorkerService.Connect`` stream; ``run_worker`` runs one
inside another process; ``main`` is the dedicated worker process (``python -m worker_svc``,
``tickwork worker``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker_svc._main import main
    from worker_svc.settings import WorkerSettings
    from worker_svc.worker import Worker, run_worker

#: Where each public name lives. The package imports a module only when one of its names is
#: first used, so that importing the package stays cheap: a job process imports what its
#: job uses and no more.
_EXPORTS = {
    "main": "worker_svc._main",
    "WorkerSettings": "worker_svc.settings",
    "Worker": "worker_svc.worker",
    "run_worker": "worker_svc.worker",
}

__all__ = ["Worker", "WorkerSettings", "main", "run_worker"]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
