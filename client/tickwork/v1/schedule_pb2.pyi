import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
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

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ALL: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_REPLACE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW: _ClassVar[OverlapPolicy]

class JitterMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JITTER_MODE_UNSPECIFIED: _ClassVar[JitterMode]
    JITTER_MODE_RANDOM: _ClassVar[JitterMode]
    JITTER_MODE_STABLE: _ClassVar[JitterMode]

class CatchUpPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATCH_UP_POLICY_UNSPECIFIED: _ClassVar[CatchUpPolicy]
    CATCH_UP_POLICY_SKIP: _ClassVar[CatchUpPolicy]
    CATCH_UP_POLICY_RUN_ONCE: _ClassVar[CatchUpPolicy]
    CATCH_UP_POLICY_RUN_ALL: _ClassVar[CatchUpPolicy]

class FireOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FIRE_OUTCOME_UNSPECIFIED: _ClassVar[FireOutcome]
    FIRE_OUTCOME_ENQUEUED: _ClassVar[FireOutcome]
    FIRE_OUTCOME_SKIPPED: _ClassVar[FireOutcome]
    FIRE_OUTCOME_MISSED: _ClassVar[FireOutcome]
    FIRE_OUTCOME_BUFFERED: _ClassVar[FireOutcome]
    FIRE_OUTCOME_REPLACED: _ClassVar[FireOutcome]
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy
OVERLAP_POLICY_BUFFER_ALL: OverlapPolicy
OVERLAP_POLICY_REPLACE: OverlapPolicy
OVERLAP_POLICY_ALLOW: OverlapPolicy
JITTER_MODE_UNSPECIFIED: JitterMode
JITTER_MODE_RANDOM: JitterMode
JITTER_MODE_STABLE: JitterMode
CATCH_UP_POLICY_UNSPECIFIED: CatchUpPolicy
CATCH_UP_POLICY_SKIP: CatchUpPolicy
CATCH_UP_POLICY_RUN_ONCE: CatchUpPolicy
CATCH_UP_POLICY_RUN_ALL: CatchUpPolicy
FIRE_OUTCOME_UNSPECIFIED: FireOutcome
FIRE_OUTCOME_ENQUEUED: FireOutcome
FIRE_OUTCOME_SKIPPED: FireOutcome
FIRE_OUTCOME_MISSED: FireOutcome
FIRE_OUTCOME_BUFFERED: FireOutcome
FIRE_OUTCOME_REPLACED: FireOutcome

