"""No service setting reaches a job: a job of the embedded worker running ``env`` prints the
few variables every job gets, those WORKER_PASS_ENV names, its task's and its own
TICKWORK_* ones, and none of the service's settings; the canaries set in the service's
environment appear nowhere a person can read (job output, API answers, console pages, the
service's log)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import json_format

from tests.console_harness import Console, Visitor, console_server
from tickwork import Client, JobStatus
from tickwork.tokens import hash_token, new_token

CANARY = f"canary-{secrets.token_hex(8)}"
SMTP_SECRET = f"smtp-{secrets.token_hex(8)}"
TOKEN_HASH = hash_token(new_token())
SECRETS = (CANARY, SMTP_SECRET, TOKEN_HASH)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    env = {
        "CANARY_SECRET": CANARY,
        "SMTP_PASSWORD": SMTP_SECRET,
        "TICKWORK_TOKENS": f"viewer:{TOKEN_HASH}:extra",
        "PASSED_ON": "passed-value",
        "WORKER_PASS_ENV": "PASSED_ON",
    }
    with console_server(tmp_path_factory.mktemp("jobenv"), env) as running:
        yield running


def test_a_job_s_environment_holds_no_service_setting(console: Console, tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        task = admin.create_task("env", "shell", {"argv": ["env"], "env": {"OWN": "own-value"}})
        py = admin.create_task(
            "pyenv",
            "python",
            {"callable": "tests.handler_fixtures:write_environment", "kwargs": {"path": str(dump)}},
        )
        [run, py_run] = admin.run("env", "pyenv")
        job = admin.wait(run.job_id, timeout=30)
        assert admin.wait(py_run.job_id, timeout=30).status == JobStatus.JOB_STATUS_SUCCEEDED
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    shell_env = dict(line.split("=", 1) for line in job.output_tail.splitlines() if "=" in line)
    python_env = json.loads(dump.read_text())
    for env in (shell_env, python_env):
        assert env["PASSED_ON"] == "passed-value"
        assert "PATH" in env and env["TICKWORK_JOB_ID"]
        leaked = [k for k in env if k.startswith(("SMTP_", "WORKER_", "DATABASE_", "CANARY"))]
        assert not leaked, leaked
        assert not {"TICKWORK_TOKENS", "TICKWORK_TOKENS_FILE", "TICKWORK_LISTEN"} & set(env)
        assert not [s for s in SECRETS if s in json.dumps(env)]
    assert shell_env["OWN"] == "own-value"

    # Nowhere a person reads: API answers of every role, console pages, the service's log.
    answers: list[str] = []
    for role in ("viewer", "operator", "admin"):
        with Client(console.server.address, token=console.tokens[role]) as client:
            for message in (
                client.get_job(run.job_id),
                client.get_task(task.id),
                client.get_task(py.id),
                *client.list_jobs(),
                *client.list_tasks(),
            ):
                answers.append(json_format.MessageToJson(message))
        visitor = Visitor(console.port)
        assert visitor.sign_in(console.tokens[role]).status == 303
        for path in (f"/jobs/{run.job_id}", f"/tasks/{task.id}", "/jobs", "/tasks", "/"):
            page = visitor.get(path)
            assert page.status == 200, (path, page.status)
            answers.append(page.body)
    answers.append(console.server.output())
    text = "\n".join(answers)
    assert "passed-value" in text  # the job's output is there to read
    assert not [s for s in SECRETS if s in text]


def test_the_console_shows_a_viewer_env_values_masked(console: Console) -> None:
    value = f"task-secret-{secrets.token_hex(4)}"
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        task = admin.create_task("keyed", "shell", {"argv": ["true"], "env": {"API_KEY": value}})
    pages = {}
    for role in ("viewer", "operator", "admin"):
        visitor = Visitor(console.port)
        assert visitor.sign_in(console.tokens[role]).status == 303
        pages[role] = visitor.get(f"/tasks/{task.id}").body
    assert value not in pages["viewer"] and "*****" in pages["viewer"]
    assert "API_KEY" in pages["viewer"]
    assert value in pages["operator"] and value in pages["admin"]
