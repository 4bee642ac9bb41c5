"""Labels on tasks and schedules, label selectors on ListTasks, ListSchedules and ListJobs
(paging included), and ``tickwork apply --prune --selector``: what a file owns and no longer
names is deleted in the apply's transaction, shown and left alone in a dry run."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import grpc
import pytest

from tests.inprocess import inprocess
from tests.queue_helpers import claim
from tickwork.cli import main
from tickwork.errors import FailedPrecondition, InvalidArgument
from tickwork.v1 import job_pb2, schedule_pb2, task_pb2
from tickwork.v1.config_pb2 import ApplyConfigRequest

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)
TRUE = {"argv": ["true"]}


async def test_labels_are_stored_returned_and_updated(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        task = await h.client.create_task("a", "shell", TRUE, labels={"owner": "team-a"})
        assert dict(task.labels) == {"owner": "team-a"}
        schedule = await h.client.create_schedule(
            "s", ["a"], cron="@daily", labels={"owner": "team-a", "env": "prod"}
        )
        assert dict((await h.client.get_schedule("s")).labels) == dict(schedule.labels)
        updated = await h.client.update_task("a", labels={"owner": "team-b"})
        assert dict(updated.labels) == {"owner": "team-b"}
        assert dict((await h.client.update_schedule("s", labels={})).labels) == {}
        for bad in ({"bad key": "v"}, {"k": "x" * 64}, {"": "v"}):
            with pytest.raises(InvalidArgument, match=r"task\.labels"):
                await h.client.update_task("a", labels=bad)
            with pytest.raises(InvalidArgument, match=r"schedule\.labels"):
                await h.client.create_schedule("t", ["a"], cron="@daily", labels=bad)
        assert dict((await h.client.get_task("a")).labels) == {"owner": "team-b"}
        assert [s.name for s in await h.client.list_schedules()] == ["s"]


async def test_selectors_filter_the_three_listings_across_pages(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        for i in range(7):
            labels = {"owner": "team-a" if i % 2 == 0 else "team-b", "env": "prod"}
            await h.client.create_task(f"t{i}", "shell", TRUE, labels=labels)
            await h.client.create_schedule(f"s{i}", [f"t{i}"], cron="@daily", labels=labels)
            await h.client.run(f"t{i}", labels={"run": "even" if i % 2 == 0 else "odd"})
        assert [t.name for t in await h.client.list_tasks(selector="owner=team-a")] == [
            "t0",
            "t2",
            "t4",
            "t6",
        ]
        assert [t.name for t in await h.client.list_tasks(" env = prod , owner=team-b ")] == [
            "t1",
            "t3",
            "t5",
        ]
        assert await h.client.list_tasks(selector="owner=team-c") == []
        assert len(await h.client.list_schedules(selector="env=prod")) == 7
        jobs = await h.client.list_jobs(selector="run=odd")
        assert sorted(j.task_name for j in jobs) == ["t1", "t3", "t5"]
        # Paging: two at a time, each token bound to its selector.
        stubs = h.client._stubs()
        names: list[str] = []
        token = ""
        while True:
            page = await stubs.schedules.ListSchedules(
                schedule_pb2.ListSchedulesRequest(
                    page_size=2, page_token=token, label_selector="owner=team-a"
                )
            )
            names += [s.name for s in page.schedules]
            token = page.next_page_token
            if not token:
                break
        assert names == ["s0", "s2", "s4", "s6"]
        first = await stubs.jobs.ListJobs(
            job_pb2.ListJobsRequest(page_size=1, label_selector="run=even")
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stubs.jobs.ListJobs(
                job_pb2.ListJobsRequest(
                    page_size=1, page_token=first.next_page_token, label_selector="run=odd"
                )
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith("page_token:")
        for bad in ("owner", "=x", "owner=a,owner=b", "bad key=1"):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stubs.tasks.ListTasks(task_pb2.ListTasksRequest(label_selector=bad))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert (err.value.details() or "").startswith("label_selector:")


FILE = """
[[tasks]]
name = "keep"
handler = "shell"
params = {{ argv = ["true"] }}
labels = {{ owner = "team-a" }}
{extra_task}
[[schedules]]
name = "keep-daily"
cron = "@daily"
tasks = ["keep"]
labels = {{ owner = "team-a" }}
{extra_schedule}
"""
OLD_TASK = """
[[tasks]]
name = "old"
handler = "shell"
params = { argv = ["true"] }
labels = { owner = "team-a" }
"""
OLD_SCHEDULE = """
[[schedules]]
name = "old-daily"
cron = "@daily"
tasks = ["old"]
labels = { owner = "team-a" }
"""


async def test_apply_prune_deletes_what_the_file_owns_and_no_longer_names(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tickwork.toml"

    async def cli(*argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, [*argv, "--server", h.service.address])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    async with inprocess(tmp_path, database_url, T0) as h:
        config.write_text(FILE.format(extra_task=OLD_TASK, extra_schedule=OLD_SCHEDULE))
        assert (await cli("apply", "-f", str(config)))[0] == 0
        await h.client.create_task("theirs", "shell", TRUE, labels={"owner": "team-a"})
        await h.client.create_task("unlabelled", "shell", TRUE)
        # The CLI sets labels: "theirs" passes to team-b before the prune.
        code, out, _ = await cli("tasks", "label", "theirs", "--label", "owner=team-b")
        assert (code, out.strip()) == (0, "task theirs: labels owner=team-b")
        code, out, _ = await cli("tasks", "list", "--selector", "owner=team-b")
        assert [line.split()[1] for line in out.splitlines()[1:]] == ["theirs"]
        code, out, _ = await cli("schedules", "label", "keep-daily", "--clear")
        assert (code, out.strip()) == (0, "schedule keep-daily: labels -")
        # Applied again: the cleared labels differ (an update), then compare equal.
        code, out, _ = await cli("apply", "-f", str(config))
        assert "schedule keep-daily: updated (labels)" in out
        assert "0 created, 1 updated, 3 unchanged" in out
        code, out, _ = await cli("apply", "-f", str(config))
        assert "0 created, 0 updated, 4 unchanged" in out
        config.write_text(FILE.format(extra_task="", extra_schedule=""))
        code, out, err = await cli("apply", "-f", str(config), "--prune")
        assert code == 2 and "--prune needs --selector" in err
        code, out, _ = await cli(
            "apply", "-f", str(config), "--prune", "--selector", "owner=team-a", "--dry-run"
        )
        assert code == 0
        assert "schedule old-daily: would be deleted" in out
        assert "task old: would be deleted" in out and "2 to delete" in out
        names = sorted(t.name for t in await h.client.list_tasks())
        assert names == ["keep", "old", "theirs", "unlabelled"]  # nothing deleted
        code, out, _ = await cli(
            "apply", "-f", str(config), "--prune", "--selector", "owner=team-a"
        )
        assert code == 0, out
        lines = out.splitlines()
        assert lines[-3:-1] == ["schedule old-daily: deleted", "task old: deleted"]
        assert "2 unchanged, 2 deleted" in lines[-1]
        assert sorted(t.name for t in await h.client.list_tasks()) == [
            "keep",
            "theirs",
            "unlabelled",
        ]
        assert [s.name for s in await h.client.list_schedules()] == ["keep-daily"]


async def test_prune_refuses_a_task_a_kept_schedule_runs(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("mine", "shell", TRUE, labels={"owner": "team-a"})
        await h.client.create_task("other", "shell", TRUE)
        await h.client.create_schedule("theirs", ["other", "mine"], cron="@daily")
        request = ApplyConfigRequest(prune_selector="owner=team-a")
        with pytest.raises(FailedPrecondition, match=r"schedule 'theirs'.*runs it"):
            await h.client.apply_config(request)
        assert sorted(t.name for t in await h.client.list_tasks()) == ["mine", "other"]
        with pytest.raises(InvalidArgument, match="prune_selector"):
            await h.client.apply_config(ApplyConfigRequest(prune_selector="owner"))


async def test_prune_refuses_a_task_with_a_running_job(tmp_path: Path, database_url: str) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("busy", "shell", TRUE, labels={"owner": "team-a"})
        await h.client.run("busy")
        await claim(h)  # its job is now RUNNING
        with pytest.raises(FailedPrecondition, match=r"cannot prune task 'busy'.*running job"):
            await h.client.apply_config(ApplyConfigRequest(prune_selector="owner=team-a"))
        assert [t.name for t in await h.client.list_tasks()] == ["busy"]
