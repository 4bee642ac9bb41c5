"""tickwork: the Python SDK and command line of the tickwork task scheduler.

``Client`` (blocking) and ``AsyncClient`` (asyncio) wrap the gRPC API: run and abort
tasks, read, watch, wait for and cancel jobs, and manage tasks and schedules. Failures raise
:class:`TickworkError` subclasses carrying the gRPC status and the server's structured
details (a :class:`Reason` code, field violations, the resource, retry advice). The
protobuf messages and enums users handle are re-exported here; the full generated API is in
:mod:`tickwork.v1`, and config-file support in :mod:`tickwork.apply`.
"""

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
    Schedule,
)
from tickwork.v1.task_pb2 import RetryPolicy, Task, TaskAbort

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
    "Job",
    "JobContext",
    "JobStatus",
    "JobTimeout",
    "NewSchedule",
    "NotFound",
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
