"""consecutive_failure_count and auto-disable: only final failures of scheduler-triggered
jobs count, any success resets it, the task is disabled at
SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT (<= 0: never), the scheduler then skips it,
re-enabling resets it, and an email goes to the system addresses (a real SMTP server)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler_svc.schema import tasks
from scheduler_svc.settings import SmtpSettings
from tests.harness import Server, free_port, wait_for
from tests.inprocess import Harness, inprocess
from tests.queue_helpers import claim, eventually, finish
from tests.receivers import Mailbox, smtp_server
from tickwork import Client, FireOutcome, JobStatus, SkipReason, Trigger

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)


async def fire_and_fail(h: Harness, error: str = "boom") -> int:
    """Move to the schedule's next fire, tick, run the scheduler job and fail it; returns
    the task's consecutive_failure_count after."""
    schedule = await h.client.get_schedule("s")
    await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
    job = await claim(h)
    assert job.trigger == "SCHEDULER"
    await finish(h, job, "FAILED", error)
    return (await h.client.get_task("flaky")).consecutive_failure_count


async def run_manually(h: Harness, status: str, error: str = "") -> None:
    """A manual run of the task that ends with ``status``."""
    (run,) = await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
    job = await claim(h)
    assert job.id == run.job_id
    await finish(h, job, status, error)


async def flaky_schedule(h: Harness, **task: object) -> None:
    await h.client.create_task("flaky", "shell", {"argv": ["false"]}, **task)  # type: ignore[arg-type]
    await h.client.create_schedule("s", ["flaky"], cron="* * * * *")


