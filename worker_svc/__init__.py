"""tickwork worker service: the worker loop, its stream protocol and the task handlers.

``Worker`` serves jobs over one ``WorkerService.Connect`` stream; ``run_worker`` runs one
inside another process; ``main`` is the dedicated worker process (``python -m worker_svc``,
``tickwork worker``).
"""

from worker_svc._main import main
from worker_svc.settings import WorkerSettings
from worker_svc.worker import Worker, run_worker

__all__ = ["Worker", "WorkerSettings", "main", "run_worker"]
