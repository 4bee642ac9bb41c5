"""What every benchmark shares: sizes, interleaved repetitions, processes, results.

A metric module exposes ``run(cfg) -> MetricResult``. Inside, it measures tickwork and its
peer in the same run with :func:`interleave` (the order flips every repetition, so drift in
the machine hits both sides alike), then reduces the samples to :class:`Figure` rows:
medians, the ratio tickwork/peer and the issue's target.

Processes under test (``tickwork serve``, a procrastinate worker, an APScheduler process)
are started with :func:`service_argv`, which pins them to ``SERVICE_CPUS`` with taskset; the
benchmark driver pins itself to ``DRIVER_CPUS`` (see :func:`pin_self`). PostgreSQL, when
used, is the machine's own server and is not pinned: both sides share it alike.
"""

from __future__ import annotations

import asyncio
import collections
import compileall
import datetime as dt
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"

Size = Literal["tiny", "small", "full"]
SIZES: tuple[Size, ...] = ("tiny", "small", "full")

#: CPUs of the processes under test and of the benchmark driver (a 2-core machine).
SERVICE_CPUS = "1"
DRIVER_CPUS = "0"

#: The local PostgreSQL server; each run creates its own database there and drops it.
PG_ADMIN_DSN = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

PEER_INSTALL_HINT = 'install the bench extra: pip install -e ".[bench]"'


class BenchError(RuntimeError):
    """A benchmark could not run (a missing peer, a service that did not start, ...)."""


@dataclass(frozen=True)
class Config:
    """How to run: size, repetitions, pinning, where results and profiles go."""

    size: Size
    reps: int
    pin: bool
    workdir: Path
    profile_dir: Path | None = None

    def pick(self, tiny: Any, small: Any, full: Any) -> Any:
        """The value for this run's size."""
        return {"tiny": tiny, "small": small, "full": full}[self.size]


@dataclass
class Figure:
    """One row of the results table.

    ``tickwork`` and ``peer`` are medians over the repetitions (``peer`` None when the metric
    has no peer); ``ratio`` is tickwork/peer. ``met`` is None when the target is not judged
    from this row.
    """

    metric: str
    name: str
    unit: str
    tickwork: float
    peer: float | None = None
    peer_name: str = ""
    target: str = ""
    met: bool | None = None
    tickwork_samples: list[float] = field(default_factory=list)
    peer_samples: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """tickwork / peer, or None."""
        if self.peer is None or self.peer == 0:
            return None
        return self.tickwork / self.peer


@dataclass
class MetricResult:
    """A metric's rows plus anything worth keeping in the JSON (raw samples, settings)."""

    metric: str
    figures: list[Figure]
    details: dict[str, Any] = field(default_factory=dict)


Sample = dict[str, float]


def median(values: Sequence[float]) -> float:
    """The median; NaN for no values."""
    return float(statistics.median(values)) if values else float("nan")


def interleave(
    reps: int, runners: Mapping[str, Callable[[int], Sample]]
) -> dict[str, list[Sample]]:
    """Run every runner ``reps`` times, alternating the order each repetition.

    Repetition 0 runs them in the given order, repetition 1 in reverse, and so on. Returns
    each runner's samples in repetition order.
    """
    out: dict[str, list[Sample]] = {name: [] for name in runners}
    names = list(runners)
    for rep in range(reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            log(f"  rep {rep + 1}/{reps}: {name}")
            load0 = os.getloadavg()[0]
            sample = runners[name](rep)
            # Other work on the machine shows here (the runs pin 2 busy processes at most).
            sample["loadavg_1m"] = max(load0, os.getloadavg()[0])
            log("    " + ", ".join(f"{k}={v:.6g}" for k, v in sample.items()))
            out[name].append(sample)
    return out


def column(samples: list[Sample], key: str) -> list[float]:
    """One measurement across repetitions."""
    return [s[key] for s in samples]


def log(message: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(message, file=sys.stderr, flush=True)


def require(*modules: str) -> None:
    """Fail loudly when a peer is not installed."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise BenchError(f"peer package(s) {', '.join(missing)} missing; {PEER_INSTALL_HINT}")


# ---------------------------------------------------------------------------- processes


def compile_sources() -> None:
    """Write the bytecode of tickwork's modules and the benchmarks' own (the jobs' module
    among them), as installing a package does: where bytecode is not written on import
    (PYTHONDONTWRITEBYTECODE), every process, and every job process importing the jobs'
    module, would compile them from source, which no peer's worker does per job."""
    for tree in ("client", "scheduler_svc", "worker_svc", "bench"):
        compileall.compile_dir(REPO / tree, quiet=1)


def pin_self(cfg: Config) -> None:
    """Pin the driver (this process) to DRIVER_CPUS when pinning is on."""
    if cfg.pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in DRIVER_CPUS.split(",")})


