"""A smoke test of an installed tickwork, runnable without the test extra (no pytest).

Usage: ``python scripts/smoke.py``. It imports every module of the three packages, starts
``tickwork serve`` (this interpreter's) on a temporary SQLite database and a free port,
creates a shell task through the SDK, runs it, waits for SUCCEEDED, and stops the service
with SIGTERM (exit 0 expected). Exit status 0 when all of it worked, 1 otherwise (the
service's output is printed). CI runs it in a venv holding every runtime dependency at
the floor pyproject.toml claims (scripts/min_versions.py).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ("tickwork", "scheduler_svc", "worker_svc")
DEADLINE_S = 60.0


def import_everything() -> int:
    """Import every module of :data:`PACKAGES`; the number imported."""
    count = 0
    for name in PACKAGES:
        package = importlib.import_module(name)
        count += 1
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if ".migrations.versions." in module.name or module.name.endswith(".__main__"):
                continue  # Alembic loads these itself; a __main__ runs the command line
            importlib.import_module(module.name)
            count += 1
    return count


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_a_job(address: str, serve: subprocess.Popen[bytes]) -> str:
    """Create and run a shell task on the service at ``address``; its output."""
    from tickwork import Client, JobStatus, Unavailable

    deadline = time.monotonic() + DEADLINE_S
    with Client(address, timeout=5) as client:
        while True:
            if serve.poll() is not None:
                raise RuntimeError(f"tickwork serve exited {serve.returncode}")
            try:
                client.list_tasks()
                break
            except Unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        client.create_task("smoke", "shell", {"argv": ["echo", "smoke ok"]})
        [run] = client.run("smoke")
        job = client.wait(run.job_id, timeout=DEADLINE_S)
        if job.status != JobStatus.JOB_STATUS_SUCCEEDED:
            raise RuntimeError(f"job ended {JobStatus.Name(job.status)}: {job.error}")
        return job.output_tail.strip()


def main() -> int:
    """Run the smoke test; 0 when it passed."""
    print(f"imported {import_everything()} modules")
    with tempfile.TemporaryDirectory() as tmp:
        address = f"127.0.0.1:{free_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        env.update(
            DATABASE_URL=f"sqlite+aiosqlite:///{Path(tmp) / 'smoke.db'}",
            TICKWORK_LISTEN=address,
            TICKWORK_CONSOLE_LISTEN="",
            WORKER_POLL_INTERVAL_SECONDS="1",
        )
        log_path = Path(tmp) / "serve.log"
        with log_path.open("wb") as log:
            serve = subprocess.Popen(
                [sys.executable, "-m", "tickwork.cli", "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp,
            )
            try:
                output = run_a_job(address, serve)
                serve.send_signal(signal.SIGTERM)
                code = serve.wait(DEADLINE_S)
            except Exception as err:
                serve.kill()
                serve.wait()
                print(f"smoke test failed: {err!r}\n{log_path.read_text(errors='replace')}")
                return 1
        if output != "smoke ok" or code != 0:
            print(f"smoke test failed: output {output!r}, exit {code}\n{log_path.read_text()}")
            return 1
    print("smoke test passed: a job ran and succeeded; the service stopped cleanly")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
