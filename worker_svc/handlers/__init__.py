"""Task handlers: what a Task does when the worker runs one of its Jobs.

A Task names a handler and gives it params (a JSON object). ``get_handler(name)`` finds the
handler among the built-ins (``shell``, ``python``) and the ``tickwork.handlers`` entry
points; ``Handler.validate(params)`` checks params when a Task is saved and
``await Handler.run(params, ctx)`` runs one Job.
"""

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
