"""Prometheus metrics over HTTP from a real service and worker (JSON logs on both), and the
fire metrics (lateness, skipped, missed) with an injected clock."""

from __future__ import annotations

import datetime as dt
import json
import signal
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.harness import Server, WorkerProc, free_port, wait_for
from tests.inprocess import inprocess
from tickwork import Client, JobStatus

UTC = dt.UTC
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample at /metrics, by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_endpoint_and_json_logs(tmp_path: Path, database_url: str) -> None:
    port = free_port()
    api = Server(
        tmp_path,
        name="api",
        database_url=database_url,
        env={
            "WORKER_IS_ENABLED": "false",
            "TICKWORK_METRICS_LISTEN": f"127.0.0.1:{port}",
            "TICKWORK_LEASE_TTL_SECONDS": "2",
            "TICKWORK_HEARTBEAT_INTERVAL_SECONDS": "0.5",
            "SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT": "2",
            "TICKWORK_LOG_FORMAT": "json",
        },
    ).wait_healthy()
    worker: WorkerProc | None = None
    worker_env = {"TICKWORK_LOG_FORMAT": "json", "WORKER_ABORT_GRACE_SECONDS": "1"}
    try:
        with Client(api.address) as tw:
            tw.create_task("ok", "shell", {"argv": ["true"]})
            tw.create_task("bad", "shell", {"argv": ["false"]})
            tw.create_task("slow", "shell", {"argv": ["sleep", "30"]})
            tw.run("ok")
            tw.run("bad")
            wait_for(
                lambda: value(scrape(port), "tickwork_queue_depth", lane="manual") == 2,
                what="queue depth 2 in the manual lane",
            )
            worker = WorkerProc(tmp_path, api.address, env=worker_env)
            wait_for(
                lambda: len(tw.list_jobs(statuses=["SUCCEEDED", "FAILED"])) == 2,
                what="both jobs to end",
            )
            samples = scrape(port)
            assert value(samples, "tickwork_jobs_finished_total", task="ok", outcome="succeeded")
            assert value(samples, "tickwork_jobs_finished_total", task="bad", outcome="failed")
            count = "tickwork_job_duration_seconds_count"
            assert value(samples, count, outcome="succeeded") == 1
            assert value(samples, count, outcome="failed") == 1
            assert value(samples, "tickwork_workers", state="active") == 1

            # Scheduled failures: counted, then the task is disabled after two.
            tw.create_schedule("bad-often", ["bad"], cron="* * * * * *")
            wait_for(
                lambda: value(scrape(port), "tickwork_task_auto_disables_total", task="bad") == 1,
                timeout_s=20,
                what="the auto-disable to be counted",
            )
            tw.update_schedule("bad-often", enabled=False)
            wait_for(
                lambda: value(scrape(port), "tickwork_task_consecutive_failures", task="bad") == 2,
                what="the failure streak gauge",
            )
            samples = scrape(port)
            assert value(samples, "tickwork_fires_total", outcome="enqueued") >= 2
            assert value(samples, "tickwork_fire_lateness_seconds_count") >= 2

            # A worker killed mid-job: its job's lease is lost and recovered.
            [run] = tw.run("slow")
            wait_for(
                lambda: tw.get_job(run.job_id).status == JobStatus.JOB_STATUS_RUNNING,
                what="the slow job to run",
            )
            worker.kill(signal.SIGKILL)
            wait_for(
                lambda: value(scrape(port), "tickwork_job_lease_losses_total", task="slow") == 1,
                timeout_s=20,
                what="the lease loss to be counted",
            )
            assert value(scrape(port), "tickwork_workers", state="active") == 0
    finally:
        if worker is not None:
            worker.stop()
        api.stop()
    for proc in (api, worker):
        assert proc is not None
        lines = [line for line in proc.output().splitlines() if line.startswith("{")]
        records = [json.loads(line) for line in lines]
        assert records and all({"time", "level", "logger", "message"} <= r.keys() for r in records)
        assert any("job_id" in r for r in records)


async def test_fire_metrics_count_lateness_skips_and_misses(
    tmp_path: Path, database_url: str
) -> None:
    start = dt.datetime(2026, 6, 1, 10, 0, 30, tzinfo=UTC)
    async with inprocess(tmp_path, database_url, start) as h:
        metrics = h.service.app.metrics.registry
        await h.client.create_task("a", "shell", {"argv": ["true"]})
        await h.client.create_schedule("s", ["a"], cron="*/5 * * * *")
        await h.tick(dt.datetime(2026, 6, 1, 10, 5, 2, tzinfo=UTC))  # 2 s late: enqueued
        await h.tick(dt.datetime(2026, 6, 1, 10, 10, 0, tzinfo=UTC))  # still queued: skipped
        # Down for half an hour: 10:15 .. 10:40 are missed (catch-up SKIP).
        await h.tick(dt.datetime(2026, 6, 1, 10, 41, 0, tzinfo=UTC))

        def sample(name: str, **labels: str) -> float:
            return metrics.get_sample_value(name, labels) or 0.0

        assert sample("tickwork_fires_total", outcome="enqueued") == 1
        assert sample("tickwork_fires_total", outcome="skipped") == 1
        assert sample("tickwork_fires_total", outcome="missed") == 6
        assert sample("tickwork_fire_lateness_seconds_count") == 1
        assert sample("tickwork_fire_lateness_seconds_sum") == 2.0
