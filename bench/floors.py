"""Floors: what the pieces under dispatch and bulk create cost on their own.

Not a comparison with a peer: these figures say where the time of the other metrics goes,
measured the same way on every run.

- gRPC bidi round trip: one process (pinned like the services) runs a grpc.aio server and
  a client stream on one event loop, as ``tickwork serve`` and its embedded worker do, and
  sends a message / awaits the answer N times: CPU microseconds per round trip.
- gRPC unary call: a grpc.aio server process (pinned) answers CreateSchedule with its
  request, the driver keeps 16 calls in flight: the server's CPU milliseconds per call.
- Store, per job: in one pinned process, the real :class:`~scheduler_svc.store.Store` on a
  fresh database enqueues N tasks (RunTasks' path, 500 per call), then claims and finishes
  them one by one with ``finish_job(claim_next_for=...)`` as the worker stream does: CPU
  milliseconds per job for each, on a SQLite file and on the local PostgreSQL.

Run alone: ``python -m bench --metric floors``. Sizes: N = 200 / 2,000 / 5,000.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from scheduler_svc.values import JobStatus, Trigger

NAME = "floors"
IN_FLIGHT = 16


def _child(cfg: Config, *args: str) -> dict[str, float]:
    """Run ``python -m bench.floors ARGS`` pinned like the services; its JSON line."""
    argv = harness.service_argv(cfg, [sys.executable, "-m", "bench.floors", *args])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise harness.BenchError(f"floors {args[0]} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------ run in the child


async def _bidi(n: int) -> dict[str, float]:
    import grpc

    from tickwork.v1 import worker_pb2, worker_pb2_grpc

    req, resp = worker_pb2.ConnectRequest, worker_pb2.ConnectResponse

    class Echo(worker_pb2_grpc.WorkerServiceServicer):
        async def Connect(self, request_iterator, context):  # type: ignore[no-untyped-def]
            async for _ in request_iterator:
                yield resp(no_job=resp.NoJob())

    server = grpc.aio.server()
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(Echo(), server)  # type: ignore[abstract]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = worker_pb2_grpc.WorkerServiceStub(channel).Connect(None)
            poll = req(poll_job=req.PollJob())
            for _ in range(100):  # warm-up
                await call.write(poll)
                await call.read()
            cpu0 = time.process_time()
            for _ in range(n):
                await call.write(poll)
                await call.read()
            cpu = time.process_time() - cpu0
            call.cancel()
    finally:
        await server.stop(None)
    return {"us_cpu_per_round_trip": 1e6 * cpu / n}


async def _unary_server(announce: Callable[[int], None]) -> None:
    import grpc

    from tickwork.v1 import schedule_pb2, schedule_pb2_grpc

    class Echo(schedule_pb2_grpc.ScheduleServiceServicer):
        async def CreateSchedule(self, request, context):  # type: ignore[no-untyped-def]
            return schedule_pb2.CreateScheduleResponse(schedule=request.schedule)

    server = grpc.aio.server()
    schedule_pb2_grpc.add_ScheduleServiceServicer_to_server(Echo(), server)  # type: ignore[abstract]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    announce(port)
    await server.wait_for_termination()


async def _store(url: str, n: int) -> dict[str, float]:
    from scheduler_svc import migrate
    from scheduler_svc.db import Database
    from scheduler_svc.store import Store

    db = Database(url)
    try:
        await migrate.upgrade(db)
        store = Store(db)
        now = dt.datetime.now(dt.UTC)
        values = {"handler": "python", "params": {"callable": "bench.noop:noop"}}
        ids = [(await store.create_task({**values, "name": f"t{i:06d}"}, now)).id for i in range(n)]
        await store.acquire_lease("worker", "w", now, 3600)
        cpu0 = time.process_time()
        for start in range(0, n, 500):
            await store.enqueue(ids[start : start + 500], Trigger.API, now)
        enqueue_cpu = time.process_time() - cpu0
        cpu0 = time.process_time()
        claimed = await store.claim_next_job("w", now, 60, worker_lease_holder="w")
        while claimed is not None:
            job = claimed[0]
            result = await store.finish_job(
                job.id,
                job.lease_token or "",
                JobStatus.SUCCEEDED,
                "",
                "",
                dt.datetime.now(dt.UTC),
                auto_disable_count=0,
                claim_next_for="w",
                lease_ttl_s=60,
            )
            claimed = result.next_job
        cycle_cpu = time.process_time() - cpu0
    finally:
        await db.dispose()
    return {
        "ms_cpu_enqueue_per_job": 1e3 * enqueue_cpu / n,
        "ms_cpu_claim_finish_per_job": 1e3 * cycle_cpu / n,
    }


def _child_main(argv: list[str]) -> None:
    what = argv[0]
    if what == "bidi":
        print(json.dumps(asyncio.run(_bidi(int(argv[1])))))
    elif what == "unary-server":
        port_file = Path(argv[1])

        def announce(port: int) -> None:
            port_file.write_text(str(port))

        asyncio.run(_unary_server(announce))
    elif what == "store":
        print(json.dumps(asyncio.run(_store(argv[1], int(argv[2])))))
    else:
        raise SystemExit(f"unknown floor {what!r}")


# ------------------------------------------------------------------ run in the driver


async def _unary_client(port: int, n: int) -> None:
    import grpc

    from tickwork.v1 import schedule_pb2, schedule_pb2_grpc

    request = schedule_pb2.CreateScheduleRequest(
        schedule=schedule_pb2.Schedule(name="x", cron_expression="0 3 * * *", task_ids=[1])
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = schedule_pb2_grpc.ScheduleServiceStub(channel)
        left = [n]

        async def caller() -> None:
            while left[0] > 0:
                left[0] -= 1
                await stub.CreateSchedule(request)

        await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))


def _unary(cfg: Config, n: int, rep: int) -> Sample:
    port_file = cfg.workdir / f"floors-unary-{rep}.port"
    argv = harness.service_argv(
        cfg, [sys.executable, "-m", "bench.floors", "unary-server", str(port_file)]
    )
    proc = harness.Proc(argv, harness.child_env(), cfg.workdir / f"floors-unary-{rep}.log")
    try:
        pid = proc.target_pid("bench.floors")
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            proc.check_alive()
            if time.monotonic() > deadline:
                raise harness.BenchError("the unary floor server did not start")
            time.sleep(0.05)
        port = int(port_file.read_text())
        asyncio.run(_unary_client(port, 200))  # warm-up
        cpu0 = harness.cpu_seconds(pid)
        asyncio.run(_unary_client(port, n))
        cpu = harness.cpu_seconds(pid) - cpu0
    finally:
        proc.stop()
    return {"ms_server_cpu_per_call": 1e3 * cpu / n}


def _store_sqlite(cfg: Config, n: int, rep: int) -> Sample:
    path = cfg.workdir / f"floors-store-{rep}.db"
    try:
        return _child(cfg, "store", f"sqlite:///{path}", str(n))
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _store_pg(cfg: Config, n: int, rep: int) -> Sample:
    with harness.pg_database("bench_floor") as dsn:
        return _child(cfg, "store", harness.sqlalchemy_url(dsn), str(n))


def run(cfg: Config) -> MetricResult:
    """Measure each floor ``cfg.reps`` times, interleaved."""
    n: int = cfg.pick(200, 2000, 5000)
    samples = harness.interleave(
        cfg.reps,
        {
            "bidi": lambda rep: _child(cfg, "bidi", str(n * 5)),
            "unary": lambda rep: _unary(cfg, n * 5, rep),
            "store-sqlite": lambda rep: _store_sqlite(cfg, n, rep),
            "store-postgresql": lambda rep: _store_pg(cfg, n, rep),
        },
    )

    def fig(name: str, unit: str, side: str, key: str) -> Figure:
        values = column(samples[side], key)
        return Figure(NAME, name, unit, median(values), tickwork_samples=values)

    figures = [
        fig("gRPC bidi round trip, one process (CPU)", "µs", "bidi", "us_cpu_per_round_trip"),
        fig("gRPC unary call, server CPU", "ms", "unary", "ms_server_cpu_per_call"),
        fig("store: enqueue, CPU per job, SQLite", "ms", "store-sqlite", "ms_cpu_enqueue_per_job"),
        fig(
            "store: finish + claim next, CPU per job, SQLite",
            "ms",
            "store-sqlite",
            "ms_cpu_claim_finish_per_job",
        ),
        fig(
            "store: enqueue, CPU per job, PostgreSQL",
            "ms",
            "store-postgresql",
            "ms_cpu_enqueue_per_job",
        ),
        fig(
            "store: finish + claim next, CPU per job, PostgreSQL (client side)",
            "ms",
            "store-postgresql",
            "ms_cpu_claim_finish_per_job",
        ),
    ]
    return MetricResult(NAME, figures, {"jobs": n, "samples": samples})


if __name__ == "__main__":
    _child_main(sys.argv[1:])
