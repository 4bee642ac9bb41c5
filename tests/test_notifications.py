"""Notifications: events are written in the outcome's transaction and delivered by the
background sender to real receivers (an HTTP server and an SMTP server on 127.0.0.1):
each kind once with its documented fields, signed; state changes only by default; the
API never returns secrets."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import signal
from pathlib import Path

import pytest

from scheduler_svc.settings import SmtpSettings
from tests.harness import Server, wait_for
from tests.inprocess import Harness, inprocess
from tests.queue_helpers import claim, eventually, finish
from tests.receivers import HttpReceiver, http_receiver, smtp_server
from tickwork import Client, InvalidArgument, JobStatus, NotFound, Trigger
from tickwork.v1 import notifier_pb2 as pb

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)
SECRET = "s3cret-key"
#: The route of the dead-man tests: with no worker, no_active_worker would come too.
DEAD_MAN = [pb.NOTIFICATION_EVENT_NO_SUCCESS]


def webhook(name: str, url: str, **fields: object) -> pb.Notifier:
    return pb.Notifier(name=name, type=pb.NOTIFIER_TYPE_WEBHOOK, url=url, secret=SECRET, **fields)  # type: ignore[arg-type]


async def fire_and_fail(h: Harness, error: str = "boom") -> None:
    """Tick at the schedule's next fire, take its job and fail it."""
    schedule = await h.client.get_schedule("s")
    await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
    job = await claim(h)
    await finish(h, job, "FAILED", error)


async def run_and_succeed(h: Harness) -> None:
    (run,) = await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
    job = await claim(h)
    assert job.id == run.job_id
    await finish(h, job, "SUCCEEDED")


async def flaky(h: Harness) -> None:
    await h.client.create_task("flaky", "shell", {"argv": ["false"]})
    await h.client.create_schedule("s", ["flaky"], cron="* * * * *")


def verify(receiver: HttpReceiver) -> list[dict[str, object]]:
    """Every body the receiver got, after checking its signature and event id header."""
    out = []
    for got in receiver.received():
        expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
        assert got.headers["x-tickwork-signature"] == expected
        body = got.json()
        assert got.headers["x-tickwork-event-id"] == body["id"]
        out.append(body)
    return out


async def received(receiver: HttpReceiver, count: int) -> list[dict[str, object]]:
    async def enough() -> list[dict[str, object]] | None:
        bodies = verify(receiver)
        return bodies if len(bodies) >= count else None

    return await eventually(enough, what=f"{count} webhook posts")


async def test_five_failures_in_a_row_send_one_failure_and_a_success_one_recovery(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=0) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("ops-hook", receiver.url))
            await flaky(h)
            for _ in range(5):
                await fire_and_fail(h, "disk full")
            await run_and_succeed(h)
            failure, recovery = await received(receiver, 2)
            await sender.pass_once()  # anything else would be routed and claimed now
            await recorded_sent(h, 2)
        assert failure["type"] == "final_failure" and failure["state_change"] is True
        assert failure["task"] == {"id": 1, "name": "flaky"}
        job = failure["job"]
        assert isinstance(job, dict)
        assert job["status"] == "FAILED" and job["trigger"] == "SCHEDULER"
        assert job["error"] == "disk full" and job["attempt"] == 1
        assert failure["consecutive_failures"] == 1
        assert recovery["type"] == "recovery" and recovery["failing_since"]
        assert recovery["id"] != failure["id"]
        assert len(receiver.received()) == 2


