"""The one error hierarchy of the scheduler service, rooted at :class:`ServiceError`.

Domain code raises these; the servicers translate them to gRPC status codes in one place
(:func:`scheduler_svc.servicers._errors.rpc_errors`). Database driver errors are wrapped in
the store, never leaked. The subclasses share their names with the client's typed errors
(:mod:`tickwork.errors`) on purpose: each is sent as the status code that the SDK turns back
into its namesake there. The client's root is ``tickwork.errors.TickworkError``; the two
hierarchies never mix (the service raises only these, the client only its own).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tickwork.reasons import Reason

__all__ = [
    "AlreadyExists",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "Reason",
    "Resource",
    "ServiceError",
    "SettingsError",
    "StorageError",
]


@dataclasses.dataclass(frozen=True)
class Resource:
    """The object a NOT_FOUND or ALREADY_EXISTS error is about (sent as ResourceInfo)."""

    type: str
    """Its message type, e.g. ``"tickwork.v1.Task"``."""
    name: str
    """Its id or name as the request gave it, e.g. ``"42"`` or ``"nightly"``."""
    by: str = "id"
    """What ``name`` is: ``"id"`` or ``"name"``."""

    @classmethod
    def task(cls, ref: int | str) -> Resource:
        """A task by id (int) or name (str)."""
        return cls("tickwork.v1.Task", str(ref), "id" if isinstance(ref, int) else "name")

    @classmethod
    def schedule(cls, ref: int | str) -> Resource:
        """A schedule by id (int) or name (str)."""
        return cls("tickwork.v1.Schedule", str(ref), "id" if isinstance(ref, int) else "name")

    @classmethod
    def job(cls, job_id: int) -> Resource:
        """A job by id."""
        return cls("tickwork.v1.Job", str(job_id))


class ServiceError(Exception):
    """Base of every domain error.

    Attributes:
        field (str): the request field at fault (a path such as ``task.retry_policy.max_attempts``
            or ``task_names[0]``), or "".
        reason (Reason): the stable reason code (sent as ErrorInfo.reason); the class's
            ``default_reason`` unless given.
        resource (Resource | None): the object the error is about, if any.
    """

    default_reason: ClassVar[Reason] = Reason.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        field: str = "",
        reason: Reason | None = None,
        resource: Resource | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.reason: Reason = reason if reason is not None else self.default_reason
        self.resource = resource

    @property
    def text(self) -> str:
        """The message without the field prefix."""
        return str(self.args[0]) if self.args else ""

    @property
    def message(self) -> str:
        """The message, prefixed with the field name when there is one."""
        text = str(self.args[0]) if self.args else ""
        if self.field and not text.startswith(self.field):
            return f"{self.field}: {text}"
        return text


class InvalidArgument(ServiceError, ValueError):
    """A request field is missing or malformed (gRPC INVALID_ARGUMENT)."""

    default_reason = Reason.FIELD_INVALID


class NotFound(ServiceError, LookupError):
    """No row with that id or name (gRPC NOT_FOUND); give ``reason`` and ``resource``."""


class AlreadyExists(ServiceError):
    """A unique name is taken (gRPC ALREADY_EXISTS); give ``reason`` and ``resource``."""


class FailedPrecondition(ServiceError):
    """The row is not in a state that allows the operation (gRPC FAILED_PRECONDITION)."""

    default_reason = Reason.FAILED_PRECONDITION


class PermissionDenied(ServiceError):
    """The caller's role may not do what the request asks, though it may make the call
    (gRPC PERMISSION_DENIED): an operator's override of a param its task does not declare
    overridable."""

    default_reason = Reason.ROLE_NOT_ALLOWED


class StorageError(ServiceError):
    """The database failed in a way the caller cannot fix (gRPC UNAVAILABLE)."""

    default_reason = Reason.DATABASE_UNAVAILABLE


class SettingsError(ServiceError, ValueError):
    """An environment variable has a value that cannot be used; the message names it."""
