import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tickwork.v1 import common_pb2 as _common_pb2
from tickwork.v1 import notifier_pb2 as _notifier_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "backoff_base_seconds", "backoff_cap_seconds")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_BASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_CAP_SECONDS_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    backoff_base_seconds: float
    backoff_cap_seconds: float
    def __init__(self, max_attempts: _Optional[int] = ..., backoff_base_seconds: _Optional[float] = ..., backoff_cap_seconds: _Optional[float] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "name", "description", "handler", "params", "task_priority", "enabled", "timeout_seconds", "consecutive_failure_count", "retry_policy", "disabled_reason", "create_time", "update_time", "memory_limit_bytes", "cpu_limit_seconds", "concurrency_group", "last_success_time", "last_failure_time", "expect_success_within_seconds", "warn_after_seconds", "labels", "disable_note", "disabled_until", "disabled_by", "disable_time", "notify", "overridable_params")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    TASK_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURE_COUNT_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_GROUP_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPECT_SUCCESS_WITHIN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WARN_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    DISABLE_NOTE_FIELD_NUMBER: _ClassVar[int]
    DISABLED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    DISABLED_BY_FIELD_NUMBER: _ClassVar[int]
    DISABLE_TIME_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    OVERRIDABLE_PARAMS_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    description: str
    handler: str
    params: _struct_pb2.Struct
    task_priority: int
    enabled: bool
    timeout_seconds: float
    consecutive_failure_count: int
    retry_policy: RetryPolicy
    disabled_reason: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    memory_limit_bytes: int
    cpu_limit_seconds: int
    concurrency_group: str
    last_success_time: _timestamp_pb2.Timestamp
    last_failure_time: _timestamp_pb2.Timestamp
    expect_success_within_seconds: float
    warn_after_seconds: float
    labels: _containers.ScalarMap[str, str]
    disable_note: str
    disabled_until: _timestamp_pb2.Timestamp
    disabled_by: str
    disable_time: _timestamp_pb2.Timestamp
    notify: _containers.RepeatedCompositeFieldContainer[_notifier_pb2.NotifyRoute]
    overridable_params: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., handler: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., task_priority: _Optional[int] = ..., enabled: _Optional[bool] = ..., timeout_seconds: _Optional[float] = ..., consecutive_failure_count: _Optional[int] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., disabled_reason: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., memory_limit_bytes: _Optional[int] = ..., cpu_limit_seconds: _Optional[int] = ..., concurrency_group: _Optional[str] = ..., last_success_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_failure_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expect_success_within_seconds: _Optional[float] = ..., warn_after_seconds: _Optional[float] = ..., labels: _Optional[_Mapping[str, str]] = ..., disable_note: _Optional[str] = ..., disabled_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., disabled_by: _Optional[str] = ..., disable_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., notify: _Optional[_Iterable[_Union[_notifier_pb2.NotifyRoute, _Mapping]]] = ..., overridable_params: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateTaskRequest(_message.Message):
    __slots__ = ("task", "request_id")
    TASK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    task: Task
    request_id: str
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateTaskResponse(_message.Message):
    __slots__ = ("task", "repeated_request")
    TASK_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    task: Task
    repeated_request: bool
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("task_id", "name")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    name: str
    def __init__(self, task_id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "label_selector")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    label_selector: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., label_selector: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    next_page_token: str
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateTaskRequest(_message.Message):
    __slots__ = ("task", "update_mask")
    TASK_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class DeleteTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    def __init__(self, task_id: _Optional[int] = ...) -> None: ...

class DeleteTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunTasksRequest(_message.Message):
    __slots__ = ("task_ids", "task_names", "trigger", "params_override", "not_before_time", "labels", "request_id")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    TASK_NAMES_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_TIME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    task_names: _containers.RepeatedScalarFieldContainer[str]
    trigger: _common_pb2.Trigger
    params_override: _struct_pb2.Struct
    not_before_time: _timestamp_pb2.Timestamp
    labels: _containers.ScalarMap[str, str]
    request_id: str
    def __init__(self, task_ids: _Optional[_Iterable[int]] = ..., task_names: _Optional[_Iterable[str]] = ..., trigger: _Optional[_Union[_common_pb2.Trigger, str]] = ..., params_override: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., not_before_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class RunTasksResponse(_message.Message):
    __slots__ = ("runs", "repeated_request")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TaskRun]
    repeated_request: bool
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.TaskRun, _Mapping]]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class AbortTasksRequest(_message.Message):
    __slots__ = ("task_ids", "request_id")
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    request_id: str
    def __init__(self, task_ids: _Optional[_Iterable[int]] = ..., request_id: _Optional[str] = ...) -> None: ...

class TaskAbort(_message.Message):
    __slots__ = ("task_id", "job_id", "action", "cancelled_job_count")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ACTION_UNSPECIFIED: _ClassVar[TaskAbort.Action]
        ACTION_CANCELLED: _ClassVar[TaskAbort.Action]
        ACTION_ABORT_REQUESTED: _ClassVar[TaskAbort.Action]
        ACTION_NONE: _ClassVar[TaskAbort.Action]
    ACTION_UNSPECIFIED: TaskAbort.Action
    ACTION_CANCELLED: TaskAbort.Action
    ACTION_ABORT_REQUESTED: TaskAbort.Action
    ACTION_NONE: TaskAbort.Action
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_JOB_COUNT_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    job_id: int
    action: TaskAbort.Action
    cancelled_job_count: int
    def __init__(self, task_id: _Optional[int] = ..., job_id: _Optional[int] = ..., action: _Optional[_Union[TaskAbort.Action, str]] = ..., cancelled_job_count: _Optional[int] = ...) -> None: ...

class AbortTasksResponse(_message.Message):
    __slots__ = ("aborts", "repeated_request")
    ABORTS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    aborts: _containers.RepeatedCompositeFieldContainer[TaskAbort]
    repeated_request: bool
    def __init__(self, aborts: _Optional[_Iterable[_Union[TaskAbort, _Mapping]]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class DisableTaskRequest(_message.Message):
    __slots__ = ("id", "note", "disabled_until")
    ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    DISABLED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    id: int
    note: str
    disabled_until: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., note: _Optional[str] = ..., disabled_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DisableTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class EnableTaskRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class EnableTaskResponse(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: Task
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...