async def test_each_event_kind_arrives_once_by_webhook_and_email(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver, smtp_server() as (box, port):
        smtp = SmtpSettings(
            host="127.0.0.1", port=port, recipients=("oncall@example.com",), timeout_s=5
        )
        async with inprocess(
            tmp_path, database_url, T0, auto_disable_task_failure_count=2, smtp=smtp
        ) as h:
            h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url))
            await h.client.put_notifier(
                pb.Notifier(name="mail", type=pb.NOTIFIER_TYPE_EMAIL, to=["ops@example.com"])
            )
            await flaky(h)
            await fire_and_fail(h, "exit code 3: disk full")
            await fire_and_fail(h, "exit code 3: disk full")  # disables the task
            await h.client.enable_task("flaky")
            await run_and_succeed(h)
            bodies = await received(receiver, 3)
            # webhook 3 + mail 3 + the SMTP_* notifier's auto-disable email.
            await eventually(lambda: _at_least(box.messages, 4), what="4 emails")
            notes = await recorded_sent(h, 7)
        assert [b["type"] for b in bodies] == ["final_failure", "auto_disabled", "recovery"]
        assert len({b["id"] for b in bodies}) == 3
        disabled = bodies[1]
        assert disabled["consecutive_failures"] == 2
        assert "disabled after 2 consecutive failures" in str(disabled["reason"])
        mails = box.messages()
        to_ops = [m["Subject"] for rcpt, m in mails if rcpt == ["ops@example.com"]]
        assert len(to_ops) == 3
        assert "failed: exit code 3: disk full" in to_ops[0]
        assert "disabled after 2 consecutive failures" in to_ops[1]
        assert "recovered" in to_ops[2]
        (oncall,) = [m for rcpt, m in mails if rcpt == ["oncall@example.com"]]
        assert "disabled after 2 consecutive failures" in oncall["Subject"]
        by_notifier = sorted((n.notifier, n.event) for n in notes)
        assert by_notifier == sorted(
            [(name, e) for name in ("hook", "mail") for e in (1, 2, 3)] + [("smtp", 3)]
        )
        assert all(n.status == pb.NOTIFICATION_STATUS_SENT and n.attempts == 1 for n in notes)


async def recorded_sent(h: Harness, count: int) -> list[pb.Notification]:
    """The notifications once ``count`` are listed and every one is recorded SENT (a
    receiver has its message before the sender records the delivery)."""

    async def listed() -> list[pb.Notification]:
        notes = await h.client.list_notifications()
        done = len(notes) == count and all(n.status == pb.NOTIFICATION_STATUS_SENT for n in notes)
        return notes if done else []

    return await eventually(listed, what=f"{count} deliveries recorded SENT")


async def _at_least(read: object, count: int) -> bool:
    return len(read()) >= count  # type: ignore[operator]


async def test_a_route_may_ask_for_every_failure_and_filter_by_task(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=0) as h:
            sender = h.service.start_sender()
            every = webhook(
                "every", receiver.url, every=True, events=[pb.NOTIFICATION_EVENT_FINAL_FAILURE]
            )
            await h.client.put_notifier(every)
            other = webhook("other-task", receiver.url + "/other", tasks=["not-flaky"])
            await h.client.put_notifier(other)
            await flaky(h)
            for _ in range(3):
                await fire_and_fail(h)
            await run_and_succeed(h)
            bodies = await received(receiver, 3)
            await sender.pass_once()
            notes = await h.client.list_notifications()
        assert [b["type"] for b in bodies] == ["final_failure"] * 3
        assert [b["state_change"] for b in bodies] == [True, False, False]
        assert {n.notifier for n in notes} == {"every"} and len(notes) == 3
        assert all(r.path == "/hook" for r in receiver.received())


async def test_slack_gets_one_readable_line(tmp_path: Path, database_url: str) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=0) as h:
            h.service.start_sender()
            slack = pb.Notifier(name="chat", type=pb.NOTIFIER_TYPE_SLACK, url=receiver.url)
            await h.client.put_notifier(slack)
            await flaky(h)
            await fire_and_fail(h, "exit code 3: disk full\nTraceback ...")
            await run_and_succeed(h)
            await eventually(lambda: _at_least(receiver.received, 2), what="2 slack posts")
        # Sent each on its own: the two may arrive in either order.
        failed, recovered = sorted((r.json() for r in receiver.received()), key=str)
        assert failed == {"text": "tickwork: task 'flaky' failed: exit code 3: disk full"}
        assert recovered == {"text": "tickwork: task 'flaky' recovered"}
        assert "x-tickwork-signature" not in receiver.received()[0].headers


