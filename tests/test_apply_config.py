"""tickwork.apply: TOML parsing and validation (pure), and apply_config's upsert by name
against a real service (ConfigService.ApplyConfig), on SQLite and PostgreSQL."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tickwork import Client
from tickwork.apply import (
    ConfigError,
    ScheduleSpec,
    TaskSpec,
    apply_config,
    config_request,
    load_config,
    parse_config,
)
from tickwork.errors import InvalidArgument, NotFound
from tickwork.structs import struct_to_dict
from tickwork.v1.schedule_pb2 import CatchUpPolicy

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tickwork.toml"
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    """The error lines (key: message) load_config reports for ``text``."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return [f"{key}: {msg}" if key else msg for key, msg in info.value.problems]


# -- parsing ------------------------------------------------------------------------------


def test_example_config_loads() -> None:
    config = load_config(REPO / "examples" / "tickwork.toml")
    assert [t.name for t in config.tasks] == ["backup-database", "health-check", "disk-report"]
    assert [s.name for s in config.schedules] == ["nightly-backup", "every-10s"]
    backup = config.tasks[0]
    assert backup.handler == "python"
    assert backup.params["callable"] == "examples.backup:backup_database"
    assert (backup.max_attempts, backup.backoff_base_seconds) == (3, 60.0)
    nightly, every = config.schedules
    assert (nightly.cron, nightly.timezone, nightly.catch_up_policy) == (
        "0 2 * * *",
        "Europe/Berlin",
        "RUN_ONCE",
    )
    assert every.cron == "*/10 * * * * *"
    assert every.tasks == ("health-check",)


def test_defaults_fill_in(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """
            [[tasks]]
            name = "t"
            handler = "shell"

            [[schedules]]
            name = "s"
            interval_seconds = 30
            tasks = ["t"]
            """,
        )
    )
    assert config.tasks == (TaskSpec(name="t", handler="shell"),)
    task = config.tasks[0]
    assert (task.task_priority, task.timeout_seconds, task.max_attempts) == (100, 0.0, 1)
    assert (task.backoff_base_seconds, task.backoff_cap_seconds) == (10.0, 600.0)
    assert task.enabled is None  # unmanaged unless the file says
    assert config.schedules == (
        ScheduleSpec(name="s", tasks=("t",), interval_seconds=30, timezone="UTC"),
    )
    assert config.source == str(tmp_path / "tickwork.toml")


def test_full_task_and_schedule(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """
            [[tasks]]
            name = "health-check"
            handler = "shell"
            params = { argv = ["sh", "-c", "echo ok"], env = { A = "1" } }
            task_priority = 120
            timeout_seconds = 30.5
            retry = { max_attempts = 3, backoff_base_seconds = 5, backoff_cap_seconds = 60 }
            enabled = false
            description = "d"

            [[schedules]]
            name = "every-10s"
            cron = "*/10   * * * * *"
            timezone = "Europe/Berlin"
            catch_up_policy = "run_once"
            tasks = ["health-check"]
            enabled = true
            description = "every ten seconds"
            """,
        )
    )
    assert config.tasks[0] == TaskSpec(
        name="health-check",
        handler="shell",
        params={"argv": ["sh", "-c", "echo ok"], "env": {"A": "1"}},
        description="d",
        task_priority=120,
        timeout_seconds=30.5,
        max_attempts=3,
        backoff_base_seconds=5.0,
        backoff_cap_seconds=60.0,
        enabled=False,
    )
    schedule = config.schedules[0]
    assert schedule.cron == "*/10 * * * * *"  # whitespace normalised like the server does
    assert schedule.catch_up_policy == "RUN_ONCE"
    assert schedule.enabled is True


def test_cron_wins_over_an_interval(tmp_path: Path) -> None:
    """Both given: accepted, as by the API; the cron expression is what is sent."""
    config = load_config(
        write(
            tmp_path,
            '[[schedules]]\nname = "s"\ncron = "* * * * *"\ninterval_seconds = 5\ntasks = ["a"]',
        )
    )
    sent = config_request(config).schedules[0].schedule
    assert (sent.cron_expression, sent.interval_seconds) == ("* * * * *", 0)


def test_empty_file_is_an_empty_config(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""))
    assert (config.tasks, config.schedules) == ((), ())