async def test_the_default_count_of_five_disables_the_task(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        assert h.service.settings.auto_disable_task_failure_count == 5
        await flaky_schedule(h)
        for n in range(1, 5):
            assert await fire_and_fail(h, f"error {n}") == n
            assert (await h.client.get_task("flaky")).enabled
        assert await fire_and_fail(h, "disk full") == 5
        task = await h.client.get_task("flaky")
        assert not task.enabled
        assert task.consecutive_failure_count == 5
        assert "5 consecutive failures" in task.disabled_reason
        assert "disk full" in task.disabled_reason
        # update_time is when it was disabled: the last failure's finish.
        (last,) = await h.client.list_jobs(task="flaky", limit=1)
        assert task.update_time == last.finish_time
        # Who disabled it: the service itself, then; no note and no end.
        assert (task.disabled_by, task.disable_note) == ("tickwork", "")
        assert task.disable_time == last.finish_time and not task.HasField("disabled_until")

        # The scheduler no longer enqueues it; the fire says why.
        schedule = await h.client.get_schedule("s")
        await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None
        (fire,) = await h.client.list_fires("s", limit=1)
        assert fire.outcome == FireOutcome.FIRE_OUTCOME_SKIPPED
        assert fire.runs[0].skip_reason == SkipReason.SKIP_REASON_TASK_DISABLED
        assert len(await h.client.list_jobs(task="flaky")) == 5


async def test_only_final_failures_of_scheduler_jobs_count(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await flaky_schedule(h, max_attempts=2, backoff_base_seconds=1, backoff_cap_seconds=1)
        assert await fire_and_fail(h) == 0  # attempt 1 of 2: a retry is queued
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None
        h.clock.advance(1)
        retry_job = await claim(h)
        assert (retry_job.attempt, retry_job.trigger) == (2, "SCHEDULER")
        await finish(h, retry_job, "FAILED", "boom")
        assert (await h.client.get_task("flaky")).consecutive_failure_count == 1

        # Manual and API failures, final ones included, never count.
        await h.client.update_task("flaky", max_attempts=1)
        await run_manually(h, "FAILED", "manual boom")
        (api_run,) = await h.client.run("flaky")
        await finish(h, await claim(h), "FAILED", "api boom")
        assert api_run.job_id
        # Nor does an aborted scheduler job.
        schedule = await h.client.get_schedule("s")
        await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
        await finish(h, await claim(h), "ABORTED", "aborted by operator")
        assert (await h.client.get_task("flaky")).consecutive_failure_count == 1

        assert await fire_and_fail(h) == 2
        # Any success resets it, whatever triggered it.
        await run_manually(h, "SUCCEEDED")
        assert (await h.client.get_task("flaky")).consecutive_failure_count == 0
        assert await fire_and_fail(h) == 1
        schedule = await h.client.get_schedule("s")
        await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
        await finish(h, await claim(h), "SUCCEEDED")
        assert (await h.client.get_task("flaky")).consecutive_failure_count == 0


async def test_re_enabling_resets_the_count_and_a_manual_run_of_a_disabled_task_runs(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=2) as h:
        await flaky_schedule(h)
        await fire_and_fail(h)
        assert await fire_and_fail(h, "still broken") == 2
        task = await h.client.get_task("flaky")
        assert not task.enabled and "2 consecutive failures" in task.disabled_reason

        # Re-enabling resets the count and the reason; the scheduler enqueues it again.
        enabled = await h.client.enable_task("flaky")
        assert enabled.enabled and enabled.consecutive_failure_count == 0
        assert enabled.disabled_reason == "" and enabled.disabled_by == ""
        assert await fire_and_fail(h) == 1
        assert await fire_and_fail(h) == 2
        assert not (await h.client.get_task("flaky")).enabled

        # An operator tests a fix: a manual run of the disabled task still runs; its failure
        # does not count, its success resets the count (the task stays disabled).
        await run_manually(h, "FAILED", "not fixed yet")
        assert (await h.client.get_task("flaky")).consecutive_failure_count == 2
        await run_manually(h, "SUCCEEDED")
        task = await h.client.get_task("flaky")
        assert task.consecutive_failure_count == 0 and not task.enabled


async def test_disabling_by_hand_leaves_no_reason_and_enabling_resets(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await flaky_schedule(h)
        assert await fire_and_fail(h) == 1
        disabled = await h.client.disable_task("flaky")
        assert not disabled.enabled and disabled.disabled_reason == ""
        assert disabled.consecutive_failure_count == 1
        assert (await h.client.enable_task("flaky")).consecutive_failure_count == 0


@pytest.mark.parametrize("count", [0, -1])
async def test_a_count_of_zero_or_less_never_disables(
    tmp_path: Path, database_url: str, count: int
) -> None:
    async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=count) as h:
        await flaky_schedule(h)
        for n in range(1, 8):
            assert await fire_and_fail(h) == n
        task = await h.client.get_task("flaky")
        assert task.enabled and task.disabled_reason == ""


@pytest.fixture
def mailbox() -> Iterator[tuple[Mailbox, int]]:
    """A real SMTP server on 127.0.0.1 (free port) and what it received."""
    with smtp_server() as served:
        yield served


def test_auto_disable_email_arrives_and_names_task_count_and_error(
    tmp_path: Path, database_url: str, mailbox: tuple[Mailbox, int]
) -> None:
    box, port = mailbox
    srv = Server(
        tmp_path,
        database_url=database_url,
        env={
            "SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT": "2",
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(port),
            "SMTP_FROM": "tickwork@example.com",
            "SMTP_TO": "ops@example.com, oncall@example.com",
        },
    )
    try:
        srv.wait_healthy()
        with Client(srv.address) as client:
            client.create_task(
                "nightly-backup",
                "shell",
                {"argv": ["sh", "-c", "echo 'disk full on /backup' >&2; exit 3"]},
            )
            client.create_schedule("every-second", ["nightly-backup"], cron="* * * * * *")
            messages = wait_for(box.messages, timeout_s=20, what="the auto-disable email")
            task = client.get_task("nightly-backup")
            assert not task.enabled and task.consecutive_failure_count == 2
            failed = client.list_jobs(task="nightly-backup", statuses=[JobStatus.JOB_STATUS_FAILED])
            assert len(failed) == 2
        (rcpt, msg), *more = messages
        assert not more
        assert sorted(rcpt) == ["oncall@example.com", "ops@example.com"]
        assert msg["From"] == "tickwork@example.com"
        subject = msg["Subject"]
        assert "nightly-backup" in subject and "2 consecutive failures" in subject
        body = msg.get_payload(decode=True).decode()  # type: ignore[union-attr]
        assert "'nightly-backup'" in body and "failed 2 times in a row" in body
        assert "exit code 3: disk full on /backup" in body
        assert "auto-disable email sent" in srv.output()
        # The log line alone tells an operator which task and why.
        assert (
            "task 'nightly-backup' disabled after 2 consecutive failures; last error: "
            "exit code 3: disk full on /backup" in srv.output()
        )
    finally:
        srv.stop()


async def test_unreachable_smtp_does_not_stop_the_scheduler(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    smtp = SmtpSettings(
        host="127.0.0.1", port=free_port(), recipients=("ops@example.com",), timeout_s=2
    )
    async with inprocess(
        tmp_path, database_url, T0, auto_disable_task_failure_count=1, smtp=smtp
    ) as h:
        h.service.start_sender()  # the email goes through the notification outbox
        await flaky_schedule(h)
        with caplog.at_level(logging.INFO, logger="scheduler_svc"):
            assert await fire_and_fail(h, "disk full") == 1
            assert not (await h.client.get_task("flaky")).enabled

            async def logged() -> bool:
                return any(r.getMessage() == "auto-disable email failed" for r in caplog.records)

            await eventually(logged, what="the email failure to be logged")
        failure = next(r for r in caplog.records if r.getMessage() == "auto-disable email failed")
        assert failure.levelno == logging.ERROR and failure.exc_info is not None
        assert getattr(failure, "task_id", None) == (await h.client.get_task("flaky")).id

        # The scheduler goes on: the next tick fires both schedules.
        await h.client.create_task("other", "shell", {"argv": ["true"]})
        await h.client.create_schedule("o", ["other"], cron="* * * * *")
        schedule = await h.client.get_schedule("s")
        await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
        (fire,) = await h.client.list_fires("s", limit=1)
        assert fire.runs[0].skip_reason == SkipReason.SKIP_REASON_TASK_DISABLED
        (other,) = await h.client.list_fires("o", limit=1)
        assert other.outcome == FireOutcome.FIRE_OUTCOME_ENQUEUED
        job = await claim(h)
        assert job.task_name == "other"


async def test_disabling_a_task_cancels_its_queued_scheduler_retry(
    tmp_path: Path, database_url: str
) -> None:
    """A disabled task's scheduled runs stop: its queued scheduler retry is cancelled with
    the disable; a manual run of it still runs and is retried as usual."""
    async with inprocess(tmp_path, database_url, T0) as h:
        await flaky_schedule(h, max_attempts=3, backoff_base_seconds=1, backoff_cap_seconds=1)
        await fire_and_fail(h)
        (retry,) = await h.client.list_jobs(task="flaky", statuses=["QUEUED"])
        assert (retry.attempt, retry.trigger) == (2, Trigger.TRIGGER_SCHEDULER)

        await h.client.disable_task("flaky")
        cancelled = await h.client.get_job(retry.id)
        assert cancelled.status == JobStatus.JOB_STATUS_CANCELLED
        assert cancelled.error == "task disabled"
        h.clock.advance(60)
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None

        (run,) = await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
        assert not run.skipped and not run.promoted
        result = await finish(h, await claim(h), "FAILED", "still broken")
        assert result.retry is not None and result.retry.trigger == "MANUAL"
        h.clock.advance(60)
        assert (await claim(h)).id == result.retry.id


async def test_a_scheduler_job_running_when_its_task_is_disabled_finishes_unretried(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await flaky_schedule(h, max_attempts=3, backoff_base_seconds=1, backoff_cap_seconds=1)
        await h.tick((await h.client.get_schedule("s")).next_run_time.ToDatetime(tzinfo=UTC))
        job = await claim(h)
        assert (job.trigger, job.attempt) == ("SCHEDULER", 1)
        await h.client.disable_task("flaky")
        assert (await h.client.get_job(job.id)).status == JobStatus.JOB_STATUS_RUNNING
        assert not (await h.service.app.store.get_job(job.id)).abort_requested

        result = await finish(h, job, "FAILED", "boom")
        assert result.accepted and result.retry is None
        h.clock.advance(60)
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30) is None
        assert [j.id for j in await h.client.list_jobs(task="flaky")] == [job.id]


async def test_disabling_keeps_a_scheduler_job_a_manual_run_promoted(
    tmp_path: Path, database_url: str
) -> None:
    """A run the operator asked for (promoting the scheduler's queued job) still runs and
    retries after the task is disabled, like any manual run."""
    async with inprocess(tmp_path, database_url, T0) as h:
        await flaky_schedule(h, max_attempts=2, backoff_base_seconds=1, backoff_cap_seconds=1)
        await h.tick((await h.client.get_schedule("s")).next_run_time.ToDatetime(tzinfo=UTC))
        (run,) = await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
        assert run.promoted
        await h.client.disable_task("flaky")
        job = await claim(h)
        assert job.id == run.job_id
        result = await finish(h, job, "FAILED", "boom")
        assert result.retry is not None
        h.clock.advance(60)
        assert (await claim(h)).id == result.retry.id


async def test_a_scheduler_job_of_a_disabled_task_left_queued_is_never_started(
    tmp_path: Path, database_url: str
) -> None:
    """The claim's own check: a scheduler job queued for a task that was disabled without
    cancelling it (on PostgreSQL, a fire racing an auto-disable) is not started, nor
    reported ready; a manual run promotes it and then it runs."""
    async with inprocess(tmp_path, database_url, T0) as h:
        await flaky_schedule(h)
        await h.tick((await h.client.get_schedule("s")).next_run_time.ToDatetime(tzinfo=UTC))
        (queued,) = await h.client.list_jobs(task="flaky", statuses=["QUEUED"])
        store = h.service.app.store
        await store.db.write(
            lambda conn: conn.execute(tasks.update().values(enabled=False))  # as the race
        )
        assert await store.claim_next_job("w", h.clock(), 30) is None
        assert await store.next_ready_time(h.clock()) is None

        (run,) = await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
        assert run.job_id == queued.id and run.promoted
        assert (await claim(h)).id == queued.id
