"""The asyncio client's ScheduleService methods on fires: firing a schedule now, its
recorded fires, backfilling its past windows, previewing a cron expression's fire times:
:class:`FiresMixin`, a part of :class:`~tickwork.AsyncClient`.

Hand-written; ``scripts/unasync.py`` generates :mod:`tickwork._sync_fires` from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tickwork import _requests as rq
from tickwork._async_base import ClientBase
from tickwork._requests.backfill import backfill_request
from tickwork.v1.common_pb2 import Trigger
from tickwork.v1.schedule_pb2 import (
    BackfillScheduleResponse,
    DescribeCronResponse,
    Fire,
    ListFiresRequest,
    OverlapPolicy,
)

__all__ = ["FiresMixin"]


class FiresMixin(ClientBase):
    """A schedule's fires: trigger now, list, backfill; cron previews."""

    async def trigger_schedule(
        self,
        schedule: int | str,
        *,
        trigger: Trigger = Trigger.TRIGGER_API,
        request_id: str = "",
    ) -> Fire:
        """Fire a schedule now: all its tasks, as its next fire would, through its overlap
        policy, in the manual lane; its next run time is unchanged. A paused or disabled
        schedule fires too.

        Args:
            schedule (int | str): the schedule's id or name.
            trigger (Trigger): ``TRIGGER_API`` (default) or ``TRIGGER_MANUAL`` (a person);
                the fire and its jobs carry it.
            request_id (str): makes the call safe to retry: a repeat with the same id
                within 24 hours returns the first call's fire and fires nothing. "": none.

        Returns:
            Fire: the fire recorded (fire time: the server's now, UTC), with its runs.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a bad trigger, reference or request_id.
        """
        schedule_id = await self._schedule_id(schedule)
        request = rq.trigger_schedule_request(schedule_id, trigger, request_id)
        response = await self._call(self._stubs().schedules.TriggerSchedule, request)
        return response.fire

    async def list_fires(self, schedule: int | str, limit: int = 100) -> list[Fire]:
        """Return a schedule's recorded fires, newest fire time first: what came of each
        (enqueued job ids, skipped and why, or missed under catch-up SKIP).

        Args:
            schedule (int | str): the schedule's id or name.
            limit (int): at most this many fires (pages are followed until reached).

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a bad limit.
        """
        limit = rq.check_limit(limit)
        schedule_id = await self._schedule_id(schedule)

        async def fetch(size: int, token: str) -> tuple[Sequence[Fire], str]:
            request = ListFiresRequest(schedule_id=schedule_id, page_size=size, page_token=token)
            response = await self._call(self._stubs().schedules.ListFires, request)
            return response.fires, response.next_page_token

        return await self._collect(fetch, limit)

    async def backfill_schedule(
        self,
        schedule: int | str,
        start: datetime,
        end: datetime,
        *,
        dry_run: bool = False,
        overlap_policy: OverlapPolicy | str | None = None,
        request_id: str = "",
    ) -> BackfillScheduleResponse:
        """Run a schedule's past windows in [``start``, ``end``): each fire time its cron
        expression had in its time zone (DST rules as :meth:`describe_cron`), oldest first,
        recorded as a fire with trigger BACKFILL; its jobs carry that window as their fire
        time (``TICKWORK_FIRE_TIME``) and wait in the backfill lane, behind scheduled and
        manual jobs. A window that already has a fire is not run again (``already_fired``).

        Args:
            schedule (int | str): the schedule's id or name (a cron schedule).
            start (datetime): aware; the first instant of the range, inclusive.
            end (datetime): aware; the end of the range, exclusive, after ``start`` and not
                after now. At most 10,000 windows.
            dry_run (bool): list the windows and whether each already fired; run nothing.
            overlap_policy (OverlapPolicy | str | None): ``"SKIP"`` or None (the schedule's
                own) for now. With SKIP a task whose job is still queued or running is
                skipped for a window: a backfill of one task runs its first window only.
            request_id (str): as for :meth:`run` (not remembered for a dry run).

        Returns:
            BackfillScheduleResponse: ``windows``, oldest first, each with ``fire_time``
            (UTC), ``already_fired``, ``fire_id`` and per task ``runs`` (the job, or why
            skipped); ``repeated_request`` for a repeat of ``request_id``.

        Raises:
            NotFound: no such schedule.
            InvalidArgument: a naive time, ``end`` not after ``start`` or after now, more
                than 10,000 windows, a policy other than SKIP (the message names the field).
            FailedPrecondition: an interval schedule (it has no fixed windows).
        """
        request = backfill_request(
            await self._schedule_id(schedule),
            start,
            end,
            overlap_policy=overlap_policy,
            dry_run=dry_run,
            request_id=request_id,
        )
        return await self._call(self._stubs().schedules.BackfillSchedule, request)

    async def describe_cron(
        self,
        expression: str,
        timezone: str = "UTC",
        after: datetime | None = None,
        count: int = 5,
    ) -> DescribeCronResponse:
        """Describe a cron expression in words and preview its next fire times.

        Args:
            expression (str): the cron expression.
            timezone (str): IANA zone it is read in.
            after (datetime | None): preview strictly after this aware instant; default now.
            count (int): how many fire times, 1 to 1000.

        Returns:
            DescribeCronResponse: ``description`` and ``fire_times`` (each with the UTC
            ``fire_time``, the ISO 8601 ``local_time`` and any ``dst_note``).

        Raises:
            InvalidArgument: a bad expression, zone, count, or a naive ``after``.
        """
        request = rq.describe_cron_request(expression, timezone, after, count)
        return await self._call(self._stubs().schedules.DescribeCron, request)
