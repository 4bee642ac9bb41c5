"""The console's schedule controls on a real ``tickwork serve`` with access control, over
HTTP: pause with a note and resume, disable a task with a note and enable it, the schedule
form's catch-up, jitter, bounds, labels and start deadline fields (bad values refused with
the field named, nothing changed), the page's words for them and its jittered preview, a
fire's start beside its fire time, and a backfill's dry run and run."""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Iterator

import pytest

from tests.console_harness import Console, Visitor, console_server
from tests.harness import wait_for
from tickwork import Client, InvalidArgument
from tickwork.console import format as fmt
from tickwork.jitter import stable_delay_s
from tickwork.v1.common_pb2 import Trigger

UTC = dt.UTC


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("controls")) as running:
        with Client(running.server.address, token=running.tokens["admin"]) as admin:
            admin.create_task("ctl-true", "shell", {"argv": ["true"]})
        yield running


def visitor(console: Console, role: str) -> Visitor:
    v = Visitor(console.port)
    assert v.sign_in(console.tokens[role]).status == 303
    return v


def admin(console: Console) -> Client:
    return Client(console.server.address, token=console.tokens["admin"])


def utc_text(moment: dt.datetime) -> str:
    """As a datetime-local field posts it: no zone, read as UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


def test_pause_with_a_note_and_until_then_resume(console: Console) -> None:
    with admin(console) as tw:
        made = tw.create_schedule("ctl-pause", ["ctl-true"], cron="0 2 * * *")
    v = visitor(console, "operator")
    page = v.get(f"/schedules/{made.id}")
    assert '<h2 id="pause-h">Pause</h2>' in page.body and "/resume" not in page.body
    csrf = page.csrf()
    until = (dt.datetime.now(UTC) + dt.timedelta(days=1)).replace(microsecond=0)
    # A past until and an unreadable one: refused naming the field, nothing paused.
    past = v.post(
        f"/schedules/{made.id}/pause",
        {"csrf": csrf, "note": "n", "until": utc_text(until - dt.timedelta(days=2))},
    )
    assert past.status == 400 and "paused_until" in past.body, past.body
    garbled = v.post(f"/schedules/{made.id}/pause", {"csrf": csrf, "until": "soon"})
    assert garbled.status == 400 and "until: give a time like" in garbled.body
    with admin(console) as tw:
        assert tw.get_schedule(made.id).enabled
    reply = v.post(
        f"/schedules/{made.id}/pause",
        {"csrf": csrf, "note": "disk <swap>", "until": utc_text(until)},
    )
    assert reply.status == 303 and reply.location == f"/schedules/{made.id}"
    with admin(console) as tw:
        paused = tw.get_schedule(made.id)
    assert not paused.enabled and paused.pause_note == "disk <swap>"
    assert paused.paused_until.ToDatetime(tzinfo=UTC) == until
    page = v.get(f"/schedules/{made.id}")
    assert "schedule ctl-pause paused until " in page.body
    assert re.search(
        r"Paused by operator-test at .*, until .*: disk &lt;swap&gt;</p>", page.body
    ), page.body
    assert f'action="/schedules/{made.id}/resume"' in page.body
    assert '<h2 id="pause-h">Change the pause</h2>' in page.body
    assert v.post(f"/schedules/{made.id}/resume", {"csrf": csrf}).status == 303
    with admin(console) as tw:
        resumed = tw.get_schedule(made.id)
    assert resumed.enabled and resumed.pause_note == ""
    assert resumed.next_run_time.seconds > 0
    assert "schedule ctl-pause resumed" in v.get(f"/schedules/{made.id}").body
    # A time with an offset is read with it (a typed time without one is UTC).
    berlin = until.astimezone(dt.timezone(dt.timedelta(hours=1))).isoformat()
    assert v.post(f"/schedules/{made.id}/pause", {"csrf": csrf, "until": berlin}).status == 303
    with admin(console) as tw:
        assert tw.get_schedule(made.id).paused_until.ToDatetime(tzinfo=UTC) == until
        tw.resume_schedule(made.id)
    # A viewer may not pause.
    viewer = visitor(console, "viewer")
    refused = viewer.post(f"/schedules/{made.id}/pause", {"csrf": viewer.csrf(), "note": "x"})
    assert refused.status == 403 and "PERMISSION_DENIED" in refused.body


def test_disable_a_task_with_a_note_and_until_then_enable(console: Console) -> None:
    with admin(console) as tw:
        task = tw.create_task("ctl-disable", "shell", {"argv": ["true"]})
    v = visitor(console, "operator")
    page = v.get(f"/tasks/{task.id}")
    assert f'action="/tasks/{task.id}/disable" class="stack"' in page.body
    assert page.body.count(f'action="/tasks/{task.id}/disable"') == 1
    csrf = page.csrf()
    until = (dt.datetime.now(UTC) + dt.timedelta(hours=6)).replace(microsecond=0)
    bad = v.post(f"/tasks/{task.id}/disable", {"csrf": csrf, "note": "x" * 4001})
    assert bad.status == 400 and "note" in bad.body, bad.body
    with admin(console) as tw:
        assert tw.get_task(task.id).enabled
    reply = v.post(
        f"/tasks/{task.id}/disable",
        {
            "csrf": csrf,
            "note": "vendor outage",
            "until": utc_text(until),
            "next": page_path(task.id),
        },
    )
    assert reply.status == 303 and reply.location == page_path(task.id)
    with admin(console) as tw:
        disabled = tw.get_task(task.id)
    assert not disabled.enabled and disabled.disable_note == "vendor outage"
    assert disabled.disabled_until.ToDatetime(tzinfo=UTC) == until
    page = v.get(page_path(task.id))
    assert f"ctl-disable: disabled until {fmt.clock(until)}" in page.body
    assert re.search(r"vendor outage; disabled by operator-test at .*, until ", page.body)
    assert 'id="disable-h"' not in page.body
    assert v.post(f"/tasks/{task.id}/enable", {"csrf": csrf}).status == 303
    with admin(console) as tw:
        enabled = tw.get_task(task.id)
    assert enabled.enabled and enabled.disable_note == ""


def page_path(task_id: int) -> str:
    return f"/tasks/{task_id}"


def full_form(
    csrf: str, name: str, task_id: int, **changes: str | list[str]
) -> dict[str, str | list[str]]:
    with_every_field: dict[str, str | list[str]] = {
        "csrf": csrf,
        "name": name,
        "cron": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "catch_up_policy": "RUN_ALL",
        "catch_up_window_seconds": "3600",
        "max_catch_up_runs": "7",
        "catch_up_on_resume": "on",
        "jitter_seconds": "600",
        "jitter_mode": "STABLE",
        "start_time": "2026-01-01T00:00",
        "end_time": "2099-01-01T00:00:00",
        "start_deadline_seconds": "90",
        "overlap_policy": "SKIP",
        "max_buffered": "0",
        "labels": "team=data\n\nowner = ops\n",
        "enabled": "on",
        "tasks": [str(task_id)],
    }
    with_every_field.update(changes)
    return with_every_field


@pytest.fixture()
def task_id(console: Console) -> int:
    """The id of the task every schedule here runs."""
    with admin(console) as tw:
        return tw.get_task("ctl-true").id


def test_the_form_sets_catch_up_jitter_bounds_labels_and_start_deadline(
    console: Console, task_id: int
) -> None:
    v = visitor(console, "admin")
    csrf = v.get("/schedules/new").csrf()
    refusals = {
        "jitter_seconds": ("90000", "schedule.jitter_seconds"),
        "end_time": ("2025-06-01T00:00", "schedule.end_time"),
        "catch_up_window_seconds": ("-1", "schedule.catch_up_window_seconds"),
        "max_catch_up_runs": ("20000", "schedule.max_catch_up_runs"),
        "labels": ("bad key=1", "labels"),
        "start_deadline_seconds": ("-5", "start_deadline_seconds"),
    }
    for key, (value, named) in refusals.items():
        reply = v.post("/schedules", full_form(csrf, "ctl-form", task_id, **{key: value}))
        assert reply.status == 400, (key, reply.status)
        error = re.search(r'id="form-error">(.*?)</p>', reply.body)
        assert error and named in html.unescape(error.group(1)), (key, reply.body[:3000])
    unreadable = {
        "jitter_seconds": "lots",
        "start_time": "tomorrow",
        "labels": "no equals sign",
        "max_catch_up_runs": "2.5",
    }
    for key, value in unreadable.items():
        reply = v.post("/schedules", full_form(csrf, "ctl-form", task_id, **{key: value}))
        assert reply.status == 400 and f"{key}: " in html.unescape(reply.body), key
        assert f'value="{value}"' in reply.body or value in reply.body  # kept in the form
    # Numbers and task ids the console cannot read, or the API refuses: named as typed.
    named_as_typed: list[tuple[dict[str, str | list[str]], str]] = [
        (
            {"cron": "", "interval_seconds": "abc"},
            "interval_seconds: give a whole number, got 'abc'",
        ),
        (
            {"cron": "", "interval_seconds": "99999999999999999999999"},
            "interval_seconds: must be between -9223372036854775808 and 9223372036854775807",
        ),
        ({"cron": "", "interval_seconds": "-5"}, "schedule.interval_seconds"),
        ({"max_buffered": "abc"}, "max_buffered: give a whole number, got 'abc'"),
        (
            {"max_buffered": "-5"},
            "schedule.max_buffered: must be between 0 (meaning 100) and 10,000, got -5",
        ),
        ({"tasks": ["abc"]}, "tasks: give task ids, got 'abc'"),
    ]
    for changes, named in named_as_typed:
        reply = v.post("/schedules", full_form(csrf, "ctl-form", task_id, **changes))
        assert reply.status == 400, (changes, reply.status)
        error = re.search(r'id="form-error">(.*?)</p>', reply.body)
        assert error and named in html.unescape(error.group(1)), (changes, error and error.group(1))
    with admin(console) as tw:
        assert "ctl-form" not in {s.name for s in tw.list_schedules()}
    reply = v.post("/schedules", full_form(csrf, "ctl-form", task_id))
    assert reply.status == 303, reply.body[:3000]
    with admin(console) as tw:
        made = tw.get_schedule("ctl-form")
    assert made.catch_up_window_seconds == 3600 and made.max_catch_up_runs == 7
    assert made.catch_up_on_resume and made.start_deadline_seconds == 90
    assert made.jitter_seconds == 600 and made.jitter_mode == 2  # STABLE
    assert made.start_time.ToDatetime(tzinfo=UTC) == dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert made.end_time.ToDatetime(tzinfo=UTC) == dt.datetime(2099, 1, 1, tzinfo=UTC)
    assert dict(made.labels) == {"team": "data", "owner": "ops"}
    edit = v.get(f"/schedules/{made.id}/edit").body
    for shown in (
        'name="catch_up_window_seconds" value="3600"',
        'name="max_catch_up_runs" value="7"',
        'name="jitter_seconds" value="600"',
        '<option value="STABLE" selected>',
        'name="start_time" value="2026-01-01T00:00:00"',
        'name="end_time" value="2099-01-01T00:00:00"',
        'name="start_deadline_seconds" value="90"',
        'name="catch_up_on_resume" checked',
        "owner=ops\nteam=data</textarea>",
    ):
        assert shown in edit, shown
    # A bad edit changes nothing; a good one clears the bounds, labels and window.
    bad = v.post(f"/schedules/{made.id}", full_form(csrf, "ctl-form", task_id, jitter_seconds="-1"))
    assert bad.status == 400 and "schedule.jitter_seconds" in bad.body
    with admin(console) as tw:
        assert tw.get_schedule(made.id).jitter_seconds == 600
    cleared = full_form(
        csrf,
        "ctl-form",
        task_id,
        catch_up_window_seconds="",
        start_time="",
        end_time="",
        labels="",
        jitter_seconds="0",
        jitter_mode="RANDOM",
        catch_up_on_resume="",
    )
    assert v.post(f"/schedules/{made.id}", cleared).status == 303
    with admin(console) as tw:
        saved = tw.get_schedule(made.id)
    assert saved.catch_up_window_seconds == 5  # the default again
    assert not saved.HasField("start_time") and not saved.HasField("end_time")
    assert dict(saved.labels) == {} and saved.jitter_seconds == 0
    assert not saved.catch_up_on_resume


def test_the_page_shows_jitter_bounds_catch_up_and_the_jittered_starts(console: Console) -> None:
    with admin(console) as tw:
        stable = tw.create_schedule(
            "ctl-stable",
            ["ctl-true"],
            cron="0 2 * * *",
            jitter_seconds=600,
            jitter_mode="STABLE",
            catch_up_policy="RUN_ALL",
            catch_up_window_seconds=7200,
            start_time=dt.datetime(2026, 1, 1, tzinfo=UTC),
            end_time=dt.datetime(2099, 1, 1, tzinfo=UTC),
            start_deadline_seconds=30,
            labels={"tier": "gold"},
        )
        randomly = tw.create_schedule(
            "ctl-random", ["ctl-true"], cron="0 3 * * *", jitter_seconds=45
        )
        plain = tw.create_schedule("ctl-plain", ["ctl-true"], cron="0 4 * * *")
    v = visitor(console, "viewer")
    body = v.get(f"/schedules/{stable.id}").body
    delay = stable_delay_s("ctl-stable", 600)
    assert f"<dd>{delay:g} s after each fire time (stable)</dd>" in body
    assert "<dd>run all (windows up to 7200 s old, at most 100 runs)</dd>" in body
    assert "<dd>from 2026-01-01 00:00:00 UTC until 2099-01-01 00:00:00 UTC (exclusive)</dd>" in body
    assert "not started 30 s after its fire time" in body
    assert "<code>tier=gold</code>" in body
    first = stable.next_run_time.ToDatetime(tzinfo=UTC)
    start = fmt.clock(first + dt.timedelta(seconds=delay))
    assert "<th>Starts (jitter)</th>" in body
    assert f"<td>{start} (+{delay:g} s)</td>" in body, body
    body = v.get(f"/schedules/{randomly.id}").body
    assert "<dd>up to 45 s after each fire time (random)</dd>" in body
    first = randomly.next_run_time.ToDatetime(tzinfo=UTC)
    spread = f"<td>{fmt.clock(first)} to {fmt.clock(first + dt.timedelta(seconds=45))}</td>"
    assert spread in body
    body = v.get(f"/schedules/{plain.id}").body
    assert "<dd>none</dd>" in body and "Starts (jitter)" not in body
    assert "<dd>skip (windows up to 5 s old)</dd>" in body
    # The preview keeps to the bounds: from a later start time, and before the end time.
    now = dt.datetime.now(UTC)
    end = now + dt.timedelta(days=3)
    with admin(console) as tw:
        later = tw.create_schedule(
            "ctl-later",
            ["ctl-true"],
            cron="0 2 * * *",
            start_time=dt.datetime(2099, 1, 1, tzinfo=UTC),
        )
        ending = tw.create_schedule("ctl-ending", ["ctl-true"], cron="0 2 * * *", end_time=end)
        ended = tw.create_schedule(
            "ctl-ended", ["ctl-true"], cron="0 2 * * *", end_time=now - dt.timedelta(days=1)
        )
    body = v.get(f"/schedules/{later.id}").body
    first_row = re.search(r'<tbody>\s*<tr><td><time datetime="([^"]+)"', body)
    assert first_row and first_row.group(1) == "2099-01-01T02:00:00+00:00", body
    body = v.get(f"/schedules/{ending.id}").body
    day = now.replace(hour=2, minute=0, second=0, microsecond=0)
    due = [day + dt.timedelta(days=n) for n in range(5)]
    expected = sum(1 for t in due if now < t < end)
    assert f"Next {expected} fire times" in body
    assert "No fire time before its end time." in v.get(f"/schedules/{ended.id}").body


def test_a_fire_shows_its_start_beside_its_fire_time(console: Console) -> None:
    with admin(console) as tw:
        made = tw.create_schedule(
            "ctl-each-second",
            ["ctl-true"],
            cron="* * * * * *",
            jitter_seconds=0.9,
            jitter_mode="STABLE",
        )
        try:
            [fire] = wait_for(
                lambda: [
                    f for f in tw.list_fires(made.id) if f.trigger == Trigger.TRIGGER_SCHEDULER
                ][:1],
                what="a scheduled fire of ctl-each-second",
            )
        finally:
            tw.pause_schedule(made.id, note="enough")
    assert fire.start_time != fire.fire_time
    body = visitor(console, "viewer").get(f"/schedules/{made.id}").body
    start = fmt.clock(fire.start_time)
    assert re.search(
        rf"{re.escape(fmt.clock(fire.fire_time))}</time><br><span class=\"hint\">starts "
        rf"<time datetime=\"[^\"]+\">{re.escape(start)}</time>",
        body,
    ), body


def test_a_backfill_dry_run_lists_the_windows_and_the_run_runs_them(console: Console) -> None:
    with admin(console) as tw:
        made = tw.create_schedule("ctl-hourly", ["ctl-true"], cron="0 * * * *")
    hour = dt.datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    span = {"from": utc_text(hour - dt.timedelta(hours=3)), "to": utc_text(hour)}
    v = visitor(console, "operator")
    csrf = v.get(f"/schedules/{made.id}").csrf()
    dry = v.post(f"/schedules/{made.id}/backfill", {"csrf": csrf, "dry_run": "on", **span})
    assert dry.status == 200, dry.body
    assert "3 windows, 3 to run, 0 already fired" in dry.body
    assert dry.body.count("<td>run</td>") == 3
    assert '<button type="submit">Run 3 windows</button>' in dry.body
    with admin(console) as tw:
        assert tw.list_fires(made.id) == []
    bad = v.post(
        f"/schedules/{made.id}/backfill",
        {"csrf": csrf, "dry_run": "on", "from": span["to"], "to": span["from"]},
    )
    assert bad.status == 400 and "INVALID_ARGUMENT" in bad.body
    ran = v.post(f"/schedules/{made.id}/backfill", {"csrf": csrf, **span})
    assert ran.status == 303 and ran.location == f"/schedules/{made.id}"
    assert "backfill of ctl-hourly: 3 windows run, 0 already fired" in v.get(ran.location).body
    with admin(console) as tw:
        fires = tw.list_fires(made.id)
    assert sorted(f.fire_time.ToDatetime(tzinfo=UTC) for f in fires) == [
        hour - dt.timedelta(hours=n) for n in (3, 2, 1)
    ]
    assert {f.trigger for f in fires} == {Trigger.TRIGGER_BACKFILL}
    again = v.post(f"/schedules/{made.id}/backfill", {"csrf": csrf, "dry_run": "on", **span})
    assert "3 windows, 0 to run, 3 already fired" in again.body
    assert "Run 0" not in again.body and again.body.count("already fired (fire ") == 3
    viewer = visitor(console, "viewer")
    refused = viewer.post(
        f"/schedules/{made.id}/backfill", {"csrf": viewer.csrf(), "dry_run": "on", **span}
    )
    assert refused.status == 403


def test_a_time_outside_the_years_1_to_9999_in_utc_is_refused_naming_the_field(
    console: Console,
) -> None:
    """9999-12-31T23:59:59-14:00 is a valid local time whose UTC instant is past what a
    Timestamp holds: refused naming the field (console 400, SDK InvalidArgument), never a
    500 or an OverflowError; nothing changes."""
    late = "9999-12-31T23:59:59-14:00"
    with admin(console) as tw:
        made = tw.create_schedule("ctl-late", ["ctl-true"], cron="0 2 * * *")
        task = tw.get_task("ctl-true")
        with pytest.raises(InvalidArgument, match=r"until: .* outside the years 1 to 9999"):
            tw.pause_schedule(made.id, until=dt.datetime.fromisoformat(late))
    v = visitor(console, "admin")
    csrf = v.get(f"/schedules/{made.id}").csrf()
    paused = v.post(f"/schedules/{made.id}/pause", {"csrf": csrf, "until": late})
    assert paused.status == 400 and "outside the years 1 to 9999" in paused.body, paused.body
    disabled = v.post(f"/tasks/{task.id}/disable", {"csrf": csrf, "until": late})
    assert disabled.status == 400 and "outside the years 1 to 9999" in disabled.body
    with admin(console) as tw:
        assert tw.get_schedule(made.id).enabled and tw.get_task(task.id).enabled
