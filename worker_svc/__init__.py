"""tickwork worker service: the worker loop, its stream protocol and the task handlers.

``Worker`` serves jobs over one ``WorkerService.Connect`` stream; ``run_worker`` runs one
inside another process; ``main`` is the dedicated worker process (``python -m worker_svc``,
``tickwork worker``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork._lazy import lazy_exports

if TYPE_CHECKING:
    from worker_svc._main import main
    from worker_svc.settings import WorkerSettings
    from worker_svc.worker import Worker, run_worker

#: Where each public name lives; imported on first use (see :mod:`tickwork._lazy`).
_EXPORTS = {
    "main": "worker_svc._main",
    "WorkerSettings": "worker_svc.settings",
    "Worker": "worker_svc.worker",
    "run_worker": "worker_svc.worker",
}

__all__ = ["Worker", "WorkerSettings", "main", "run_worker"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
