"""The asyncio client's TaskService methods, tasks' definitions (running them is in
:mod:`tickwork._async_jobs`): :class:`TasksMixin`, a part of :class:`~tickwork.AsyncClient`.

Hand-written; ``scripts/unasync.py`` generates :mod:`tickwork._sync_tasks` from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack

from tickwork import _requests as rq
from tickwork._async_base import ClientBase
from tickwork.v1.task_pb2 import (
    CreateTaskRequest,
    DeleteTaskRequest,
    EnableTaskRequest,
    ListTasksRequest,
    Task,
)

__all__ = ["TasksMixin"]


class TasksMixin(ClientBase):
    """Tasks: create, get, list, update, delete, enable, disable."""

    async def create_task(
        self,
        name: str,
        handler: str,
        params: Mapping[str, Any],
        *,
        description: str = "",
        task_priority: int = 100,
        enabled: bool = True,
        timeout_seconds: float = 0,
        max_attempts: int = 1,
        backoff_base_seconds: float = 10,
        backoff_cap_seconds: float = 600,
        memory_limit_bytes: int = 0,
        cpu_limit_seconds: int = 0,
        concurrency_group: str = "",
        labels: Mapping[str, str] | None = None,
        notify: Sequence[rq.Route] = (),
        overridable_params: Sequence[str] = (),
    ) -> Task:
        """Create a task and return it with its id.

        Args:
            name (str): unique, non-empty, at most 200 characters.
            handler (str): ``"shell"``, ``"python"`` or a registered handler name.
            params (Mapping[str, Any]): the handler's parameters (JSON-like), e.g.
                ``{"argv": ["sh", "-c", "echo ok"]}`` or ``{"callable": "pkg.mod:fn"}``.
            description (str): free text.
            task_priority (int): higher runs first within a lane; default 100.
            enabled (bool): a disabled task is never enqueued by the scheduler.
            timeout_seconds (float): longest run time, seconds; 0 means no limit.
            max_attempts (int): attempts including the first; 1 means no retry.
            backoff_base_seconds (float): base of the exponential retry backoff, seconds.
            backoff_cap_seconds (float): upper bound of one backoff delay, seconds.
            memory_limit_bytes (int): address space each job process may map, bytes
                (RLIMIT_AS); 0 means no limit.
            cpu_limit_seconds (int): CPU time each job process may use, seconds
                (RLIMIT_CPU); 0 means no limit.
            concurrency_group (str): jobs of tasks in one non-empty group never run at
                once (with the service's TICKWORK_MAX_RUNNING_JOBS above 1); empty: the
                task alone.
            labels (Mapping[str, str] | None): labels for ownership and filtering (keys of
                at most 63 characters of A-Z, a-z, 0-9 and ``._-/``; values at most 63).

            notify (Sequence[Route]): which notifiers get which of its events: NotifyRoute
                messages or mappings ``{"notifiers": [...], "events": ["final_failure"],
                "every": False}``; empty: each notifier's own route.
            overridable_params (Sequence[str]): the dotted param paths a caller with the
                operator role may set in a run's ``params_override`` (``"env.REGION"``,
                ``"kwargs.limit"``); empty: none (admins may override anything).

        Raises:
            AlreadyExists: the name is taken.
            InvalidArgument: a bad field, e.g. params the handler rejects (named).
        """
        task = rq.build_task(
            name,
            handler,
            params,
            description=description,
            task_priority=task_priority,
            enabled=enabled,
            timeout_seconds=timeout_seconds,
            max_attempts=max_attempts,
            backoff_base_seconds=backoff_base_seconds,
            backoff_cap_seconds=backoff_cap_seconds,
            memory_limit_bytes=memory_limit_bytes,
            cpu_limit_seconds=cpu_limit_seconds,
            concurrency_group=concurrency_group,
            labels=labels,
        )
        task.notify.extend(rq.notify_routes(notify))
        task.overridable_params.extend(rq.param_paths(overridable_params))
        request = CreateTaskRequest(task=task)
        response = await self._call(self._stubs().tasks.CreateTask, request)
        return response.task

    async def get_task(self, task: int | str) -> Task:
        """Return a task by id or name, with its failure count and retry policy.

        Args:
            task (int | str): the task's id or name.

        Raises:
            NotFound: no such task.
            InvalidArgument: a bad reference.
        """
        request = rq.get_task_request(task)
        response = await self._call(self._stubs().tasks.GetTask, request)
        return response.task

    async def list_tasks(self, selector: str = "") -> list[Task]:
        """Return every task, in ascending name order (all pages are followed).

        Args:
            selector (str): only tasks whose labels match this label selector,
                ``"key=value,key2=value2"`` (all must hold); empty means all.

        Raises:
            InvalidArgument: a malformed selector.
        """
        rq.check_type(selector, str, "selector")

        async def fetch(size: int, token: str) -> tuple[Sequence[Task], str]:
            request = ListTasksRequest(page_size=size, page_token=token, label_selector=selector)
            response = await self._call(self._stubs().tasks.ListTasks, request)
            return response.tasks, response.next_page_token

        return await self._collect(fetch, None)

    async def update_task(self, task: int | str, **fields: Unpack[rq.TaskFields]) -> Task:
        """Change the given fields of a task and return the stored task.

        Only the keywords given are sent (the update mask is built from their names), e.g.
        ``await update_task("backup", enabled=False, timeout_seconds=600)``. Keywords are
        those of :meth:`create_task` plus ``name``; ``max_attempts`` and the backoff keywords
        change the retry policy, keeping the values not given. Re-enabling resets the
        failure count.

        Args:
            task (int | str): the task's id or name.
            **fields (TaskFields): the new values (durations in seconds).

        Raises:
            NotFound: no such task.
            InvalidArgument: no field, or a bad value.
            AlreadyExists: the new name is taken.
            TypeError: an unknown keyword.
        """
        current = await self.get_task(task)
        request = rq.update_task_request(current, fields)
        response = await self._call(self._stubs().tasks.UpdateTask, request)
        return response.task

    async def delete_task(self, task: int | str) -> None:
        """Delete a task with all its jobs (their history too) and its place in schedules.

        Args:
            task (int | str): the task's id or name.

        Raises:
            NotFound: no such task.
            FailedPrecondition: the task has a running job, or is the only task of a
                schedule (delete the schedule first, or give it another task).
        """
        request = DeleteTaskRequest(task_id=await self._task_id(task))
        await self._call(self._stubs().tasks.DeleteTask, request)

    async def enable_task(self, task: int | str) -> Task:
        """Enable a task, clearing its disable note and resetting its failure count, and
        return it.

        Args:
            task (int | str): the task's id or name.

        Raises:
            NotFound: no such task.
        """
        request = EnableTaskRequest(id=await self._task_id(task))
        response = await self._call(self._stubs().tasks.EnableTask, request)
        return response.task

    async def disable_task(
        self, task: int | str, note: str = "", until: datetime | None = None
    ) -> Task:
        """Disable a task, so that the scheduler stops enqueueing it, and return it (a manual
        or API run still runs it). Who disabled it (the token's label) and when are kept.

        Args:
            task (int | str): the task's id or name.
            note (str): why, for people (at most 4000 characters).
            until (datetime | None): enable it again by itself at this time (aware); None:
                disabled until :meth:`enable_task`.

        Raises:
            NotFound: no such task.
            InvalidArgument: a note too long, or ``until`` not in the future.
        """
        request = rq.disable_task_request(await self._task_id(task), note, until)
        response = await self._call(self._stubs().tasks.DisableTask, request)
        return response.task
