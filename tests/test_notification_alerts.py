"""Notifications of schedules and of the service, against a real HTTP receiver, the clock
injected: fires missed under the catch-up policy (one event per schedule and batch), a
fire's job not started by its schedule's start deadline (once per job), and ready jobs
waiting with no active worker (once, then once when a worker is back)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from tests.inprocess import inprocess
from tests.queue_helpers import claim, eventually, finish
from tests.receivers import HttpReceiver, http_receiver
from tests.test_notifications import received, webhook
from tickwork import InvalidArgument, Trigger
from tickwork.v1 import notifier_pb2 as pb
from tickwork.v1 import schedule_pb2

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)


async def settle(receiver: HttpReceiver, count: int) -> list[dict[str, object]]:
    """Exactly ``count`` bodies, once that many came (a later one would fail the test)."""
    bodies = await received(receiver, count) if count else []
    assert len(receiver.received()) == count
    return bodies


async def test_missed_fires_send_one_event_per_schedule_and_batch(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url))
            await h.client.create_task("t", "shell", {"argv": ["true"]})
            await h.client.create_schedule("minutely", ["t"], cron="* * * * *")
            await h.client.create_schedule("every-2m", ["t"], cron="*/2 * * * *")
            # Down from 10:00 to 10:05:10: 10:01 .. 10:05 passed, each more than the 5 s
            # grace ago: every window missed (SKIP).
            await h.tick(T0 + dt.timedelta(minutes=5, seconds=10))
            await h.tick()  # nothing more is due: no second event
            await sender.pass_once()
            bodies = await settle(receiver, 2)
            fires = await h.client.list_fires("minutely")
        by_name = {b["schedule"]["name"]: b for b in bodies}  # type: ignore[index]
        minutely = by_name["minutely"]
        assert minutely["type"] == "missed_fire" and minutely["state_change"] is True
        assert minutely["missed_count"] == 5 and minutely["catch_up_policy"] == "SKIP"
        assert minutely["fire_times"] == [
            (T0 + dt.timedelta(minutes=m)).isoformat() for m in range(1, 6)
        ]
        assert minutely["schedule_id"] == minutely["schedule"]["id"]  # type: ignore[index]
        assert minutely["task"] == {"id": None, "name": ""}
        assert by_name["every-2m"]["fire_times"] == [
            (T0 + dt.timedelta(minutes=m)).isoformat() for m in (2, 4)
        ]
        assert [f.outcome for f in fires] == [schedule_pb2.FIRE_OUTCOME_MISSED] * 5


async def test_a_job_not_started_by_the_start_deadline_is_notified_once(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0) as h:
            sender = h.service.start_sender()
            deadlines = [pb.NOTIFICATION_EVENT_START_DEADLINE]  # no worker: not no_active_worker
            await h.client.put_notifier(webhook("hook", receiver.url, events=deadlines))
            await h.client.create_task("t", "shell", {"argv": ["true"]})
            created = await h.client.create_schedule(
                "s", ["t"], cron="*/10 * * * *", start_deadline_seconds=300
            )
            assert created.start_deadline_seconds == 300
            fire = T0 + dt.timedelta(minutes=10)
            await h.tick(fire)  # queued; no worker takes it
            h.clock.set(fire + dt.timedelta(seconds=299))
            await sender.pass_once()
            await settle(receiver, 0)
            h.clock.set(fire + dt.timedelta(seconds=300))
            await sender.pass_once()
            await sender.pass_once()
            (late,) = await settle(receiver, 1)
            h.clock.advance(600)
            await sender.pass_once()
            await settle(receiver, 1)

            # A job that started in time is not notified.
            started = await claim(h)
            await finish(h, started, "SUCCEEDED")
            schedule = await h.client.get_schedule("s")
            fire2 = schedule.next_run_time.ToDatetime(tzinfo=UTC)
            await h.tick(fire2)
            h.clock.set(fire2 + dt.timedelta(seconds=10))
            await claim(h)
            h.clock.set(fire2 + dt.timedelta(seconds=400))
            await sender.pass_once()
            await settle(receiver, 1)

            for call in (
                h.client.create_schedule("bad", ["t"], cron="* * * * *", start_deadline_seconds=-1),
                h.client.update_schedule("s", start_deadline_seconds=-0.5),
            ):
                with pytest.raises(InvalidArgument) as err:
                    await call
                assert err.value.field == "schedule.start_deadline_seconds"
            updated = await h.client.update_schedule("s", start_deadline_seconds=0)
            assert updated.start_deadline_seconds == 0
        assert late["type"] == "start_deadline" and late["start_deadline_seconds"] == 300
        assert late["schedule"] == {"id": created.id, "name": "s"}
        assert late["task"]["name"] == "t"  # type: ignore[index]
        job = late["job"]
        assert isinstance(job, dict)
        assert job["status"] == "QUEUED" and job["fire_time"] == fire.isoformat()
        assert job["id"] == started.id


async def test_jobs_waiting_with_no_active_worker_alert_once_and_the_return_once(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, lease_ttl_s=15.0) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url))
            await h.client.create_task("t", "shell", {"argv": ["true"]})
            await h.client.run("t", trigger=Trigger.TRIGGER_MANUAL)
            h.clock.advance(14)
            await sender.pass_once()
            await settle(receiver, 0)  # waited less than a lease TTL
            h.clock.advance(2)
            await sender.pass_once()
            await sender.pass_once()
            (down,) = await settle(receiver, 1)
            h.clock.advance(60)
            await sender.pass_once()
            await settle(receiver, 1)  # still down: not repeated

            store = h.service.app.store
            assert await store.acquire_slot_lease("w1", h.clock(), 30.0, 1) is not None
            await sender.pass_once()
            await sender.pass_once()
            _, back = await settle(receiver, 2)
            h.clock.advance(31)  # its lease runs out; the job still waits
            await sender.pass_once()
            *_, again = await settle(receiver, 3)
        assert down["type"] == "no_active_worker" and down["state_change"] is True
        assert down["waiting_jobs"] == 1 and down["lease_ttl_seconds"] == 15.0
        assert down["oldest_enqueued_at"] == T0.isoformat()
        assert down["task"] == {"id": None, "name": ""} and down["schedule_id"] is None
        assert back["type"] == "worker_returned"
        assert back["no_active_worker_since"] == (T0 + dt.timedelta(seconds=16)).isoformat()
        assert again["type"] == "no_active_worker" and again["id"] != down["id"]


async def test_a_restarted_service_gives_its_workers_a_lease_ttl_before_it_alerts(
    tmp_path: Path, database_url: str
) -> None:
    """Jobs that waited through a restart (longer than a lease TTL, no lease live) do not
    page at once: the restarted service's own workers get a lease TTL to connect."""
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, lease_ttl_s=15.0) as h:
            await h.client.put_notifier(webhook("hook", receiver.url))
            await h.client.create_task("t", "shell", {"argv": ["true"]})
            await h.client.run("t", trigger=Trigger.TRIGGER_MANUAL)
            h.clock.advance(45)  # the service was down meanwhile: this sender starts now
            sender = h.service.start_sender()
            await sender.pass_once()
            await settle(receiver, 0)
            store = h.service.app.store
            assert await store.acquire_slot_lease("w1", h.clock(), 30.0, 1) is not None
            h.clock.advance(15)  # its worker connected in time: nothing to say
            await sender.pass_once()
            await settle(receiver, 0)
            await store.release_lease("worker", "w1", h.clock())
            h.clock.advance(1)
            await sender.pass_once()
            (down,) = await settle(receiver, 1)  # now it is missing: said at once
        assert down["type"] == "no_active_worker"