class Schedule(_message.Message):
    __slots__ = ("id", "name", "description", "cron_expression", "interval_seconds", "timezone", "catch_up_policy", "enabled", "task_ids", "next_run_time", "cron_description", "last_run_time", "create_time", "update_time", "task_names", "overlap_policy", "max_buffered", "catch_up_window_seconds", "max_catch_up_runs", "jitter_seconds", "jitter_mode", "start_time", "end_time", "labels", "pause_note", "paused_until", "paused_by", "pause_time", "catch_up_on_resume", "start_deadline_seconds", "notify")
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
    CRON_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_POLICY_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    CRON_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    TASK_NAMES_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_BUFFERED_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_CATCH_UP_RUNS_FIELD_NUMBER: _ClassVar[int]
    JITTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    JITTER_MODE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PAUSE_NOTE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    PAUSED_BY_FIELD_NUMBER: _ClassVar[int]
    PAUSE_TIME_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_ON_RESUME_FIELD_NUMBER: _ClassVar[int]
    START_DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    description: str
    cron_expression: str
    interval_seconds: int
    timezone: str
    catch_up_policy: CatchUpPolicy
    enabled: bool
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    next_run_time: _timestamp_pb2.Timestamp
    cron_description: str
    last_run_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    task_names: _containers.RepeatedScalarFieldContainer[str]
    overlap_policy: OverlapPolicy
    max_buffered: int
    catch_up_window_seconds: float
    max_catch_up_runs: int
    jitter_seconds: float
    jitter_mode: JitterMode
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    labels: _containers.ScalarMap[str, str]
    pause_note: str
    paused_until: _timestamp_pb2.Timestamp
    paused_by: str
    pause_time: _timestamp_pb2.Timestamp
    catch_up_on_resume: bool
    start_deadline_seconds: float
    notify: _containers.RepeatedCompositeFieldContainer[_notifier_pb2.NotifyRoute]
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., cron_expression: _Optional[str] = ..., interval_seconds: _Optional[int] = ..., timezone: _Optional[str] = ..., catch_up_policy: _Optional[_Union[CatchUpPolicy, str]] = ..., enabled: _Optional[bool] = ..., task_ids: _Optional[_Iterable[int]] = ..., next_run_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cron_description: _Optional[str] = ..., last_run_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., task_names: _Optional[_Iterable[str]] = ..., overlap_policy: _Optional[_Union[OverlapPolicy, str]] = ..., max_buffered: _Optional[int] = ..., catch_up_window_seconds: _Optional[float] = ..., max_catch_up_runs: _Optional[int] = ..., jitter_seconds: _Optional[float] = ..., jitter_mode: _Optional[_Union[JitterMode, str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., pause_note: _Optional[str] = ..., paused_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., paused_by: _Optional[str] = ..., pause_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., catch_up_on_resume: _Optional[bool] = ..., start_deadline_seconds: _Optional[float] = ..., notify: _Optional[_Iterable[_Union[_notifier_pb2.NotifyRoute, _Mapping]]] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "request_id")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    request_id: str
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule", "repeated_request")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    repeated_request: bool
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class BatchCreateSchedulesRequest(_message.Message):
    __slots__ = ("requests", "request_id")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[CreateScheduleRequest]
    request_id: str
    def __init__(self, requests: _Optional[_Iterable[_Union[CreateScheduleRequest, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class BatchCreateSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "repeated_request")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    repeated_request: bool
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "name")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    schedule_id: int
    name: str
    def __init__(self, schedule_id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "label_selector")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    label_selector: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., label_selector: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_page_token")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    next_page_token: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "update_mask")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: int
    def __init__(self, schedule_id: _Optional[int] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeCronRequest(_message.Message):
    __slots__ = ("cron_expression", "timezone", "after", "count")
    CRON_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    cron_expression: str
    timezone: str
    after: _timestamp_pb2.Timestamp
    count: int
    def __init__(self, cron_expression: _Optional[str] = ..., timezone: _Optional[str] = ..., after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...

class FireTimePreview(_message.Message):
    __slots__ = ("fire_time", "local_time", "dst_note")
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LOCAL_TIME_FIELD_NUMBER: _ClassVar[int]
    DST_NOTE_FIELD_NUMBER: _ClassVar[int]
    fire_time: _timestamp_pb2.Timestamp
    local_time: str
    dst_note: str
    def __init__(self, fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., local_time: _Optional[str] = ..., dst_note: _Optional[str] = ...) -> None: ...

class DescribeCronResponse(_message.Message):
    __slots__ = ("description", "fire_times")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    description: str
    fire_times: _containers.RepeatedCompositeFieldContainer[FireTimePreview]
    def __init__(self, description: _Optional[str] = ..., fire_times: _Optional[_Iterable[_Union[FireTimePreview, _Mapping]]] = ...) -> None: ...

class Fire(_message.Message):
    __slots__ = ("id", "schedule_id", "fire_time", "outcome", "runs", "record_time", "trigger", "start_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    id: int
    schedule_id: int
    fire_time: _timestamp_pb2.Timestamp
    outcome: FireOutcome
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TaskRun]
    record_time: _timestamp_pb2.Timestamp
    trigger: _common_pb2.Trigger
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., schedule_id: _Optional[int] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[FireOutcome, str]] = ..., runs: _Optional[_Iterable[_Union[_common_pb2.TaskRun, _Mapping]]] = ..., record_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger: _Optional[_Union[_common_pb2.Trigger, str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("id", "note", "paused_until")
    ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    id: int
    note: str
    paused_until: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., note: _Optional[str] = ..., paused_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class BackfillScheduleRequest(_message.Message):
    __slots__ = ("id", "start_time", "end_time", "overlap_policy", "dry_run", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_POLICY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    overlap_policy: OverlapPolicy
    dry_run: bool
    request_id: str
    def __init__(self, id: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., overlap_policy: _Optional[_Union[OverlapPolicy, str]] = ..., dry_run: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class BackfillWindow(_message.Message):
    __slots__ = ("fire_time", "already_fired", "fire_id", "runs")
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FIRED_FIELD_NUMBER: _ClassVar[int]
    FIRE_ID_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    fire_time: _timestamp_pb2.Timestamp
    already_fired: bool
    fire_id: int
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TaskRun]
    def __init__(self, fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., already_fired: _Optional[bool] = ..., fire_id: _Optional[int] = ..., runs: _Optional[_Iterable[_Union[_common_pb2.TaskRun, _Mapping]]] = ...) -> None: ...

class BackfillScheduleResponse(_message.Message):
    __slots__ = ("windows", "repeated_request")
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    windows: _containers.RepeatedCompositeFieldContainer[BackfillWindow]
    repeated_request: bool
    def __init__(self, windows: _Optional[_Iterable[_Union[BackfillWindow, _Mapping]]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ("id", "trigger", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    trigger: _common_pb2.Trigger
    request_id: str
    def __init__(self, id: _Optional[int] = ..., trigger: _Optional[_Union[_common_pb2.Trigger, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ("fire", "repeated_request")
    FIRE_FIELD_NUMBER: _ClassVar[int]
    REPEATED_REQUEST_FIELD_NUMBER: _ClassVar[int]
    fire: Fire
    repeated_request: bool
    def __init__(self, fire: _Optional[_Union[Fire, _Mapping]] = ..., repeated_request: _Optional[bool] = ...) -> None: ...

class ListFiresRequest(_message.Message):
    __slots__ = ("schedule_id", "page_size", "page_token")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedule_id: int
    page_size: int
    page_token: str
    def __init__(self, schedule_id: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListFiresResponse(_message.Message):
    __slots__ = ("fires", "next_page_token")
    FIRES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    fires: _containers.RepeatedCompositeFieldContainer[Fire]
    next_page_token: str
    def __init__(self, fires: _Optional[_Iterable[_Union[Fire, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
