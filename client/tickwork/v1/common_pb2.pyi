from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SkipReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SKIP_REASON_UNSPECIFIED: _ClassVar[SkipReason]
    SKIP_REASON_ALREADY_QUEUED: _ClassVar[SkipReason]
    SKIP_REASON_ALREADY_RUNNING: _ClassVar[SkipReason]
    SKIP_REASON_TASK_DISABLED: _ClassVar[SkipReason]
    SKIP_REASON_BUFFER_FULL: _ClassVar[SkipReason]

class Trigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRIGGER_UNSPECIFIED: _ClassVar[Trigger]
    TRIGGER_MANUAL: _ClassVar[Trigger]
    TRIGGER_API: _ClassVar[Trigger]
    TRIGGER_SCHEDULER: _ClassVar[Trigger]
    TRIGGER_BACKFILL: _ClassVar[Trigger]
SKIP_REASON_UNSPECIFIED: SkipReason
SKIP_REASON_ALREADY_QUEUED: SkipReason
SKIP_REASON_ALREADY_RUNNING: SkipReason
SKIP_REASON_TASK_DISABLED: SkipReason
SKIP_REASON_BUFFER_FULL: SkipReason
TRIGGER_UNSPECIFIED: Trigger
TRIGGER_MANUAL: Trigger
TRIGGER_API: Trigger
TRIGGER_SCHEDULER: Trigger
TRIGGER_BACKFILL: Trigger

class TaskRun(_message.Message):
    __slots__ = ("task_id", "job_id", "skipped", "skip_reason", "promoted", "task_name")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    job_id: int
    skipped: bool
    skip_reason: SkipReason
    promoted: bool
    task_name: str
    def __init__(self, task_id: _Optional[int] = ..., job_id: _Optional[int] = ..., skipped: _Optional[bool] = ..., skip_reason: _Optional[_Union[SkipReason, str]] = ..., promoted: _Optional[bool] = ..., task_name: _Optional[str] = ...) -> None: ...
