"""tickwork: the Python SDK and command line of the tickwork task scheduler.

``Client`` (blocking) and ``AsyncClient`` (asyncio) wrap the gRPC API: run and abort
tasks, read, watch, wait for and cancel jobs, and manage tasks and schedules. Failures raise
:class:`TickworkError` subclasses carrying the gRPC status and the server's structured
details (a :class:`Reason` code, field violations, the resource, retry advice). The
protobuf messages and enums users handle are re-exported here; the full generated API is in
:mod:`tickwork.v1`, and config-file support in :mod:`tickwork.apply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork._lazy import lazy_exports

if TYPE_CHECKING:
    from tickwork._async import AsyncClient
    from tickwork._channel import TlsConfig
    from tickwork._context import JobContext
    from tickwork._requests import NewSchedule
    from tickwork._sync import Client
    from tickwork.errors import (
        AlreadyExists,
        DatabaseUnavailable,
        DeadlineExceeded,
        FailedPrecondition,
        FieldViolation,
        InvalidArgument,
        JobTimeout,
        NotFound,
        PermissionDenied,
        ResourceRef,
        TickworkError,
        Unauthenticated,
        Unavailable,
        from_rpc_error,
    )
    from tickwork.reasons import Reason
    from tickwork.v1.common_pb2 import SkipReason, TaskRun, Trigger
    from tickwork.v1.job_pb2 import Job, JobStatus
    from tickwork.v1.schedule_pb2 import (
        CatchUpPolicy,
        DescribeCronResponse,
        Fire,
        FireOutcome,
        FireTimePreview,
        JitterMode,
        OverlapPolicy,
        Schedule,
    )
    from tickwork.v1.task_pb2 import RetryPolicy, Task, TaskAbort

#: Where each public name lives; imported on first use (see :mod:`tickwork._lazy`).
_EXPORTS = {
    "AsyncClient": "tickwork._async",
    "TlsConfig": "tickwork._channel",
    "JobContext": "tickwork._context",
    "NewSchedule": "tickwork._requests",
    "Client": "tickwork._sync",
    "AlreadyExists": "tickwork.errors",
    "DatabaseUnavailable": "tickwork.errors",
    "DeadlineExceeded": "tickwork.errors",
    "FailedPrecondition": "tickwork.errors",
    "FieldViolation": "tickwork.errors",
    "InvalidArgument": "tickwork.errors",
    "JobTimeout": "tickwork.errors",
    "NotFound": "tickwork.errors",
    "PermissionDenied": "tickwork.errors",
    "ResourceRef": "tickwork.errors",
    "TickworkError": "tickwork.errors",
    "Unauthenticated": "tickwork.errors",
    "Unavailable": "tickwork.errors",
    "from_rpc_error": "tickwork.errors",
    "Reason": "tickwork.reasons",
    "SkipReason": "tickwork.v1.common_pb2",
    "TaskRun": "tickwork.v1.common_pb2",
    "Trigger": "tickwork.v1.common_pb2",
    "Job": "tickwork.v1.job_pb2",
    "JobStatus": "tickwork.v1.job_pb2",
    "CatchUpPolicy": "tickwork.v1.schedule_pb2",
    "DescribeCronResponse": "tickwork.v1.schedule_pb2",
    "Fire": "tickwork.v1.schedule_pb2",
    "FireOutcome": "tickwork.v1.schedule_pb2",
    "FireTimePreview": "tickwork.v1.schedule_pb2",
    "JitterMode": "tickwork.v1.schedule_pb2",
    "OverlapPolicy": "tickwork.v1.schedule_pb2",
    "Schedule": "tickwork.v1.schedule_pb2",
    "RetryPolicy": "tickwork.v1.task_pb2",
    "Task": "tickwork.v1.task_pb2",
    "TaskAbort": "tickwork.v1.task_pb2",
}

__all__ = [
    "AlreadyExists",
    "AsyncClient",
    "CatchUpPolicy",
    "Client",
    "DatabaseUnavailable",
    "DeadlineExceeded",
    "DescribeCronResponse",
    "FailedPrecondition",
    "FieldViolation",
    "Fire",
    "FireOutcome",
    "FireTimePreview",
    "InvalidArgument",
    "JitterMode",
    "Job",
    "JobContext",
    "JobStatus",
    "JobTimeout",
    "NewSchedule",
    "NotFound",
    "OverlapPolicy",
    "PermissionDenied",
    "Reason",
    "ResourceRef",
    "RetryPolicy",
    "Schedule",
    "SkipReason",
    "Task",
    "TaskAbort",
    "TaskRun",
    "TickworkError",
    "TlsConfig",
    "Trigger",
    "Unauthenticated",
    "Unavailable",
    "from_rpc_error",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
