"""The SDK (sync and asyncio) and the networked CLI commands against a live embedded server
(``server`` fixture: API + scheduler loop + worker on a fresh SQLite file)."""

from __future__ import annotations

import textwrap
import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.harness import Server, wait_for
from tickwork import (
    AlreadyExists,
    AsyncClient,
    Client,
    FailedPrecondition,
    InvalidArgument,
    Job,
    JobStatus,
    JobTimeout,
    NotFound,
    SkipReason,
    TaskAbort,
    Trigger,
)
from tickwork.apply import apply_config, load_config, parse_config
from tickwork.cli import main

WAIT_S = 30.0


def shell(script: str) -> dict[str, Any]:
    return {"argv": ["sh", "-c", script]}


@pytest.fixture
def tw(server: Server) -> Iterator[Client]:
    with Client(server.address, timeout=10) as client:
        yield client


# -- running and waiting ------------------------------------------------------------------


def test_run_wait_get_list(tw: Client) -> None:
    task = tw.create_task("hello", "shell", shell("echo hello from tickwork"))
    assert task.id > 0 and task.enabled and task.task_priority == 100

    [run] = tw.run("hello")
    assert run.task_id == task.id and run.job_id > 0 and not run.skipped

    job = tw.wait(run.job_id, timeout=WAIT_S)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED
    assert job.trigger == Trigger.TRIGGER_API
    assert "hello from tickwork" in job.output_tail
    assert job.HasField("start_time") and job.HasField("finish_time")

    assert tw.get_job(run.job_id) == job
    assert [j.id for j in tw.list_jobs(task="hello")] == [run.job_id]
    assert tw.list_jobs(task="hello", statuses=["FAILED"]) == []
    assert [j.id for j in tw.list_jobs(statuses=[JobStatus.JOB_STATUS_SUCCEEDED])] == [run.job_id]


def test_run_returns_one_result_per_argument_in_order(tw: Client) -> None:
    a = tw.create_task("a", "shell", shell("true"))
    tw.create_task("b", "shell", shell("true"))
    runs = tw.run("b", a.id)
    assert [r.task_name for r in runs] == ["b", "a"]
    for r in runs:
        assert tw.wait(r.job_id, timeout=WAIT_S).status == JobStatus.JOB_STATUS_SUCCEEDED


def test_watch_ends_with_the_final_state(tw: Client) -> None:
    tw.create_task("count", "shell", shell("for i in 1 2 3; do echo $i; sleep 0.1; done"))
    [run] = tw.run("count")
    states = list(tw.watch(run.job_id))
    assert states[-1].status == JobStatus.JOB_STATUS_SUCCEEDED
    assert all(s.id == run.job_id for s in states)
    assert "3" in states[-1].output_tail


def test_failed_job_reports_its_error(tw: Client) -> None:
    tw.create_task("broken", "shell", shell("echo oops >&2; exit 3"))
    [run] = tw.run("broken")
    job = tw.wait(run.job_id, timeout=WAIT_S)
    assert job.status == JobStatus.JOB_STATUS_FAILED
    assert job.error


def test_wait_timeout_then_abort(tw: Client) -> None:
    tw.create_task("sleepy", "shell", shell("sleep 30"))
    [run] = tw.run("sleepy")
    with pytest.raises(JobTimeout) as info:
        tw.wait(run.job_id, timeout=0.5)
    assert info.value.job_id == run.job_id
    assert isinstance(info.value, TimeoutError)

    [again] = tw.run("sleepy")
    assert again.skipped and again.job_id == run.job_id
    assert again.skip_reason in (
        SkipReason.SKIP_REASON_ALREADY_RUNNING,
        SkipReason.SKIP_REASON_ALREADY_QUEUED,
    )

    [abort] = tw.abort("sleepy")
    assert abort.job_id == run.job_id
    assert abort.action in (TaskAbort.ACTION_ABORT_REQUESTED, TaskAbort.ACTION_CANCELLED)
    job = tw.wait(run.job_id, timeout=WAIT_S)
    assert job.status in (JobStatus.JOB_STATUS_ABORTED, JobStatus.JOB_STATUS_CANCELLED)


