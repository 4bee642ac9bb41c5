"""TaskService: translate requests, call the store and the App, translate answers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import grpc

from scheduler_svc import overrides, selectors, validation
from scheduler_svc.app import App
from scheduler_svc.callers import caller_label, may_override_any_param
from scheduler_svc.errors import InvalidArgument, NotFound, Reason
from scheduler_svc.records import EnqueueResult, RunOptions, TaskRecord
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers import _paging as paging
from scheduler_svc.servicers._errors import rpc_errors
from scheduler_svc.servicers._masks import update_paths, writable_fields
from scheduler_svc.servicers._request_ids import once
from scheduler_svc.servicers._routes import stored_routes
from scheduler_svc.servicers.pauses import TaskDisables
from scheduler_svc.store import ABORTED_BY_OPERATOR, Remember
from scheduler_svc.values import AbortAction
from tickwork.v1 import common_pb2, task_pb2, task_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]

#: The Task fields an update may write: every field its proto does not mark OUTPUT_ONLY or
#: IDENTIFIER.
WRITABLE = writable_fields(task_pb2.Task.DESCRIPTOR)
#: RetryPolicy fields an update mask may name one by one (``retry_policy.max_attempts``).
RETRY_FIELDS = ("max_attempts", "backoff_base_seconds", "backoff_cap_seconds")
_RETRY_DEFAULTS = {"max_attempts": 1, "backoff_base_seconds": 10.0, "backoff_cap_seconds": 600.0}


def task_values(task: task_pb2.Task, paths: tuple[str, ...]) -> dict[str, Any]:
    """Validated column values for the Task fields named in ``paths`` (checked paths, see
    :func:`_masks.update_paths`). ``retry_policy`` sets the whole policy, unset fields taking
    their defaults; ``retry_policy.<field>`` sets that column alone (0 meaning its default),
    left for :func:`check_retry` to validate against the stored policy.

    Raises InvalidArgument naming the field (task.name, task.handler, task.params, ...).
    """
    out: dict[str, Any] = {}
    for path in paths:
        if path == "name":
            out["name"] = validation.name(task.name, "task.name")
        elif path == "description":
            out["description"] = validation.description(task.description, "task.description")
        elif path == "handler":
            out["handler"] = task.handler.strip()
        elif path == "params":
            validation.params_size(task.params.ByteSize())
            out["params"] = cv.from_struct(task.params, "task.params")
        elif path == "task_priority":
            value = task.task_priority if task.HasField("task_priority") else 100
            out["task_priority"] = validation.priority(value)
        elif path == "enabled":
            out["enabled"] = task.enabled if task.HasField("enabled") else True
        elif path == "timeout_seconds":
            out["timeout_seconds"] = validation.seconds(
                task.timeout_seconds, "task.timeout_seconds"
            )
        elif path in ("memory_limit_bytes", "cpu_limit_seconds"):
            out[path] = validation.process_limit(getattr(task, path), f"task.{path}")
        elif path == "concurrency_group":
            out[path] = validation.concurrency_group(task.concurrency_group)
        elif path == "notify":
            out["notify"] = stored_routes(task.notify, "task.notify")
        elif path == "overridable_params":
            out[path] = overrides.overridable_params(task.overridable_params) or None
        elif path in ("expect_success_within_seconds", "warn_after_seconds"):
            out[path] = validation.seconds(getattr(task, path), f"task.{path}")
        elif path == "retry_policy":
            rp = task.retry_policy
            attempts, base, cap = validation.retry_policy(
                rp.max_attempts or 1,
                rp.backoff_base_seconds or 10.0,
                rp.backoff_cap_seconds or 600.0,
            )
            out.update(max_attempts=attempts, backoff_base_seconds=base, backoff_cap_seconds=cap)
        elif path.startswith("retry_policy.") and path[len("retry_policy.") :] in RETRY_FIELDS:
            column = path[len("retry_policy.") :]
            out[column] = getattr(task.retry_policy, column) or _RETRY_DEFAULTS[column]
        elif path == "labels":
            out["labels"] = validation.labels(task.labels, "task.labels")
        else:
            raise InvalidArgument(
                f"unknown or read-only field {path!r}; writable: {', '.join(WRITABLE)}",
                field="update_mask",
                reason=Reason.UPDATE_MASK_INVALID,
            )
    return out


class TaskServicer(TaskDisables, task_pb2_grpc.TaskServiceServicer):
    """tickwork.v1.TaskService."""

    def __init__(self, app: App) -> None:
        self.app = app

    @rpc_errors
    async def CreateTask(
        self, request: task_pb2.CreateTaskRequest, context: Ctx
    ) -> task_pb2.CreateTaskResponse:
        def answer(stored: TaskRecord) -> task_pb2.CreateTaskResponse:
            return task_pb2.CreateTaskResponse(task=cv.task(stored))

        async def run(remember: Remember | None) -> task_pb2.CreateTaskResponse:
            values = task_values(request.task, WRITABLE)
            validation.handler_params(values["handler"], values["params"])
            now = remember.now if remember else self.app.clock()
            return answer(await self.app.store.create_task(values, now, remember=remember))

        return await once(
            self.app, "TaskService/CreateTask", request, task_pb2.CreateTaskResponse, run, answer
        )

    @rpc_errors
    async def GetTask(
        self, request: task_pb2.GetTaskRequest, context: Ctx
    ) -> task_pb2.GetTaskResponse:
        if request.task_id:
            found = await self.app.store.get_task(request.task_id)
        elif request.name:
            name = validation.free_text(request.name, "name")
            found = await self.app.store.get_task_by_name(name)
        else:
            raise InvalidArgument(
                "give task_id or name", field="task_id", reason=Reason.FIELD_REQUIRED
            )
        times = await self.app.store.task_outcome_times([found.id])
        return task_pb2.GetTaskResponse(task=cv.task(found, times.get(found.id, (None, None))))

    @rpc_errors
    async def ListTasks(
        self, request: task_pb2.ListTasksRequest, context: Ctx
    ) -> task_pb2.ListTasksResponse:
        size = cv.page_size(request.page_size)
        after = paging.decode(request) or ""
        selector = selectors.parse(request.label_selector)
        rows = await self.app.store.list_tasks(size + 1, after, selector)
        times = await self.app.store.task_outcome_times([r.id for r in rows])
        page = cv.fit_page(rows, size, lambda r: cv.task(r, times.get(r.id, (None, None))))
        token = paging.encode(request, page.last.name) if page.last else ""
        return task_pb2.ListTasksResponse(tasks=page.items, next_page_token=token)

    @rpc_errors
    async def UpdateTask(
        self, request: task_pb2.UpdateTaskRequest, context: Ctx
    ) -> task_pb2.UpdateTaskResponse:
        if not request.task.id:
            raise InvalidArgument("required", field="task.id", reason=Reason.FIELD_REQUIRED)
        paths = update_paths(
            request.task, request.update_mask, WRITABLE, {"retry_policy": RETRY_FIELDS}
        )
        if not paths:
            raise InvalidArgument(
                "the request sets no writable field; name the fields to change in update_mask",
                field="update_mask",
                reason=Reason.UPDATE_MASK_INVALID,
            )
        values = task_values(request.task, paths)
        if {"handler", "params", *RETRY_FIELDS} & set(values):
            current = await self.app.store.get_task(request.task.id)
            validation.handler_params(
                values.get("handler", current.handler), values.get("params", current.params)
            )
            # A policy set field by field must still hold with the stored fields.
            validation.retry_policy(
                *(values.get(column, getattr(current, column)) for column in RETRY_FIELDS)
            )
        stored, cancelled = await self.app.store.update_task(
            request.task.id, values, self.app.clock(), by=caller_label()
        )
        for job_id in cancelled:
            self.app.hub.job_changed(job_id)
        return task_pb2.UpdateTaskResponse(task=cv.task(stored))

    @rpc_errors
    async def DeleteTask(
        self, request: task_pb2.DeleteTaskRequest, context: Ctx
    ) -> task_pb2.DeleteTaskResponse:
        await self.app.store.delete_task(cv.required_id(request.task_id, "task_id"))
        self.app.schedules_changed()
        return task_pb2.DeleteTaskResponse()

    @rpc_errors
    async def RunTasks(
        self, request: task_pb2.RunTasksRequest, context: Ctx
    ) -> task_pb2.RunTasksResponse:
        def answer(result: EnqueueResult) -> task_pb2.RunTasksResponse:
            # One entry per request entry, in order (ids, then names); repeats come back skipped.
            return task_pb2.RunTasksResponse(runs=[cv.task_run(r) for r in result.runs])

        async def run(remember: Remember | None) -> task_pb2.RunTasksResponse:
            count = len(request.task_ids) + len(request.task_names)
            # Named by the field the caller filled (task_ids when both or neither).
            only_names = bool(request.task_names) and not request.task_ids
            validation.tasks_per_call(count, "task_names" if only_names else "task_ids")
            ids = cv.positive_ids(request.task_ids, "task_ids")
            for i, name in enumerate(request.task_names):
                field = f"task_names[{i}]"
                if not name:
                    raise InvalidArgument("required", field=field, reason=Reason.FIELD_REQUIRED)
                validation.free_text(name, field)
                ids.append((await self.app.store.get_task_by_name(name, field=field)).id)
            trigger = request.trigger or common_pb2.TRIGGER_API
            if trigger not in (common_pb2.TRIGGER_MANUAL, common_pb2.TRIGGER_API):
                raise InvalidArgument("must be TRIGGER_MANUAL or TRIGGER_API", field="trigger")
            now = remember.now if remember else self.app.clock()
            options = await self._run_options(request, ids, now)
            result = await self.app.enqueue(
                ids, cv.trigger_name(trigger), options=options, remember=remember
            )
            return answer(result)

        return await once(
            self.app, "TaskService/RunTasks", request, task_pb2.RunTasksResponse, run, answer
        )

    async def _run_options(
        self, request: task_pb2.RunTasksRequest, task_ids: list[int], now: dt.datetime
    ) -> RunOptions:
        """The validated run options of ``request`` for the tasks ``task_ids``, with the
        caller's token label. An operator's override may set only the paths each task
        declares overridable; the override patched over each task's params must be valid
        for its handler (an unknown task is left for the enqueue to report).

        Raises PermissionDenied naming params_override.<path>; InvalidArgument naming
        params_override, not_before_time or labels[...].
        """
        override: dict[str, Any] | None = None
        if request.params_override.fields:
            validation.params_size(request.params_override.ByteSize(), "params_override")
            override = cv.from_struct(request.params_override, "params_override")
            restricted = not may_override_any_param()
            for task_id in dict.fromkeys(task_ids):
                try:
                    task = await self.app.store.get_task(task_id)
                except NotFound:
                    continue
                if restricted:
                    overrides.check_override(task.name, task.overridable_params or [], override)
                try:
                    validation.handler_params(
                        task.handler,
                        overrides.merge_patch(task.params, override),
                        "params_override",
                    )
                except InvalidArgument as err:
                    raise InvalidArgument(
                        f'patched over the params of task "{task.name}": {err.text}',
                        field=err.field,
                        reason=err.reason,
                    ) from None
        not_before = None
        if request.HasField("not_before_time"):
            when = cv.from_ts(request.not_before_time, "not_before_time")
            not_before = validation.not_before(when, now)
        return RunOptions(
            requested_by=caller_label(),
            params_override=override,
            not_before=not_before if not_before is not None and not_before > now else None,
            labels=validation.labels(request.labels) or None,
        )

    @rpc_errors
    async def AbortTasks(
        self, request: task_pb2.AbortTasksRequest, context: Ctx
    ) -> task_pb2.AbortTasksResponse:
        def answer(done: list[tuple[int, int, AbortAction, int]]) -> task_pb2.AbortTasksResponse:
            return task_pb2.AbortTasksResponse(
                aborts=[
                    task_pb2.TaskAbort(
                        task_id=task_id,
                        job_id=job_id,
                        action=task_pb2.TaskAbort.Action.Value(f"ACTION_{action}"),  # type: ignore[arg-type]
                        cancelled_job_count=cancelled,
                    )
                    for task_id, job_id, action, cancelled in done
                ]
            )

        async def run(remember: Remember | None) -> task_pb2.AbortTasksResponse:
            validation.tasks_per_call(len(request.task_ids), "task_ids")
            now = remember.now if remember else self.app.clock()
            done = await self.app.store.abort_tasks(
                cv.positive_ids(request.task_ids, "task_ids"),
                now,
                stopped_by=caller_label(),
                remember=remember,
            )
            for _, job_id, action, _ in done:
                if action == AbortAction.ABORT_REQUESTED:
                    self.app.hub.request_abort(job_id, ABORTED_BY_OPERATOR)
                if job_id:
                    self.app.hub.job_changed(job_id)
            return answer(done)

        return await once(
            self.app, "TaskService/AbortTasks", request, task_pb2.AbortTasksResponse, run, answer
        )
