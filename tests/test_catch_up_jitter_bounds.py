"""A schedule's catch-up window and RUN_ALL, its jitter and its start/end bounds, driven by
an injected clock on the real service (both backends). No sleeping."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pytest

from scheduler_svc.values import JobStatus
from tests.inprocess import Harness, inprocess
from tickwork import CatchUpPolicy, FireOutcome, InvalidArgument, JitterMode, SkipReason
from tickwork.jitter import stable_delay_s

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def utc(stamp: Any) -> dt.datetime:
    when: dt.datetime = stamp.ToDatetime(tzinfo=UTC)
    return when


async def schedule(h: Harness, name: str, cron: str, **kw: Any) -> None:
    """A schedule ``name`` of one task (``job-<name>``) on ``cron``."""
    await h.client.create_task(f"job-{name}", "shell", {"argv": ["true"]})
    await h.client.create_schedule(name, [f"job-{name}"], cron=cron, **kw)


async def fires(h: Harness, name: str) -> list[tuple[str, str]]:
    """(fire time, outcome) of each recorded fire, oldest first."""
    found = await h.client.list_fires(name, limit=5000)
    return sorted((utc(f.fire_time).strftime("%H:%M"), FireOutcome.Name(f.outcome)) for f in found)


async def test_run_all_fires_every_window_oldest_first_up_to_the_cap(
    tmp_path: Path, database_url: str
) -> None:
    """Down 01:30 to 04:30 on an hourly schedule, RUN_ALL with a one-day window and a cap of
    2: the two newest windows fire, each its own fire with its own fire time, oldest first
    (03:00 gets the job; 04:00 goes through the same enqueue and finds it queued); 02:00,
    beyond the cap, is missed; the next run is 05:00."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T01:30:00+00:00")) as h:
        await schedule(
            h,
            "s",
            "0 * * * *",
            catch_up_policy="RUN_ALL",
            catch_up_window_seconds=86400,
            max_catch_up_runs=2,
        )
        await h.tick(at("2026-06-01T04:30:00+00:00"))
        assert await fires(h, "s") == [
            ("02:00", "FIRE_OUTCOME_MISSED"),
            ("03:00", "FIRE_OUTCOME_ENQUEUED"),
            ("04:00", "FIRE_OUTCOME_SKIPPED"),
        ]
        recorded = {utc(f.fire_time).hour: f for f in await h.client.list_fires("s")}
        assert recorded[3].id < recorded[4].id  # recorded oldest first
        (job,) = await h.client.list_jobs()
        assert utc(job.fire_time) == at("2026-06-01T03:00:00+00:00")  # TICKWORK_FIRE_TIME
        assert recorded[4].runs[0].skip_reason == SkipReason.SKIP_REASON_ALREADY_QUEUED
        assert recorded[4].runs[0].job_id == job.id
        s = await h.client.get_schedule("s")
        assert utc(s.next_run_time) == at("2026-06-01T05:00:00+00:00")
        assert utc(s.last_run_time) == at("2026-06-01T04:00:00+00:00")


async def test_run_all_keeps_the_newest_windows_up_to_the_cap(
    tmp_path: Path, database_url: str
) -> None:
    """A minute schedule down for 5 hours, RUN_ALL, window 3 hours, cap 150 (beyond the
    default cap): the 150 newest windows are recorded as fires in one tick, the older ones
    missed."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T00:59:30+00:00")) as h:
        await schedule(
            h,
            "s",
            "* * * * *",
            catch_up_policy="RUN_ALL",
            catch_up_window_seconds=3 * 3600,
            max_catch_up_runs=150,
        )
        await h.tick(at("2026-06-01T06:00:30+00:00"))
        summary = await fires(h, "s")
        kept = [t for t, outcome in summary if outcome != "FIRE_OUTCOME_MISSED"]
        assert len(kept) == 150
        assert (kept[0], kept[-1]) == ("03:31", "06:00")
        assert all(o == "FIRE_OUTCOME_MISSED" for t, o in summary if t < "03:31")
        assert len(summary) == 301  # 01:00 .. 06:00, each recorded once
        s = await h.client.get_schedule("s")
        assert utc(s.next_run_time) == at("2026-06-01T06:01:00+00:00")


@pytest.mark.parametrize(
    ("window_s", "expected"),
    [
        (5400.0, [("02:00", "MISSED"), ("03:00", "ENQUEUED"), ("04:00", "SKIPPED")]),
        (5399.999, [("02:00", "MISSED"), ("03:00", "MISSED"), ("04:00", "ENQUEUED")]),
    ],
)
async def test_run_all_window_just_inside_and_just_outside(
    tmp_path: Path, database_url: str, window_s: float, expected: list[tuple[str, str]]
) -> None:
    """At 04:30, 03:00 is exactly 5400 s old: inside a 5400 s window (it fires), outside a
    5399.999 s one (missed)."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T01:30:00+00:00")) as h:
        await schedule(
            h, "s", "0 * * * *", catch_up_policy="RUN_ALL", catch_up_window_seconds=window_s
        )
        await h.tick(at("2026-06-01T04:30:00+00:00"))
        assert await fires(h, "s") == [(t, f"FIRE_OUTCOME_{o}") for t, o in expected]


