"""Prometheus metrics of one scheduler service replica, served over HTTP when configured.

Counters and histograms are updated where the events happen (``App``, the worker stream);
the gauges read from the database (queue depth, consecutive failures) are refreshed by the
service every :data:`REFRESH_S` seconds and served from that snapshot, so a scrape never
waits for the database. Each :class:`Metrics` has its own registry (several services may
run in one test process).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator, Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler_svc.storage_health import StorageHealth

#: How often the database-backed gauges are refreshed, seconds.
REFRESH_S = 2.0

LANES = {0: "manual", 1: "scheduler", 2: "backfill"}

_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600)
_LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)


class _Snapshot(Collector):
    """Gauges read from the database, served from the last refresh."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: dict[str, int] = dict.fromkeys(LANES.values(), 0)
        self._failures: dict[str, int] = {}

    def update(self, queue_by_lane: Mapping[int, int], failures: Mapping[str, int]) -> None:
        queue = dict.fromkeys(LANES.values(), 0)
        for lane, count in queue_by_lane.items():
            queue[LANES.get(lane, str(lane))] = count
        with self._lock:
            self._queue, self._failures = queue, dict(failures)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            queue, failures = self._queue, self._failures
        depth = GaugeMetricFamily(
            "tickwork_queue_depth", "Jobs queued (not yet running), by lane.", labels=["lane"]
        )
        for lane, count in sorted(queue.items()):
            depth.add_metric([lane], count)
        yield depth
        streak = GaugeMetricFamily(
            "tickwork_task_consecutive_failures",
            "Consecutive final failures of scheduler-triggered jobs, by task.",
            labels=["task"],
        )
        for task, count in sorted(failures.items()):
            streak.add_metric([task], count)
        yield streak


class Metrics:
    """The replica's instruments, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.jobs_finished = Counter(
            "tickwork_jobs_finished",
            "Jobs that ended, by task and outcome (succeeded, failed, aborted).",
            ["task", "outcome"],
            registry=r,
        )
        # By outcome only: a 14-bucket histogram per task would be 16 series a task and
        # outcome (160,000 at 10,000 tasks). Per-task run times are in the jobs table.
        self.job_duration = Histogram(
            "tickwork_job_duration_seconds",
            "Run time of ended jobs (start to finish), by outcome.",
            ["outcome"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.fires = Counter(
            "tickwork_fires",
            "Schedule fires recorded, by outcome (enqueued, skipped, missed, buffered, replaced).",
            ["outcome"],
            registry=r,
        )
        self.backfill_windows = Counter(
            "tickwork_backfill_windows",
            "Windows of schedules backfilled (BackfillSchedule, not dry runs), by outcome "
            "(enqueued, skipped, already_fired).",
            ["outcome"],
            registry=r,
        )
        self.fire_lateness = Histogram(
            "tickwork_fire_lateness_seconds",
            "Enqueue time minus start (fire time plus jitter) of enqueued scheduler fires.",
            buckets=_LATENESS_BUCKETS,
            registry=r,
        )
        self.auto_disables = Counter(
            "tickwork_task_auto_disables",
            "Tasks disabled after consecutive failures, by task.",
            ["task"],
            registry=r,
        )
        self.lease_losses = Counter(
            "tickwork_job_lease_losses",
            "Running jobs recovered because their lease expired, by task.",
            ["task"],
            registry=r,
        )
        self.notifications = Counter(
            "tickwork_notifications",
            "Notification delivery attempts, by notifier and outcome (sent, retried, given_up).",
            ["notifier", "outcome"],
            registry=r,
        )
        self.last_success = Gauge(
            "tickwork_task_last_success_timestamp_seconds",
            "When a job of the task last succeeded (Unix time), as recorded by this replica.",
            ["task"],
            registry=r,
        )
        self.workers = Gauge(
            "tickwork_workers",
            "Worker streams open on this replica, by state (active, standby).",
            ["state"],
            registry=r,
        )
        self.database_up = Gauge(
            "tickwork_database_up",
            "1 while the database takes writes, 0 while they fail or stall.",
            registry=r,
        )
        self.database_up.set(1)
        self.database_errors = Counter(
            "tickwork_database_errors",
            "Database operations that failed on the database itself.",
            registry=r,
        )
        self.queue_stalled = Gauge(
            "tickwork_queue_stalled_seconds",
            "How long ready jobs have been queued with no active worker connected to this "
            "replica (0: none waiting, or a worker is active).",
            registry=r,
        )
        self.clock_steps = Counter(
            "tickwork_clock_steps",
            "Wall-clock steps the scheduler loop detected, by direction (back, forward).",
            ["direction"],
            registry=r,
        )
        for direction in ("back", "forward"):
            self.clock_steps.labels(direction)
        self._errors_seen = 0
        for state in ("active", "standby"):
            self.workers.labels(state)
        for outcome in ("enqueued", "skipped", "missed", "buffered", "replaced"):
            self.fires.labels(outcome)
        for outcome in ("enqueued", "skipped", "already_fired"):
            self.backfill_windows.labels(outcome)
        self.snapshot = _Snapshot()
        r.register(self.snapshot)

    def job_finished(
        self,
        task: str,
        status: str,
        started: dt.datetime | None,
        finished: dt.datetime | None,
    ) -> None:
        """Count an ended job (by task and outcome) and observe its run time (by outcome)."""
        outcome = status.lower()
        self.jobs_finished.labels(task, outcome).inc()
        if started is not None and finished is not None:
            seconds = max(0.0, (finished - started).total_seconds())
            self.job_duration.labels(outcome).observe(seconds)

    def storage(self, health: StorageHealth) -> None:
        """Follow the database's state: the up gauge and the error counter."""
        self.database_up.set(0 if health.failing else 1)
        new = health.failures_total - self._errors_seen
        if new > 0:
            self.database_errors.inc(new)
            self._errors_seen = health.failures_total

    def worker_state(self, old: str | None, new: str | None) -> None:
        """Move one worker stream from state ``old`` to ``new`` (None: not counted)."""
        if old == new:
            return
        if old is not None:
            self.workers.labels(old).dec()
        if new is not None:
            self.workers.labels(new).inc()


class MetricsServer:
    """The HTTP endpoint serving a registry at /metrics, in a thread."""

    def __init__(self, listen: str, registry: CollectorRegistry) -> None:
        host, _, port = listen.rpartition(":")
        server, thread = start_http_server(int(port), addr=host.strip("[]"), registry=registry)
        self._server: WSGIServer = server
        self._thread = thread
        self.port: int = int(server.server_address[1])

    def close(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
