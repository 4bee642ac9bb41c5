"""The stable reason codes of tickwork's errors (``google.rpc.ErrorInfo.reason``).

Every error the service sends carries an ``ErrorInfo`` whose ``domain`` is :data:`DOMAIN` and
whose ``reason`` is one of :class:`Reason`; a client branches on the reason, never on the
message text, which may change. The codes are part of the API: a code is never renamed or
reused for another meaning, and new ones may be added (a client treats an unknown code like
the status code alone).

This module is the one list of codes; the service raises them, the SDK exposes them as
``TickworkError.reason``.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DOMAIN", "Reason"]

#: ``ErrorInfo.domain`` of every tickwork error.
DOMAIN = "tickwork.dev"


class Reason(StrEnum):
    """Why a call failed; the gRPC status code of each is in its comment."""

    # INVALID_ARGUMENT: a BadRequest field violation names the field.
    FIELD_REQUIRED = "FIELD_REQUIRED"
    """A required field is missing or empty."""
    FIELD_INVALID = "FIELD_INVALID"
    """A field's value is malformed, too long or out of range."""
    CRON_INVALID = "CRON_INVALID"
    """The cron expression does not parse; the message names the cron field at fault."""
    CRON_NEVER_FIRES = "CRON_NEVER_FIRES"
    """The cron expression parses but can never fire (``0 0 30 2 *``)."""
    TIMEZONE_UNKNOWN = "TIMEZONE_UNKNOWN"
    """The time zone is not an IANA zone name this service knows."""
    HANDLER_UNKNOWN = "HANDLER_UNKNOWN"
    """No handler of that name is installed."""
    PARAMS_INVALID = "PARAMS_INVALID"
    """The handler refuses the task's params (or they are not a JSON object)."""
    TOO_MANY_ITEMS = "TOO_MANY_ITEMS"
    """A list names more items than one call or one message holds."""
    PAGE_TOKEN_INVALID = "PAGE_TOKEN_INVALID"
    """The page token is not one this service made for this same request."""
    UPDATE_MASK_INVALID = "UPDATE_MASK_INVALID"
    """The update mask names a field that is unknown or cannot be written."""
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    """The request id was used before for a different request."""
    REQUEST_UNDECODABLE = "REQUEST_UNDECODABLE"
    """The request bytes are not the method's request message."""

    # NOT_FOUND: a ResourceInfo names the resource.
    TASK_NOT_FOUND = "TASK_NOT_FOUND"
    SCHEDULE_NOT_FOUND = "SCHEDULE_NOT_FOUND"
    JOB_NOT_FOUND = "JOB_NOT_FOUND"
    LEASE_NOT_FOUND = "LEASE_NOT_FOUND"
    NOTIFIER_NOT_FOUND = "NOTIFIER_NOT_FOUND"

    # ALREADY_EXISTS: a ResourceInfo names the resource.
    TASK_NAME_TAKEN = "TASK_NAME_TAKEN"
    SCHEDULE_NAME_TAKEN = "SCHEDULE_NAME_TAKEN"

    # FAILED_PRECONDITION
    JOB_NOT_QUEUED = "JOB_NOT_QUEUED"
    """Only a queued job can be cancelled; a running one is aborted (AbortTasks)."""
    TASK_RUNNING = "TASK_RUNNING"
    """The task has a running job; abort it first."""
    TASK_IN_USE = "TASK_IN_USE"
    """The task is the only task of a schedule."""
    QUEUE_CONTENDED = "QUEUE_CONTENDED"
    """Other calls kept changing the queue; the call may be retried."""
    WORKER_PROTOCOL = "WORKER_PROTOCOL"
    """A worker stream broke the protocol (a second Hello, an outcome for a lease it lost)."""
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    """Any other state that does not allow the call."""

    # UNAVAILABLE: a RetryInfo says how long to wait before retrying.
    DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"
    SERVICE_STOPPING = "SERVICE_STOPPING"

    # UNAUTHENTICATED, PERMISSION_DENIED
    TOKEN_REQUIRED = "TOKEN_REQUIRED"
    TOKEN_UNKNOWN = "TOKEN_UNKNOWN"
    ROLE_NOT_ALLOWED = "ROLE_NOT_ALLOWED"
    PARAM_NOT_OVERRIDABLE = "PARAM_NOT_OVERRIDABLE"
    """An operator's params_override sets a param its task does not declare overridable."""

    # INTERNAL
    INTERNAL = "INTERNAL"
    """A fault of the service; its log has the details."""