@pytest.mark.parametrize(
    ("window_s", "latest"),
    [(1800.0, "FIRE_OUTCOME_ENQUEUED"), (1799.0, "FIRE_OUTCOME_MISSED")],
)
async def test_skip_fires_the_latest_window_when_inside_the_window(
    tmp_path: Path, database_url: str, window_s: float, latest: str
) -> None:
    """SKIP: the older windows are missed; the latest (04:00, 1800 s old at 04:30) fires
    when inside the catch-up window, else it is missed too."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T01:30:00+00:00")) as h:
        await schedule(h, "s", "0 * * * *", catch_up_window_seconds=window_s)
        await h.tick(at("2026-06-01T04:30:00+00:00"))
        assert await fires(h, "s") == [
            ("02:00", "FIRE_OUTCOME_MISSED"),
            ("03:00", "FIRE_OUTCOME_MISSED"),
            ("04:00", latest),
        ]


async def test_a_window_of_zero_makes_every_late_window_missed(
    tmp_path: Path, database_url: str
) -> None:
    """catch_up_window_seconds 0 lowers the tick tolerance too: a window 2 s old whose
    successor has come is missed; the default (5 s) fires it."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:30+00:00")) as h:
        await schedule(h, "zero", "*/20 * * * * *", catch_up_window_seconds=0)
        await schedule(h, "dflt", "*/20 * * * * *")
        assert (await h.client.get_schedule("dflt")).catch_up_window_seconds == 5.0
        await h.tick(at("2026-06-01T10:01:02+00:00"))
        assert await fires(h, "zero") == [
            ("10:00", "FIRE_OUTCOME_MISSED"),
            ("10:01", "FIRE_OUTCOME_MISSED"),
        ]
        assert await fires(h, "dflt") == [
            ("10:00", "FIRE_OUTCOME_MISSED"),
            ("10:01", "FIRE_OUTCOME_ENQUEUED"),
        ]


async def test_stable_jitter_is_the_same_every_fire_and_restart_and_delays_the_job(
    tmp_path: Path, database_url: str
) -> None:
    """STABLE: every fire starts the same delay after its nominal fire time, derived from
    the name (so the same after a restart), within [0, jitter); the fire keeps its nominal
    fire time, the job carries both, and it is not claimed before the jittered start."""
    delay = dt.timedelta(seconds=stable_delay_s("s", 600.0))
    assert dt.timedelta(0) <= delay < dt.timedelta(seconds=600)
    starts = []
    for boot, when in enumerate(("10:00:00.5", "10:10:00.5")):
        async with inprocess(tmp_path, database_url, at("2026-06-01T09:59:00+00:00")) as h:
            if boot == 0:
                await schedule(h, "s", "*/10 * * * *", jitter_seconds=600, jitter_mode="STABLE")
            await h.tick(at(f"2026-06-01T{when}+00:00"))
            newest = (await h.client.list_fires("s"))[0]
            starts.append(utc(newest.start_time) - utc(newest.fire_time))
            (job,) = [j for j in await h.client.list_jobs() if j.fire_time == newest.fire_time]
            assert utc(job.not_before_time) == utc(newest.start_time)
            store = h.service.app.store
            assert await store.claim_next_job("w", utc(newest.start_time) - _US, 30) is None
            claimed = await store.claim_next_job("w", utc(newest.start_time), 30)
            assert claimed is not None and claimed[0].id == job.id
            token = claimed[0].lease_token or ""
            await h.service.app.finish_job(job.id, token, JobStatus.SUCCEEDED, "", "")
    assert starts == [delay, delay]


