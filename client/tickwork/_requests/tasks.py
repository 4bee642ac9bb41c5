"""Task requests: GetTask, RunTasks (and its answer in argument order), CreateTask and
UpdateTask with its field mask and retry policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict

from google.protobuf.field_mask_pb2 import FieldMask

from tickwork._requests.checks import Ref, assign_field, assign_labels, check_ref, check_type
from tickwork._requests.convert import to_struct, to_timestamp
from tickwork._requests.routes import Route, notify_routes
from tickwork.errors import InvalidArgument
from tickwork.v1.common_pb2 import TaskRun, Trigger
from tickwork.v1.task_pb2 import (
    DisableTaskRequest,
    GetTaskRequest,
    RetryPolicy,
    RunTasksRequest,
    Task,
    UpdateTaskRequest,
)


class TaskFields(TypedDict, total=False):
    """Keyword arguments of ``update_task``: the writable Task fields.

    ``max_attempts``, ``backoff_base_seconds`` and ``backoff_cap_seconds`` update the
    task's retry policy (the other two keep their current values).
    """

    name: str
    description: str
    handler: str
    params: Mapping[str, Any]
    task_priority: int
    enabled: bool
    timeout_seconds: float
    max_attempts: int
    backoff_base_seconds: float
    backoff_cap_seconds: float
    memory_limit_bytes: int
    cpu_limit_seconds: int
    concurrency_group: str
    expect_success_within_seconds: float
    warn_after_seconds: float
    labels: Mapping[str, str]
    notify: Sequence[Route]
    overridable_params: Sequence[str]


_RETRY_FIELDS = ("max_attempts", "backoff_base_seconds", "backoff_cap_seconds")
_TASK_FIELDS = frozenset(TaskFields.__annotations__)

TASK_MASK = (
    "name",
    "description",
    "handler",
    "params",
    "task_priority",
    "enabled",
    "timeout_seconds",
    "retry_policy",
    "memory_limit_bytes",
    "cpu_limit_seconds",
    "concurrency_group",
    "labels",
    "expect_success_within_seconds",
    "warn_after_seconds",
    "notify",
    "overridable_params",
)
"""Every writable Task field: the full update mask."""


def get_task_request(ref: Ref) -> GetTaskRequest:
    """Build GetTask by id (int) or by name (str); raises InvalidArgument on a bad ref."""
    ref = check_ref(ref, "task")
    if isinstance(ref, int):
        return GetTaskRequest(task_id=ref)
    return GetTaskRequest(name=ref)


def run_tasks_request(
    refs: Sequence[Ref],
    trigger: Trigger,
    *,
    params_override: Mapping[str, Any] | None = None,
    not_before: datetime | None = None,
    labels: Mapping[str, str] | None = None,
) -> RunTasksRequest:
    """Build RunTasks from ids and names and the run options.

    Raises:
        InvalidArgument: no task given, a bad reference, params_override not a JSON-like
            mapping, a naive ``not_before``, or labels that are not strings.
    """
    if not refs:
        raise InvalidArgument("tasks: name at least one task id or name")
    checked = [check_ref(r, "task") for r in refs]
    request = RunTasksRequest(
        task_ids=[r for r in checked if isinstance(r, int)],
        task_names=[r for r in checked if isinstance(r, str)],
        trigger=trigger,
    )
    if params_override:
        request.params_override.CopyFrom(to_struct(params_override, "params_override"))
    if not_before is not None:
        request.not_before_time.CopyFrom(to_timestamp(not_before, "not_before"))
    for key, value in (labels or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"labels: keys and values must be str, got {key!r}: {value!r}")
        request.labels[key] = value
    return request


def runs_in_argument_order(refs: Sequence[Ref], runs: Sequence[TaskRun]) -> list[TaskRun]:
    """Reorder RunTasks' answer (ids first, then names) into the caller's argument order.

    Args:
        refs (Sequence[int | str]): the references as the caller gave them.
        runs (Sequence[TaskRun]): the server's runs, one per reference.

    Returns:
        list[TaskRun]: ``runs[i]`` belongs to ``refs[i]``. When the counts differ (a server
        that merged duplicates) the server's order is kept.
    """
    if len(runs) != len(refs):
        return list(runs)
    n_ids = sum(1 for r in refs if isinstance(r, int))
    by_id = iter(runs[:n_ids])
    by_name = iter(runs[n_ids:])
    return [next(by_id) if isinstance(r, int) else next(by_name) for r in refs]


def build_task(
    name: str,
    handler: str,
    params: Mapping[str, Any],
    *,
    description: str,
    task_priority: int,
    enabled: bool,
    timeout_seconds: float,
    max_attempts: int,
    backoff_base_seconds: float,
    backoff_cap_seconds: float,
    memory_limit_bytes: int = 0,
    cpu_limit_seconds: int = 0,
    concurrency_group: str = "",
    labels: Mapping[str, str] | None = None,
) -> Task:
    """Build a Task with every writable field set explicitly (see ``create_task``).

    Raises:
        InvalidArgument: a value of the wrong Python type, or params that are not JSON.
    """
    check_type(name, str, "name")
    check_type(handler, str, "handler")
    check_type(description, str, "description")
    check_type(task_priority, int, "task_priority")
    check_type(enabled, bool, "enabled")
    check_type(timeout_seconds, int | float, "timeout_seconds")
    check_type(max_attempts, int, "max_attempts")
    check_type(backoff_base_seconds, int | float, "backoff_base_seconds")
    check_type(backoff_cap_seconds, int | float, "backoff_cap_seconds")
    check_type(memory_limit_bytes, int, "memory_limit_bytes")
    check_type(cpu_limit_seconds, int, "cpu_limit_seconds")
    check_type(concurrency_group, str, "concurrency_group")
    task = Task(params=to_struct(params, "task.params"))
    for field, value in (
        ("name", name),
        ("description", description),
        ("handler", handler),
        ("task_priority", task_priority),
        ("enabled", enabled),
        ("timeout_seconds", timeout_seconds),
        ("memory_limit_bytes", memory_limit_bytes),
        ("cpu_limit_seconds", cpu_limit_seconds),
        ("concurrency_group", concurrency_group),
    ):
        assign_field(task, field, value)
    assign_labels(task, labels)
    for field, value in (
        ("max_attempts", max_attempts),
        ("backoff_base_seconds", backoff_base_seconds),
        ("backoff_cap_seconds", backoff_cap_seconds),
    ):
        _assign_retry(task.retry_policy, field, value)
    return task


def param_paths(paths: Sequence[str]) -> list[str]:
    """``paths`` (Task.overridable_params) as a list of str; the server checks their form.

    Raises:
        InvalidArgument: a single str (a sequence of its characters) or an item not a str.
    """
    if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
        raise InvalidArgument('overridable_params: expected a list of str such as ["env.REGION"]')
    return list(paths)


def _assign_retry(retry: RetryPolicy, field: str, value: object) -> None:
    """Set a retry policy field. 0 is refused: on the wire it means "unset", which the
    server reads as the default (1 attempt, 10 s, 600 s), not as the 0 asked for.

    Raises:
        InvalidArgument: ``field: ...`` for 0, a wrong type or a number out of range.
    """
    if value == 0 and not isinstance(value, bool):
        raise InvalidArgument(
            f"{field}: must be above 0 (0 would be read as the default)"
            + (": 1 means no retry" if field == "max_attempts" else "")
        )
    assign_field(retry, field, value)


def update_task_request(current: Task, fields: TaskFields) -> UpdateTaskRequest:
    """Build UpdateTask changing only ``fields`` of ``current``.

    Args:
        current (Task): the stored task (its id names it; its retry policy fills the retry
            values not given).
        fields (TaskFields): the new values, by SDK keyword.

    Returns:
        UpdateTaskRequest: the task with the new values and a mask of exactly the given
        fields (the three retry keywords map to the one path ``retry_policy``).

    Raises:
        TypeError: an unknown keyword.
        InvalidArgument: no field given, or params not JSON-representable.
    """
    unknown = sorted(set(fields) - _TASK_FIELDS)
    if unknown:
        raise TypeError(
            f"update_task() got unknown field(s) {', '.join(unknown)}; "
            f"expected some of {', '.join(sorted(_TASK_FIELDS))}"
        )
    if not fields:
        raise InvalidArgument("update_task: give at least one field to change")
    task = Task(id=current.id)
    paths: list[str] = []
    for key, value in fields.items():
        if key in _RETRY_FIELDS:
            continue
        if key == "params":
            task.params.CopyFrom(to_struct(fields["params"], "task.params"))
        elif key == "labels":
            assign_labels(task, fields["labels"])
        elif key == "notify":
            task.notify.extend(notify_routes(fields["notify"]))
        elif key == "overridable_params":
            task.overridable_params.extend(param_paths(fields["overridable_params"]))
        else:
            assign_field(task, key, value)
        paths.append(key)
    if any(k in fields for k in _RETRY_FIELDS):
        retry = RetryPolicy()
        retry.CopyFrom(current.retry_policy)
        if not current.HasField("retry_policy"):
            retry.max_attempts, retry.backoff_base_seconds, retry.backoff_cap_seconds = 1, 10, 600
        for key in _RETRY_FIELDS:
            if key in fields:
                _assign_retry(retry, key, fields[key])  # type: ignore[literal-required]
        task.retry_policy.CopyFrom(retry)
        paths.append("retry_policy")
    return UpdateTaskRequest(task=task, update_mask=FieldMask(paths=paths))


def disable_task_request(
    task_id: int, note: str = "", until: datetime | None = None
) -> DisableTaskRequest:
    """Build DisableTask: ``note`` for people, ``until`` (aware) when it is enabled again.

    Raises:
        InvalidArgument: a note that is not str, or a naive ``until``.
    """
    check_type(note, str, "note")
    request = DisableTaskRequest(id=task_id, note=note)
    if until is not None:
        request.disabled_until.CopyFrom(to_timestamp(until, "until"))
    return request
