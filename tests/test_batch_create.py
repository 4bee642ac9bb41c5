"""BatchCreateSchedules: a bulk import in one transaction, all or none, errors naming the
request at fault; on both backends, through the SDK (``create_schedules``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.harness import Server
from tickwork import AlreadyExists, Client, InvalidArgument, NewSchedule, NotFound
from tickwork.v1 import schedule_pb2, schedule_pb2_grpc


@pytest.fixture
def srv(tmp_path: Path, database_url: str) -> Iterator[Server]:
    server = Server(tmp_path, database_url=database_url, env={"WORKER_IS_ENABLED": "false"})
    try:
        yield server.wait_healthy()
    finally:
        server.stop()


@pytest.fixture
def tw(srv: Server) -> Iterator[Client]:
    with Client(srv.address) as client:
        client.create_task("backup", "shell", {"argv": ["true"]})
        client.create_task("report", "shell", {"argv": ["true"]})
        yield client


def mine(client: Client) -> list[str]:
    """Names of the schedules these tests made (the built-in retention schedule aside)."""
    return [s.name for s in client.list_schedules() if s.name != "tickwork-retention"]


def batch(n: int, start: int = 0) -> list[NewSchedule]:
    return [
        {
            "name": f"s-{i:04d}",
            "tasks": ["backup", "report"] if i % 2 else ["report"],
            "cron": "0 3 * * *" if i % 3 else "30 2 * * *",
            "timezone": "Europe/Berlin" if i % 2 else "UTC",
        }
        for i in range(start, start + n)
    ]


def test_creates_every_schedule_in_request_order(tw: Client) -> None:
    items = batch(250)
    created = tw.create_schedules(items)
    assert [s.name for s in created] == [item["name"] for item in items]
    assert len({s.id for s in created}) == 250
    one_by_one = tw.create_schedule("single", ["report"], cron="30 2 * * *", timezone="UTC")
    for item, schedule in zip(items, created, strict=True):
        assert list(schedule.task_names) == item["tasks"]
        assert schedule.cron_expression == item["cron"]
        assert schedule.timezone == item["timezone"]
        assert schedule.HasField("next_run_time") and schedule.cron_description
        assert tw.get_schedule(schedule.id) == schedule
    # Each one as CreateSchedule makes it: same next run for the same timing.
    utc_0230 = next(s for s in created if s.timezone == "UTC" and s.cron_expression == "30 2 * * *")
    assert utc_0230.next_run_time == one_by_one.next_run_time
    assert len(mine(tw)) == 251


def test_a_bad_item_fails_the_whole_batch_naming_it(tw: Client) -> None:
    items = batch(5)
    items[3]["cron"] = "0 0 31 2 *"  # never fires
    with pytest.raises(InvalidArgument) as err:
        tw.create_schedules(items)
    assert err.value.details.startswith("requests[3].schedule.cron_expression:")
    assert err.value.reason == "CRON_NEVER_FIRES"
    assert [v.field for v in err.value.field_violations] == ["requests[3].schedule.cron_expression"]

    items = batch(5)
    items[2]["name"] = items[0]["name"]
    with pytest.raises(AlreadyExists) as taken:
        tw.create_schedules(items)
    assert taken.value.details.startswith("requests[2].schedule.name:")
    assert "requests[0]" in taken.value.details
    assert (taken.value.reason, taken.value.field) == (
        "SCHEDULE_NAME_TAKEN",
        "requests[2].schedule.name",
    )
    assert taken.value.resource is not None and taken.value.resource.type == "tickwork.v1.Schedule"

    tw.create_schedules(batch(1, start=7))
    with pytest.raises(AlreadyExists) as exists:
        tw.create_schedules(batch(5, start=3))  # s-0007 is the fifth
    assert exists.value.details.startswith("requests[4].schedule.name:")

    report = tw.get_task("report").id
    items = batch(3)
    items[1]["tasks"] = [report, 999_999]
    with pytest.raises(NotFound) as unknown:
        tw.create_schedules(items)
    assert unknown.value.details.startswith("requests[1].schedule.task_ids[1]:")
    assert unknown.value.field == "requests[1].schedule.task_ids[1]"

    assert mine(tw) == ["s-0007"]  # nothing else was written


def test_batch_size_is_bounded(srv: Server, tw: Client) -> None:
    channel = grpc.insecure_channel(srv.address)
    stub = schedule_pb2_grpc.ScheduleServiceStub(channel)
    for count in (0, 1001):
        request = schedule_pb2.BatchCreateSchedulesRequest(
            requests=[
                schedule_pb2.CreateScheduleRequest(
                    schedule=schedule_pb2.Schedule(
                        name=f"s{i}", cron_expression="@daily", task_ids=[1]
                    )
                )
                for i in range(count)
            ]
        )
        with pytest.raises(grpc.RpcError) as err:
            stub.BatchCreateSchedules(request, timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(
            f"requests: give 1 to 1000 requests, got {count}"
        )
    channel.close()
    assert mine(tw) == []


def test_the_sdk_checks_items_before_sending(tw: Client) -> None:
    with pytest.raises(InvalidArgument, match=r"schedules\[1\]: unknown key 'crontab'"):
        tw.create_schedules([batch(1)[0], {"name": "x", "tasks": ["report"], "crontab": "@daily"}])  # type: ignore[typeddict-unknown-key]
    with pytest.raises(InvalidArgument, match=r"schedules\[0\]: give 'name' and 'tasks'"):
        tw.create_schedules([{"name": "x"}])  # type: ignore[typeddict-item]
    with pytest.raises(InvalidArgument, match=r"schedules\[0\]: schedule: give cron or interval"):
        tw.create_schedules([{"name": "x", "tasks": ["report"]}])
    assert mine(tw) == []


WRONG_TYPES: list[tuple[dict[str, object], str]] = [
    ({"name": 123}, "name"),
    ({"name": b"abc"}, "name"),
    ({"cron": 5}, "cron"),
    ({"timezone": None}, "timezone"),
    ({"description": 5}, "description"),
    ({"cron": None, "interval_seconds": "60"}, "interval_seconds"),
    ({"cron": None, "interval_seconds": True}, "interval_seconds"),
    ({"enabled": None}, "enabled"),
    ({"enabled": "no"}, "enabled"),
    ({"tasks": None}, "tasks"),
    ({"tasks": {"report": 1}}, "tasks"),
    ({"name": "bad-\ud800"}, ""),
]


def test_the_sdk_refuses_wrong_types_naming_the_item(tw: Client) -> None:
    # Client-side checks: one server serves every case.
    for change, field in WRONG_TYPES:
        items = batch(2)
        items[1].update(change)  # type: ignore[typeddict-item]
        with pytest.raises(InvalidArgument) as err:
            tw.create_schedules(items)
        prefix = "schedules[1].tasks" if field == "tasks" else "schedules[1]"
        assert err.value.details.startswith(prefix), (change, err.value.details)
        assert field in err.value.details, (change, err.value.details)
    assert mine(tw) == []


def test_an_unknown_task_name_is_named_with_its_item(tw: Client) -> None:
    items = batch(3)
    items[2]["tasks"] = ["report", "no-such-task"]
    with pytest.raises(NotFound) as err:
        tw.create_schedules(items)
    assert err.value.details.startswith("schedules[2].tasks: ")
    assert "no-such-task" in err.value.details
    assert mine(tw) == []


def test_a_batch_whose_reply_would_not_fit_is_refused_before_writing(tw: Client) -> None:
    # Ten tasks with names of 200 four-byte characters, each in 1,000 schedules: the
    # reply would list 8 MB of task names, twice what a client reads. Written, the
    # schedules would exist while the caller saw RESOURCE_EXHAUSTED.
    ids = [
        tw.create_task(chr(0x1D4B6 + i) * 200, "shell", {"argv": ["true"]}).id for i in range(10)
    ]
    big = [NewSchedule(name=f"wide-{i}", tasks=ids, cron="0 * * * *") for i in range(1000)]
    with pytest.raises(InvalidArgument) as info:
        tw.create_schedules(big)
    assert info.value.details.startswith("requests: the reply could reach ")
    assert mine(tw) == []
    assert len(tw.create_schedules(big[:100])) == 100  # a tenth of it is fine