_US = dt.timedelta(microseconds=1)


async def test_random_jitter_is_drawn_per_fire_within_range(
    tmp_path: Path, database_url: str
) -> None:
    """RANDOM: each fire's start is its fire time plus a delay in [0, jitter), drawn anew;
    schedule.next_run_time stays the nominal fire time."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T09:59:00+00:00")) as h:
        h.scheduler.rng = random.Random(11)
        await schedule(h, "s", "* * * * *", jitter_seconds=30)
        s = await h.client.get_schedule("s")
        assert utc(s.next_run_time) == at("2026-06-01T10:00:00+00:00")
        delays = []
        for minute in range(6):
            await h.tick(at(f"2026-06-01T10:0{minute}:00.2+00:00"))
            fire = (await h.client.list_fires("s"))[0]
            delays.append((utc(fire.start_time) - utc(fire.fire_time)).total_seconds())
            assert utc(fire.fire_time).minute == minute  # nominal
        assert all(0 <= d < 30 for d in delays), delays
        assert len(set(delays)) == len(delays), delays


async def test_no_jitter_starts_at_the_fire_time(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, at("2026-06-01T09:59:00+00:00")) as h:
        await schedule(h, "s", "* * * * *")
        await h.tick(at("2026-06-01T10:00:00.2+00:00"))
        (fire,) = await h.client.list_fires("s")
        assert fire.start_time == fire.fire_time
        (job,) = await h.client.list_jobs()
        assert not job.HasField("not_before_time")


async def test_bounds_no_fire_before_start_nor_at_or_after_end(
    tmp_path: Path, database_url: str
) -> None:
    """start 10:02:30, end 10:05: the first fire is 10:03, the last 10:04; 10:05 is not
    fired and the schedule then has no next run."""
    start, end = at("2026-06-01T10:02:30+00:00"), at("2026-06-01T10:05:00+00:00")
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:10+00:00")) as h:
        await schedule(h, "s", "* * * * *", start_time=start, end_time=end)
        s = await h.client.get_schedule("s")
        assert utc(s.next_run_time) == at("2026-06-01T10:03:00+00:00")
        assert (utc(s.start_time), utc(s.end_time)) == (start, end)
        for minute in range(1, 8):
            await h.tick(at(f"2026-06-01T10:0{minute}:00.1+00:00"))
        assert await fires(h, "s") == [
            ("10:03", "FIRE_OUTCOME_ENQUEUED"),
            ("10:04", "FIRE_OUTCOME_SKIPPED"),  # the 10:03 job is still queued
        ]
        assert not (await h.client.get_schedule("s")).HasField("next_run_time")


async def test_a_schedule_past_its_end_has_no_next_run(tmp_path: Path, database_url: str) -> None:
    """Moving end_time into the past removes the next run; the loop fires nothing."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:10+00:00")) as h:
        await schedule(h, "s", "* * * * *")
        s = await h.client.update_schedule("s", end_time=at("2026-06-01T10:00:00+00:00"))
        assert not s.HasField("next_run_time")
        await h.tick(at("2026-06-01T10:03:00+00:00"))
        assert await fires(h, "s") == []
        s = await h.client.update_schedule("s", end_time=None)
        assert utc(s.next_run_time) == at("2026-06-01T10:04:00+00:00")  # from the update's now


