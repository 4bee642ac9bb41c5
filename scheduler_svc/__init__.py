"""tickwork scheduler service: the gRPC API, the store, the scheduler loop and the queue.

Public names: :class:`Settings` and the domain errors. The fire-time resolver is
:mod:`tickwork.cron` (the client's, which the service stands on). The process itself is
``scheduler_svc.server`` (``create_server(settings) -> Service``, ``main()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork._lazy import lazy_exports

if TYPE_CHECKING:
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

#: Where each public name lives; imported on first use, so that ``tickwork`` commands that
#: only name the service's commands (see :mod:`scheduler_svc._cli`) stay cheap.
_EXPORTS = {
    **{
        name: "scheduler_svc.errors"
        for name in (
            "AlreadyExists",
            "FailedPrecondition",
            "InvalidArgument",
            "NotFound",
            "ServiceError",
            "SettingsError",
            "StorageError",
        )
    },
    "Settings": "scheduler_svc.settings",
    "SmtpSettings": "scheduler_svc.settings",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
