"""ScheduleService: schedules, cron previews and fire history."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from scheduler_svc import pausing, selectors, validation
from scheduler_svc.app import App
from scheduler_svc.callers import caller_label
from scheduler_svc.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    Reason,
    Resource,
    ServiceError,
)
from scheduler_svc.firing import DEFAULT_CATCH_UP_WINDOW_S, cron_schedule
from scheduler_svc.records import FireRecord, FireRequest, FireResult, ScheduleRecord
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers import _paging as paging
from scheduler_svc.servicers._errors import rpc_errors
from scheduler_svc.servicers._masks import update_paths, writable_fields
from scheduler_svc.servicers._request_ids import once
from scheduler_svc.servicers._routes import stored_routes
from scheduler_svc.servicers.backfill import BackfillRpc
from scheduler_svc.servicers.pauses import SchedulePauses
from scheduler_svc.store import Remember
from scheduler_svc.values import FireOutcome
from tickwork.cron import DST_NOTE_TEXT, CronError
from tickwork.v1 import common_pb2, schedule_pb2, schedule_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]

#: The Schedule fields an update may write: every field its proto does not mark
#: OUTPUT_ONLY or IDENTIFIER.
WRITABLE = writable_fields(schedule_pb2.Schedule.DESCRIPTOR)
#: Changing one of these recomputes next_run_time: the record's fields, and the Schedule
#: fields (update paths) that write them.
TIMING = {"cron_expression", "interval_seconds", "timezone", "enabled", "start_at", "end_at"}
TIMING_PATHS = (TIMING - {"start_at", "end_at"}) | {"start_time", "end_time"}

#: DescribeCron's text for each DST note.
DST_NOTES = DST_NOTE_TEXT


def describe(record: ScheduleRecord) -> str:
    """The schedule's timing in words: cron-descriptor, or "Every N seconds"."""
    if record.cron_expression:
        try:
            return cron_schedule(record.cron_expression, record.timezone).describe()
        except CronError as err:
            return f"invalid: {err}"
    if record.interval_seconds:
        unit = "second" if record.interval_seconds == 1 else "seconds"
        return f"Every {record.interval_seconds} {unit} after the previous run finished"
    return ""


#: The largest reply a call may build, in bytes: a gRPC client accepts 4 MiB by default
#: (grpcurl, the SDK), less room for the envelope.
MAX_REPLY_BYTES = 4 * 1024 * 1024 - 64 * 1024

_LONGEST_NAME_BYTES = 4 * validation.MAX_NAME_CHARS + 3  # UTF-8, and the field's prefix


def reply_bytes_bound(values: dict[str, Any], task_ids: list[int], now: dt.datetime) -> int:
    """At least the encoded size of a schedule, as a reply will hold it once stored, before
    it is: its validated ``values`` (next_run_at included), cron description, the largest
    id and times, and for each of ``task_ids`` the longest name a task may have."""
    draft = ScheduleRecord(
        id=2**63 - 1,
        last_run_at=now,
        created_at=now,
        updated_at=now,
        task_ids=tuple(task_ids),
        **values,
    )
    size = cv.schedule(draft, describe(draft)).ByteSize()
    return size + 6 + len(task_ids) * _LONGEST_NAME_BYTES  # 6: its own tag and length


