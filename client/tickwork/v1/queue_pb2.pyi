import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tickwork.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnqueueRequest(_message.Message):
    __slots__ = ("task_ids", "trigger", "schedule_id", "fire_time", "missed", "missed_fire_times")
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    trigger: _common_pb2.Trigger
    schedule_id: int
    fire_time: _timestamp_pb2.Timestamp
    missed: bool
    missed_fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    def __init__(self, task_ids: _Optional[_Iterable[int]] = ..., trigger: _Optional[_Union[_common_pb2.Trigger, str]] = ..., schedule_id: _Optional[int] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., missed: _Optional[bool] = ..., missed_fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ("runs", "duplicate_fire")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIRE_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TaskRun]
    duplicate_fire: bool
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.TaskRun, _Mapping]]] = ..., duplicate_fire: _Optional[bool] = ...) -> None: ...

class ScheduleFire(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "task_ids", "missed", "missed_fire_times", "start_time")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    schedule_id: int
    fire_time: _timestamp_pb2.Timestamp
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    missed: bool
    missed_fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, schedule_id: _Optional[int] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., task_ids: _Optional[_Iterable[int]] = ..., missed: _Optional[bool] = ..., missed_fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class EnqueueFiresRequest(_message.Message):
    __slots__ = ("fires",)
    FIRES_FIELD_NUMBER: _ClassVar[int]
    fires: _containers.RepeatedCompositeFieldContainer[ScheduleFire]
    def __init__(self, fires: _Optional[_Iterable[_Union[ScheduleFire, _Mapping]]] = ...) -> None: ...

class ScheduleFireResult(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "runs", "duplicate_fire", "schedule_found")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIRE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FOUND_FIELD_NUMBER: _ClassVar[int]
    schedule_id: int
    fire_time: _timestamp_pb2.Timestamp
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TaskRun]
    duplicate_fire: bool
    schedule_found: bool
    def __init__(self, schedule_id: _Optional[int] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., runs: _Optional[_Iterable[_Union[_common_pb2.TaskRun, _Mapping]]] = ..., duplicate_fire: _Optional[bool] = ..., schedule_found: _Optional[bool] = ...) -> None: ...

class EnqueueFiresResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScheduleFireResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ScheduleFireResult, _Mapping]]] = ...) -> None: ...