async def test_notifiers_never_return_secrets_and_refuse_bad_fields(
    tmp_path: Path, database_url: str
) -> None:
    smtp = SmtpSettings(host="127.0.0.1", port=2525, recipients=("ops@example.com",), timeout_s=2)
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, smtp=smtp) as h:
            put = await h.client.put_notifier(webhook("hook", receiver.url, timeout_seconds=3))
            assert put.created and put.changed
            stored = put.notifier
            again = await h.client.put_notifier(webhook("hook", receiver.url, timeout_seconds=3))
            assert not again.created and not again.changed
            other_secret = webhook("hook", receiver.url, timeout_seconds=3)
            other_secret.secret = "another"
            assert (await h.client.put_notifier(other_secret)).changed
            await h.client.put_notifier(webhook("hook", receiver.url, timeout_seconds=3))
            assert stored.url == "" and stored.secret == ""
            assert stored.has_url and stored.has_secret and stored.timeout_seconds == 3
            listed = await h.client.list_notifiers()
            assert [(n.name, n.builtin) for n in listed] == [("hook", False), ("smtp", True)]
            assert all(n.url == "" and n.secret == "" for n in listed)
            for bad, field in (
                (pb.Notifier(name="x"), "notifier.type"),
                (pb.Notifier(name="", type=pb.NOTIFIER_TYPE_SLACK), "notifier.name"),
                (
                    pb.Notifier(name="x", type=pb.NOTIFIER_TYPE_WEBHOOK, url="ftp://h/"),
                    "notifier.url",
                ),
                (
                    pb.Notifier(name="x", type=pb.NOTIFIER_TYPE_EMAIL, to=["nobody"]),
                    "notifier.to[0]",
                ),
                # A NUL (PostgreSQL cannot store it: it was a database outage), a newline.
                (pb.Notifier(name="x\0y", type=pb.NOTIFIER_TYPE_SLACK), "notifier.name"),
                (pb.Notifier(name="x\ny", type=pb.NOTIFIER_TYPE_SLACK), "notifier.name"),
                *(
                    (
                        pb.Notifier(name="x", type=pb.NOTIFIER_TYPE_EMAIL, to=["a@b.c", to]),
                        "notifier.to[1]",
                    )
                    for to in ("a@b.com\r\nBcc: evil@x.com", "a@b.com, c@d.com", "a b@c.com")
                ),
                *(
                    (pb.Notifier(name="x", type=pb.NOTIFIER_TYPE_WEBHOOK, url=url), "notifier.url")
                    for url in ("http://127.0.0.1:99999/a", "http://:@/?tok=1", "http://h/a\r\nb")
                ),
                (
                    pb.Notifier(
                        name="x", type=pb.NOTIFIER_TYPE_SLACK, url=receiver.url, secret="s"
                    ),
                    "notifier.secret",
                ),
                (
                    pb.Notifier(
                        name="x", type=pb.NOTIFIER_TYPE_WEBHOOK, url=receiver.url, tasks=["a\0"]
                    ),
                    "notifier.tasks[0]",
                ),
                (
                    pb.Notifier(
                        name="x",
                        type=pb.NOTIFIER_TYPE_SLACK,
                        url=receiver.url,
                        events=[pb.NOTIFICATION_EVENT_TEST],
                    ),
                    "notifier.events[0]",
                ),
            ):
                with pytest.raises(InvalidArgument) as err:
                    await h.client.put_notifier(bad)
                assert err.value.field == field, (bad, err.value)
            with pytest.raises(NotFound):
                await h.client.delete_notifier("nope")
            with pytest.raises(NotFound):
                await h.client.test_notifier("nope")

            tested = await h.client.test_notifier("hook")
            assert tested.delivered and tested.error == ""
            (body,) = verify(receiver)
            assert body["type"] == "test" and body["id"] == tested.event_id
            receiver.status = 503
            failed = await h.client.test_notifier("hook")
            assert not failed.delivered and failed.error == "HTTP 503"
            dead = f"http://127.0.0.1:{receiver.port + 0}/secret-path-token"
            receiver.stop()
            await h.client.put_notifier(webhook("hook", dead))
            unreachable = await h.client.test_notifier("hook")
            assert not unreachable.delivered and "secret-path-token" not in unreachable.error
            await h.client.delete_notifier("hook")
            assert [n.name for n in await h.client.list_notifiers()] == ["smtp"]


