import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tickwork.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PurgeHistoryRequest(_message.Message):
    __slots__ = ("job_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    lease_token: str
    def __init__(self, job_id: _Optional[int] = ..., lease_token: _Optional[str] = ...) -> None: ...

class PurgeHistoryResponse(_message.Message):
    __slots__ = ("jobs_deleted", "fires_deleted", "cutoff_time", "keep_days", "requests_deleted")
    JOBS_DELETED_FIELD_NUMBER: _ClassVar[int]
    FIRES_DELETED_FIELD_NUMBER: _ClassVar[int]
    CUTOFF_TIME_FIELD_NUMBER: _ClassVar[int]
    KEEP_DAYS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    jobs_deleted: int
    fires_deleted: int
    cutoff_time: _timestamp_pb2.Timestamp
    keep_days: int
    requests_deleted: int
    def __init__(self, jobs_deleted: _Optional[int] = ..., fires_deleted: _Optional[int] = ..., cutoff_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., keep_days: _Optional[int] = ..., requests_deleted: _Optional[int] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("hello", "poll_job", "heartbeat", "log_lines", "outcome", "cancel_poll")
    class Hello(_message.Message):
        __slots__ = ("worker_id", "handlers", "next_job_in_outcome_ack", "slots")
        WORKER_ID_FIELD_NUMBER: _ClassVar[int]
        HANDLERS_FIELD_NUMBER: _ClassVar[int]
        NEXT_JOB_IN_OUTCOME_ACK_FIELD_NUMBER: _ClassVar[int]
        SLOTS_FIELD_NUMBER: _ClassVar[int]
        worker_id: str
        handlers: _containers.RepeatedScalarFieldContainer[str]
        next_job_in_outcome_ack: bool
        slots: int
        def __init__(self, worker_id: _Optional[str] = ..., handlers: _Optional[_Iterable[str]] = ..., next_job_in_outcome_ack: _Optional[bool] = ..., slots: _Optional[int] = ...) -> None: ...
    class PollJob(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class CancelPoll(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class Heartbeat(_message.Message):
        __slots__ = ("job_id", "lease_token")
        JOB_ID_FIELD_NUMBER: _ClassVar[int]
        LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
        job_id: int
        lease_token: str
        def __init__(self, job_id: _Optional[int] = ..., lease_token: _Optional[str] = ...) -> None: ...
    class LogLines(_message.Message):
        __slots__ = ("job_id", "lease_token", "stream", "lines")
        JOB_ID_FIELD_NUMBER: _ClassVar[int]
        LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
        STREAM_FIELD_NUMBER: _ClassVar[int]
        LINES_FIELD_NUMBER: _ClassVar[int]
        job_id: int
        lease_token: str
        stream: str
        lines: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, job_id: _Optional[int] = ..., lease_token: _Optional[str] = ..., stream: _Optional[str] = ..., lines: _Optional[_Iterable[str]] = ...) -> None: ...
    class Outcome(_message.Message):
        __slots__ = ("job_id", "lease_token", "status", "error", "output_tail", "poll_next")
        JOB_ID_FIELD_NUMBER: _ClassVar[int]
        LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
        STATUS_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
        POLL_NEXT_FIELD_NUMBER: _ClassVar[int]
        job_id: int
        lease_token: str
        status: _job_pb2.JobStatus
        error: str
        output_tail: str
        poll_next: bool
        def __init__(self, job_id: _Optional[int] = ..., lease_token: _Optional[str] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., error: _Optional[str] = ..., output_tail: _Optional[str] = ..., poll_next: _Optional[bool] = ...) -> None: ...
    HELLO_FIELD_NUMBER: _ClassVar[int]
    POLL_JOB_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    LOG_LINES_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_POLL_FIELD_NUMBER: _ClassVar[int]
    hello: ConnectRequest.Hello
    poll_job: ConnectRequest.PollJob
    heartbeat: ConnectRequest.Heartbeat
    log_lines: ConnectRequest.LogLines
    outcome: ConnectRequest.Outcome
    cancel_poll: ConnectRequest.CancelPoll
    def __init__(self, hello: _Optional[_Union[ConnectRequest.Hello, _Mapping]] = ..., poll_job: _Optional[_Union[ConnectRequest.PollJob, _Mapping]] = ..., heartbeat: _Optional[_Union[ConnectRequest.Heartbeat, _Mapping]] = ..., log_lines: _Optional[_Union[ConnectRequest.LogLines, _Mapping]] = ..., outcome: _Optional[_Union[ConnectRequest.Outcome, _Mapping]] = ..., cancel_poll: _Optional[_Union[ConnectRequest.CancelPoll, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("welcome", "assign_job", "no_job", "abort_job", "outcome_ack")
    class Welcome(_message.Message):
        __slots__ = ("active", "heartbeat_interval_seconds", "lease_ttl_seconds", "max_running_jobs")
        ACTIVE_FIELD_NUMBER: _ClassVar[int]
        HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
        LEASE_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
        MAX_RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
        active: bool
        heartbeat_interval_seconds: float
        lease_ttl_seconds: float
        max_running_jobs: int
        def __init__(self, active: _Optional[bool] = ..., heartbeat_interval_seconds: _Optional[float] = ..., lease_ttl_seconds: _Optional[float] = ..., max_running_jobs: _Optional[int] = ...) -> None: ...
    class AssignJob(_message.Message):
        __slots__ = ("job", "handler", "params", "timeout_seconds", "lease_token", "memory_limit_bytes", "cpu_limit_seconds", "schedule_name", "previous_fire_time", "slot")
        JOB_FIELD_NUMBER: _ClassVar[int]
        HANDLER_FIELD_NUMBER: _ClassVar[int]
        PARAMS_FIELD_NUMBER: _ClassVar[int]
        TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
        LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
        MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
        CPU_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
        SCHEDULE_NAME_FIELD_NUMBER: _ClassVar[int]
        PREVIOUS_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
        SLOT_FIELD_NUMBER: _ClassVar[int]
        job: _job_pb2.Job
        handler: str
        params: _struct_pb2.Struct
        timeout_seconds: float
        lease_token: str
        memory_limit_bytes: int
        cpu_limit_seconds: int
        schedule_name: str
        previous_fire_time: _timestamp_pb2.Timestamp
        slot: int
        def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., handler: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., timeout_seconds: _Optional[float] = ..., lease_token: _Optional[str] = ..., memory_limit_bytes: _Optional[int] = ..., cpu_limit_seconds: _Optional[int] = ..., schedule_name: _Optional[str] = ..., previous_fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., slot: _Optional[int] = ...) -> None: ...
    class NoJob(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class AbortJob(_message.Message):
        __slots__ = ("job_id", "reason")
        JOB_ID_FIELD_NUMBER: _ClassVar[int]
        REASON_FIELD_NUMBER: _ClassVar[int]
        job_id: int
        reason: str
        def __init__(self, job_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...
    class OutcomeAck(_message.Message):
        __slots__ = ("job_id", "accepted", "next_job")
        JOB_ID_FIELD_NUMBER: _ClassVar[int]
        ACCEPTED_FIELD_NUMBER: _ClassVar[int]
        NEXT_JOB_FIELD_NUMBER: _ClassVar[int]
        job_id: int
        accepted: bool
        next_job: ConnectResponse.AssignJob
        def __init__(self, job_id: _Optional[int] = ..., accepted: _Optional[bool] = ..., next_job: _Optional[_Union[ConnectResponse.AssignJob, _Mapping]] = ...) -> None: ...
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ASSIGN_JOB_FIELD_NUMBER: _ClassVar[int]
    NO_JOB_FIELD_NUMBER: _ClassVar[int]
    ABORT_JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_ACK_FIELD_NUMBER: _ClassVar[int]
    welcome: ConnectResponse.Welcome
    assign_job: ConnectResponse.AssignJob
    no_job: ConnectResponse.NoJob
    abort_job: ConnectResponse.AbortJob
    outcome_ack: ConnectResponse.OutcomeAck
    def __init__(self, welcome: _Optional[_Union[ConnectResponse.Welcome, _Mapping]] = ..., assign_job: _Optional[_Union[ConnectResponse.AssignJob, _Mapping]] = ..., no_job: _Optional[_Union[ConnectResponse.NoJob, _Mapping]] = ..., abort_job: _Optional[_Union[ConnectResponse.AbortJob, _Mapping]] = ..., outcome_ack: _Optional[_Union[ConnectResponse.OutcomeAck, _Mapping]] = ...) -> None: ...