def schedule_values(s: schedule_pb2.Schedule, paths: tuple[str, ...]) -> dict[str, Any]:
    """Column values for the Schedule fields in ``paths`` (task_ids excluded), validated
    field by field. Raises InvalidArgument naming the field."""
    out: dict[str, Any] = {}
    for path in paths:
        if path == "name":
            out["name"] = validation.name(s.name, "schedule.name")
        elif path == "description":
            out["description"] = validation.description(s.description, "schedule.description")
        elif path == "cron_expression":
            out["cron_expression"] = validation.cron_text(
                s.cron_expression, "schedule.cron_expression"
            )
        elif path == "interval_seconds":
            if s.interval_seconds:
                validation.interval_seconds(s.interval_seconds)
            out["interval_seconds"] = s.interval_seconds
        elif path == "timezone":
            out["timezone"] = s.timezone.strip() or "UTC"
        elif path == "catch_up_policy":
            out["catch_up_policy"] = validation.catch_up_policy(
                cv.catch_up_policy(s.catch_up_policy)
            )
        elif path == "enabled":
            out["enabled"] = s.enabled if s.HasField("enabled") else True
        elif path == "catch_up_window_seconds":
            out["catch_up_window_seconds"] = (
                validation.catch_up_window_seconds(s.catch_up_window_seconds)
                if s.HasField("catch_up_window_seconds")
                else DEFAULT_CATCH_UP_WINDOW_S
            )
        elif path == "max_catch_up_runs":
            out["max_catch_up_runs"] = validation.max_catch_up_runs(s.max_catch_up_runs)
        elif path == "jitter_seconds":
            out["jitter_seconds"] = validation.jitter_seconds(s.jitter_seconds)
        elif path == "jitter_mode":
            out["jitter_mode"] = validation.jitter_mode(cv.jitter_mode(s.jitter_mode))
        elif path in ("start_time", "end_time"):
            column = "start_at" if path == "start_time" else "end_at"
            field = f"schedule.{path}"
            out[column] = cv.from_ts(getattr(s, path), field) if s.HasField(path) else None
        elif path == "overlap_policy":
            out["overlap_policy"] = validation.overlap_policy(cv.overlap_policy(s.overlap_policy))
        elif path == "max_buffered":
            out["max_buffered"] = validation.max_buffered(s.max_buffered)
        elif path == "labels":
            out["labels"] = validation.labels(s.labels, "schedule.labels")
        elif path == "catch_up_on_resume":
            out["catch_up_on_resume"] = s.catch_up_on_resume
        elif path == "notify":
            out["notify"] = stored_routes(s.notify, "schedule.notify")
        elif path == "start_deadline_seconds":
            out["start_deadline_seconds"] = validation.seconds(
                s.start_deadline_seconds, "schedule.start_deadline_seconds"
            )
        elif path != "task_ids":
            raise InvalidArgument(
                f"unknown or read-only field {path!r}; writable: {', '.join(WRITABLE)}",
                field="update_mask",
                reason=Reason.UPDATE_MASK_INVALID,
            )
    return out


def check_timing(record: ScheduleRecord, changed: Collection[str] = ()) -> None:
    """A schedule needs a valid cron expression in a valid zone, or an interval >= 1 s,
    and an end_time after its start_time when both are set.

    Args:
        record (ScheduleRecord): the schedule as it would be stored.
        changed (Collection[str]): the fields an update sets; a bad interval is blamed on
            ``interval_seconds`` when the update set it, else on ``cron_expression``.

    Raises:
        InvalidArgument: naming the field (``schedule.cron_expression``,
            ``schedule.interval_seconds``, ``schedule.timezone``, or ``schedule.end_time``
            when not after start_time).
    """
    validation.bounds(record.start_at, record.end_at)
    if record.cron_expression:
        validation.cron(record.cron_expression, record.timezone)
    else:
        validation.cron("* * * * *", record.timezone)  # validates the zone alone
        if record.interval_seconds < 1:
            field = "interval_seconds" if "interval_seconds" in changed else "cron_expression"
            raise InvalidArgument(
                "give a cron_expression or an interval_seconds >= 1 (interval_seconds is "
                f"{record.interval_seconds})",
                field=f"schedule.{field}",
            )


#: The most schedules one BatchCreateSchedules call may create.
MAX_BATCH = 1000


@contextmanager
def in_request(index: int) -> Iterator[None]:
    """Name the batch item at fault: an error about field ``f`` of item ``index`` is
    re-raised about ``requests[index].f``."""
    try:
        yield
    except ServiceError as err:
        text = str(err.args[0]) if err.args else ""
        field = f"requests[{index}].{err.field}" if err.field else f"requests[{index}]"
        raise type(err)(text, field=field, reason=err.reason, resource=err.resource) from None


def check_task_ids(task_ids: list[int]) -> list[int]:
    """At least one task, at most :data:`validation.MAX_SCHEDULE_TASKS`, no duplicates,
    each a positive id."""
    if not task_ids:
        raise InvalidArgument(
            "name at least one task", field="schedule.task_ids", reason=Reason.FIELD_REQUIRED
        )
    if len(task_ids) > validation.MAX_SCHEDULE_TASKS:
        raise InvalidArgument(
            f"lists {len(task_ids)} tasks; at most {validation.MAX_SCHEDULE_TASKS}",
            field="schedule.task_ids",
            reason=Reason.TOO_MANY_ITEMS,
        )
    if len(set(task_ids)) != len(task_ids):
        raise InvalidArgument("a task is listed twice", field="schedule.task_ids")
    return cv.positive_ids(task_ids, "schedule.task_ids")