THREE_TASKS = """
[[tasks]]
name = "a"
handler = "shell"
[[tasks]]
name = "b"
handler = "shell"
[[tasks]]
name = "c"
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (THREE_TASKS, "tasks[2].handler: required"),
        ('[[tasks]]\nhandler = "shell"', "tasks[0].name: required"),
        ('[[tasks]]\nname = " "\nhandler = "shell"', "tasks[0].name: must not be empty"),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\ntask_priority = "high"',
            "tasks[0].task_priority: expected an integer, got string 'high'",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\ntask_priority = true',
            "tasks[0].task_priority: expected an integer, got boolean True",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\ntask_priority = 99999999999999999999',
            "tasks[0].task_priority: must be between -2147483648 and 2147483647, got "
            "99999999999999999999",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nmemory_limit_bytes = 9223372036854775808',
            "tasks[0].memory_limit_bytes: must be between -9223372036854775808 and "
            "9223372036854775807, got 9223372036854775808",
        ),
        (
            '[[schedules]]\nname = "s"\ninterval_seconds = 99999999999999999999\ntasks = ["a"]',
            "schedules[0].interval_seconds: must be between -9223372036854775808 and "
            "9223372036854775807",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nparams = ["x"]',
            "tasks[0].params: expected a table, got array ['x']",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nenabled = "yes"',
            "tasks[0].enabled: expected true or false, got string 'yes'",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\ntimeout_seconds = -1',
            "tasks[0].timeout_seconds: must be >= 0",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nretries = 3',
            "tasks[0].retries: unknown key",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nretry = { attempts = 3 }',
            "tasks[0].retry.attempts: unknown key",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nretry = { max_attempts = 0 }',
            "tasks[0].retry.max_attempts: must be between 1 and 100, got 0",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nretry = { backoff_cap_seconds = 0 }',
            "tasks[0].retry.backoff_cap_seconds: must be > 0 seconds",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\n[[tasks]]\nname = "a"\nhandler = "x"',
            "tasks[1].name: duplicate name 'a' (also tasks[0])",
        ),
        ('[[task]]\nname = "a"', "task: unknown key (expected tasks, schedules, notifiers)"),
        ('tasks = "a"', "tasks: expected an array of tables ([[tasks]])"),
        ('[[schedules]]\nname = "s"\ntasks = ["a"]', "schedules[0]: give cron or interval_seconds"),
        (
            '[[schedules]]\nname = "s"\ninterval_seconds = 0\ntasks = ["a"]',
            "schedules[0].interval_seconds: must be at least 1, got 0",
        ),
        (
            '[[schedules]]\nname = "s"\ninterval_seconds = 1.5\ntasks = ["a"]',
            "schedules[0].interval_seconds: expected an integer, got float 1.5",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = " "\ntasks = ["a"]',
            "schedules[0].cron: must not be empty",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntimezone = "Mars/Base"\ntasks = ["a"]',
            "schedules[0].timezone: unknown IANA time zone 'Mars/Base'",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ncatch_up_policy = "ALWAYS"\ntasks = ["a"]',
            "schedules[0].catch_up_policy: expected one of SKIP, RUN_ONCE, RUN_ALL, got 'ALWAYS'",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\noverlap_policy = "SOMETIMES"\n'
            'tasks = ["a"]',
            "schedules[0].overlap_policy: expected one of SKIP, BUFFER_ONE, BUFFER_ALL, REPLACE,"
            " ALLOW, got 'SOMETIMES'",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\nmax_buffered = 10001\ntasks = ["a"]',
            "schedules[0].max_buffered: must be between 0 (meaning 100) and 10000, got 10001",
        ),
        ('[[schedules]]\nname = "s"\ncron = "@daily"', "schedules[0].tasks: required"),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntasks = ["a"]\nlabels = { owner = 1 }',
            "schedules[0].labels.owner: expected a string, got integer 1",
        ),
        (
            '[[tasks]]\nname = "a"\nhandler = "shell"\nlabels = "team-a"',
            "tasks[0].labels: expected a table, got string 'team-a'",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntasks = []',
            "schedules[0].tasks: name at least one task",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntasks = "a"',
            "schedules[0].tasks: expected an array of task names, got 'a'",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntasks = ["a", "a"]',
            "schedules[0].tasks: a task is named twice",
        ),
        (
            '[[schedules]]\nname = "s"\ncron = "@daily"\ntasks = ["a"]\nevery = 3',
            "schedules[0].every: unknown key",
        ),
    ],
)
def test_validation_names_the_key(tmp_path: Path, text: str, expected: str) -> None:
    problems = problems_of(tmp_path, text)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_reported(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """
        [[tasks]]
        name = "a"
        [[tasks]]
        handler = "shell"
        task_priority = "x"
        [[schedules]]
        name = "s"
        tasks = ["a"]
        """,
    )
    assert [p.split(":")[0] for p in problems] == [
        "tasks[0].handler",
        "tasks[1].name",
        "tasks[1].task_priority",
        "schedules[0]",
    ]


def test_config_error_is_an_invalid_argument(tmp_path: Path) -> None:
    path = write(tmp_path, THREE_TASKS)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert isinstance(err, InvalidArgument)
    assert isinstance(err, ValueError)
    assert err.key == "tasks[2].handler"
    assert err.details == "tasks[2].handler: required"
    assert str(err) == f"{path}: tasks[2].handler: required"


def test_invalid_toml(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, '[[tasks]]\nname = "a\n')
    assert len(problems) == 1
    assert problems[0].startswith("invalid TOML: ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.toml")
    assert "cannot read" in info.value.details


def test_parse_config_takes_a_decoded_dict() -> None:
    config = parse_config({"tasks": [{"name": "a", "handler": "shell"}]})
    assert config.tasks[0].name == "a"
    assert config.source == "<config>"


# -- apply_config against a real service ---------------------------------------------------


CONFIG = """
[[tasks]]
name = "health-check"
handler = "shell"
params = { argv = ["sh", "-c", "echo ok"], timeout_seconds = 5 }
retry = { max_attempts = 3 }

