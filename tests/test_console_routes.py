"""The console without a browser, on a real ``tickwork serve`` with access control: every
route answers with the right status for no session, a viewer, an operator and an admin;
a POST without its CSRF token is refused and changes nothing; sessions and headers."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console_harness import Console, Visitor, console_server
from tests.harness import REPO, Proc, base_env, free_port, wait_for
from tickwork import Client, JobStatus


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("console")) as running:
        yield running


@pytest.fixture(scope="module")
def ids(console: Console) -> dict[str, int]:
    """A task, two schedules (one to delete) and a finished job, made through the API."""
    with Client(console.server.address, token=console.tokens["admin"]) as tw:
        task = tw.create_task("echo", "shell", {"argv": ["echo", "hi"]})
        nightly = tw.create_schedule("nightly", ["echo"], cron="0 2 * * *")
        [run] = tw.run("echo")
        tw.wait(run.job_id, timeout=30)
    return {"task": task.id, "schedule": nightly.id, "job": run.job_id}


def visitor(console: Console, role: str | None) -> Visitor:
    v = Visitor(console.port)
    if role is not None:
        assert v.sign_in(console.tokens[role]).status == 303
    return v


ROLES = (None, "viewer", "operator", "admin")


def get_routes(ids: dict[str, int]) -> list[str]:
    t, s, j = ids["task"], ids["schedule"], ids["job"]
    return [
        "/",
        "/schedules",
        "/schedules/new",
        f"/schedules/{s}",
        f"/schedules/{s}/edit",
        "/tasks",
        f"/tasks/{t}",
        "/jobs",
        f"/jobs?task=echo&status=SUCCEEDED&schedule={s}",
        f"/jobs/{j}",
    ]


@pytest.mark.parametrize("role", ROLES)
def test_every_page_answers_each_role(
    console: Console, ids: dict[str, int], role: str | None
) -> None:
    v = visitor(console, role)
    for path in get_routes(ids):
        reply = v.get(path)
        if role is None:
            assert reply.status == 303, path
            assert reply.location.startswith("/signin?next=%2F"), reply.location
        else:
            assert reply.status == 200, (path, reply.body[:500])
            assert "Sign out" in reply.body
    describe = v.get("/cron/describe?expression=0+2+*+*+*&timezone=Europe%2FBerlin")
    events = v.get(f"/jobs/{ids['job']}/events")
    if role is None:
        assert (describe.status, events.status) == (401, 401)
    else:
        assert describe.status == 200 and "At 02:00 AM" in describe.body
        assert events.status == 200
        assert events.headers["content-type"].startswith("text/event-stream")
        assert "event: job" in events.body and '"status": "SUCCEEDED"' in events.body
        assert events.body.rstrip().endswith("event: end\ndata: {}")
    static = ("/static/console.js", "/static/console.css", "/static/favicon.svg")
    for path in ("/signin", "/healthz", *static):
        assert v.get(path).status == 200, path
    assert '<link rel="icon" href="/static/favicon.svg"' in v.get("/signin").body
    # Unknown ids are 404 (the API's NOT_FOUND), an id beyond int64 is 400, never 500.
    unknown = {
        f"/tasks/{2**40}": 404,
        f"/jobs/{2**40}": 404,
        f"/schedules/{2**40}": 404,
        f"/tasks/{2**70}": 400,
        "/nowhere": 404,
    }
    for path, status in unknown.items():
        expected = 303 if role is None and path != "/nowhere" else status
        assert v.get(path).status == expected, path


Form = dict[str, str | list[str]]


def post_routes(ids: dict[str, int], role: str) -> list[tuple[str, Form, tuple[int, int, int]]]:
    """(path, form, expected status for viewer, operator, admin)."""
    t, s, j = ids["task"], ids["schedule"], ids["job"]
    new: Form = {
        "name": f"made-by-{role}",
        "cron": "*/5 * * * *",
        "timezone": "UTC",
        "tasks": [str(t)],
        "enabled": "on",
    }
    edit: Form = {
        "name": "nightly",
        "cron": "0 3 * * *",
        "timezone": "UTC",
        "tasks": [str(t)],
        "enabled": "on",
    }
    now = dt.datetime.now(dt.UTC).replace(microsecond=0, tzinfo=None)
    backfill: Form = {
        "from": (now - dt.timedelta(days=2)).isoformat(),
        "to": now.isoformat(),
        "dry_run": "on",
    }
    return [
        (f"/tasks/{t}/run", {}, (403, 303, 303)),
        (f"/tasks/{t}/abort", {}, (403, 303, 303)),
        (f"/jobs/{j}/cancel", {}, (403, 409, 409)),  # the job has ended: not queued
        (f"/tasks/{t}/disable", {}, (403, 303, 303)),  # an operator may switch enabled
        (f"/tasks/{t}/enable", {}, (403, 303, 303)),
        ("/schedules", new, (403, 403, 303)),
        (f"/schedules/{s}", edit, (403, 403, 303)),
        (f"/schedules/{s}/disable", {}, (403, 303, 303)),
        (f"/schedules/{s}/enable", {}, (403, 303, 303)),
        (f"/schedules/{s}/trigger", {}, (403, 303, 303)),
        (f"/schedules/{s}/pause", {"note": f"paused by {role}"}, (403, 303, 303)),
        (f"/schedules/{s}/resume", {}, (403, 303, 303)),
        (f"/schedules/{s}/backfill", backfill, (403, 200, 200)),  # a dry run: a page
    ]


@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_every_action_answers_each_role(console: Console, ids: dict[str, int], role: str) -> None:
    v = visitor(console, role)
    csrf = v.csrf()
    column = ("viewer", "operator", "admin").index(role)
    for path, form, expected in post_routes(ids, role):
        reply = v.post(path, {**form, "csrf": csrf})
        assert reply.status == expected[column], (path, reply.status, reply.body[:800])
        if reply.status == 403:
            assert "PERMISSION_DENIED" in reply.body
    with Client(console.server.address, token=console.tokens["admin"]) as tw:
        names = {s.name for s in tw.list_schedules()}
        assert (f"made-by-{role}" in names) == (role == "admin")
        doomed = tw.create_schedule(f"doomed-{role}", ["echo"], interval_seconds=3600)
    reply = v.post(f"/schedules/{doomed.id}/delete", {"csrf": csrf})
    assert reply.status == (303 if role == "admin" else 403)


def test_a_post_without_a_session_or_its_csrf_token_is_refused(
    console: Console, ids: dict[str, int]
) -> None:
    anonymous = Visitor(console.port)
    admin = visitor(console, "admin")
    other = visitor(console, "admin")
    with Client(console.server.address, token=console.tokens["admin"]) as tw:
        jobs_before = len(tw.list_jobs("echo"))
        for path, form, _ in post_routes(ids, "nobody"):
            assert anonymous.post(path, {**form, "csrf": "x"}).status == 403, path
            refused = admin.post(path, form)
            assert refused.status == 403, path
            assert "CSRF" in refused.body
            # Another session's token is not this session's.
            assert admin.post(path, {**form, "csrf": other.csrf()}).status == 403, path
        assert len(tw.list_jobs("echo")) == jobs_before
        assert "nobody" not in {s.name for s in tw.list_schedules()}
        assert tw.get_task("echo").enabled
        assert tw.get_schedule(ids["schedule"]).pause_note != "paused by nobody"
    assert Visitor(console.port).post("/signout", {"csrf": "x"}).status == 403


def test_sign_in_exchanges_the_token_for_a_session_cookie(console: Console) -> None:
    v = Visitor(console.port)
    form = v.get("/signin")
    assert form.status == 200
    headers = form.headers
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["x-frame-options"] == "DENY"
    # Without the sign-in form's CSRF cookie and field: refused.
    bare = Visitor(console.port)
    assert bare.post("/signin", {"token": console.tokens["viewer"]}).status == 403
    assert (
        bare.post("/signin", {"token": console.tokens["viewer"], "csrf": form.csrf()}).status == 403
    )
    # A wrong token: 401, no session.
    wrong = v.post("/signin", {"csrf": form.csrf(), "token": "tw_not-a-token"})
    assert wrong.status == 401 and "does not know this token" in wrong.body
    assert "tickwork_session" not in v.cookies
    # The worker's token may not read: refused too.
    v2 = Visitor(console.port)
    assert v2.sign_in(console.tokens["worker"]).status == 401
    ok = Visitor(console.port)
    token = console.tokens["viewer"]
    reply = ok.sign_in(token)
    assert reply.status == 303 and reply.location == "/"
    [cookie] = [c for c in reply.set_cookies if c.startswith("tickwork_session=")]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert token not in cookie
    for page in ("/", "/tasks", "/jobs"):
        body = ok.get(page)
        assert token not in body.body and all(token not in v for v in body.headers.values())
    out = console.server.output()
    assert token not in out
    # Signing out ends the session on the server: the old cookie no longer works.
    old = dict(ok.cookies)
    assert ok.post("/signout", {"csrf": ok.csrf()}).status == 303
    stale = Visitor(console.port, cookies=old)
    assert stale.get("/").status == 303


def test_serve_prints_the_console_url_and_refuses_an_exposed_console(tmp_path: Path) -> None:
    def serve(name: str, **env: str) -> Proc:
        full = base_env(
            DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / (name + '.db')}",
            TICKWORK_LISTEN=f"127.0.0.1:{free_port()}",
            WORKER_IS_ENABLED="false",
            **env,
        )
        return Proc([sys.executable, "-m", "tickwork.cli", "serve"], full, tmp_path / f"{name}.log")

    exposed = serve("exposed", TICKWORK_CONSOLE_LISTEN=f"0.0.0.0:{free_port()}")
    assert exposed.popen.wait(60) == 2
    assert "TICKWORK_CONSOLE_LISTEN: refusing to serve the console on 0.0.0.0:" in exposed.output()
    exposed.stop()
    port = free_port()
    fine = serve("fine", TICKWORK_CONSOLE_LISTEN=f"127.0.0.1:{port}")
    try:
        wait_for(lambda: "tickwork console on" in fine.output(), timeout_s=30, what="console")
        assert f"tickwork console on http://127.0.0.1:{port}/" in fine.output()
        # No access control: signing in with no token opens a session.
        v = Visitor(port)
        assert "no access control" in v.get("/signin").body
        assert v.sign_in("").status == 303
        assert v.get("/").status == 200
    finally:
        fine.stop()
    off = serve("off", TICKWORK_CONSOLE_LISTEN="")
    try:
        wait_for(lambda: "tickwork serving on" in off.output(), timeout_s=30, what="serve")
        assert "console" not in off.output()
    finally:
        off.stop()


def test_the_console_command_serves_a_remote_api(console: Console, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "tickwork.cli", "console", "--server", console.server.address]
    proc = Proc([*argv, "--listen", f"127.0.0.1:{port}"], base_env(), tmp_path / "console.log")
    try:
        wait_for(lambda: "tickwork console on" in proc.output(), timeout_s=30, what="console")
        v = Visitor(port)
        assert v.sign_in(console.tokens["viewer"]).status == 303
        page = v.get("/tasks")
        assert page.status == 200 and re.search(r">echo</a>", page.body)
    finally:
        assert proc.stop() == 0
    # The API has tokens: listening on every address is allowed; a busy port is not.
    busy = subprocess.run(
        [*argv, "--listen", f"127.0.0.1:{console.port}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=base_env(),
        cwd=REPO,
    )
    assert busy.returncode == 2
    assert "cannot listen on" in busy.stderr


def test_the_job_page_shows_who_ran_it_and_its_labels(console: Console) -> None:
    with Client(console.server.address, token=console.tokens["operator"]) as tw:
        with Client(console.server.address, token=console.tokens["admin"]) as admin:
            admin.create_task("labelled", "shell", {"argv": ["true"]})
        [run] = tw.run("labelled", labels={"team": "data", "run": "7"})
        tw.wait(run.job_id, timeout=30)
    page = visitor(console, "viewer").get(f"/jobs/{run.job_id}")
    assert page.status == 200
    assert re.search(r"<dt>Requested by</dt><dd>operator-test</dd>", page.body), page.body
    assert "<code>run=7</code> <code>team=data</code>" in page.body


def test_the_job_page_says_when_the_start_of_the_output_was_not_kept(console: Console) -> None:
    cut = "Only the last 4,096 characters of output are kept"
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        admin.create_task("chatty", "shell", {"argv": ["sh", "-c", "seq 1 3000"]})
        admin.create_task("quiet", "shell", {"argv": ["echo", "one line"]})
        ended = [admin.wait(run.job_id, timeout=30) for run in admin.run("chatty", "quiet")]
    v = visitor(console, "viewer")
    long_page, short_page = (v.get(f"/jobs/{job.id}") for job in ended)
    assert cut in long_page.body and "2999\n3000" in long_page.body, long_page.body[-600:]
    assert cut not in short_page.body and "one line" in short_page.body


def test_the_schedule_page_shows_the_overlap_policy_and_each_fire(console: Console) -> None:
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        admin.create_task("held", "shell", {"argv": ["sleep", "30"]})
        schedule = admin.create_schedule(
            "held-nightly", ["held"], cron="0 4 * * *", overlap_policy="BUFFER_ALL", max_buffered=3
        )
    v = visitor(console, "operator")
    csrf = v.csrf()
    for _ in range(2):  # the second fire waits behind the first one's job
        reply = v.post(f"/schedules/{schedule.id}/trigger", {"csrf": csrf})
        assert reply.status == 303, reply.body
    page = visitor(console, "viewer").get(f"/schedules/{schedule.id}")
    assert page.status == 200
    assert "<dt>Overlap</dt><dd>buffer all (at most 3 waiting)</dd>" in page.body
    assert "pill-fire-buffered" in page.body and "pill-fire-enqueued" in page.body
    assert page.body.count("<td>manual</td>") == 2
    with Client(console.server.address, token=console.tokens["operator"]) as tw:
        tw.abort("held")  # the running job and the one waiting behind it
        jobs = [tw.wait(j.id, timeout=30) for j in tw.list_jobs(task="held")]
    assert len(jobs) == 2 and all(j.status != JobStatus.JOB_STATUS_QUEUED for j in jobs)


def test_the_schedule_page_shows_its_pause_note_and_the_task_page_its_disable(
    console: Console,
) -> None:
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        admin.create_task("paused-task", "shell", {"argv": ["true"]}, labels={"owner": "ops"})
        made = admin.create_schedule(
            "paused-nightly", ["paused-task"], cron="0 2 * * *", labels={"owner": "ops"}
        )
    with Client(console.server.address, token=console.tokens["operator"]) as tw:
        tw.pause_schedule("paused-nightly", note="disk swap <tonight>")
        task = tw.disable_task("paused-task", note="vendor outage")
    v = visitor(console, "viewer")
    page = v.get(f"/schedules/{made.id}")
    assert page.status == 200
    assert re.search(r"Paused by operator-test at .*: disk swap &lt;tonight&gt;</p>", page.body)
    assert "<code>owner=ops</code>" in page.body
    page = v.get(f"/tasks/{task.id}")
    assert re.search(r"vendor outage; disabled by operator-test at ", page.body), page.body


def test_the_overview_shows_when_a_failing_task_last_failed_and_succeeded(
    console: Console,
) -> None:
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        admin.create_task("wobbly", "shell", {"argv": ["sh", "-c", "exit 3"]})
        admin.create_schedule("wobbly-each-second", ["wobbly"], cron="* * * * * *")
        try:
            wait_for(
                lambda: admin.get_task("wobbly").consecutive_failure_count > 0,
                what="a scheduled failure of wobbly",
            )
        finally:
            admin.delete_schedule("wobbly-each-second")
    page = visitor(console, "viewer").get("/")
    assert page.status == 200
    assert re.search(
        r'wobbly</a>: \d+ consecutive failures?; last failure <time datetime="[^"]+">.*?'
        r"</time>, last success none kept</li>",
        page.body,
    ), page.body


def test_the_overview_names_each_queue_lane(console: Console) -> None:
    page = visitor(console, "viewer").get("/")
    assert page.status == 200
    lanes = re.findall(r"<dt>(\w+) lane</dt>", page.body)
    assert lanes == ["manual", "scheduler", "backfill"], lanes


def test_the_overview_lists_no_fire_due_at_or_after_a_schedule_s_end(console: Console) -> None:
    now = dt.datetime.now(dt.UTC)
    end = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=4)
    with Client(console.server.address, token=console.tokens["admin"]) as admin:
        admin.create_task("ends-task", "shell", {"argv": ["true"]})
        made = admin.create_schedule("ends-soon", ["ends-task"], cron="* * * * *", end_time=end)
    page = visitor(console, "viewer").get("/")
    row = rf'<a href="/schedules/{made.id}">ends-soon</a></td>\s*<td>(.*?)</td>'
    rows = re.findall(row, page.body)
    assert 1 <= len(rows) <= 4, rows  # the minutes before the end, never 12 into the hour


@pytest.mark.parametrize(
    ("query", "named"),
    [("status=BOGUS", "status: expected one of"), ("schedule=abc", "schedule: expected a")],
)
def test_a_jobs_filter_it_cannot_read_is_refused_naming_it(
    console: Console, query: str, named: str
) -> None:
    page = visitor(console, "viewer").get(f"/jobs?{query}")
    assert page.status == 400 and named in page.body, (page.status, page.body)