def test_cancel_a_queued_job(tw: Client) -> None:
    tw.create_task("blocker", "shell", shell("sleep 30"))
    tw.create_task("behind", "shell", shell("true"))
    [blocker] = tw.run("blocker")
    [behind] = tw.run("behind")  # queued: the one worker is busy with (or about to run) blocker
    cancelled = tw.cancel_job(behind.job_id)
    assert cancelled.status == JobStatus.JOB_STATUS_CANCELLED
    with pytest.raises(FailedPrecondition):
        tw.cancel_job(behind.job_id)
    tw.abort("blocker")
    tw.wait(blocker.job_id, timeout=WAIT_S)


# -- typed errors -------------------------------------------------------------------------


def test_errors_are_typed(tw: Client) -> None:
    with pytest.raises(NotFound) as info:
        tw.get_task("no-such-task")
    assert isinstance(info.value, LookupError)
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(NotFound):
        tw.get_job(999_999)
    with pytest.raises(NotFound):
        tw.run("no-such-task")

    tw.create_task("dup", "shell", shell("true"))
    with pytest.raises(AlreadyExists):
        tw.create_task("dup", "shell", shell("true"))
    with pytest.raises(InvalidArgument) as bad:
        tw.create_task("no-argv", "shell", {})
    assert isinstance(bad.value, ValueError)
    assert "argv" in bad.value.details


def test_invalid_schedules_are_rejected_naming_the_field(tw: Client) -> None:
    tw.create_task("t", "shell", shell("true"))
    with pytest.raises(InvalidArgument) as never:
        tw.create_schedule("never", ["t"], cron="0 0 30 2 *")
    assert "can never fire" in never.value.details
    with pytest.raises(InvalidArgument) as zone:
        tw.create_schedule("zoned", ["t"], cron="@daily", timezone="Mars/Base")
    assert "timezone" in zone.value.details
    with pytest.raises(InvalidArgument):
        tw.create_schedule("untimed", ["t"])  # rejected by the SDK before sending
    with pytest.raises(NotFound):
        tw.create_schedule("orphan", ["no-such-task"], cron="@daily")


# -- task and schedule management ---------------------------------------------------------


def test_update_task_sends_only_the_given_fields(tw: Client) -> None:
    tw.create_task(
        "upd", "shell", shell("true"), description="before", max_attempts=2, backoff_base_seconds=7
    )
    task = tw.update_task("upd", timeout_seconds=5, max_attempts=4)
    assert task.timeout_seconds == 5
    assert task.retry_policy.max_attempts == 4
    assert task.retry_policy.backoff_base_seconds == 7  # kept
    assert task.description == "before"  # not in the mask
    assert tw.disable_task("upd").enabled is False
    assert tw.enable_task(task.id).enabled is True
    with pytest.raises(TypeError):
        tw.update_task("upd", colour="blue")  # type: ignore[call-arg]
    assert [t.name for t in tw.list_tasks() if not t.name.startswith("tickwork-")] == ["upd"]
    tw.delete_task("upd")
    with pytest.raises(NotFound):
        tw.get_task("upd")


def test_schedule_lifecycle_and_fires(tw: Client) -> None:
    tw.create_task("nightly", "shell", shell("true"))
    schedule = tw.create_schedule(
        "night", ["nightly"], cron="0 2 * * *", timezone="Europe/Berlin", description="d"
    )
    assert schedule.cron_description == "At 02:00 AM"
    assert schedule.HasField("next_run_time")
    assert list(schedule.task_names) == ["nightly"]
    assert tw.get_schedule("night").id == schedule.id

    updated = tw.update_schedule("night", interval_seconds=3600)
    assert (updated.cron_expression, updated.interval_seconds) == ("", 3600)
    assert updated.timezone == "Europe/Berlin"
    assert [s.name for s in tw.list_schedules() if not s.name.startswith("tickwork-")] == ["night"]
    assert tw.list_fires("night") == []

    tw.delete_schedule("night")
    with pytest.raises(NotFound):
        tw.get_schedule("night")
    tw.get_task("nightly")  # its task stays


