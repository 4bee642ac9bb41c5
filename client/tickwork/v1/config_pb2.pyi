import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tickwork.v1 import schedule_pb2 as _schedule_pb2
from tickwork.v1 import task_pb2 as _task_pb2
from tickwork.v1 import notifier_pb2 as _notifier_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApplyConfigRequest(_message.Message):
    __slots__ = ("tasks", "schedules", "dry_run", "prune_selector", "notifiers")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    PRUNE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NOTIFIERS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[_task_pb2.Task]
    schedules: _containers.RepeatedCompositeFieldContainer[ConfigSchedule]
    dry_run: bool
    prune_selector: str
    notifiers: _containers.RepeatedCompositeFieldContainer[_notifier_pb2.Notifier]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_task_pb2.Task, _Mapping]]] = ..., schedules: _Optional[_Iterable[_Union[ConfigSchedule, _Mapping]]] = ..., dry_run: _Optional[bool] = ..., prune_selector: _Optional[str] = ..., notifiers: _Optional[_Iterable[_Union[_notifier_pb2.Notifier, _Mapping]]] = ...) -> None: ...

class ConfigSchedule(_message.Message):
    __slots__ = ("schedule", "task_names")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TASK_NAMES_FIELD_NUMBER: _ClassVar[int]
    schedule: _schedule_pb2.Schedule
    task_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, schedule: _Optional[_Union[_schedule_pb2.Schedule, _Mapping]] = ..., task_names: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfigChange(_message.Message):
    __slots__ = ("kind", "name", "action", "fields", "id", "fire_times_before", "fire_times_after")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[ConfigChange.Kind]
        KIND_TASK: _ClassVar[ConfigChange.Kind]
        KIND_SCHEDULE: _ClassVar[ConfigChange.Kind]
        KIND_NOTIFIER: _ClassVar[ConfigChange.Kind]
    KIND_UNSPECIFIED: ConfigChange.Kind
    KIND_TASK: ConfigChange.Kind
    KIND_SCHEDULE: ConfigChange.Kind
    KIND_NOTIFIER: ConfigChange.Kind
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ACTION_UNSPECIFIED: _ClassVar[ConfigChange.Action]
        ACTION_CREATED: _ClassVar[ConfigChange.Action]
        ACTION_UPDATED: _ClassVar[ConfigChange.Action]
        ACTION_UNCHANGED: _ClassVar[ConfigChange.Action]
        ACTION_DELETED: _ClassVar[ConfigChange.Action]
    ACTION_UNSPECIFIED: ConfigChange.Action
    ACTION_CREATED: ConfigChange.Action
    ACTION_UPDATED: ConfigChange.Action
    ACTION_UNCHANGED: ConfigChange.Action
    ACTION_DELETED: ConfigChange.Action
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIMES_BEFORE_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIMES_AFTER_FIELD_NUMBER: _ClassVar[int]
    kind: ConfigChange.Kind
    name: str
    action: ConfigChange.Action
    fields: _containers.RepeatedScalarFieldContainer[str]
    id: int
    fire_times_before: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    fire_times_after: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    def __init__(self, kind: _Optional[_Union[ConfigChange.Kind, str]] = ..., name: _Optional[str] = ..., action: _Optional[_Union[ConfigChange.Action, str]] = ..., fields: _Optional[_Iterable[str]] = ..., id: _Optional[int] = ..., fire_times_before: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., fire_times_after: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ...) -> None: ...

class ApplyConfigResponse(_message.Message):
    __slots__ = ("changes", "dry_run")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[ConfigChange]
    dry_run: bool
    def __init__(self, changes: _Optional[_Iterable[_Union[ConfigChange, _Mapping]]] = ..., dry_run: _Optional[bool] = ...) -> None: ...