async def test_the_new_events_can_be_routed_by_name_and_read_as_one_line(
    tmp_path: Path, database_url: str
) -> None:
    """A notifier naming only missed_fire gets it and nothing else; Slack's line names
    the schedule and the count."""
    with http_receiver() as receiver:
        async with inprocess(tmp_path, database_url, T0, lease_ttl_s=15.0) as h:
            sender = h.service.start_sender()
            only = webhook("only", receiver.url, events=[pb.NOTIFICATION_EVENT_MISSED_FIRE])
            await h.client.put_notifier(only)
            slack = pb.Notifier(name="chat", type=pb.NOTIFIER_TYPE_SLACK, url=receiver.url + "/s")
            await h.client.put_notifier(slack)
            await h.client.create_task("t", "shell", {"argv": ["true"]})
            await h.client.create_schedule("nightly", ["t"], cron="0 2 * * *")
            await h.tick(T0 + dt.timedelta(days=2, minutes=1))  # 02:00 twice missed
            await h.client.run("t")  # waits with no worker
            h.clock.advance(20)
            await sender.pass_once()

            async def both() -> bool:
                return len(receiver.received()) >= 3

            await eventually(both, what="3 posts")
            await asyncio.sleep(0)
            notes = await h.client.list_notifications()
        hooks = [r.json() for r in receiver.received() if r.path == "/hook"]
        lines = sorted(r.json()["text"] for r in receiver.received() if r.path != "/hook")
        assert [b["type"] for b in hooks] == ["missed_fire"]
        assert lines == [
            "tickwork: 1 ready job has waited over 15 s with no active worker",
            "tickwork: schedule 'nightly' missed 2 fires (catch-up SKIP), the first at "
            "2026-06-02T02:00:00+00:00",
        ]
        assert {(n.notifier, n.event) for n in notes} == {
            ("only", pb.NOTIFICATION_EVENT_MISSED_FIRE),
            ("chat", pb.NOTIFICATION_EVENT_MISSED_FIRE),
            ("chat", pb.NOTIFICATION_EVENT_NO_ACTIVE_WORKER),
        }


