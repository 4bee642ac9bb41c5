"""What the SDK sends and how it reads the answers: pure functions, no I/O.

The clients (:mod:`tickwork._async` and its service modules, and the ``_sync`` twins
generated from them), the command line and :mod:`tickwork.apply` turn arguments into
protobuf requests here, so the clients only call the stubs. An argument error raises
:class:`~tickwork.errors.InvalidArgument` (also a ``ValueError``) naming the argument, before
anything is sent. This package is the index; each module holds one concern:

- :mod:`.address`: the ``HOST:PORT`` to dial, and whether an address is loopback.
- :mod:`.checks`: references, ids, Python types and enum names of arguments.
- :mod:`.convert`: params to ``Struct``, datetimes to ``Timestamp`` (UTC) and back.
- :mod:`.jobs`: ListJobs, paging, and the timing of a job watch.
- :mod:`.tasks`: task requests and update masks.
- :mod:`.schedules`: schedule requests, update masks and DescribeCron.
- :mod:`.routes`: the notification routes of tasks and schedules.
"""

from tickwork._requests.address import (
    DEFAULT_PORT,
    DEFAULT_SERVER,
    SERVER_ENV,
    is_loopback,
    resolve_server,
    with_default_port,
)
from tickwork._requests.checks import (
    MAX_ID,
    Ref,
    check_job_id,
    check_ref,
    check_type,
    enum_label,
    parse_catch_up_policy,
    parse_jitter_mode,
    parse_job_status,
    parse_overlap_policy,
    signed_range,
    task_refs,
)
from tickwork._requests.convert import MAX_NESTING, to_datetime, to_struct, to_timestamp
from tickwork._requests.jobs import (
    MAX_PAGE_SIZE,
    TERMINAL_STATUSES,
    check_limit,
    is_terminal,
    list_jobs_request,
    page_size,
    remaining_s,
    resume_delay_s,
    wait_timeout,
    watch_deadline,
)
from tickwork._requests.routes import Route, notify_routes
from tickwork._requests.schedules import (
    SCHEDULE_MASK,
    TIMING_KEYWORDS,
    NewSchedule,
    ScheduleFields,
    batch_create_schedules_request,
    build_schedule,
    describe_cron_request,
    get_schedule_request,
    new_schedule_refs,
    pause_schedule_request,
    set_timing,
    trigger_schedule_request,
    update_schedule_request,
)
from tickwork._requests.tasks import (
    TASK_MASK,
    TaskFields,
    build_task,
    disable_task_request,
    get_task_request,
    param_paths,
    run_tasks_request,
    runs_in_argument_order,
    update_task_request,
)

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_SERVER",
    "MAX_ID",
    "MAX_NESTING",
    "MAX_PAGE_SIZE",
    "SCHEDULE_MASK",
    "SERVER_ENV",
    "TASK_MASK",
    "TERMINAL_STATUSES",
    "TIMING_KEYWORDS",
    "NewSchedule",
    "Ref",
    "Route",
    "ScheduleFields",
    "TaskFields",
    "batch_create_schedules_request",
    "build_schedule",
    "build_task",
    "check_job_id",
    "check_limit",
    "check_ref",
    "check_type",
    "describe_cron_request",
    "disable_task_request",
    "enum_label",
    "get_schedule_request",
    "get_task_request",
    "is_loopback",
    "is_terminal",
    "list_jobs_request",
    "new_schedule_refs",
    "notify_routes",
    "page_size",
    "param_paths",
    "parse_catch_up_policy",
    "parse_jitter_mode",
    "parse_job_status",
    "parse_overlap_policy",
    "pause_schedule_request",
    "remaining_s",
    "resolve_server",
    "resume_delay_s",
    "run_tasks_request",
    "runs_in_argument_order",
    "set_timing",
    "signed_range",
    "task_refs",
    "to_datetime",
    "to_struct",
    "to_timestamp",
    "trigger_schedule_request",
    "update_schedule_request",
    "update_task_request",
    "wait_timeout",
    "watch_deadline",
    "with_default_port",
]