async def test_interval_bounds(tmp_path: Path, database_url: str) -> None:
    """An interval schedule's first run waits for start_time; none at or after end_time."""
    start = at("2026-06-01T11:00:00+00:00")
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        await h.client.create_task("job-i", "shell", {"argv": ["true"]})
        s = await h.client.create_schedule(
            "i", ["job-i"], interval_seconds=60, start_time=start, end_time=start + _US * 10**6
        )
        assert utc(s.next_run_time) == start
        await h.tick(start)
        assert utc((await h.client.get_schedule("i")).last_run_time) == start
        assert not (await h.client.get_schedule("i")).HasField("next_run_time")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"catch_up_window_seconds": -1.0}, "schedule.catch_up_window_seconds"),
        ({"catch_up_window_seconds": float("nan")}, "schedule.catch_up_window_seconds"),
        ({"max_catch_up_runs": 10_001}, "schedule.max_catch_up_runs"),
        ({"max_catch_up_runs": -1}, "schedule.max_catch_up_runs"),
        ({"jitter_seconds": 86400.5}, "schedule.jitter_seconds"),
        ({"jitter_seconds": -0.1}, "schedule.jitter_seconds"),
        (
            {
                "start_time": at("2026-06-02T00:00:00+00:00"),
                "end_time": at("2026-06-02T00:00:00+00:00"),
            },
            "schedule.end_time",
        ),
    ],
)
async def test_bad_values_are_refused_naming_the_field_and_change_nothing(
    tmp_path: Path, database_url: str, kwargs: dict[str, Any], field: str
) -> None:
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        await schedule(h, "s", "* * * * *")
        before = await h.client.get_schedule("s")
        with pytest.raises(InvalidArgument) as create:
            await h.client.create_schedule("t", ["job-s"], cron="* * * * *", **kwargs)
        assert create.value.field == field
        with pytest.raises(InvalidArgument) as update:
            await h.client.update_schedule("s", **kwargs)
        assert update.value.field == field
        assert await h.client.get_schedule("s") == before
        assert [x.name for x in await h.client.list_schedules()] == ["s"]


async def test_an_end_before_the_stored_start_is_refused(tmp_path: Path, database_url: str) -> None:
    """The bounds are checked on the schedule as it would be stored."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        await schedule(h, "s", "* * * * *", start_time=at("2026-06-02T00:00:00+00:00"))
        with pytest.raises(InvalidArgument) as err:
            await h.client.update_schedule("s", end_time=at("2026-06-01T23:00:00+00:00"))
        assert err.value.field == "schedule.end_time"


async def test_an_unknown_jitter_mode_is_refused(tmp_path: Path, database_url: str) -> None:
    from tickwork.v1 import schedule_pb2

    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        await schedule(h, "s", "* * * * *")
        with pytest.raises(InvalidArgument, match="jitter_mode"):
            await h.client.update_schedule("s", jitter_mode="SOMETIMES")  # SDK check
        stub = h.client._stubs().schedules  # the raw enum number reaches the server
        s = await h.client.get_schedule("s")
        request = schedule_pb2.UpdateScheduleRequest(
            schedule=schedule_pb2.Schedule(id=s.id, jitter_mode=7),  # type: ignore[arg-type]
        )
        request.update_mask.paths.append("jitter_mode")
        with pytest.raises(InvalidArgument) as err:
            await h.client._call(stub.UpdateSchedule, request)
        assert err.value.field == "schedule.jitter_mode"


_CONFIG = """
[[tasks]]
name = "t"
handler = "shell"
params = { argv = ["true"] }