def service_argv(cfg: Config, argv: list[str]) -> list[str]:
    """``argv`` pinned to SERVICE_CPUS with taskset (when pinning is on)."""
    if not cfg.pin:
        return list(argv)
    if shutil.which("taskset") is None:
        raise BenchError("taskset not found (util-linux); run with --no-pin")
    return ["taskset", "-c", SERVICE_CPUS, *argv]


@contextmanager
def profiled(cfg: Config, pid: int, name: str) -> Iterator[None]:
    """With --profile: py-spy samples process ``pid`` (threads on CPU) while the block runs
    and writes collapsed stacks to ``<profile_dir>/<name>.txt``."""
    if cfg.profile_dir is None:
        yield
        return
    spy = shutil.which("py-spy")
    if spy is None:
        raise BenchError(f"--profile needs py-spy; {PEER_INSTALL_HINT}")
    path = cfg.profile_dir / f"{name}.txt"
    argv = [spy, "record", "--pid", str(pid), "-r", "200", "-f", "raw", "-o", str(path)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # py-spy attaches
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """A child process (its own process group) with its output in a log file."""

    def __init__(
        self, argv: list[str], env: Mapping[str, str], log_path: Path, cwd: Path = REPO
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            argv,
            env=dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )

    def output(self) -> str:
        """What the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def target_pid(self, name_part: str) -> int:
        """The pid of the program whose command line contains ``name_part``."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid in [self.popen.pid, *descendants(self.popen.pid)]:
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                if name_part.encode() in cmdline:
                    return pid
            time.sleep(0.05)
        raise BenchError(f"no process running {name_part!r} under {self.argv}")

    def check_alive(self) -> None:
        """Raise with the log when the process has exited."""
        if self.popen.poll() is not None:
            raise BenchError(
                f"{self.argv[-1]} exited {self.popen.returncode}:\n{self.output()[-4000:]}"
            )

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM the process group, wait, then SIGKILL it."""
        if self.popen.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._log.close()
        return self.popen.returncode


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of process ``pid`` and its live descendants, each with the children it has
    reaped, seconds: the difference of two readings is what the tree used between them,
    processes born and reaped in between included."""
    total = 0.0
    for member in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone since the listing: its parent's reaped children count it
        total += sum(int(f) for f in fields[11:15]) / _CLK_TCK
    return total


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of process ``pid``, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmHWM for pid {pid}")


def healthy(address: str) -> bool:
    """True when the gRPC health check at ``address`` answers SERVING."""
    with grpc.insecure_channel(address) as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=0.5
            )
        except grpc.RpcError:
            return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


def child_env(**extra: str) -> dict[str, str]:
    """This environment without the caller's TICKWORK_* and DATABASE_URL, plus ``extra``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_") and k != "DATABASE_URL"
    }
    env.update(extra)
    return env


def tickwork_env(database_url: str, address: str, **extra: str) -> dict[str, str]:
    """The environment of a benchmarked ``tickwork serve`` (defaults otherwise, INFO logs),
    without the web console: services started side by side would contend for its port."""
    return child_env(
        **{
            "DATABASE_URL": database_url,
            "TICKWORK_LISTEN": address,
            "TICKWORK_SERVER": address,
            "TICKWORK_CONSOLE_LISTEN": "",
            **extra,
        }
    )


class TickworkService:
    """``tickwork serve`` on a free port, pinned like every service under test."""

    def __init__(
        self,
        cfg: Config,
        database_url: str,
        *,
        name: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        argv = service_argv(cfg, [sys.executable, "-m", "tickwork.cli", "serve"])
        full_env = tickwork_env(database_url, self.address, **dict(env or {}))
        self.proc = Proc(argv, full_env, cfg.workdir / f"{name}.log")
        self.pid = 0

    def wait_healthy(self, timeout_s: float = 120.0) -> TickworkService:
        """Block until SERVING; raise with the log if it exits or takes too long."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.proc.check_alive()
            if healthy(self.address):
                self.pid = self.proc.target_pid("tickwork.cli")
                return self
            time.sleep(0.05)
        raise BenchError(f"tickwork not healthy after {timeout_s}s:\n{self.proc.output()[-4000:]}")

    def stop(self) -> None:
        """Stop the service (SIGTERM, then SIGKILL)."""
        self.proc.stop()