def test_a_scheduled_task_fires_and_is_recorded(tw: Client) -> None:
    tw.create_task("tick", "shell", shell("echo tick"))
    tw.create_schedule("every-second", ["tick"], cron="* * * * * *")
    deadline = datetime.now(UTC).timestamp() + WAIT_S
    jobs: list[Job] = []
    while not jobs and datetime.now(UTC).timestamp() < deadline:
        jobs = tw.list_jobs(task="tick", schedule="every-second", statuses=["SUCCEEDED"])
        time.sleep(0.1)
    assert jobs and jobs[0].trigger == Trigger.TRIGGER_SCHEDULER
    fires = tw.list_fires("every-second", limit=5)
    assert fires and any(r.job_id == jobs[-1].id for f in fires for r in f.runs)


def test_describe_cron_previews_dst(tw: Client) -> None:
    preview = tw.describe_cron(
        "30 2 * * *", "Europe/Berlin", after=datetime(2026, 3, 28, 12, tzinfo=UTC), count=2
    )
    assert preview.description == "At 02:30 AM"
    assert [p.local_time for p in preview.fire_times] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    assert preview.fire_times[0].dst_note and not preview.fire_times[1].dst_note
    with pytest.raises(InvalidArgument):
        tw.describe_cron("0 2 * * *", after=datetime(2026, 1, 1))  # naive


# -- apply --------------------------------------------------------------------------------

CONFIG = """
[[tasks]]
name = "health-check"
handler = "shell"
params = { argv = ["sh", "-c", "echo ok"] }
timeout_seconds = 30
retry = { max_attempts = 3, backoff_base_seconds = 5, backoff_cap_seconds = 60 }

[[schedules]]
name = "every-10s"
cron = "*/10 * * * * *"
timezone = "Europe/Berlin"
catch_up_policy = "RUN_ONCE"
tasks = ["health-check"]
"""


def test_apply_config_is_idempotent(tw: Client) -> None:
    config = parse_config(tomllib.loads(CONFIG))
    first = apply_config(tw, config)
    assert [c.action for c in first.changes] == ["created", "created"]
    second = apply_config(tw, config)
    assert [c.action for c in second.changes] == ["unchanged", "unchanged"]

    changed = parse_config(tomllib.loads(CONFIG.replace("= 30", "= 45")))
    third = apply_config(tw, changed)
    assert [str(c) for c in third.changes] == [
        "task health-check: updated (timeout_seconds)",
        "schedule every-10s: unchanged",
    ]
    assert tw.get_task("health-check").timeout_seconds == 45
    assert not apply_config(tw, changed).changed


def test_example_config_applies_twice_unchanged(server: Server) -> None:
    example = str(Path(__file__).resolve().parent.parent / "examples" / "tickwork.toml")
    assert main(["--server", server.address, "apply", "-f", example]) == 0
    with Client(server.address) as tw:
        report = apply_config(tw, load_config(example))
    assert not report.changed, str(report)


# -- asyncio ------------------------------------------------------------------------------


async def test_async_client(server: Server) -> None:
    async with AsyncClient(server.address, timeout=10) as tw:
        await tw.create_task("async-hello", "shell", shell("echo async"))
        [run] = await tw.run("async-hello")
        states = [job.status async for job in tw.watch(run.job_id)]
        assert states[-1] == JobStatus.JOB_STATUS_SUCCEEDED
        job = await tw.wait(run.job_id, timeout=WAIT_S)
        assert "async" in job.output_tail
        names = [t.name for t in await tw.list_tasks() if not t.name.startswith("tickwork-")]
        assert names == ["async-hello"]
        assert [j.id for j in await tw.list_jobs(task="async-hello")] == [run.job_id]
        with pytest.raises(NotFound):
            await tw.get_task("missing")
        await tw.create_task("async-sleep", "shell", shell("sleep 30"))
        [slow] = await tw.run("async-sleep")
        with pytest.raises(JobTimeout):
            await tw.wait(slow.job_id, timeout=0.3)
        await tw.abort("async-sleep")
        await tw.wait(slow.job_id, timeout=WAIT_S)


