"""tickwork scheduler service: the gRPC API, the store, the scheduler loop and the queue.

Public names: :class:`Settings` and the domain errors. The fire-time resolver is
:mod:`tickwork.cron` (the client's, which the service stands on). The process itself is
``scheduler_svc.server`` (``create_server(settings) -> Service``, ``main()``).
"""

from scheduler_svc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ServiceError,
    SettingsError,
    StorageError,
)
from scheduler_svc.settings import Settings, SmtpSettings

__all__ = [
    "AlreadyExists",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "ServiceError",
    "Settings",
    "SettingsError",
    "SmtpSettings",
    "StorageError",
]