[[schedules]]
name = "nightly"
cron = "0 2 * * *"
tasks = ["t"]
catch_up_policy = "RUN_ALL"
catch_up_window_seconds = 7200
max_catch_up_runs = 3
jitter_seconds = 900
jitter_mode = "STABLE"
start_time = 2026-07-01T00:00:00Z
end_time = 2026-08-01T00:00:00Z
"""


async def test_a_config_file_speaks_the_same_names(tmp_path: Path, database_url: str) -> None:
    """The file's keys are the Schedule fields; ApplyConfig stores them, reports them as
    changed fields, previews fire times within the bounds, and the report shows the STABLE
    start; applying again changes nothing."""
    import tomllib

    from tickwork.apply import config_request, parse_config

    config = parse_config(tomllib.loads(_CONFIG))
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        response = await h.client.apply_config(config_request(config))
        created = response.changes[1]
        assert [utc(t) for t in created.fire_times_after] == [
            at(f"2026-07-0{d}T02:00:00+00:00") for d in (1, 2, 3)
        ]
        s = await h.client.get_schedule("nightly")
        assert s.catch_up_policy == CatchUpPolicy.CATCH_UP_POLICY_RUN_ALL
        assert (s.catch_up_window_seconds, s.max_catch_up_runs) == (7200, 3)
        assert (s.jitter_seconds, s.jitter_mode) == (900, JitterMode.JITTER_MODE_STABLE)
        assert utc(s.start_time) == at("2026-07-01T00:00:00+00:00")
        assert utc(s.next_run_time) == at("2026-07-01T02:00:00+00:00")
        again = await h.client.apply_config(config_request(config))
        assert again.changes[1].action == again.changes[1].ACTION_UNCHANGED
        changed = parse_config(tomllib.loads(_CONFIG.replace("= 900", "= 60")))
        update = (await h.client.apply_config(config_request(changed))).changes[1]
        assert list(update.fields) == ["jitter_seconds"]


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("jitter_seconds = 90000", "schedules[0].jitter_seconds"),
        ('jitter_mode = "SOMETIMES"', "schedules[0].jitter_mode"),
        ("catch_up_window_seconds = -1", "schedules[0].catch_up_window_seconds"),
        ("end_time = 2026-06-30T00:00:00Z", "schedules[0].end_time"),
        ("start_time = 2026-07-01T00:00:00", "schedules[0].start_time"),
    ],
)
def test_bad_config_values_name_the_key(line: str, key: str) -> None:
    import tomllib

    from tickwork.apply import ConfigError, parse_config

    name = line.split(" ")[0]
    kept = "\n".join(x for x in _CONFIG.splitlines() if not x.startswith(f"{name} "))
    with pytest.raises(ConfigError) as err:
        parse_config(tomllib.loads(f"{kept}\n{line}\n"))
    assert err.value.key == key


async def test_apply_config_refuses_what_only_the_server_checks(
    tmp_path: Path, database_url: str
) -> None:
    """A cap over 10,000 passes the file's checks; the server names the field and applies
    nothing."""
    import tomllib

    from tickwork.apply import config_request, parse_config

    config = parse_config(tomllib.loads(_CONFIG.replace("= 3", "= 10001")))
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        with pytest.raises(InvalidArgument) as err:
            await h.client.apply_config(config_request(config))
        assert err.value.field == "schedules[0].max_catch_up_runs"
        assert await h.client.list_schedules() == []


async def test_the_cli_flags_and_previews(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``schedules create/update`` take the flags; ``get`` and ``preview`` show the nominal
    fire times and the jittered starts; a bad value is the server's INVALID_ARGUMENT naming
    the field (exit 2) and changes nothing."""
    import asyncio

    from tickwork.cli import main

    async def cli(*argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["--server", h.service.address, *argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:10+00:00")) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        code, out, _ = await cli(
            "schedules", "create", "hourly", "--task", "t", "--cron", "0 * * * *",
            "--catch-up", "RUN_ALL", "--catch-up-window", "7200", "--max-catch-up-runs", "4",
            "--jitter", "600", "--jitter-mode", "stable",
            "--start-time", "2026-06-01T12:00:00Z", "--end-time", "2026-06-01T15:00:00Z",
        )  # fmt: skip
        assert code == 0, out
        s = await h.client.get_schedule("hourly")
        assert (s.catch_up_window_seconds, s.max_catch_up_runs, s.jitter_seconds) == (7200, 4, 600)
        delay = dt.timedelta(seconds=stable_delay_s("hourly", 600))
        start = (at("2026-06-01T12:00:00+00:00") + delay).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert f"next start  {start} (stable jitter)" in out
        code, out, _ = await cli("schedules", "preview", "hourly", "--count", "5")
        assert code == 0
        lines = out.splitlines()
        assert lines[1].split() == ["2026-06-01T12:00:00Z", start]
        assert [line.split()[0] for line in lines[1:4]] == [
            f"2026-06-01T{hour}:00:00Z" for hour in (12, 13, 14)
        ]  # none at or after the end time
        assert lines[4].startswith("starts: ")
        code, out, _ = await cli("schedules", "get", "hourly")
        assert "catch_up_window_seconds" in out and "JITTER_MODE_STABLE" not in out
        code, out, err = await cli("schedules", "update", "hourly", "--jitter", "90000")
        assert code == 2 and "schedule.jitter_seconds" in err
        assert (await h.client.get_schedule("hourly")).jitter_seconds == 600
        code, out, _ = await cli("schedules", "update", "hourly", "--end-time", "none")
        assert code == 0
        assert not (await h.client.get_schedule("hourly")).HasField("end_time")


@pytest.mark.parametrize(
    ("policy", "window_s", "outcome"),
    [
        ("SKIP", 600.0, "FIRE_OUTCOME_ENQUEUED"),
        ("RUN_ALL", 600.0, "FIRE_OUTCOME_ENQUEUED"),
        ("SKIP", 299.0, "FIRE_OUTCOME_MISSED"),
        ("RUN_ALL", 299.0, "FIRE_OUTCOME_MISSED"),
        ("RUN_ONCE", 5.0, "FIRE_OUTCOME_ENQUEUED"),
    ],
)
async def test_an_interval_schedules_pending_run_after_downtime(
    tmp_path: Path, database_url: str, policy: str, window_s: float, outcome: str
) -> None:
    """Every 60 s, due at 10:01, reached at 10:06 (300 s old): SKIP and RUN_ALL fire it
    when at most the catch-up window old, RUN_ONCE fires it anyway."""
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        await h.client.create_task("job-i", "shell", {"argv": ["true"]})
        await h.client.create_schedule(
            "i",
            ["job-i"],
            interval_seconds=60,
            catch_up_policy=policy,
            catch_up_window_seconds=window_s,
        )
        await h.tick(at("2026-06-01T10:06:00+00:00"))
        assert await fires(h, "i") == [("10:01", outcome)]


async def test_lateness_is_measured_from_the_jittered_start(
    tmp_path: Path, database_url: str
) -> None:
    """A fire enqueued 2 s after its fire time but before its jittered start is not late;
    one enqueued after its start is late by the time since the start."""
    delay = stable_delay_s("s", 3600.0)
    assert delay > 2.0
    async with inprocess(tmp_path, database_url, at("2026-06-01T08:59:00+00:00")) as h:
        metrics = h.service.app.metrics.registry
        await schedule(h, "s", "0 * * * *", jitter_seconds=3600, jitter_mode="STABLE")
        await h.tick(at("2026-06-01T09:00:02+00:00"))
        assert metrics.get_sample_value("tickwork_fire_lateness_seconds_sum") == 0.0
        assert metrics.get_sample_value("tickwork_fire_lateness_seconds_count") == 1.0


async def test_the_apply_report_shows_the_stable_starts(tmp_path: Path, database_url: str) -> None:
    import asyncio
    import tomllib

    from tickwork import Client
    from tickwork.apply import apply_config, parse_config

    config = parse_config(tomllib.loads(_CONFIG))
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        with Client(h.service.address) as client:
            report = await asyncio.to_thread(apply_config, client, config)
        text = report.changes[1].describe()
        delay = stable_delay_s("nightly", 900)
        assert "next fire times after: 2026-07-01T02:00:00Z" in text
        assert f"starts: {delay:g} s after each fire time (stable)" in text


async def test_create_schedules_takes_the_same_keywords(tmp_path: Path, database_url: str) -> None:
    end = at("2026-06-02T00:00:00+00:00")
    async with inprocess(tmp_path, database_url, at("2026-06-01T10:00:00+00:00")) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        (s,) = await h.client.create_schedules(
            [
                {
                    "name": "b",
                    "tasks": ["t"],
                    "cron": "* * * * *",
                    "catch_up_policy": "RUN_ALL",
                    "max_catch_up_runs": 7,
                    "jitter_seconds": 5,
                    "jitter_mode": "STABLE",
                    "end_time": end,
                }
            ]
        )
        assert (s.max_catch_up_runs, s.jitter_seconds, utc(s.end_time)) == (7, 5, end)
        assert s.jitter_mode == JitterMode.JITTER_MODE_STABLE