# -- CLI against the server ---------------------------------------------------------------


def test_cli_run_wait_and_listings(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        textwrap.dedent(
            """
            [[tasks]]
            name = "greet"
            handler = "shell"
            params = { argv = ["sh", "-c", "echo hi there"] }

            [[tasks]]
            name = "fail"
            handler = "shell"
            params = { argv = ["sh", "-c", "echo bad >&2; exit 1"] }

            [[schedules]]
            name = "nightly"
            cron = "0 2 * * *"
            timezone = "Europe/Berlin"
            tasks = ["greet"]
            """
        )
    )
    base = ["--server", server.address]
    assert main([*base, "apply", "-f", str(config)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "3 created, 0 updated, 0 unchanged"
    assert main([*base, "apply", "-f", str(config)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 created, 0 updated, 3 unchanged"

    assert main([*base, "tasks", "run", "greet", "--wait", "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job ")
    assert "SUCCEEDED" in out and "hi there" in out

    assert main([*base, "tasks", "run", "fail", "--wait", "--timeout", "30"]) == 1
    assert "FAILED" in capsys.readouterr().out

    assert main([*base, "jobs", "list", "--status", "succeeded,failed"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["ID", "TASK", "STATUS"]
    assert len(table) == 3

    assert main([*base, "jobs", "get", "1"]) == 0
    assert "status" in capsys.readouterr().out

    assert main([*base, "jobs", "watch", "1"]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out

    assert main([*base, "schedules", "list"]) == 0
    listing = capsys.readouterr().out
    assert "At 02:00 AM" in listing and "greet" in listing

    assert main([*base, "schedules", "fires", "nightly"]) == 0
    assert main([*base, "tasks", "disable", "greet"]) == 0
    assert "disabled" in capsys.readouterr().out
    assert main([*base, "tasks", "list"]) == 0

    assert main([*base, "jobs", "get", "999"]) == 1
    assert capsys.readouterr().err.startswith("error: NOT_FOUND: ")


def test_cli_tasks_get_and_abort(
    server: Server, tw: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tasks get`` shows every field, params and retry policy as JSON and the whole
    disabled_reason; ``tasks abort`` cancels a queued job or aborts the running one."""
    base = ["--server", server.address]
    tw.create_task(
        "cli-long",
        "shell",
        {"argv": ["sleep", "60"]},
        max_attempts=3,
        description="sleeps a minute",
    )
    assert main([*base, "tasks", "get", "cli-long"]) == 0
    fields = {
        line.split(None, 1)[0]: line.split(None, 1)[1].strip()
        for line in capsys.readouterr().out.splitlines()
        if len(line.split(None, 1)) == 2
    }
    assert fields["name"] == "cli-long" and fields["handler"] == "shell"
    assert fields["params"] == '{"argv": ["sleep", "60"]}'
    assert '"max_attempts": 3' in fields["retry_policy"]  # as in an apply file
    assert fields["description"] == "sleeps a minute"

    assert main([*base, "tasks", "abort", "cli-long"]) == 0
    assert capsys.readouterr().out == "task cli-long: nothing queued or running\n"
    (run,) = tw.run("cli-long")
    wait_for(lambda: tw.get_job(run.job_id).status == JobStatus.JOB_STATUS_RUNNING)
    assert main([*base, "tasks", "abort", "cli-long"]) == 0
    assert capsys.readouterr().out.startswith(f"task cli-long: running job {run.job_id} told")
    job = tw.wait(run.job_id, timeout=WAIT_S)
    assert job.status == JobStatus.JOB_STATUS_ABORTED and job.attempt == 1

    assert main([*base, "tasks", "get", "no-such-task"]) == 1
    assert capsys.readouterr().err.startswith("error: NOT_FOUND: ")


def test_cli_enables_disables_and_deletes_schedules_and_tasks(
    server: Server, tw: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """What an apply file cannot do: stop a schedule, and remove what it no longer names."""
    base = ["--server", server.address]
    tw.create_task("cli-gone", "shell", {"argv": ["true"]})
    tw.create_schedule("cli-hourly", ["cli-gone"], cron="0 * * * *")

    assert main([*base, "schedules", "disable", "cli-hourly"]) == 0
    assert capsys.readouterr().out == "schedule cli-hourly: disabled\n"
    schedule = tw.get_schedule("cli-hourly")
    assert not schedule.enabled and not schedule.HasField("next_run_time")
    assert main([*base, "schedules", "enable", "cli-hourly"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("schedule cli-hourly: enabled, next run ") and out.endswith(":00:00Z\n")
    assert tw.get_schedule("cli-hourly").enabled

    # The schedule's only task cannot go first: the refusal says what to do.
    assert main([*base, "tasks", "delete", "cli-gone"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: FAILED_PRECONDITION: ") and "cli-hourly" in err
    assert main([*base, "schedules", "delete", "cli-hourly"]) == 0
    assert capsys.readouterr().out == "schedule cli-hourly: deleted\n"
    assert main([*base, "tasks", "delete", "cli-gone"]) == 0
    assert capsys.readouterr().out == "task cli-gone: deleted\n"
    assert [t.name for t in tw.list_tasks() if t.name == "cli-gone"] == []

    for argv in (["schedules", "delete", "cli-hourly"], ["tasks", "delete", "cli-gone"]):
        assert main([*base, *argv]) == 1
        assert capsys.readouterr().err.startswith("error: NOT_FOUND: ")


def test_cli_apply_names_where_in_the_file_the_server_refused(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        textwrap.dedent(
            """
            [[tasks]]
            name = "fine"
            handler = "shell"
            params = { argv = ["true"] }

            [[tasks]]
            name = "typo"
            handler = "shel"
            params = { argv = ["true"] }
            """
        )
    )
    assert main(["--server", server.address, "apply", "-f", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: INVALID_ARGUMENT: tasks[1] (typo).handler: "), err
    assert "unknown handler 'shel'" in err


def test_sdk_argument_shapes_are_checked(tw: Client) -> None:
    tw.create_task("shape-check", "shell", {"argv": ["true"]})
    with pytest.raises(InvalidArgument, match="tasks: expected a list"):
        tw.create_schedule("s", "shape-check", cron="0 * * * *")
    tw.create_schedule("s", ["shape-check"], cron="0 * * * *")
    with pytest.raises(InvalidArgument, match="tasks: expected a list"):
        tw.update_schedule("s", tasks="shape-check")  # not the letters s, h, a, ...
    assert list(tw.get_schedule("s").task_names) == ["shape-check"]
    with pytest.raises(InvalidArgument, match="timeout"):
        tw.wait(1, timeout=float("nan"))
    (run,) = tw.run("shape-check")
    done = tw.wait(run.job_id, timeout=float("inf"))  # inf waits, it does not give up at once
    assert done.status == JobStatus.JOB_STATUS_SUCCEEDED
    assert [j.id for j in tw.list_jobs(statuses="succeeded")] == [run.job_id]


def test_apply_checks_schedules_before_writing_anything(tw: Client) -> None:
    unknown_task = parse_config(
        tomllib.loads(CONFIG.replace('tasks = ["health-check"]', 'tasks = ["nope"]'))
    )
    with pytest.raises(
        NotFound, match=r"schedules\[0\] \(every-10s\)\.task_names\[0\]: no task named 'nope'"
    ):
        apply_config(tw, unknown_task)
    bad_cron = parse_config(tomllib.loads(CONFIG.replace("*/10 * * * * *", "61 * * * *")))
    with pytest.raises(InvalidArgument, match=r"schedules\[0\]"):
        apply_config(tw, bad_cron)
    assert [t.name for t in tw.list_tasks() if not t.name.startswith("tickwork-")] == []
