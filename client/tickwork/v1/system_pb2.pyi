import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKER_STATE_UNSPECIFIED: _ClassVar[WorkerState]
    WORKER_STATE_ACTIVE: _ClassVar[WorkerState]
    WORKER_STATE_STANDBY: _ClassVar[WorkerState]

class QueueLane(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUE_LANE_UNSPECIFIED: _ClassVar[QueueLane]
    QUEUE_LANE_MANUAL: _ClassVar[QueueLane]
    QUEUE_LANE_SCHEDULER: _ClassVar[QueueLane]
    QUEUE_LANE_BACKFILL: _ClassVar[QueueLane]
WORKER_STATE_UNSPECIFIED: WorkerState
WORKER_STATE_ACTIVE: WorkerState
WORKER_STATE_STANDBY: WorkerState
QUEUE_LANE_UNSPECIFIED: QueueLane
QUEUE_LANE_MANUAL: QueueLane
QUEUE_LANE_SCHEDULER: QueueLane
QUEUE_LANE_BACKFILL: QueueLane

class WorkerStatus(_message.Message):
    __slots__ = ("worker_id", "state", "connect_time", "state_time", "last_heartbeat_time", "slots", "running_job_ids", "only_lease_known")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONNECT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    ONLY_LEASE_KNOWN_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    state: WorkerState
    connect_time: _timestamp_pb2.Timestamp
    state_time: _timestamp_pb2.Timestamp
    last_heartbeat_time: _timestamp_pb2.Timestamp
    slots: int
    running_job_ids: _containers.RepeatedScalarFieldContainer[int]
    only_lease_known: bool
    def __init__(self, worker_id: _Optional[str] = ..., state: _Optional[_Union[WorkerState, str]] = ..., connect_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., slots: _Optional[int] = ..., running_job_ids: _Optional[_Iterable[int]] = ..., only_lease_known: _Optional[bool] = ...) -> None: ...

class LaneDepth(_message.Message):
    __slots__ = ("lane", "queued_jobs")
    LANE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_JOBS_FIELD_NUMBER: _ClassVar[int]
    lane: QueueLane
    queued_jobs: int
    def __init__(self, lane: _Optional[_Union[QueueLane, str]] = ..., queued_jobs: _Optional[int] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("workers", "queue", "read_time", "database", "queue_stall")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    READ_TIME_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_STALL_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerStatus]
    queue: _containers.RepeatedCompositeFieldContainer[LaneDepth]
    read_time: _timestamp_pb2.Timestamp
    database: DatabaseStatus
    queue_stall: QueueStall
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerStatus, _Mapping]]] = ..., queue: _Optional[_Iterable[_Union[LaneDepth, _Mapping]]] = ..., read_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., database: _Optional[_Union[DatabaseStatus, _Mapping]] = ..., queue_stall: _Optional[_Union[QueueStall, _Mapping]] = ...) -> None: ...

class DatabaseStatus(_message.Message):
    __slots__ = ("writes_ok", "error", "failed_operations")
    WRITES_OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILED_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    writes_ok: bool
    error: str
    failed_operations: int
    def __init__(self, writes_ok: _Optional[bool] = ..., error: _Optional[str] = ..., failed_operations: _Optional[int] = ...) -> None: ...

class QueueStall(_message.Message):
    __slots__ = ("since",)
    SINCE_FIELD_NUMBER: _ClassVar[int]
    since: _timestamp_pb2.Timestamp
    def __init__(self, since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
