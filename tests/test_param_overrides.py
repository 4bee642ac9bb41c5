"""Who may override what of a task when running it, on a real service with access control.

An operator's params_override may set only the paths its task declares in
overridable_params (dotted, a path under a declared one included); anything else is
PERMISSION_DENIED naming ``params_override.<path>``, and nothing is enqueued. An admin may
override anything. The override is a JSON Merge Patch, so ``env.REGION`` sets one variable
and keeps the task's others. A viewer reads params' env values masked.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_svc.overrides import merge_patch, set_paths
from tests.harness import REPO, Server, base_env
from tests.security import role_tokens, tokens_file
from tickwork import Client, InvalidArgument, JobStatus, PermissionDenied, Reason
from tickwork.apply import ConfigError, apply_config, parse_config
from tickwork.structs import struct_to_dict

REPORT = {
    "argv": ["sh", "-c", 'echo "region=$REGION mode=$MODE"'],
    "env": {"REGION": "us", "MODE": "full"},
}


@pytest.fixture(scope="module")
def tokens() -> dict[str, str]:
    return role_tokens()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, tokens: dict[str, str]) -> Iterator[Server]:
    """The embedded service with access control (SQLite: the rule does not touch the
    database's dialect)."""
    tmp = tmp_path_factory.mktemp("overrides")
    srv = Server(
        tmp,
        env={
            "TICKWORK_TOKENS_FILE": str(tokens_file(tmp / "tokens", tokens)),
            "WORKER_POLL_INTERVAL_SECONDS": "1",
        },
    )
    try:
        yield srv.wait_healthy()
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def admin(secured: Server, tokens: dict[str, str]) -> Iterator[Client]:
    with Client(secured.address, token=tokens["admin"]) as client:
        client.create_task("report", "shell", REPORT, overridable_params=["env.REGION"])
        client.create_task("fixed", "shell", REPORT)
        yield client


@pytest.fixture(scope="module")
def operator(secured: Server, tokens: dict[str, str], admin: Client) -> Iterator[Client]:
    with Client(secured.address, token=tokens["operator"]) as client:
        yield client


def job_ids(client: Client, task: str) -> set[int]:
    return {job.id for job in client.list_jobs(task=task)}


def output_of(client: Client, job_id: int) -> str:
    job = client.wait(job_id, timeout=30)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, job.error
    return job.output_tail.strip()


@pytest.mark.parametrize(
    ("override", "path"),
    [
        ({"argv": ["sh", "-c", "id"]}, "argv"),
        ({"env": {"MODE": "quick"}}, "env.MODE"),
        ({"env": {"REGION": "eu", "PATH": "/tmp"}}, "env.PATH"),
        ({"env": None}, "env"),
        ({"cwd": "/"}, "cwd"),
    ],
)
def test_an_operator_s_override_of_an_undeclared_param_is_denied_naming_it(
    operator: Client, override: dict[str, object], path: str
) -> None:
    before = job_ids(operator, "report")
    with pytest.raises(PermissionDenied) as denied:
        operator.run("report", params_override=override)
    assert denied.value.details == (
        f'params_override.{path} is not overridable for task "report"; '
        "the task declares: env.REGION"
    )
    assert denied.value.reason == Reason.PARAM_NOT_OVERRIDABLE
    assert job_ids(operator, "report") == before  # nothing enqueued


def test_a_task_that_declares_nothing_lets_an_operator_override_nothing(
    operator: Client,
) -> None:
    with pytest.raises(PermissionDenied) as denied:
        operator.run("fixed", params_override={"env": {"REGION": "eu"}})
    assert denied.value.details == (
        'params_override.env.REGION is not overridable for task "fixed"; '
        "the task declares: nothing (overridable_params is empty)"
    )
    # Running it as it is stays an operator's right.
    (run,) = operator.run("fixed")
    assert output_of(operator, run.job_id) == "region=us mode=full"


def test_an_operator_sets_a_declared_param_and_the_job_sees_it_patched_in(
    operator: Client,
) -> None:
    (run,) = operator.run("report", params_override={"env": {"REGION": "eu"}})
    # A merge patch: MODE is kept, REGION replaced.
    assert output_of(operator, run.job_id) == "region=eu mode=full"
    job = operator.get_job(run.job_id)
    assert struct_to_dict(job.params_override) == {"env": {"REGION": "eu"}}
    assert job.requested_by == "operator-test"


def test_an_admin_may_override_anything(admin: Client) -> None:
    (run,) = admin.run("fixed", params_override={"argv": ["sh", "-c", "echo admin-ran"]})
    assert output_of(admin, run.job_id) == "admin-ran"
    (run,) = admin.run("report", params_override={"env": {"MODE": None}})
    assert output_of(admin, run.job_id) == "region=us mode="


@pytest.mark.usefixtures("admin")
def test_the_cli_takes_dotted_params(secured: Server, tokens: dict[str, str]) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tickwork.cli", "tasks", "run", "report", *args],
            capture_output=True,
            text=True,
            env=base_env(TICKWORK_SERVER=secured.address, TICKWORK_TOKEN=tokens["operator"]),
            cwd=REPO,
            timeout=30,
        )

    done = run("--param", "env.REGION=ap", "--wait")
    assert done.returncode == 0, done.stderr
    assert "region=ap mode=full" in done.stdout
    denied = run("--param", 'argv=["id"]')
    assert denied.returncode != 0
    assert 'params_override.argv is not overridable for task "report"' in denied.stderr


