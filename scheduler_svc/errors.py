"""The one error hierarchy of the scheduler service, rooted at :class:`ServiceError`.

Domain code raises these; the servicers translate them to gRPC status codes in one place
(:func:`scheduler_svc.servicers._errors.rpc_errors`). Database driver errors are wrapped in
the store, never leaked. The subclasses share their names with the client's typed errors
(:mod:`tickwork.errors`) on purpose: each is sent as the status code that the SDK turns back
into its namesake there. The client's root is ``tickwork.errors.TickworkError``; the two
hierarchies never mix (the service raises only these, the client only its own).
"""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every domain error. ``field`` names the request field at fault, if any."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field

    @property
    def message(self) -> str:
        """The message, prefixed with the field name when there is one."""
        text = str(self.args[0]) if self.args else ""
        if self.field and not text.startswith(self.field):
            return f"{self.field}: {text}"
        return text


class InvalidArgument(ServiceError, ValueError):
    """A request field is missing or malformed (gRPC INVALID_ARGUMENT)."""


class NotFound(ServiceError, LookupError):
    """No row with that id or name (gRPC NOT_FOUND)."""


class AlreadyExists(ServiceError):
    """A unique name is taken (gRPC ALREADY_EXISTS)."""


class FailedPrecondition(ServiceError):
    """The row is not in a state that allows the operation (gRPC FAILED_PRECONDITION)."""


class StorageError(ServiceError):
    """The database failed in a way the caller cannot fix (gRPC UNAVAILABLE)."""


class SettingsError(ServiceError, ValueError):
    """An environment variable has a value that cannot be used; the message names it."""
