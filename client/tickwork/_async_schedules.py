"""The asyncio client's ScheduleService methods on schedules' definitions and pauses
(their fires are in :mod:`tickwork._async_fires`): :class:`SchedulesMixin`, a part of
:class:`~tickwork.AsyncClient`.

Hand-written; ``scripts/unasync.py`` generates :mod:`tickwork._sync_schedules` from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Unpack

from tickwork import _requests as rq
from tickwork._async_base import ClientBase
from tickwork.errors import TickworkError
from tickwork.v1.schedule_pb2 import (
    CatchUpPolicy,
    CreateScheduleRequest,
    DeleteScheduleRequest,
    JitterMode,
    ListSchedulesRequest,
    OverlapPolicy,
    ResumeScheduleRequest,
    Schedule,
)

__all__ = ["SchedulesMixin"]


class SchedulesMixin(ClientBase):
    """Schedules: create (one or a batch), get, list, update, pause, resume, delete."""

    async def create_schedule(
        self,
        name: str,
        tasks: Sequence[int | str],
        *,
        cron: str | None = None,
        interval_seconds: int | None = None,
        timezone: str = "UTC",
        catch_up_policy: CatchUpPolicy | str = "SKIP",
        description: str = "",
        enabled: bool = True,
        catch_up_window_seconds: float | None = None,
        max_catch_up_runs: int = 0,
        jitter_seconds: float = 0.0,
        jitter_mode: JitterMode | str = "RANDOM",
        start_time: datetime | None = None,
        end_time: datetime | None = None,
        overlap_policy: OverlapPolicy | str = "SKIP",
        max_buffered: int = 0,
        labels: Mapping[str, str] | None = None,
        catch_up_on_resume: bool = False,
        start_deadline_seconds: float = 0.0,
        notify: Sequence[rq.Route] = (),
    ) -> Schedule:
        """Create a schedule and return it with its id, next run time (UTC) and description.

        Args:
            name (str): unique, non-empty.
            tasks (Sequence[int | str]): the tasks it runs (ids or names), at least one.
            cron (str | None): 5 fields, or 6 with seconds first, or a macro (``@daily``).
            interval_seconds (int | None): run this many seconds after the previous run
                finished; used when ``cron`` is not given.
            timezone (str): IANA zone the expression is read in.
            catch_up_policy (CatchUpPolicy | str): after downtime, ``"SKIP"`` the missed
                windows, ``"RUN_ONCE"`` (one run for them) or ``"RUN_ALL"`` (every window
                within the catch-up window, oldest first).
            description (str): free text.
            enabled (bool): a disabled schedule does not fire.
            catch_up_window_seconds (float | None): how old a missed window may be and still
                fire after downtime, seconds; None means the server's default, 5.
            max_catch_up_runs (int): RUN_ALL's cap on the windows fired after downtime (the
                newest kept); 0 means 100, at most 10,000.
            jitter_seconds (float): most delay added to each fire's start, seconds, 0 to
                86400; the fire keeps its nominal fire time.
            jitter_mode (JitterMode | str): ``"RANDOM"`` (a new delay per fire) or
                ``"STABLE"`` (one delay derived from the schedule's name).
            start_time (datetime | None): no fire before this aware instant.
            end_time (datetime | None): no fire at or after this aware instant; after
                ``start_time``.
            overlap_policy (OverlapPolicy | str): what a fire does while a job of its task is
                queued or running: ``"SKIP"`` it (default), ``"BUFFER_ONE"``,
                ``"BUFFER_ALL"`` (wait), ``"REPLACE"`` the running job, ``"ALLOW"`` both.
            max_buffered (int): the cap on waiting fires (queued jobs of a task) under
                BUFFER_ALL, and on queued jobs that run alongside under ALLOW; 0 means 100,
                at most 10,000.
            labels (Mapping[str, str] | None): labels for ownership and filtering, as a
                task's.
            catch_up_on_resume (bool): on resume, fire the paused windows through the
                catch-up policy; by default the paused time is never caught up.
            start_deadline_seconds (float): a start_deadline notification goes out when a
                fire's job has not started this many seconds after the fire time; 0: never.
            notify (Sequence[Route]): which notifiers get which events of its jobs and of
                itself, added to its tasks' routes (as ``create_task``'s).

        Raises:
            InvalidArgument: no cron nor interval; an invalid or never-firing expression or an
                unknown zone; a negative catch-up window or start deadline, a jitter over
                86400 s, an unknown jitter mode or overlap policy, a max_buffered outside
                0..10000, an end_time not after start_time (the message names the field).
            AlreadyExists: the name is taken.
            NotFound: an unknown task.
        """
        schedule = rq.build_schedule(
            name,
            [await self._task_id(t) for t in rq.task_refs(tasks)],
            cron=cron,
            interval_seconds=interval_seconds,
            timezone=timezone,
            catch_up_policy=catch_up_policy,
            description=description,
            enabled=enabled,
            catch_up_window_seconds=catch_up_window_seconds,
            max_catch_up_runs=max_catch_up_runs,
            jitter_seconds=jitter_seconds,
            jitter_mode=jitter_mode,
            start_time=start_time,
            end_time=end_time,
            overlap_policy=overlap_policy,
            max_buffered=max_buffered,
            labels=labels,
            catch_up_on_resume=catch_up_on_resume,
            start_deadline_seconds=start_deadline_seconds,
            notify=notify,
        )
        request = CreateScheduleRequest(schedule=schedule)
        response = await self._call(self._stubs().schedules.CreateSchedule, request)
        return response.schedule

    async def create_schedules(self, schedules: Sequence[rq.NewSchedule]) -> list[Schedule]:
        """Create up to 1,000 schedules in one transaction, all or none (a bulk import),
        and return them in order, as :meth:`create_schedule` would one by one.

        Args:
            schedules (Sequence[NewSchedule]): mappings with ``create_schedule``'s arguments:
                ``name`` and ``tasks`` (ids or names) required; ``cron`` or
                ``interval_seconds``; ``timezone``, ``catch_up_policy``, ``description``,
                ``enabled``, ``overlap_policy``, ``max_buffered`` and the catch-up, jitter and
                bounds keywords optional.

        Raises:
            InvalidArgument: a bad item or field, an empty batch or more than 1,000; the
                message names the item (``schedules[3]``, or the server's
                ``requests[3].schedule.cron_expression``).
            AlreadyExists: a name is taken, or given twice.
            NotFound: an unknown task.
        """
        ids = []
        for i, item_refs in enumerate(rq.new_schedule_refs(schedules)):
            try:
                ids.append([await self._task_id(t) for t in item_refs])
            except TickworkError as err:
                raise type(err)(f"schedules[{i}].tasks: {err.details}", err.code) from None
        request = rq.batch_create_schedules_request(schedules, ids)
        response = await self._call(self._stubs().schedules.BatchCreateSchedules, request)
        return list(response.schedules)

    async def get_schedule(self, schedule: int | str) -> Schedule:
        """Return a schedule by id or name, with its next run time (UTC) and description.

        Args:
            schedule (int | str): the schedule's id or name.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a bad reference.
        """
        request = rq.get_schedule_request(schedule)
        response = await self._call(self._stubs().schedules.GetSchedule, request)
        return response.schedule

    async def list_schedules(self, selector: str = "") -> list[Schedule]:
        """Return every schedule, in ascending name order (all pages are followed).

        Args:
            selector (str): only schedules whose labels match this label selector,
                ``"key=value,key2=value2"`` (all must hold); empty means all.

        Raises:
            InvalidArgument: a malformed selector.
        """
        rq.check_type(selector, str, "selector")

        async def fetch(size: int, token: str) -> tuple[Sequence[Schedule], str]:
            request = ListSchedulesRequest(
                page_size=size, page_token=token, label_selector=selector
            )
            response = await self._call(self._stubs().schedules.ListSchedules, request)
            return response.schedules, response.next_page_token

        return await self._collect(fetch, None)

    async def update_schedule(
        self, schedule: int | str, **fields: Unpack[rq.ScheduleFields]
    ) -> Schedule:
        """Change the given fields of a schedule and return the stored schedule.

        Keywords: ``name``, ``description``, ``cron``, ``interval_seconds``, ``timezone``,
        ``catch_up_policy``, ``enabled``, ``tasks`` (ids or names, replacing the list),
        ``overlap_policy``, ``max_buffered``, ``catch_up_window_seconds``,
        ``max_catch_up_runs``, ``jitter_seconds``, ``jitter_mode``, ``start_time``,
        ``end_time`` (as in :meth:`create_schedule`; None
        resets the catch-up window to 5 s and removes a bound), ``start_deadline_seconds``,
        ``notify``.
        ``interval_seconds`` without ``cron`` also clears the cron expression. The server
        recomputes the next run time (UTC) when the timing or enabled state changes.

        Args:
            schedule (int | str): the schedule's id or name.
            **fields (ScheduleFields): the new values.

        Raises:
            NotFound: no such schedule or task.
            InvalidArgument: no field or a bad value (named).
            AlreadyExists: the new name is taken.
            TypeError: an unknown keyword.
        """
        schedule_id = await self._schedule_id(schedule)
        task_ids = (
            [await self._task_id(t) for t in rq.task_refs(fields["tasks"])]
            if "tasks" in fields
            else None
        )
        request = rq.update_schedule_request(schedule_id, fields, task_ids)
        response = await self._call(self._stubs().schedules.UpdateSchedule, request)
        return response.schedule

    async def pause_schedule(
        self, schedule: int | str, note: str = "", until: datetime | None = None
    ) -> Schedule:
        """Pause a schedule (it does not fire) with a note, and return it. Who paused it (the
        token's label) and when are kept; pausing a paused schedule replaces its note.

        Args:
            schedule (int | str): the schedule's id or name.
            note (str): why, for people (at most 4000 characters).
            until (datetime | None): resume it by itself at this time (aware); None: paused
                until :meth:`resume_schedule`.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a note too long, or ``until`` not in the future.
        """
        request = rq.pause_schedule_request(await self._schedule_id(schedule), note, until)
        response = await self._call(self._stubs().schedules.PauseSchedule, request)
        return response.schedule

    async def resume_schedule(self, schedule: int | str) -> Schedule:
        """Resume a paused schedule and return it with its next run time. The paused windows
        are not fired unless its ``catch_up_on_resume`` is set.

        Args:
            schedule (int | str): the schedule's id or name.

        Raises:
            NotFound: no such schedule.
        """
        request = ResumeScheduleRequest(id=await self._schedule_id(schedule))
        response = await self._call(self._stubs().schedules.ResumeSchedule, request)
        return response.schedule

    async def delete_schedule(self, schedule: int | str) -> None:
        """Delete a schedule and its fire history; its tasks stay.

        Args:
            schedule (int | str): the schedule's id or name.

        Raises:
            NotFound: no such schedule.
        """
        request = DeleteScheduleRequest(schedule_id=await self._schedule_id(schedule))
        await self._call(self._stubs().schedules.DeleteSchedule, request)