def test_a_kill_between_the_outbox_commit_and_the_send_delivers_after_restart_once(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        env = {
            "WORKER_POLL_INTERVAL_SECONDS": "1",
            "SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT": "0",
        }
        first = Server(
            tmp_path,
            database_url=database_url,
            env={**env, "TICKWORK_FAILPOINTS": "after-outbox-commit"},
        )
        try:
            first.wait_healthy()
            with Client(first.address) as client:
                client.put_notifier(webhook("hook", receiver.url))
                client.create_task("bad", "shell", {"argv": ["sh", "-c", "exit 4"]})
                client.run("bad")
            first.popen.wait(30)
        finally:
            first.stop()
        assert first.popen.returncode == -signal.SIGKILL
        assert "failpoint after-outbox-commit reached" in first.output()
        assert receiver.received() == []
        second = Server(tmp_path, database_url=database_url, env=env, name="second")
        try:
            second.wait_healthy()
            with Client(second.address) as client:

                def sent() -> list[pb.Notification]:
                    notes = client.list_notifications()
                    return notes if notes and notes[0].status == pb.NOTIFICATION_STATUS_SENT else []

                (note,) = wait_for(sent, what="the event sent after the restart")
                (failed,) = client.list_jobs(task="bad")
        finally:
            second.stop()
        (body,) = verify(receiver)
        assert body["id"] == note.event_id and body["type"] == "final_failure"
        assert body["job"]["id"] == failed.id and "exit code 4" in body["job"]["error"]  # type: ignore[index]
        assert note.attempts == 1


def test_a_receiver_answering_500_is_retried_then_given_up_and_fires_stay_on_time(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        receiver.status = 500
        receiver.failing_delay_s = 1.0
        srv = Server(
            tmp_path,
            database_url=database_url,
            env={
                "WORKER_POLL_INTERVAL_SECONDS": "1",
                "SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT": "0",
                "TICKWORK_NOTIFY_MAX_ATTEMPTS": "3",
                "TICKWORK_NOTIFY_BACKOFF_SECONDS": "0.2",
                "TICKWORK_NOTIFY_BACKOFF_CAP_SECONDS": "0.4",
            },
        )
        try:
            srv.wait_healthy()
            with Client(srv.address) as client:
                every = webhook("hook", receiver.url, every=True)
                client.put_notifier(every)
                client.create_task("bad", "shell", {"argv": ["false"]})
                client.create_schedule("each-second", ["bad"], cron="* * * * * *")

                def given_up() -> list[pb.Notification]:
                    return client.list_notifications(status=pb.NOTIFICATION_STATUS_GIVEN_UP)

                first, *_ = wait_for(given_up, timeout_s=30, what="a notification given up")
                jobs = client.list_jobs(task="bad", limit=1000)
        finally:
            srv.stop()
        assert first.attempts == 3 and first.last_error == "HTTP 500"
        tries = [r for r in receiver.received() if r.json()["id"] == first.event_id]
        assert len(tries) == 3
        # Every fire meanwhile was enqueued on time: the sender never held up the tick.
        fired = [j for j in jobs if j.HasField("fire_time")]
        assert len(fired) >= 4
        lateness = [
            (j.enqueue_time.ToDatetime() - j.fire_time.ToDatetime()).total_seconds() for j in fired
        ]
        assert max(lateness) < 0.5, lateness


async def test_apply_declares_notifiers_and_the_cli_lists_and_tests_them(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tickwork.cli import main

    with http_receiver() as receiver:
        config = tmp_path / "tickwork.toml"

        def write(secret: str) -> None:
            config.write_text(
                "[[notifiers]]\n"
                'name = "ops-hook"\n'
                'type = "webhook"\n'
                f'url = "{receiver.url}"\n'
                f'secret = "{secret}"\n'
                'events = ["final_failure", "recovery"]\n'
                "[[notifiers]]\n"
                'name = "ops-mail"\n'
                'type = "email"\n'
                'to = ["ops@example.com"]\n'
                "every = true\n"
            )

        async def cli(*argv: str) -> tuple[int, str]:
            code = await asyncio.to_thread(main, [*argv, "--server", h.service.address])
            return code, capsys.readouterr().out

        async with inprocess(tmp_path, database_url, T0) as h:
            write(SECRET)
            code, out = await cli("apply", "-f", str(config), "--dry-run")
            assert code == 0
            assert "notifier ops-hook: would be created" in out
            assert "notifier ops-mail: would be created" in out
            assert [n.name for n in await h.client.list_notifiers()] == []  # nothing written
            code, out = await cli("apply", "-f", str(config))
            assert code == 0
            assert "notifier ops-hook: created" in out and "notifier ops-mail: created" in out
            code, out = await cli("apply", "-f", str(config))
            assert "notifier ops-hook: unchanged" in out and "notifier ops-mail: unchanged" in out
            write("rotated")
            code, out = await cli("apply", "-f", str(config), "--dry-run")
            assert "notifier ops-hook: would be updated (secret)" in out
            code, out = await cli("apply", "-f", str(config), "--dry-run")
            assert "notifier ops-hook: would be updated (secret)" in out  # still not written
            code, out = await cli("apply", "-f", str(config))
            assert "notifier ops-hook: updated (secret)" in out
            assert "notifier ops-mail: unchanged" in out

            code, out = await cli("notifiers", "list")
            assert code == 0
            assert "ops-hook" in out and "webhook" in out and "final_failure, recovery" in out
            assert "ops-mail" in out and "ops@example.com" in out and "every event" in out
            assert "rotated" not in out and str(receiver.port) not in out

            code, out = await cli("notifiers", "test", "ops-hook")
            assert code == 0 and "delivered" in out
            (got,) = receiver.received()
            expected = "sha256=" + hmac.new(b"rotated", got.body, hashlib.sha256).hexdigest()
            assert got.headers["x-tickwork-signature"] == expected
            code, out = await cli("notifiers", "test", "ops-mail")  # no SMTP_HOST
            assert code == 1 and "no SMTP server: set SMTP_HOST" in out

            h.service.start_sender()
            await h.client.create_task("bad", "shell", {"argv": ["false"]})
            await h.client.run("bad")
            job = await claim(h)
            await finish(h, job, "FAILED", "broken")

            async def listed() -> str | None:
                _, out = await cli("notifications", "list")
                return out if "sent" in out and "given-up" not in out else None

            out = await eventually(listed, what="the webhook notification sent")
            assert "final_failure" in out and "bad" in out and "ops-hook" in out
            code, out = await cli("notifications", "list", "--status", "pending")
            assert "ops-mail" in out  # retried: no SMTP server


async def test_a_task_shows_when_it_last_succeeded_and_failed(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=0) as h:
        await flaky(h)
        task = await h.client.get_task("flaky")
        assert not task.HasField("last_success_time") and not task.HasField("last_failure_time")
        await fire_and_fail(h)
        failed_at = h.clock()
        h.clock.advance(30)
        await run_and_succeed(h)
        succeeded_at = h.clock()
        task = await h.client.get_task("flaky")
        assert task.last_failure_time.ToDatetime(tzinfo=UTC) == failed_at
        assert task.last_success_time.ToDatetime(tzinfo=UTC) == succeeded_at
        (listed,) = await h.client.list_tasks()
        assert listed.last_success_time == task.last_success_time
        assert listed.last_failure_time == task.last_failure_time
        gauge = h.service.app.metrics.registry.get_sample_value(
            "tickwork_task_last_success_timestamp_seconds", {"task": "flaky"}
        )
        assert gauge == succeeded_at.timestamp()


async def test_a_dead_man_alert_fires_once_for_a_schedule_whose_worker_is_stopped(
    tmp_path: Path, database_url: str
) -> None:
    """No worker takes the scheduled jobs (none runs in the harness): once the window has
    passed without a success, one no_success event goes out, not one per check; a success
    clears it, and the next silence alerts again."""
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url, events=DEAD_MAN))
            await flaky(h)
            task = await h.client.update_task("flaky", expect_success_within_seconds=150)
            assert task.expect_success_within_seconds == 150
            for _ in range(2):  # fires at 10:01 and 10:02: queued, never started
                schedule = await h.client.get_schedule("s")
                await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
                await sender.pass_once()
            assert receiver.received() == []
            h.clock.set(T0 + dt.timedelta(seconds=150))
            await sender.pass_once()
            await sender.pass_once()
            (alert,) = await received(receiver, 1)
            assert alert["type"] == "no_success" and alert["task"]["name"] == "flaky"  # type: ignore[index]
            assert alert["expect_success_within_seconds"] == 150
            assert alert["last_success_at"] is None
            h.clock.advance(60)
            await sender.pass_once()
            assert len(receiver.received()) == 1

            job = await claim(h)  # a worker comes back: the queued job succeeds
            await finish(h, job, "SUCCEEDED")
            succeeded_at = h.clock()
            h.clock.advance(149)
            await sender.pass_once()
            assert len(receiver.received()) == 1
            h.clock.advance(1)
            await sender.pass_once()
            _, again = await received(receiver, 2)
            with pytest.raises(InvalidArgument) as err:
                await h.client.update_task("flaky", expect_success_within_seconds=-1)
            assert err.value.field == "task.expect_success_within_seconds"
        assert again["type"] == "no_success" and again["id"] != alert["id"]
        assert again["last_success_at"] == succeeded_at.isoformat()


async def test_retention_deletes_old_notifications_but_not_pending_ones(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=0) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url))
            await h.client.put_notifier(webhook("down", "http://127.0.0.1:9/"))
            await flaky(h)
            await fire_and_fail(h)
            await received(receiver, 1)

            async def settled() -> bool:
                await sender.pass_once()
                notes = await h.client.list_notifications()
                return len(notes) == 2 and all(n.attempts == 1 for n in notes)

            await eventually(settled, what="both deliveries tried once")
            outbox = h.service.app.store.outbox
            later = h.clock() + dt.timedelta(days=1)
            await h.service.app.store.purge_history(later)
            assert len(await outbox.list_events()) == 1  # "down" is still pending
            await sender.pass_once()
            (down,) = await h.client.list_notifications(notifier="down")
            await outbox.record(down.id, h.clock(), error="gave up", retry_at=None)
            await h.service.app.store.purge_history(later)
            assert await outbox.list_events() == []
            assert await h.client.list_notifications() == []


