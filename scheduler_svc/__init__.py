"""tickwork scheduler service: the gRPC API, the store, the scheduler loop and the queue.

Public names: the fire-time resolver (:class:`CronSchedule`, :class:`CronError`,
:class:`DstNote`), :class:`Settings`, and the domain errors. The process itself is
``scheduler_svc.server`` (``create_server(settings) -> Service``, ``main()``), kept out of this
module so that ``tickwork cron`` imports no server code.
"""

from scheduler_svc.cron import CronError, CronSchedule, DstNote, FirePreview, validate_timezone
from scheduler_svc.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    StorageError,
    TickworkError,
)
from scheduler_svc.settings import Settings, SettingsError, SmtpSettings

__all__ = [
    "AlreadyExists",
    "CronError",
    "CronSchedule",
    "DstNote",
    "FailedPrecondition",
    "FirePreview",
    "InvalidArgument",
    "NotFound",
    "Settings",
    "SettingsError",
    "SmtpSettings",
    "StorageError",
    "TickworkError",
    "validate_timezone",
]