async def test_a_retry_is_not_held_to_the_start_deadline_and_a_later_job_waits_from_then(
    tmp_path: Path, database_url: str
) -> None:
    with http_receiver() as receiver:
        async with inprocess(
            tmp_path, database_url, T0, lease_ttl_s=15.0, auto_disable_task_failure_count=0
        ) as h:
            sender = h.service.start_sender()
            await h.client.put_notifier(webhook("hook", receiver.url))
            await h.client.create_task(
                "t", "shell", {"argv": ["false"]}, max_attempts=2, backoff_base_seconds=1
            )
            await h.client.create_schedule(
                "s", ["t"], cron="*/10 * * * *", start_deadline_seconds=60
            )
            fire = T0 + dt.timedelta(minutes=10)
            await h.tick(fire)
            store = h.service.app.store
            assert await store.acquire_slot_lease("w1", h.clock(), 3600.0, 1) is not None
            await finish(h, await claim(h), "FAILED", "boom")  # a retry is queued
            (retry,) = [j for j in await h.client.list_jobs(task="t") if j.attempt == 2]
            assert retry.fire_time.ToDatetime(tzinfo=UTC) == fire
            h.clock.set(fire + dt.timedelta(seconds=600))
            await sender.pass_once()
            await settle(receiver, 0)  # the retry is late, but not held to the deadline

            await h.client.delete_schedule("s")
            await finish(h, await claim(h), "SUCCEEDED")
            await store.release_lease("worker", "w1", h.clock())
            start = h.clock()
            await h.client.run("t", not_before=start + dt.timedelta(seconds=100))
            h.clock.set(start + dt.timedelta(seconds=114))
            await sender.pass_once()
            await settle(receiver, 0)  # ready for 14 s only
            h.clock.set(start + dt.timedelta(seconds=116))
            await sender.pass_once()
            (down,) = await settle(receiver, 1)
        assert down["type"] == "no_active_worker" and down["waiting_jobs"] == 1


async def test_the_config_file_and_the_cli_set_the_start_deadline(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tickwork.cli import main

    config = tmp_path / "tickwork.toml"

    def write(deadline: object) -> None:
        config.write_text(
            '[[tasks]]\nname = "t"\nhandler = "shell"\nparams = { argv = ["true"] }\n'
            '[[schedules]]\nname = "s"\ncron = "* * * * *"\ntasks = ["t"]\n'
            f"start_deadline_seconds = {deadline}\n"
        )

    async with inprocess(tmp_path, database_url, T0) as h:

        async def cli(*argv: str) -> tuple[int, str]:
            code = await asyncio.to_thread(main, [*argv, "--server", h.service.address])
            captured = capsys.readouterr()
            return code, captured.out + captured.err

        write(300)
        code, out = await cli("apply", "-f", str(config))
        assert code == 0 and "schedule s: created" in out
        assert (await h.client.get_schedule("s")).start_deadline_seconds == 300
        code, out = await cli("apply", "-f", str(config))
        assert "schedule s: unchanged" in out
        write(60.5)
        code, out = await cli("apply", "-f", str(config))
        assert "schedule s: updated (start_deadline_seconds)" in out
        assert (await h.client.get_schedule("s")).start_deadline_seconds == 60.5
        write(-1)
        code, out = await cli("apply", "-f", str(config))
        assert code != 0 and "schedules[0].start_deadline_seconds: must be >= 0" in out

        code, out = await cli("schedules", "update", "s", "--start-deadline", "0")
        assert code == 0 and "schedule s: updated" in out
        assert (await h.client.get_schedule("s")).start_deadline_seconds == 0
        code, out = await cli("schedules", "update", "s", "--start-deadline", "-2")
        assert code != 0 and "schedule.start_deadline_seconds" in out