[[tasks]]
name = "report"
handler = "shell"
params = { argv = ["true"] }

[[schedules]]
name = "every-10s"
cron = "*/10 * * * * *"
tasks = ["report", "health-check"]
catch_up_policy = "RUN_ONCE"
"""


def apply(client: Client, tmp_path: Path, text: str, *, dry_run: bool = False) -> list[str]:
    report = apply_config(client, load_config(write(tmp_path, text)), dry_run=dry_run)
    return [str(c).splitlines()[0] for c in report.changes]


def test_apply_creates_then_reports_unchanged(api_client: Client, tmp_path: Path) -> None:
    assert apply(api_client, tmp_path, CONFIG) == [
        "task health-check: created",
        "task report: created",
        "schedule every-10s: created",
    ]
    schedule = api_client.get_schedule("every-10s")
    assert list(schedule.task_ids) == [
        api_client.get_task("report").id,
        api_client.get_task("health-check").id,
    ]
    assert schedule.catch_up_policy == CatchUpPolicy.CATCH_UP_POLICY_RUN_ONCE
    updated = schedule.update_time.ToDatetime()

    report = apply_config(api_client, load_config(write(tmp_path, CONFIG)))
    assert [c.action for c in report.changes] == ["unchanged"] * 3
    assert not report.changed
    assert report.summary() == "0 created, 0 updated, 3 unchanged"
    assert api_client.get_schedule("every-10s").update_time.ToDatetime() == updated


def test_apply_updates_only_what_differs(api_client: Client, tmp_path: Path) -> None:
    apply(api_client, tmp_path, CONFIG)
    changed = CONFIG.replace('"echo ok"', '"echo fine"').replace(
        "max_attempts = 3", "max_attempts = 4"
    )
    changed = changed.replace('cron = "*/10 * * * * *"', "interval_seconds = 60")
    assert apply(api_client, tmp_path, changed) == [
        "task health-check: updated (params, retry_policy.max_attempts)",
        "task report: unchanged",
        "schedule every-10s: updated (cron_expression, interval_seconds)",
    ]
    task = api_client.get_task("health-check")
    assert struct_to_dict(task.params)["argv"] == ["sh", "-c", "echo fine"]
    assert task.retry_policy.max_attempts == 4
    schedule = api_client.get_schedule("every-10s")
    assert (schedule.cron_expression, schedule.interval_seconds) == ("", 60)
    assert apply(api_client, tmp_path, changed)[-1] == "schedule every-10s: unchanged"


def test_apply_leaves_enabled_alone_unless_given(api_client: Client, tmp_path: Path) -> None:
    apply(api_client, tmp_path, CONFIG)
    api_client.update_task("report", enabled=False)  # e.g. auto-disabled after failures
    assert apply(api_client, tmp_path, CONFIG)[1] == "task report: unchanged"
    assert api_client.get_task("report").enabled is False
    managed = CONFIG.replace(
        'params = { argv = ["true"] }', 'params = { argv = ["true"] }\nenabled = true'
    )
    assert apply(api_client, tmp_path, managed)[1] == "task report: updated (enabled)"
    assert api_client.get_task("report").enabled is True


def test_apply_task_order_in_schedule_does_not_matter(api_client: Client, tmp_path: Path) -> None:
    apply(api_client, tmp_path, CONFIG)
    swapped = CONFIG.replace('["report", "health-check"]', '["health-check", "report"]')
    assert apply(api_client, tmp_path, swapped)[-1] == "schedule every-10s: unchanged"


def test_schedule_may_name_a_task_already_on_the_server(api_client: Client, tmp_path: Path) -> None:
    api_client.create_task("existing", "shell", {"argv": ["true"]})
    text = '[[schedules]]\nname = "s"\ninterval_seconds = 5\ntasks = ["existing"]'
    assert apply(api_client, tmp_path, text) == ["schedule s: created"]
    missing = text.replace('"existing"', '"missing"')
    with pytest.raises(NotFound, match=r"schedules\[0\] \(t\)\.task_names\[0\]: no task named"):
        apply(api_client, tmp_path, missing.replace('"s"', '"t"'))
