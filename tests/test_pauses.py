"""Pausing a schedule and disabling a task with a note: who and when are kept, a pause or a
disable ends by itself at its time (the scheduler loop, driven by an injected clock), and a
resume never catches up the paused time unless the schedule asks for it."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import grpc
import pytest

from scheduler_svc.auth import Principal
from tests.inprocess import Harness, inprocess
from tickwork import AsyncClient, FireOutcome
from tickwork.cli import main
from tickwork.errors import InvalidArgument, NotFound
from tickwork.structs import dict_to_struct
from tickwork.tokens import hash_token, new_token
from tickwork.v1 import schedule_pb2, task_pb2
from tickwork.v1.config_pb2 import ApplyConfigRequest, ConfigSchedule

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def when(stamp: object) -> dt.datetime:
    return stamp.ToDatetime(tzinfo=UTC)  # type: ignore[attr-defined, no-any-return]


async def every_five_minutes(h: Harness, **kw: object) -> None:
    await h.client.create_task("job-a", "shell", {"argv": ["true"]})
    await h.client.create_schedule("s", ["job-a"], cron="*/5 * * * *", **kw)  # type: ignore[arg-type]


async def fires(h: Harness) -> list[tuple[str, str]]:
    found = await h.client.list_fires("s", limit=1000)
    return sorted((when(f.fire_time).isoformat(), FireOutcome.Name(f.outcome)) for f in found)


async def test_a_pause_keeps_its_note_who_and_when_and_a_resume_clears_them(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h)
        paused = await h.client.pause_schedule("s", note="db migration, ticket 42")
        assert (paused.enabled, paused.pause_note, paused.paused_by) == (
            False,
            "db migration, ticket 42",
            "anonymous",
        )
        assert when(paused.pause_time) == T0
        assert not paused.HasField("paused_until") and not paused.HasField("next_run_time")
        # Pausing again replaces the note.
        h.clock.advance(60)
        again = await h.client.pause_schedule("s", note="still migrating")
        assert (again.pause_note, when(again.pause_time)) == ("still migrating", h.clock())
        listed = await h.client.list_schedules()
        assert [s.pause_note for s in listed] == ["still migrating"]
        # Nothing fires while paused.
        await h.tick(at("2026-06-01T10:05:01+00:00"))
        assert await h.client.list_jobs() == []
        resumed = await h.client.resume_schedule("s")
        assert resumed.enabled and resumed.pause_note == resumed.paused_by == ""
        assert not resumed.HasField("pause_time")
        assert when(resumed.next_run_time) == at("2026-06-01T10:10:00+00:00")
        await h.tick(at("2026-06-01T10:10:00.5+00:00"))
        assert len(await h.client.list_jobs()) == 1


async def test_update_enabled_false_is_a_pause_without_a_note_and_true_clears_it(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h)
        await h.client.pause_schedule("s", note="why")
        kept = await h.client.update_schedule("s", enabled=False)  # already paused: kept
        assert (kept.pause_note, when(kept.pause_time)) == ("why", T0)
        enabled = await h.client.update_schedule("s", enabled=True)
        assert enabled.pause_note == enabled.paused_by == "" and not enabled.HasField("pause_time")
        h.clock.advance(5)
        disabled = await h.client.update_schedule("s", enabled=False)
        assert (disabled.pause_note, disabled.paused_by) == ("", "anonymous")
        assert when(disabled.pause_time) == T0 + dt.timedelta(seconds=5)


async def test_a_pause_resumes_by_itself_at_paused_until(tmp_path: Path, database_url: str) -> None:
    async with inprocess(
        tmp_path, database_url, T0, scheduler_poll_interval_s=3600.0, scheduler_lease_ttl_s=7200.0
    ) as h:
        await every_five_minutes(h)
        until = at("2026-06-01T10:20:00+00:00")
        paused = await h.client.pause_schedule("s", note="quiet hour", until=until)
        assert when(paused.paused_until) == until
        # The loop wakes by the pause's end, not only at its poll interval.
        assert await h.tick() == until
        await h.tick(at("2026-06-01T10:19:59+00:00"))
        assert not (await h.client.get_schedule("s")).enabled
        # At paused_until it resumes; the window at that very instant fires.
        await h.tick(at("2026-06-01T10:20:00.5+00:00"))
        schedule = await h.client.get_schedule("s")
        assert (
            schedule.enabled and schedule.pause_note == "" and not schedule.HasField("paused_until")
        )
        jobs = await h.client.list_jobs()
        assert [when(j.fire_time) for j in jobs] == [until]
        # The paused windows (10:05, 10:10, 10:15) were neither fired nor recorded.
        assert await fires(h) == [("2026-06-01T10:20:00+00:00", "FIRE_OUTCOME_ENQUEUED")]
        assert when(schedule.next_run_time) == at("2026-06-01T10:25:00+00:00")


@pytest.mark.parametrize("policy", ["RUN_ONCE", "SKIP"])
async def test_catch_up_on_resume_sends_the_paused_windows_through_the_catch_up_policy(
    tmp_path: Path, database_url: str, policy: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h, catch_up_on_resume=True, catch_up_policy=policy)
        assert (await h.client.get_schedule("s")).catch_up_on_resume
        await h.client.pause_schedule("s", note="n")
        await h.tick(at("2026-06-01T10:17:00+00:00"))
        assert await h.client.list_jobs() == []
        resumed = await h.client.resume_schedule("s")
        assert when(resumed.next_run_time) == at("2026-06-01T10:05:00+00:00")
        await h.tick()
        # RUN_ONCE: the latest paused window runs once, the earlier ones are recorded
        # missed; SKIP: all are recorded missed.
        latest = "FIRE_OUTCOME_ENQUEUED" if policy == "RUN_ONCE" else "FIRE_OUTCOME_MISSED"
        assert await fires(h) == [
            ("2026-06-01T10:05:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T10:10:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T10:15:00+00:00", latest),
        ]
        assert len(await h.client.list_jobs()) == (policy == "RUN_ONCE")
        assert when((await h.client.get_schedule("s")).next_run_time) == at(
            "2026-06-01T10:20:00+00:00"
        )


async def test_a_resume_without_catch_up_fires_no_paused_window(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h, catch_up_policy="RUN_ONCE")
        await h.client.pause_schedule("s")
        h.clock.set(at("2026-06-01T10:17:00+00:00"))
        resumed = await h.client.resume_schedule("s")
        assert when(resumed.next_run_time) == at("2026-06-01T10:20:00+00:00")
        await h.tick()
        assert await fires(h) == [] and await h.client.list_jobs() == []


async def test_bad_pauses_name_the_field_and_change_nothing(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h)
        with pytest.raises(InvalidArgument, match="paused_until"):
            await h.client.pause_schedule("s", until=T0 - dt.timedelta(seconds=1))
        with pytest.raises(InvalidArgument, match="note"):
            await h.client.pause_schedule("s", note="x" * 4001)
        with pytest.raises(InvalidArgument, match="note"):
            await h.client.pause_schedule("s", note="a\x00b")
        assert (await h.client.get_schedule("s")).enabled
        stub = h.client._stubs().schedules
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.PauseSchedule(schedule_pb2.PauseScheduleRequest(id=999))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert (err.value.details() or "").startswith("id:")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ResumeSchedule(schedule_pb2.ResumeScheduleRequest())
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_disable_keeps_its_note_and_ends_by_itself(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h)
        until = at("2026-06-01T10:12:00+00:00")
        task = await h.client.disable_task("job-a", note="vendor outage", until=until)
        assert (task.enabled, task.disable_note, task.disabled_by) == (
            False,
            "vendor outage",
            "anonymous",
        )
        assert (when(task.disabled_until), when(task.disable_time)) == (until, T0)
        await h.tick(at("2026-06-01T10:05:00.5+00:00"))  # skipped: the task is disabled
        assert await h.client.list_jobs() == []
        await h.tick(at("2026-06-01T10:12:00+00:00"))
        task = await h.client.get_task("job-a")
        assert task.enabled and task.disable_note == task.disabled_by == ""
        assert not task.HasField("disabled_until") and not task.HasField("disable_time")
        await h.tick(at("2026-06-01T10:15:00.5+00:00"))
        assert len(await h.client.list_jobs()) == 1


async def test_enable_task_clears_the_disable_and_the_failure_count(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("job-a", "shell", {"argv": ["true"]})
        await h.client.disable_task("job-a", note="n")
        enabled = await h.client.enable_task("job-a")
        assert (enabled.enabled, enabled.disable_note, enabled.consecutive_failure_count) == (
            True,
            "",
            0,
        )
        updated = await h.client.update_task("job-a", enabled=False)  # a disable, no note
        assert (updated.disable_note, updated.disabled_by) == ("", "anonymous")
        with pytest.raises(InvalidArgument, match="disabled_until"):
            await h.client.disable_task("job-a", until=T0)
        stub = h.client._stubs().tasks
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.EnableTask(task_pb2.EnableTaskRequest(id=12345))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(NotFound):
            await h.client.disable_task("nope")


async def test_who_paused_and_disabled_is_the_callers_token_label(
    tmp_path: Path, database_url: str
) -> None:
    admin, operator = new_token(), new_token()
    tokens = {
        hash_token(admin): Principal("admin", "setup"),
        hash_token(operator): Principal("operator", "alice"),
    }
    async with inprocess(tmp_path, database_url, T0, tokens=tokens) as h:
        async with AsyncClient(h.service.address, token=admin) as boss:
            await boss.create_task("job-a", "shell", {"argv": ["true"]})
            await boss.create_schedule("s", ["job-a"], cron="*/5 * * * *")
        async with AsyncClient(h.service.address, token=operator) as alice:
            assert (await alice.pause_schedule("s", note="n")).paused_by == "alice"
            assert (await alice.resume_schedule("s")).enabled
            # An operator's toggle through UpdateSchedule records its label too.
            assert (await alice.update_schedule("s", enabled=False)).paused_by == "alice"
            assert (await alice.disable_task("job-a")).disabled_by == "alice"
            assert (await alice.enable_task("job-a")).disabled_by == ""


async def test_resuming_a_schedule_that_is_not_paused_changes_nothing(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("job-a", "shell", {"argv": ["true"]})
        made = await h.client.create_schedule("s", ["job-a"], interval_seconds=600)
        h.clock.advance(120)
        resumed = await h.client.resume_schedule("s")
        assert resumed.next_run_time == made.next_run_time and resumed.enabled


async def test_the_cli_pauses_resumes_disables_and_lists_the_notes(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def cli(*argv: str) -> tuple[int, str]:
        code = await asyncio.to_thread(main, [*argv, "--server", h.service.address])
        return code, capsys.readouterr().out

    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h)
        code, out = await cli(
            "schedules", "pause", "s", "--note", "db migration", "--until", "2026-06-02T00:00:00Z"
        )
        assert code == 0
        assert "schedule s: paused: db migration (by anonymous, until 2026-06-02" in out
        code, out = await cli("schedules", "list")
        assert "db migration (by anonymous, until 2026-06-02" in out
        code, out = await cli("schedules", "resume", "s")
        assert (code, "schedule s: resumed, next run 2026-06-01" in out) == (0, True)
        code, out = await cli("tasks", "disable", "job-a", "--note", "vendor down")
        assert (code, out.strip()) == (0, "task job-a: disabled")
        code, out = await cli("tasks", "list")
        assert "vendor down (by anonymous)" in out
        code, out = await cli("tasks", "enable", "job-a")
        assert (code, out.strip()) == (0, "task job-a: enabled")
        code, _ = await cli("schedules", "pause", "s", "--until", "2026-06-01T10:00:00")
        assert code == 2  # no offset: a usage error before anything is sent
        assert (await h.client.get_schedule("s")).enabled


async def test_an_interval_schedule_resumes_one_interval_after_paused_until_and_apply_pauses(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("job-a", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["job-a"], interval_seconds=600)
        until = T0 + dt.timedelta(hours=1)
        await h.client.pause_schedule("s", until=until)
        await h.tick(until)
        resumed = await h.client.get_schedule("s")
        assert resumed.enabled and when(resumed.next_run_time) == until + dt.timedelta(minutes=10)
        # A configuration that sets enabled false pauses it too, recording who and when.
        request = ApplyConfigRequest(
            tasks=[
                task_pb2.Task(
                    name="job-a", handler="shell", params=dict_to_struct({"argv": ["true"]})
                )
            ],
            schedules=[
                ConfigSchedule(
                    schedule=schedule_pb2.Schedule(name="s", interval_seconds=600, enabled=False),
                    task_names=["job-a"],
                )
            ],
        )
        await h.client.apply_config(request)
        paused = await h.client.get_schedule("s")
        assert (paused.enabled, paused.paused_by, when(paused.pause_time)) == (
            False,
            "anonymous",
            until,
        )


async def test_catch_up_on_resume_at_paused_until_catches_up_from_the_pause(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await every_five_minutes(h, catch_up_on_resume=True, catch_up_policy="RUN_ONCE")
        await h.client.pause_schedule("s", until=at("2026-06-01T10:17:00+00:00"))
        await h.tick(at("2026-06-01T10:17:00+00:00"))
        assert (await h.client.get_schedule("s")).enabled
        assert await fires(h) == [
            ("2026-06-01T10:05:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T10:10:00+00:00", "FIRE_OUTCOME_MISSED"),
            ("2026-06-01T10:15:00+00:00", "FIRE_OUTCOME_ENQUEUED"),
        ]