def test_declared_paths_are_checked_and_kept(admin: Client) -> None:
    with pytest.raises(InvalidArgument) as bad:
        admin.create_task("bad", "shell", REPORT, overridable_params=["env.REGION", "env..X"])
    assert bad.value.field == "task.overridable_params[1]"
    task = admin.create_task(
        "paths", "python", {"callable": "tests.handler_fixtures:add"}, overridable_params=["kwargs"]
    )
    assert list(task.overridable_params) == ["kwargs"]
    changed = admin.update_task("paths", overridable_params=["kwargs.a", "kwargs.b"])
    assert list(changed.overridable_params) == ["kwargs.a", "kwargs.b"]
    assert list(admin.get_task("paths").overridable_params) == ["kwargs.a", "kwargs.b"]


def test_a_task_s_env_may_not_set_a_job_variable(admin: Client) -> None:
    with pytest.raises(InvalidArgument) as bad:
        admin.create_task("sneaky", "shell", {"argv": ["true"], "env": {"TICKWORK_JOB_ID": "1"}})
    assert bad.value.field == "task.params"
    assert "env.TICKWORK_JOB_ID" in bad.value.details


def test_a_viewer_reads_env_values_masked(
    secured: Server, tokens: dict[str, str], operator: Client, admin: Client
) -> None:
    (run,) = operator.run("report", params_override={"env": {"REGION": "secret-region"}})
    operator.wait(run.job_id, timeout=30)
    with Client(secured.address, token=tokens["viewer"]) as viewer:
        shown = struct_to_dict(viewer.get_task("report").params)
        assert shown == {**REPORT, "env": {"REGION": "*****", "MODE": "*****"}}
        [listed] = [t for t in viewer.list_tasks() if t.name == "report"]
        assert struct_to_dict(listed.params)["env"] == {"REGION": "*****", "MODE": "*****"}
        job = viewer.get_job(run.job_id)
        assert struct_to_dict(job.params_override) == {"env": {"REGION": "*****"}}
        [listed_job] = [j for j in viewer.list_jobs(task="report") if j.id == run.job_id]
        assert struct_to_dict(listed_job.params_override) == {"env": {"REGION": "*****"}}
        watched = viewer.wait(run.job_id, timeout=30)
        assert struct_to_dict(watched.params_override) == {"env": {"REGION": "*****"}}
    for client in (operator, admin):
        assert struct_to_dict(client.get_task("report").params) == REPORT
        got = client.get_job(run.job_id)
        assert struct_to_dict(got.params_override) == {"env": {"REGION": "secret-region"}}


def test_a_configuration_file_declares_overridable_params(admin: Client) -> None:
    item = {"name": "from-file", "handler": "shell", "params": REPORT}
    apply_config(admin, parse_config({"tasks": [{**item, "overridable_params": ["env"]}]}))
    assert list(admin.get_task("from-file").overridable_params) == ["env"]
    with pytest.raises(ConfigError, match=r"tasks\[0\]\.overridable_params: expected an array"):
        parse_config({"tasks": [{**item, "overridable_params": "env"}]})


# RFC 7396, appendix A: target, patch, result.
RFC_7396_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_7396_EXAMPLES)
def test_the_override_is_a_json_merge_patch(target: object, patch: object, result: object) -> None:
    assert merge_patch(target, patch) == result


@pytest.mark.parametrize(
    ("patch", "paths"),
    [
        ({"env": {"REGION": "eu", "A": None}}, ["env.REGION", "env.A"]),
        ({"env": {}}, ["env"]),
        ({"kwargs": {"opts": {"limit": 5}}, "argv": ["x"]}, ["kwargs.opts.limit", "argv"]),
    ],
)
def test_the_paths_an_override_sets_are_its_leaves(patch: dict[str, Any], paths: list[str]) -> None:
    assert list(set_paths(patch)) == paths
