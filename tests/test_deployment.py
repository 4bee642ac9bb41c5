"""Deployment files: compose.yaml's modes match the "Deployment modes" table of
docs/operations/deployment.md, and the Dockerfile's targets run as a non-root user with a
gRPC health check and a data volume.

No Docker engine runs here: compose.yaml is read as YAML (and checked by Debian's
`docker-compose config` when it is installed; CI installs it)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from scheduler_svc.settings import Settings
from tests.harness import REPO

SERVE_TARGETS = {"embedded", "api"}
DEPLOYMENT_DOC = REPO / "docs" / "operations" / "deployment.md"


@dataclass(frozen=True)
class Mode:
    name: str
    processes: str
    compose: str
    scheduler: str
    worker: str


def documented_modes(doc: str) -> list[Mode]:
    """The rows of the first table under the "## Deployment modes" heading."""
    section = doc.split("## Deployment modes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert "compose" in header, "the Deployment modes table needs its compose column"
    modes = []
    for line in rows[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        modes.append(
            Mode(
                name=cells["mode"],
                processes=cells["processes"],
                compose=cells["compose"].strip("`"),
                scheduler=cells["SCHEDULER_IS_ENABLED"].split()[0],
                worker=cells["WORKER_IS_ENABLED"].split()[0],
            )
        )
    return modes


def started_services(compose: dict[str, Any], command: str) -> set[str]:
    """The services ``docker compose [--profile P ...] up [SERVICE ...]`` starts."""
    words = shlex.split(command)
    assert words[:2] == ["docker", "compose"], command
    profiles: set[str] = set()
    rest = words[2:]
    while rest and rest[0] == "--profile":
        profiles.add(rest[1])
        rest = rest[2:]
    assert rest and rest[0] == "up", command
    targets = rest[1:]
    services: dict[str, Any] = compose["services"]
    if not targets:
        return {n for n, s in services.items() if not set(s.get("profiles", [])) - profiles}
    started: set[str] = set()
    todo = list(targets)
    while todo:
        name = todo.pop()
        if name not in started:
            started.add(name)
            todo.extend(services[name].get("depends_on", {}))
    for name in started:
        wanted = set(services[name].get("profiles", []))
        assert not wanted or wanted & profiles, f"{command}: {name} needs profile {wanted}"
    return started


def target(service: dict[str, Any]) -> str:
    build = service.get("build")
    return str(build.get("target", "")) if isinstance(build, dict) else ""


def check_modes(doc: str, compose: dict[str, Any]) -> None:
    """Each mode with a compose command starts one serve service with the table's
    environment, and a dedicated worker exactly when the mode has one."""
    services: dict[str, Any] = compose["services"]
    covered: set[str] = set()
    modes = [m for m in documented_modes(doc) if m.compose not in ("", "-", "—")]
    assert {"embedded (default)", "dedicated worker"} <= {m.name for m in modes}
    for mode in modes:
        started = started_services(compose, mode.compose)
        serving = [n for n in started if target(services[n]) in SERVE_TARGETS]
        assert len(serving) == 1, f"{mode.name}: one tickwork serve, got {serving}"
        [name] = serving
        covered.add(name)
        env = {k: str(v).lower() for k, v in services[name]["environment"].items()}
        assert env["SCHEDULER_IS_ENABLED"] == mode.scheduler, mode.name
        assert env["WORKER_IS_ENABLED"] == mode.worker, mode.name
        assert target(services[name]) == ("embedded" if mode.worker == "true" else "api")
        workers = [n for n in started if target(services[n]) == "worker"]
        assert bool(workers) == ("tickwork worker" in mode.processes), mode.name
        for worker in workers:
            server = services[worker]["environment"]["TICKWORK_SERVER"]
            assert server.split(":")[0] == name, f"{worker} must connect to {name}"
        on_postgres = "PostgreSQL" in mode.processes
        assert env["DATABASE_URL"].startswith("postgresql" if on_postgres else "sqlite")
    every_serve = {n for n, s in services.items() if target(s) in SERVE_TARGETS}
    assert covered == every_serve, f"services in no documented mode: {every_serve - covered}"


def test_compose_modes_match_the_deployment_doc_table() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    check_modes(DEPLOYMENT_DOC.read_text(), compose)


def test_compose_and_the_image_stop_within_the_shutdown_bound() -> None:
    """SIGTERM (the image's STOPSIGNAL) makes a tickwork process exit within
    TICKWORK_SHUTDOWN_GRACE_SECONDS (25 s by default): compose waits longer than that before
    SIGKILL (Docker's default of 10 s would cut a running job's grace), as Kubernetes' 30 s
    default grace does."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if "build" not in service:
            continue  # not a tickwork image (PostgreSQL)
        if target(service) == "console":
            continue  # runs no jobs: its stop waits only for open pages
        env = service.get("environment", {})
        bound = float(env.get("TICKWORK_SHUTDOWN_GRACE_SECONDS", Settings().shutdown_grace_s))
        period = service.get("stop_grace_period", "10s")
        seconds = int(period.removesuffix("s"))
        assert bound + 5 <= seconds <= 30, f"{name}: stop_grace_period {period}, bound {bound}"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "\nSTOPSIGNAL SIGTERM\n" in dockerfile


def test_compose_file_is_valid_for_docker_compose() -> None:
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (CI installs Debian's package)")
    for extra in ([], ["--profile", "worker"], ["--profile", "postgres"]):
        result = subprocess.run(
            [tool, "-f", str(REPO / "compose.yaml"), *extra, "config", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert result.returncode == 0, result.stderr


def dockerfile_stages() -> dict[str, list[str]]:
    """Instructions per stage (continuation lines joined), by stage name."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.IGNORECASE)
        if match:
            current = stages.setdefault(match.group(2), [f"FROM {match.group(1)}"])
        else:
            current.append(line)
    return stages


def chain(stages: dict[str, list[str]], name: str) -> list[str]:
    """A stage's instructions with those of the stages it is built FROM, oldest first."""
    parent = stages[name][0].split()[1]
    return (chain(stages, parent) if parent in stages else []) + stages[name][1:]


def test_dockerfile_targets() -> None:
    stages = dockerfile_stages()
    assert {"embedded", "worker", "api"} <= stages.keys()
    assert list(stages)[-1] == "embedded"  # `docker build .` builds the default mode
    for name in ("embedded", "worker", "api"):
        steps = chain(stages, name)
        users = [s.split()[1] for s in steps if s.startswith("USER")]
        assert users and users[-1] not in ("root", "0"), name
        healthchecks = [s for s in steps if s.startswith("HEALTHCHECK")]
        if name in SERVE_TARGETS:
            assert '"tickwork", "health"' in healthchecks[-1], name
            assert any(s.startswith("VOLUME") and "/var/lib/tickwork" in s for s in steps)
            assert any("DATABASE_URL=sqlite+aiosqlite:////var/lib/tickwork/" in s for s in steps)
        enabled = [s for s in steps if "WORKER_IS_ENABLED=" in s]
        if name in SERVE_TARGETS:
            expected = "true" if name == "embedded" else "false"
            assert f"WORKER_IS_ENABLED={expected}" in enabled[-1], name
    assert not any("apt-get" in s for s in chain(stages, "api"))  # no handler tools in api
