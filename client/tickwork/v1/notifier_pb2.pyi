import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NotifierType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NOTIFIER_TYPE_UNSPECIFIED: _ClassVar[NotifierType]
    NOTIFIER_TYPE_EMAIL: _ClassVar[NotifierType]
    NOTIFIER_TYPE_WEBHOOK: _ClassVar[NotifierType]
    NOTIFIER_TYPE_SLACK: _ClassVar[NotifierType]

class NotificationEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NOTIFICATION_EVENT_UNSPECIFIED: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_FINAL_FAILURE: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_RECOVERY: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_AUTO_DISABLED: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_TEST: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_NO_SUCCESS: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_LONG_RUN: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_MISSED_FIRE: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_START_DEADLINE: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_NO_ACTIVE_WORKER: _ClassVar[NotificationEvent]
    NOTIFICATION_EVENT_WORKER_RETURNED: _ClassVar[NotificationEvent]

class NotificationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NOTIFICATION_STATUS_UNSPECIFIED: _ClassVar[NotificationStatus]
    NOTIFICATION_STATUS_PENDING: _ClassVar[NotificationStatus]
    NOTIFICATION_STATUS_SENT: _ClassVar[NotificationStatus]
    NOTIFICATION_STATUS_GIVEN_UP: _ClassVar[NotificationStatus]
NOTIFIER_TYPE_UNSPECIFIED: NotifierType
NOTIFIER_TYPE_EMAIL: NotifierType
NOTIFIER_TYPE_WEBHOOK: NotifierType
NOTIFIER_TYPE_SLACK: NotifierType
NOTIFICATION_EVENT_UNSPECIFIED: NotificationEvent
NOTIFICATION_EVENT_FINAL_FAILURE: NotificationEvent
NOTIFICATION_EVENT_RECOVERY: NotificationEvent
NOTIFICATION_EVENT_AUTO_DISABLED: NotificationEvent
NOTIFICATION_EVENT_TEST: NotificationEvent
NOTIFICATION_EVENT_NO_SUCCESS: NotificationEvent
NOTIFICATION_EVENT_LONG_RUN: NotificationEvent
NOTIFICATION_EVENT_MISSED_FIRE: NotificationEvent
NOTIFICATION_EVENT_START_DEADLINE: NotificationEvent
NOTIFICATION_EVENT_NO_ACTIVE_WORKER: NotificationEvent
NOTIFICATION_EVENT_WORKER_RETURNED: NotificationEvent
NOTIFICATION_STATUS_UNSPECIFIED: NotificationStatus
NOTIFICATION_STATUS_PENDING: NotificationStatus
NOTIFICATION_STATUS_SENT: NotificationStatus
NOTIFICATION_STATUS_GIVEN_UP: NotificationStatus

class NotifyRoute(_message.Message):
    __slots__ = ("notifiers", "events", "every")
    NOTIFIERS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    notifiers: _containers.RepeatedScalarFieldContainer[str]
    events: _containers.RepeatedScalarFieldContainer[NotificationEvent]
    every: bool
    def __init__(self, notifiers: _Optional[_Iterable[str]] = ..., events: _Optional[_Iterable[_Union[NotificationEvent, str]]] = ..., every: _Optional[bool] = ...) -> None: ...

class Notifier(_message.Message):
    __slots__ = ("name", "type", "url", "secret", "to", "timeout_seconds", "events", "every", "tasks", "schedules", "has_url", "has_secret", "builtin", "create_time", "update_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    HAS_URL_FIELD_NUMBER: _ClassVar[int]
    HAS_SECRET_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: NotifierType
    url: str
    secret: str
    to: _containers.RepeatedScalarFieldContainer[str]
    timeout_seconds: float
    events: _containers.RepeatedScalarFieldContainer[NotificationEvent]
    every: bool
    tasks: _containers.RepeatedScalarFieldContainer[str]
    schedules: _containers.RepeatedScalarFieldContainer[str]
    has_url: bool
    has_secret: bool
    builtin: bool
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[NotifierType, str]] = ..., url: _Optional[str] = ..., secret: _Optional[str] = ..., to: _Optional[_Iterable[str]] = ..., timeout_seconds: _Optional[float] = ..., events: _Optional[_Iterable[_Union[NotificationEvent, str]]] = ..., every: _Optional[bool] = ..., tasks: _Optional[_Iterable[str]] = ..., schedules: _Optional[_Iterable[str]] = ..., has_url: _Optional[bool] = ..., has_secret: _Optional[bool] = ..., builtin: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PutNotifierRequest(_message.Message):
    __slots__ = ("notifier", "validate_only")
    NOTIFIER_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    notifier: Notifier
    validate_only: bool
    def __init__(self, notifier: _Optional[_Union[Notifier, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class PutNotifierResponse(_message.Message):
    __slots__ = ("notifier", "created", "changed")
    NOTIFIER_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    notifier: Notifier
    created: bool
    changed: bool
    def __init__(self, notifier: _Optional[_Union[Notifier, _Mapping]] = ..., created: _Optional[bool] = ..., changed: _Optional[bool] = ...) -> None: ...

class ListNotifiersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListNotifiersResponse(_message.Message):
    __slots__ = ("notifiers",)
    NOTIFIERS_FIELD_NUMBER: _ClassVar[int]
    notifiers: _containers.RepeatedCompositeFieldContainer[Notifier]
    def __init__(self, notifiers: _Optional[_Iterable[_Union[Notifier, _Mapping]]] = ...) -> None: ...

class DeleteNotifierRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteNotifierResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TestNotifierRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class TestNotifierResponse(_message.Message):
    __slots__ = ("delivered", "error", "event_id")
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    delivered: bool
    error: str
    event_id: str
    def __init__(self, delivered: _Optional[bool] = ..., error: _Optional[str] = ..., event_id: _Optional[str] = ...) -> None: ...

class Notification(_message.Message):
    __slots__ = ("id", "event_id", "event", "notifier", "status", "attempts", "last_error", "task_name", "job_id", "state_change", "event_time", "sent_time", "next_attempt_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    NOTIFIER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    SENT_TIME_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    id: int
    event_id: str
    event: NotificationEvent
    notifier: str
    status: NotificationStatus
    attempts: int
    last_error: str
    task_name: str
    job_id: int
    state_change: bool
    event_time: _timestamp_pb2.Timestamp
    sent_time: _timestamp_pb2.Timestamp
    next_attempt_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., event_id: _Optional[str] = ..., event: _Optional[_Union[NotificationEvent, str]] = ..., notifier: _Optional[str] = ..., status: _Optional[_Union[NotificationStatus, str]] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., task_name: _Optional[str] = ..., job_id: _Optional[int] = ..., state_change: _Optional[bool] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sent_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListNotificationsRequest(_message.Message):
    __slots__ = ("limit", "notifier", "status")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NOTIFIER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    notifier: str
    status: NotificationStatus
    def __init__(self, limit: _Optional[int] = ..., notifier: _Optional[str] = ..., status: _Optional[_Union[NotificationStatus, str]] = ...) -> None: ...

class ListNotificationsResponse(_message.Message):
    __slots__ = ("notifications",)
    NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
    notifications: _containers.RepeatedCompositeFieldContainer[Notification]
    def __init__(self, notifications: _Optional[_Iterable[_Union[Notification, _Mapping]]] = ...) -> None: ...
