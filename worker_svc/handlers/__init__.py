"""Task handlers: what a Task does when the worker runs one of its Jobs.

A Task names a handler and gives it params (a JSON object). ``get_handler(name)`` finds the
handler among the built-ins (``shell``, ``python``) and the ``tickwork.handlers`` entry
points; ``Handler.validate(params)`` checks params when a Task is saved and
``await Handler.run(params, ctx)`` runs one Job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork._lazy import lazy_exports

if TYPE_CHECKING:
    from ._base import Handler, HandlerResult, InvalidParams, JobContext, JobFailed, ServiceCalls
    from ._jobproc import start_job_process_server
    from ._limits import ProcessLimits, unsupported_limit
    from ._output import OUTPUT_TAIL_CHARS
    from ._registry import (
        ENTRY_POINT_GROUP,
        HandlerLoadError,
        UnknownHandler,
        get_handler,
        handler_names,
    )
    from .python import PythonHandler
    from .retention import RetentionHandler
    from .shell import ShellHandler

#: Where each public name lives; imported on first use (see :mod:`tickwork._lazy`).
_EXPORTS = {
    "Handler": "worker_svc.handlers._base",
    "HandlerResult": "worker_svc.handlers._base",
    "InvalidParams": "worker_svc.handlers._base",
    "JobContext": "worker_svc.handlers._base",
    "JobFailed": "worker_svc.handlers._base",
    "ServiceCalls": "worker_svc.handlers._base",
    "start_job_process_server": "worker_svc.handlers._jobproc",
    "ProcessLimits": "worker_svc.handlers._limits",
    "unsupported_limit": "worker_svc.handlers._limits",
    "OUTPUT_TAIL_CHARS": "worker_svc.handlers._output",
    "ENTRY_POINT_GROUP": "worker_svc.handlers._registry",
    "HandlerLoadError": "worker_svc.handlers._registry",
    "UnknownHandler": "worker_svc.handlers._registry",
    "get_handler": "worker_svc.handlers._registry",
    "handler_names": "worker_svc.handlers._registry",
    "PythonHandler": "worker_svc.handlers.python",
    "RetentionHandler": "worker_svc.handlers.retention",
    "ShellHandler": "worker_svc.handlers.shell",
}

__all__ = [
    "ENTRY_POINT_GROUP",
    "OUTPUT_TAIL_CHARS",
    "Handler",
    "HandlerLoadError",
    "HandlerResult",
    "InvalidParams",
    "JobContext",
    "JobFailed",
    "ProcessLimits",
    "PythonHandler",
    "RetentionHandler",
    "ServiceCalls",
    "ShellHandler",
    "UnknownHandler",
    "get_handler",
    "handler_names",
    "start_job_process_server",
    "unsupported_limit",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
