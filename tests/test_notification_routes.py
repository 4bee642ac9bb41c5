"""Routes on tasks and schedules (Task.notify, Schedule.notify): when an event's task or
schedule has routes, they alone decide which declared notifiers get it, state changes only
unless a route asks for every event; without any, each notifier's own route decides."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from tests.inprocess import Harness, inprocess
from tests.queue_helpers import claim, eventually, finish
from tests.receivers import http_receiver
from tests.test_notifications import webhook
from tickwork import InvalidArgument, Trigger
from tickwork.v1 import notifier_pb2 as pb

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)


async def fire_and_fail(h: Harness) -> None:
    schedule = await h.client.get_schedule("s")
    await h.tick(schedule.next_run_time.ToDatetime(tzinfo=UTC))
    await finish(h, await claim(h), "FAILED", "boom")


async def run_and_end(h: Harness, task: str, status: str) -> None:
    await h.client.run(task, trigger=Trigger.TRIGGER_MANUAL)
    await finish(h, await claim(h), status, "boom" if status == "FAILED" else "")


async def test_task_and_schedule_routes_decide_who_gets_which_event(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, auto_disable_task_failure_count=0) as h:
            sender = h.service.start_sender()
            for name in ("team", "ops"):
                await h.client.put_notifier(webhook(name, f"{receiver.url}/{name}"))
            failures = [pb.NOTIFICATION_EVENT_FINAL_FAILURE]
            await h.client.put_notifier(webhook("other", f"{receiver.url}/other", events=failures))
            argv = {"argv": ["false"]}
            flaky = await h.client.create_task(
                "flaky",
                "shell",
                argv,
                notify=[{"notifiers": ["team"], "events": ["final_failure", "recovery"]}],
            )
            assert [list(r.notifiers) for r in flaky.notify] == [["team"]]
            await h.client.create_task(
                "loud",
                "shell",
                argv,
                notify=[
                    {"notifiers": ["team", "ghost"], "events": ["final_failure"], "every": True}
                ],
            )
            await h.client.create_task("plain", "shell", argv)
            schedule = await h.client.create_schedule(
                "s", ["flaky"], cron="* * * * *", notify=[{"notifiers": ["ops"]}]
            )
            assert list(schedule.notify[0].notifiers) == ["ops"] and not schedule.notify[0].every
            for _ in range(3):
                await fire_and_fail(h)  # team and ops once each (state change); other never
            await run_and_end(h, "flaky", "SUCCEEDED")  # recovery: team (a manual job)
            await run_and_end(h, "plain", "FAILED")  # no routes: all three own routes
            for _ in range(2):
                await run_and_end(h, "loud", "FAILED")  # every: team twice (ghost: given up)

            async def settled() -> list[pb.Notification] | None:
                await sender.pass_once()
                notes = await h.client.list_notifications(limit=100)
                done = len(notes) >= 10 and all(
                    n.status != pb.NOTIFICATION_STATUS_PENDING for n in notes
                )
                return notes if done else None

            notes = await eventually(settled, what="10 notifications settled")
            assert len(notes) == 10
        got = sorted(
            (r.path.rsplit("/", 1)[-1], r.json()["type"], r.json()["task"]["name"])
            for r in receiver.received()
        )
        assert got == sorted(
            [
                ("team", "final_failure", "flaky"),
                ("ops", "final_failure", "flaky"),
                ("team", "recovery", "flaky"),
                ("team", "final_failure", "plain"),
                ("ops", "final_failure", "plain"),
                ("other", "final_failure", "plain"),
                ("team", "final_failure", "loud"),
                ("team", "final_failure", "loud"),
            ]
        )
        ghosts = [n for n in notes if n.notifier == "ghost"]
        assert len(ghosts) == 2
        assert all(n.status == pb.NOTIFICATION_STATUS_GIVEN_UP for n in ghosts)
        assert all("no notifier named 'ghost'" in n.last_error for n in ghosts)


async def test_routes_are_checked_field_by_field(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        for routes, field in (
            ([{"notifiers": []}], "task.notify[0].notifiers"),
            ([{"notifiers": ["a", " "]}], "task.notify[0].notifiers[1]"),
            ([{"notifiers": ["a"], "events": ["test"]}], "task.notify[0].events[0]"),
            ([{"notifiers": ["a"]}] * 21, "task.notify"),
        ):
            with pytest.raises(InvalidArgument) as err:
                await h.client.update_task("t", notify=routes)
            assert err.value.field == field
        with pytest.raises(InvalidArgument) as err:
            await h.client.create_schedule("s", ["t"], cron="* * * * *", notify=[{}])
        assert err.value.field == "schedule.notify[0].notifiers"
        with pytest.raises(InvalidArgument, match=r"notify\[0\]\.events\[0\]: unknown event"):
            await h.client.update_task("t", notify=[{"notifiers": ["a"], "events": ["nope"]}])
        task = await h.client.update_task("t", notify=[{"notifiers": ["a"], "every": True}])
        assert task.notify[0].every and list(task.notify[0].events) == []
        task = await h.client.update_task("t", notify=[])
        assert list(task.notify) == []


async def test_create_schedules_keeps_each_schedule_s_routes(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        routed, plain = await h.client.create_schedules(
            [
                {
                    "name": "routed",
                    "tasks": ["t"],
                    "cron": "* * * * *",
                    "notify": [{"notifiers": ["ops"], "events": ["missed_fire"]}],
                },
                {"name": "plain", "tasks": ["t"], "cron": "* * * * *"},
            ]
        )
        assert [list(r.notifiers) for r in routed.notify] == [["ops"]]
        assert [list(r.events) for r in routed.notify] == [[pb.NOTIFICATION_EVENT_MISSED_FIRE]]
        assert list(plain.notify) == []
        stored = await h.client.get_schedule("routed")
        assert [list(r.notifiers) for r in stored.notify] == [["ops"]]
        with pytest.raises(InvalidArgument) as err:
            await h.client.create_schedules(
                [{"name": "bad", "tasks": ["t"], "cron": "* * * * *", "notify": [{}]}]
            )
        assert err.value.field == "requests[0].schedule.notify[0].notifiers"


async def test_the_config_file_manages_routes_and_the_task_alert_thresholds(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tickwork.cli import main

    config = tmp_path / "tickwork.toml"

    def write(events: str, warn: int) -> None:
        config.write_text(
            '[[tasks]]\nname = "t"\nhandler = "shell"\nparams = { argv = ["true"] }\n'
            f"expect_success_within_seconds = 3600\nwarn_after_seconds = {warn}\n"
            f'notify = [{{ notifiers = ["ops"], events = {events} }}]\n'
            '[[schedules]]\nname = "s"\ncron = "* * * * *"\ntasks = ["t"]\n'
            'notify = [{ notifiers = ["ops"], every = true }]\n'
        )

    async with inprocess(tmp_path, database_url, T0) as h:

        async def cli(*argv: str) -> tuple[int, str]:
            code = await asyncio.to_thread(main, [*argv, "--server", h.service.address])
            captured = capsys.readouterr()
            return code, captured.out + captured.err

        write('["final_failure"]', 60)
        code, out = await cli("apply", "-f", str(config))
        assert code == 0 and "task t: created" in out and "schedule s: created" in out
        task = await h.client.get_task("t")
        assert task.expect_success_within_seconds == 3600 and task.warn_after_seconds == 60
        assert list(task.notify[0].events) == [pb.NOTIFICATION_EVENT_FINAL_FAILURE]
        assert (await h.client.get_schedule("s")).notify[0].every
        code, out = await cli("apply", "-f", str(config))
        assert "task t: unchanged" in out and "schedule s: unchanged" in out
        write('["final_failure", "recovery"]', 90)
        code, out = await cli("apply", "-f", str(config))
        assert "task t: updated (notify, warn_after_seconds)" in out
        write('["bogus"]', 90)
        code, out = await cli("apply", "-f", str(config))
        assert code != 0 and "tasks[0].notify[0].events[0]: unknown event 'bogus'" in out


async def test_the_builtin_smtp_notifier_keeps_its_route_under_task_routes(
    tmp_path: Path, database_url: str
) -> None:
    from scheduler_svc.settings import SmtpSettings
    from tests.receivers import smtp_server

    with http_receiver() as receiver, smtp_server() as (box, port):
        smtp = SmtpSettings(
            host="127.0.0.1", port=port, recipients=("oncall@example.com",), timeout_s=5
        )
        async with inprocess(
            tmp_path, database_url, T0, auto_disable_task_failure_count=1, smtp=smtp
        ) as h:
            h.service.start_sender()
            await h.client.put_notifier(webhook("team", receiver.url))
            await h.client.create_task(
                "t", "shell", {"argv": ["false"]}, notify=[{"notifiers": ["team"]}]
            )
            await h.client.create_schedule("s", ["t"], cron="* * * * *")
            await fire_and_fail(h)  # disables the task

            async def both() -> bool:
                return len(box.messages()) == 1 and len(receiver.received()) == 2

            await eventually(both, what="the auto-disable email and two posts")
        ((rcpt, mail),) = box.messages()
        assert rcpt == ["oncall@example.com"] and "disabled after 1" in mail["Subject"]
        # Each delivery is sent on its own task, so the two posts may arrive in either order.
        assert sorted(r.json()["type"] for r in receiver.received()) == [
            "auto_disabled",
            "final_failure",
        ]


async def test_tasks_list_shows_the_last_success_and_failure(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tickwork.cli import main

    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await run_and_end(h, "t", "FAILED")
        h.clock.advance(60)
        await run_and_end(h, "t", "SUCCEEDED")
        code = await asyncio.to_thread(main, ["tasks", "list", "--server", h.service.address])
        out = capsys.readouterr().out
    assert code == 0
    header, row = out.splitlines()[:2]
    assert "LAST SUCCESS (UTC)" in header and "LAST FAILURE (UTC)" in header
    assert "2026-06-01T10:01:00Z" in row and "2026-06-01T10:00:00Z" in row


async def test_the_notifiers_of_a_file_share_its_transaction(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file whose task is refused writes none of its notifiers, and one whose notifier
    is refused writes none of its tasks; the error names the notifier."""
    from tickwork.cli import main

    config = tmp_path / "tickwork.toml"
    notifier = '[[notifiers]]\nname = "hook"\ntype = "webhook"\nurl = "{url}"\n'
    task = '[[tasks]]\nname = "t"\nhandler = "{handler}"\nparams = {{ argv = ["true"] }}\n'

    async with inprocess(tmp_path, database_url, T0) as h:

        async def apply(text: str) -> tuple[int, str]:
            config.write_text(text)
            argv = ["apply", "-f", str(config), "--server", h.service.address]
            code = await asyncio.to_thread(main, argv)
            captured = capsys.readouterr()
            return code, captured.out + captured.err

        code, out = await apply(
            notifier.format(url="http://127.0.0.1:9/") + task.format(handler="no-such-handler")
        )
        assert code != 0 and "tasks[0] (t).handler" in out
        assert await h.client.list_notifiers() == []
        code, out = await apply(notifier.format(url="ftp://x/") + task.format(handler="shell"))
        assert code != 0 and "notifiers[0] (hook).url" in out
        assert await h.client.list_tasks() == []
        code, out = await apply(
            notifier.format(url="http://127.0.0.1:9/") + task.format(handler="shell")
        )
        assert code == 0 and "notifier hook: created" in out and "task t: created" in out
        code, out = await apply(
            notifier.format(url="http://127.0.0.1:9/x") + task.format(handler="shell")
        )
        assert "notifier hook: updated (url)" in out and "task t: unchanged" in out