@contextmanager
def tickwork_service(
    cfg: Config, database_url: str, *, name: str, env: Mapping[str, str] | None = None
) -> Iterator[TickworkService]:
    """A started, healthy ``tickwork serve``; stopped on exit."""
    service = TickworkService(cfg, database_url, name=name, env=env)
    try:
        yield service.wait_healthy()
    finally:
        service.stop()


# ---------------------------------------------------------------------------- databases


async def _pg_admin(sql: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def pg_dsn(name: str) -> str:
    """The libpq DSN of database ``name`` on the benchmark PostgreSQL server."""
    return PG_ADMIN_DSN.rsplit("/", 1)[0] + "/" + name


@contextmanager
def pg_database(prefix: str) -> Iterator[str]:
    """A new PostgreSQL database (its libpq DSN), dropped on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as err:
        raise BenchError(f"PostgreSQL at {PG_ADMIN_DSN} unusable: {err}") from err
    try:
        yield pg_dsn(name)
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def sqlalchemy_url(dsn: str) -> str:
    """The SQLAlchemy asyncpg URL of a libpq DSN."""
    return dsn.replace("postgresql://", "postgresql+asyncpg://", 1)


# ---------------------------------------------------------------------------- results


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_gib, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in (
        "tickwork",
        "grpcio",
        "sqlalchemy",
        "aiosqlite",
        "asyncpg",
        "procrastinate",
        "psycopg",
        "apscheduler",
        "croniter",
        "cronsim",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value != value:  # NaN
        return "nan"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table(results: Sequence[MetricResult]) -> str:
    """The figures as a Markdown table."""
    lines = [
        "| metric | figure | unit | tickwork | peer | ratio | target | met? |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    for result in results:
        for f in result.figures:
            peer = f"{_fmt(f.peer)} ({f.peer_name})" if f.peer is not None else "-"
            met = "-" if f.met is None else ("yes" if f.met else "NO")
            lines.append(
                f"| {f.metric} | {f.name} | {f.unit} | {_fmt(f.tickwork)} | {peer} | "
                f"{_fmt(f.ratio)} | {f.target} | {met} |"
            )
    return "\n".join(lines)


def write_json(path: Path, cfg: Config, results: Sequence[MetricResult], argv: list[str]) -> None:
    """Write every figure, sample and detail, with the machine, to ``path``."""
    doc = {
        "when": dt.datetime.now(dt.UTC).isoformat(),
        "command": argv,
        "size": cfg.size,
        "reps": cfg.reps,
        "pinning": (
            f"services on CPU {SERVICE_CPUS}, driver on CPU {DRIVER_CPUS} (taskset)"
            if cfg.pin
            else "none"
        ),
        "machine": machine(),
        "metrics": [
            {
                "metric": r.metric,
                "figures": [{**asdict(f), "ratio": f.ratio} for f in r.figures],
                "details": r.details,
            }
            for r in results
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def summarize_profile(path: Path, top: int = 25) -> str:
    """The hottest functions of a py-spy raw (collapsed stacks) profile: self and total %."""
    if not path.exists():
        return f"(no profile at {path})"
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        frames = [_short_frame(f) for f in stack.split(";")]
        if frames:
            self_counts[frames[-1]] += count
        for frame in set(frames):
            total_counts[frame] += count
    if not samples:
        return f"(empty profile at {path})"
    out = [f"{path.name}: {samples} samples (on CPU)", "  self%  total%  function (by self)"]
    for frame, count in self_counts.most_common(top):
        pct = 100 * total_counts[frame] / samples
        out.append(f"  {100 * count / samples:5.1f}  {pct:6.1f}  {frame}")
    out.append("         total%  project function (by total)")
    ours = [(f, c) for f, c in total_counts.most_common() if _is_project(f)]
    for frame, count in ours[:top]:
        out.append(f"         {100 * count / samples:6.1f}  {frame}")
    return "\n".join(out)


def _is_project(frame: str) -> bool:
    where = frame.partition(" (")[2]
    return where.split("/")[0] in (
        "scheduler_svc",
        "worker_svc",
        "tickwork",
        "servicers",
        "handlers",
    )


def _short_frame(frame: str) -> str:
    """``func (path/to/pkg/file.py:12)`` -> ``func (pkg/file.py)``."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 2)
    return f"{name} ({'/'.join(file[-2:])})" if where else name