def test_a_dead_man_alert_fires_for_a_schedule_whose_worker_is_stopped(
    tmp_path: Path, database_url: str
) -> None:
    """A real service with no worker: the schedule fires every second, its jobs wait, and
    the task's window passes without a success: one no_success arrives."""
    with http_receiver() as receiver:
        srv = Server(tmp_path, database_url=database_url, env={"WORKER_IS_ENABLED": "false"})
        try:
            srv.wait_healthy()
            with Client(srv.address) as client:
                client.put_notifier(webhook("hook", receiver.url, events=DEAD_MAN))
                client.create_task("backup", "shell", {"argv": ["true"]})
                client.update_task("backup", expect_success_within_seconds=2)
                client.create_schedule("each-second", ["backup"], cron="* * * * * *")
                (body,) = wait_for(lambda: verify(receiver), what="the dead-man alert")
                queued = client.list_jobs(task="backup")
                notes = wait_for(
                    lambda: [
                        n
                        for n in client.list_notifications()
                        if n.status == pb.NOTIFICATION_STATUS_SENT
                    ],
                    what="the alert recorded as sent",
                )
        finally:
            srv.stop()
        assert body["type"] == "no_success" and body["task"]["name"] == "backup"  # type: ignore[index]
        assert [j.status for j in queued] == [JobStatus.JOB_STATUS_QUEUED]  # no worker took it
        assert [n.event for n in notes] == [pb.NOTIFICATION_EVENT_NO_SUCCESS]
        assert len(receiver.received()) == 1


async def test_a_long_run_is_notified_once_and_the_job_goes_on(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url))
            await flaky(h)
            task = await h.client.update_task("flaky", warn_after_seconds=60)
            assert task.warn_after_seconds == 60
            await h.client.run("flaky", trigger=Trigger.TRIGGER_MANUAL)
            job = await claim(h)
            h.clock.advance(59)
            await sender.pass_once()
            assert receiver.received() == []
            h.clock.advance(1)
            await sender.pass_once()
            await sender.pass_once()
            (body,) = await received(receiver, 1)
            h.clock.advance(600)
            await sender.pass_once()
            assert len(receiver.received()) == 1
            running = await h.client.get_job(job.id)
            assert running.status == JobStatus.JOB_STATUS_RUNNING
            await finish(h, job, "SUCCEEDED")
            with pytest.raises(InvalidArgument) as err:
                await h.client.update_task("flaky", warn_after_seconds=-5)
            assert err.value.field == "task.warn_after_seconds"
        assert body["type"] == "long_run" and body["warn_after_seconds"] == 60
        assert body["job"]["id"] == job.id and body["job"]["status"] == "RUNNING"  # type: ignore[index]