class ScheduleServicer(SchedulePauses, BackfillRpc, schedule_pb2_grpc.ScheduleServiceServicer):
    """tickwork.v1.ScheduleService."""

    def __init__(self, app: App) -> None:
        self.app = app

    def _out(self, record: ScheduleRecord) -> schedule_pb2.Schedule:
        return cv.schedule(record, describe(record))

    def _new_schedule(
        self, schedule: schedule_pb2.Schedule, now: dt.datetime
    ) -> tuple[dict[str, Any], list[int]]:
        """Validated column values (next_run_at computed from ``now``) and task ids of a
        schedule to create. Raises InvalidArgument naming the field."""
        values = schedule_values(schedule, WRITABLE)
        if values["cron_expression"]:
            values["interval_seconds"] = 0  # cron wins: the stored schedule shows what fires
        task_ids = check_task_ids(list(schedule.task_ids))
        draft = ScheduleRecord(
            id=0, next_run_at=None, last_run_at=None, created_at=now, updated_at=now, **values
        )
        check_timing(draft)
        values["next_run_at"] = self.app.next_run(draft)
        return values, task_ids

    @rpc_errors
    async def CreateSchedule(
        self, request: schedule_pb2.CreateScheduleRequest, context: Ctx
    ) -> schedule_pb2.CreateScheduleResponse:
        def answer(stored: ScheduleRecord) -> schedule_pb2.CreateScheduleResponse:
            return schedule_pb2.CreateScheduleResponse(schedule=self._out(stored))

        async def run(remember: Remember | None) -> schedule_pb2.CreateScheduleResponse:
            now = remember.now if remember else self.app.clock()
            values, task_ids = self._new_schedule(request.schedule, now)
            stored = await self.app.store.create_schedule(values, task_ids, now, remember=remember)
            self.app.schedules_changed(stored.next_run_at)
            return answer(stored)

        return await once(
            self.app,
            "ScheduleService/CreateSchedule",
            request,
            schedule_pb2.CreateScheduleResponse,
            run,
            answer,
        )

    @rpc_errors
    async def BatchCreateSchedules(
        self, request: schedule_pb2.BatchCreateSchedulesRequest, context: Ctx
    ) -> schedule_pb2.BatchCreateSchedulesResponse:
        def answer(stored: list[ScheduleRecord]) -> schedule_pb2.BatchCreateSchedulesResponse:
            return schedule_pb2.BatchCreateSchedulesResponse(
                schedules=[self._out(r) for r in stored]
            )

        async def run(remember: Remember | None) -> schedule_pb2.BatchCreateSchedulesResponse:
            now = remember.now if remember else self.app.clock()
            stored = await self._create_batch(request, now, remember)
            next_runs = [r.next_run_at for r in stored if r.next_run_at is not None]
            if next_runs:
                self.app.schedules_changed(min(next_runs))
            return answer(stored)

        return await once(
            self.app,
            "ScheduleService/BatchCreateSchedules",
            request,
            schedule_pb2.BatchCreateSchedulesResponse,
            run,
            answer,
        )

    async def _create_batch(
        self,
        request: schedule_pb2.BatchCreateSchedulesRequest,
        now: dt.datetime,
        remember: Remember | None,
    ) -> list[ScheduleRecord]:
        """Validate and store a batch, all or none (see :meth:`Store.create_schedules`)."""
        count = len(request.requests)
        if not 1 <= count <= MAX_BATCH:
            raise InvalidArgument(f"give 1 to {MAX_BATCH} requests, got {count}", field="requests")
        items = []
        first_with_name: dict[str, int] = {}
        reply_bytes = 0
        for i, item in enumerate(request.requests):
            with in_request(i):
                if item.request_id:
                    raise InvalidArgument(
                        "must be empty inside a batch; the batch's request_id covers it",
                        field="request_id",
                    )
                values, task_ids = self._new_schedule(item.schedule, now)
                reply_bytes += reply_bytes_bound(values, task_ids, now)
                earlier = first_with_name.setdefault(values["name"], i)
                if earlier != i:
                    raise AlreadyExists(
                        f"{values['name']!r} is also the name in requests[{earlier}]",
                        field="schedule.name",
                        reason=Reason.SCHEDULE_NAME_TAKEN,
                        resource=Resource.schedule(values["name"]),
                    )
            items.append((values, task_ids))
        if reply_bytes > MAX_REPLY_BYTES:
            # Refused before anything is written: the client could not read the reply and
            # would take created schedules for a failed call.
            raise InvalidArgument(
                f"the reply could reach {reply_bytes:,} bytes, over the {MAX_REPLY_BYTES:,} a "
                "client accepts; send fewer schedules (or fewer tasks each) per call",
                field="requests",
                reason=Reason.TOO_MANY_ITEMS,
            )
        return await self.app.store.create_schedules(items, now, remember=remember)

    @rpc_errors
    async def GetSchedule(
        self, request: schedule_pb2.GetScheduleRequest, context: Ctx
    ) -> schedule_pb2.GetScheduleResponse:
        if request.schedule_id:
            found = await self.app.store.get_schedule(request.schedule_id)
        elif request.name:
            name = validation.free_text(request.name, "name")
            found = await self.app.store.get_schedule_by_name(name)
        else:
            raise InvalidArgument(
                "give schedule_id or name", field="schedule_id", reason=Reason.FIELD_REQUIRED
            )
        return schedule_pb2.GetScheduleResponse(schedule=self._out(found))

    @rpc_errors
    async def ListSchedules(
        self, request: schedule_pb2.ListSchedulesRequest, context: Ctx
    ) -> schedule_pb2.ListSchedulesResponse:
        size = cv.page_size(request.page_size)
        after = paging.decode(request) or ""
        selector = selectors.parse(request.label_selector)
        rows = await self.app.store.list_schedules(size + 1, after, selector)
        page = cv.fit_page(rows, size, self._out)
        token = paging.encode(request, page.last.name) if page.last else ""
        return schedule_pb2.ListSchedulesResponse(schedules=page.items, next_page_token=token)

    @rpc_errors
    async def UpdateSchedule(
        self, request: schedule_pb2.UpdateScheduleRequest, context: Ctx
    ) -> schedule_pb2.UpdateScheduleResponse:
        sid = request.schedule.id
        if not sid:
            raise InvalidArgument("required", field="schedule.id", reason=Reason.FIELD_REQUIRED)
        paths = update_paths(request.schedule, request.update_mask, WRITABLE)
        if not paths:
            raise InvalidArgument(
                "the request sets no writable field; name the fields to change in update_mask",
                field="update_mask",
                reason=Reason.UPDATE_MASK_INVALID,
            )
        values = schedule_values(request.schedule, paths)
        task_ids = check_task_ids(list(request.schedule.task_ids)) if "task_ids" in paths else None
        now, by = self.app.clock(), caller_label()

        def complete(current: ScheduleRecord) -> dict[str, Any]:
            # Run by the store in the update's transaction, on the schedule as it is then
            # (row locked), so two updates each valid on what it read never combine into
            # an invalid schedule (e.g. one clearing the cron, one the interval).
            merged = dataclasses.replace(current, **values)
            check_timing(merged, paths)
            extra: dict[str, Any] = {}
            if merged.cron_expression and merged.interval_seconds:
                # Cron wins, as on create: the interval is not kept beside it.
                merged = dataclasses.replace(merged, interval_seconds=0)
                extra["interval_seconds"] = 0
            if TIMING_PATHS & set(paths) and any(
                getattr(current, k) != getattr(merged, k) for k in TIMING
            ):
                extra["next_run_at"] = self.app.next_run(merged)
            if merged.enabled and not current.enabled:  # a resume
                extra.update(pausing.resume_columns(merged, now))
            elif current.enabled and not merged.enabled:  # a pause without a note
                extra.update(pausing.pause_columns(by, now))
            return extra

        stored = await self.app.store.update_schedule(sid, values, task_ids, now, complete=complete)
        self.app.schedules_changed()
        return schedule_pb2.UpdateScheduleResponse(schedule=self._out(stored))

    @rpc_errors
    async def DeleteSchedule(
        self, request: schedule_pb2.DeleteScheduleRequest, context: Ctx
    ) -> schedule_pb2.DeleteScheduleResponse:
        await self.app.store.delete_schedule(cv.required_id(request.schedule_id, "schedule_id"))
        self.app.schedules_changed()
        return schedule_pb2.DeleteScheduleResponse()

    @rpc_errors
    async def DescribeCron(
        self, request: schedule_pb2.DescribeCronRequest, context: Ctx
    ) -> schedule_pb2.DescribeCronResponse:
        if not 0 <= request.count <= 1000:
            raise InvalidArgument("must be between 0 and 1000", field="count")
        zone = request.timezone.strip() or "UTC"
        parsed = validation.cron(" ".join(request.cron_expression.split()), zone, prefix="")
        after = (
            cv.from_ts(request.after, "after") if request.HasField("after") else self.app.clock()
        )
        previews = parsed.next_fire_times(after, request.count or 5)
        return schedule_pb2.DescribeCronResponse(
            description=parsed.describe(),
            fire_times=[
                schedule_pb2.FireTimePreview(
                    fire_time=cv.ts(p.fire_time),
                    local_time=p.fire_time.isoformat(),
                    dst_note=DST_NOTES[p.dst_note],
                )
                for p in previews
            ],
        )

    @rpc_errors
    async def TriggerSchedule(
        self, request: schedule_pb2.TriggerScheduleRequest, context: Ctx
    ) -> schedule_pb2.TriggerScheduleResponse:
        def answer(result: FireResult) -> schedule_pb2.TriggerScheduleResponse:
            return schedule_pb2.TriggerScheduleResponse(fire=cv.fire(fire_record(result)))

        async def run(remember: Remember | None) -> schedule_pb2.TriggerScheduleResponse:
            sid = cv.required_id(request.id, "id")
            trigger = request.trigger or common_pb2.TRIGGER_API
            if trigger not in (common_pb2.TRIGGER_MANUAL, common_pb2.TRIGGER_API):
                raise InvalidArgument("must be TRIGGER_MANUAL or TRIGGER_API", field="trigger")
            found = await self.app.store.get_schedule(sid)
            now = remember.now if remember else self.app.clock()
            fire = FireRequest(
                schedule_id=sid,
                fire_time=now,
                task_ids=found.task_ids,
                trigger=cv.trigger_name(trigger),
            )
            try:
                result = await self.app.enqueue_fire(fire, remember=remember)
            except NotFound as err:  # deleted since it was read
                raise NotFound(
                    str(err.args[0]), field="id", reason=err.reason, resource=err.resource
                ) from None
            return answer(result)

        return await once(
            self.app,
            "ScheduleService/TriggerSchedule",
            request,
            schedule_pb2.TriggerScheduleResponse,
            run,
            answer,
        )

    @rpc_errors
    async def ListFires(
        self, request: schedule_pb2.ListFiresRequest, context: Ctx
    ) -> schedule_pb2.ListFiresResponse:
        cv.required_id(request.schedule_id, "schedule_id")
        size = cv.page_size(request.page_size)
        position = paging.decode(request)
        before = None
        if position is not None:  # the last fire time shown, in microseconds since the epoch
            before = cv.from_ts(_micros_ts(paging.int_position(position)), "page_token")
        rows = await self.app.store.list_fires(request.schedule_id, size + 1, before)
        page = cv.fit_page(rows, size, cv.fire)
        token = ""
        if page.last:
            micros = page.last.fire_time - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
            token = paging.encode(request, str(micros // dt.timedelta(microseconds=1)))
        return schedule_pb2.ListFiresResponse(fires=page.items, next_page_token=token)


def fire_record(result: FireResult) -> FireRecord:
    """The fire ``result`` recorded (or found recorded), as a record."""
    req = result.request
    return FireRecord(
        id=result.fire_id,
        schedule_id=req.schedule_id,
        fire_time=req.fire_time,
        outcome=FireOutcome(result.outcome),
        runs=result.runs,
        recorded_at=result.recorded_at or req.fire_time,
        trigger=req.trigger,
    )


def _micros_ts(micros: int) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromMicroseconds(micros)
    return out
