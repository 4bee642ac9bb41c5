"""``tickwork schedules update --overlap-policy/--max-buffered``, ``schedules trigger`` and
the outcome and trigger of each fire in ``schedules fires``, against an in-process service
with an injected clock (the CLI runs in a thread: it is a blocking client)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import grpc
import pytest

from tests.inprocess import inprocess
from tickwork import Client, OverlapPolicy
from tickwork.apply import apply_config, config_request, load_config
from tickwork.cli import main
from tickwork.v1 import config_pb2_grpc
from tickwork.v1.config_pb2 import ApplyConfigRequest

T0 = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=dt.UTC)


async def test_cli_sets_the_policy_triggers_and_shows_each_fire(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        await h.client.create_task("t", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["t"], cron="0 3 * * *")
        base = ["--server", h.service.address]

        async def cli(*args: str) -> tuple[int, str, str]:
            code = await asyncio.to_thread(main, [*args, *base])
            captured = capsys.readouterr()
            return code, captured.out, captured.err

        code, out, _ = await cli(
            "schedules", "update", "s", "--overlap-policy", "buffer-one", "--max-buffered", "5"
        )
        assert code == 0 and out.startswith("schedule s: updated"), out
        updated = await h.client.get_schedule("s")
        assert (updated.overlap_policy, updated.max_buffered) == (
            OverlapPolicy.OVERLAP_POLICY_BUFFER_ONE,
            5,
        )
        code, _, err = await cli("schedules", "update", "s", "--max-buffered", "20000")
        assert code == 2 and "schedule.max_buffered" in err
        code, _, err = await cli("schedules", "update", "s", "--overlap-policy", "sometimes")
        assert code == 2 and "--overlap-policy" in err
        assert (await h.client.get_schedule("s")).max_buffered == 5

        code, out, _ = await cli("schedules", "trigger", "s")
        assert code == 0
        assert out.startswith("schedule s: fired at 2026-06-01T10:00:30Z, ENQUEUED: t: job ")
        assert await h.service.app.store.claim_next_job("w", h.clock(), 30.0) is not None
        for _ in range(2):
            h.clock.advance(1)
            assert (await cli("schedules", "trigger", "s"))[0] == 0
        code, out, _ = await cli("schedules", "fires", "s")
        lines = [line.split()[:3] for line in out.splitlines()]
        assert lines == [
            ["FIRE", "TIME", "(UTC)"],
            ["2026-06-01T10:00:32Z", "SKIPPED", "MANUAL"],
            ["2026-06-01T10:00:31Z", "BUFFERED", "MANUAL"],
            ["2026-06-01T10:00:30Z", "ENQUEUED", "MANUAL"],
        ]
        assert "skipped (already queued, job" in out.splitlines()[1]


async def test_a_config_file_sets_the_overlap_policy_and_the_server_checks_it(
    tmp_path: Path, database_url: str
) -> None:
    async with inprocess(tmp_path, database_url, T0) as h:
        path = tmp_path / "tickwork.toml"
        path.write_text(
            '[[tasks]]\nname = "t"\nhandler = "shell"\nparams = { argv = ["true"] }\n'
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntasks = ["t"]\n'
            'overlap_policy = "buffer_all"\nmax_buffered = 20\n'
        )
        config = load_config(path)

        def apply(request: ApplyConfigRequest | None = None) -> object:
            if request is not None:
                with grpc.insecure_channel(h.service.address) as channel:
                    return config_pb2_grpc.ConfigServiceStub(channel).ApplyConfig(request)
            with Client(h.service.address) as client:
                return apply_config(client, config)

        await asyncio.to_thread(apply)
        stored = await h.client.get_schedule("s")
        assert (stored.overlap_policy, stored.max_buffered) == (
            OverlapPolicy.OVERLAP_POLICY_BUFFER_ALL,
            20,
        )
        report = await asyncio.to_thread(apply)
        assert [c.action for c in report.changes] == ["unchanged", "unchanged"]  # type: ignore[attr-defined]
        # The server checks what a file could not: nothing is written on a bad value.
        for bad, field in (
            ({"overlap_policy": 9}, "schedules[0].overlap_policy"),
            ({"max_buffered": -1}, "schedules[0].max_buffered"),
        ):
            request = config_request(config)
            for key, value in bad.items():
                setattr(request.schedules[0].schedule, key, value)
            request.schedules[0].schedule.description = "changed"
            with pytest.raises(grpc.RpcError) as err:
                await asyncio.to_thread(apply, request)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in (err.value.details() or "")
        assert (await h.client.get_schedule("s")).description == ""
