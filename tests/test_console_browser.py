"""The console end to end in headless Chromium (Debian's ``chromium`` package, driven by
Playwright), on a real ``tickwork serve`` with access control and its embedded worker.

Each page's screenshot is written to ``test-artifacts/console/`` (see console_harness).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console_harness import ARTIFACTS, Console, console_server
from tests.harness import wait_for
from tickwork import Client, SkipReason

CHROMIUM = Path("/usr/bin/chromium")
pytest.importorskip("playwright.sync_api", reason="the console extra: playwright")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium package (installed by .ci/run)"
)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    env = {"SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT": "2"}
    with console_server(tmp_path_factory.mktemp("browser"), env) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def admin(console: Console) -> Iterator[Client]:
    with Client(console.server.address, token=console.tokens["admin"]) as tw:
        yield tw


def signed_in(browser: Browser, console: Console, role: str, **options: object) -> Page:
    """A new browser context signed in with ``role``'s token, on the overview."""
    context = browser.new_context(**options)  # type: ignore[arg-type]
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.goto(console.url + "signin")
    page.fill("#token", console.tokens[role])
    page.click("button:has-text('Sign in')")
    expect(page.locator("h1")).to_have_text("Overview")
    return page


def shot(page: Page, name: str) -> Path:
    """Write the page's full screenshot as ``test-artifacts/console/NAME.png``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def test_a_viewer_sees_the_overview_with_the_worker_active(
    browser: Browser, console: Console, admin: Client
) -> None:
    admin.create_task("nightly-report", "shell", {"argv": ["echo", "report"]})
    admin.create_schedule("every-10-minutes", ["nightly-report"], cron="*/10 * * * *")
    page = signed_in(browser, console, "viewer")
    workers = page.locator("section", has=page.locator("#workers-h"))
    expect(workers.locator("tbody tr")).to_have_count(1)
    expect(workers.locator(".pill-active")).to_have_text("active")
    expect(page.locator("section", has=page.locator("#queue-h"))).to_contain_text("manual lane")
    expect(page.locator("section", has=page.locator("#due-h"))).to_contain_text("every-10-minutes")
    shot(page, "overview")
    phone = signed_in(browser, console, "viewer", viewport={"width": 390, "height": 844})
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the overview is {width} px wide at a phone's 390"
    shot(phone, "overview-phone")
    # Keyboard: the skip link is the first stop and leads to the content.
    phone.keyboard.press("Tab")
    assert phone.evaluate("document.activeElement.textContent") == "Skip to content"


def test_an_operator_runs_a_task_and_watches_its_output_arrive(
    browser: Browser, console: Console, admin: Client
) -> None:
    script = "echo first line; sleep 6; echo second line; sleep 1; echo all done"
    task = admin.create_task("slow-echo", "shell", {"argv": ["sh", "-c", script]})
    page = signed_in(browser, console, "operator")
    page.goto(console.url + f"tasks/{task.id}")
    shot(page, "task-before-run")
    page.click("button:has-text('Run now')")
    expect(page.locator("h1")).to_contain_text("Job")
    output = page.locator("[data-job-output]")
    # The output arrives while the job runs: the first line without the last, no reload.
    page.wait_for_function(
        "() => { const t = document.querySelector('[data-job-output]').textContent;"
        " return t.includes('first line') && !t.includes('all done'); }"
    )
    expect(page.locator("[data-job-status] .pill")).to_have_text("running")
    shot(page, "job-running")
    overview = page.context.new_page()
    overview.goto(console.url)
    running = overview.locator("section", has=overview.locator("#running-h"))
    expect(running).to_contain_text("slow-echo")
    expect(running.locator("[data-watch-job]")).to_have_text("first line")
    shot(overview, "overview-running")
    overview.close()
    expect(output).to_contain_text("all done", timeout=30_000)
    expect(page.locator("[data-job-status] .pill")).to_have_text("succeeded")
    expect(page.locator("button:has-text('Abort')")).to_be_hidden()
    assert "second line" in output.text_content()  # type: ignore[operator]
    shot(page, "job-done")
    page.goto(console.url + f"tasks/{task.id}")
    expect(page.locator(".picture figcaption")).to_contain_text("1 finished jobs")
    shot(page, "task")


def test_an_admin_sees_the_cron_preview_follow_the_expression_before_saving(
    browser: Browser, console: Console, admin: Client
) -> None:
    admin.create_task("spring-task", "shell", {"argv": ["true"]})
    page = signed_in(browser, console, "admin")
    page.goto(console.url + "schedules/new")
    page.fill("#name", "spring-forward")
    # 02:30 on 28 March: in Berlin 2027-03-28 02:30 does not exist (DST gap).
    page.fill("#timezone", "Europe/Berlin")
    page.fill("#cron", "30 2 28 3 *")
    preview = page.locator("[data-cron-preview]")
    expect(preview.locator("[data-cron-description]")).to_contain_text("02:30 AM")
    expect(preview).to_contain_text("2027-03-28 03:00:00 CEST")
    expect(preview).to_contain_text("DST gap")
    shot(page, "schedule-form-preview")
    page.fill("#timezone", "America/New_York")
    expect(preview).to_contain_text("2027-03-28 02:30:00 EDT")
    expect(preview).not_to_contain_text("DST gap")
    # An invalid zone, then an invalid expression: the server's message, naming the field.
    page.fill("#timezone", "Mars/Olympus")
    expect(preview.locator("[data-cron-error]")).to_contain_text("timezone")
    page.fill("#timezone", "Europe/Berlin")
    page.fill("#cron", "61 * * * *")
    expect(preview.locator("[data-cron-error]")).to_contain_text("minute")
    shot(page, "schedule-form-invalid")
    page.check("label:has-text('spring-task') input")
    page.click("button:has-text('Create')")
    expect(page.locator("#form-error")).to_contain_text("minute")
    assert "spring-forward" not in {s.name for s in admin.list_schedules()}
    # Fixed, it saves; the schedule's page shows the DST note among the next fire times.
    page.fill("#cron", "30 2 28 3 *")
    expect(preview).to_contain_text("DST gap")
    page.click("button:has-text('Create')")
    expect(page.locator("h1")).to_have_text("Schedule spring-forward")
    expect(page.locator("section", has=page.locator("#next-h"))).to_contain_text("DST gap")
    shot(page, "schedule")
    assert "spring-forward" in {s.name for s in admin.list_schedules()}


def test_a_viewers_run_now_is_refused_and_no_job_appears(
    browser: Browser, console: Console, admin: Client
) -> None:
    admin.create_task("viewer-target", "shell", {"argv": ["true"]})
    page = signed_in(browser, console, "viewer")
    page.goto(console.url + "tasks")
    row = page.locator("tr", has=page.locator("a", has_text=re.compile("^viewer-target$")))
    with page.expect_response(re.compile(r"/tasks/\d+/run$")) as answer:
        row.locator("button:has-text('Run now')").click()
    assert answer.value.status == 403
    expect(page.locator(".error")).to_contain_text("PERMISSION_DENIED")
    shot(page, "viewer-refused")
    assert admin.list_jobs("viewer-target") == []


def test_stored_markup_and_ansi_escapes_render_as_text(
    browser: Browser, console: Console, admin: Client
) -> None:
    name = "<script>window.pwned=1</script>"
    script = r"printf '<script>window.pwned=2</script>\n\033[31mred\033[0m <b>bold</b>\n'"
    admin.create_task(name, "shell", {"argv": ["sh", "-c", script]}, description="<i>x</i>")
    [run] = admin.run(name)
    admin.wait(run.job_id, timeout=30)
    page = signed_in(browser, console, "viewer")
    for path in (f"jobs/{run.job_id}", "tasks", "jobs", ""):
        page.goto(console.url + path)
        assert page.evaluate("window.pwned") is None, path
        assert page.locator("main script, main b, main i").count() == 0, path
    page.goto(console.url + f"jobs/{run.job_id}")
    output = page.locator("[data-job-output]").text_content() or ""
    assert "<script>window.pwned=2</script>" in output
    assert "\\x1b[31mred\\x1b[0m <b>bold</b>" in output
    expect(page.locator("h1")).to_contain_text(name)
    shot(page, "job-escaped")


def test_the_disabled_pill_tells_the_failure_count_after_an_auto_disable(
    browser: Browser, console: Console, admin: Client
) -> None:
    admin.create_task("always-fails", "shell", {"argv": ["sh", "-c", "echo boom >&2; exit 3"]})
    admin.create_schedule("every-second", ["always-fails"], cron="* * * * * *")
    wait_for(
        lambda: not admin.get_task("always-fails").enabled,
        timeout_s=60,
        what="the auto-disable",
    )
    wait_for(
        lambda: any(
            r.skip_reason == SkipReason.SKIP_REASON_TASK_DISABLED
            for f in admin.list_fires("every-second", limit=5)
            for r in f.runs
        ),
        timeout_s=30,
        what="a fire skipped because the task is disabled",
    )
    admin.update_schedule("every-second", enabled=False)
    page = signed_in(browser, console, "viewer")
    page.goto(console.url + "tasks")
    row = page.locator("tr", has=page.locator("a", has_text=re.compile("^always-fails$")))
    pill = row.locator(".pill-disabled")
    expect(pill).to_contain_text("disabled (2)")
    title = pill.get_attribute("title") or ""
    assert title.count("2 consecutive failures") == 1, title  # the reason says it, once
    assert "exit" in title or "boom" in title or "3" in title, title
    pill.focus()  # keyboard users reach the tooltip's pill too
    shot(page, "tasks")
    page.goto(console.url)
    expect(page.locator("section", has=page.locator("#disabled-h"))).to_contain_text("always-fails")
    shot(page, "overview-after-failures")
    page.goto(console.url + "schedules")
    shot(page, "schedules")
    page.click("a:has-text('every-second')")
    history = page.locator("section", has=page.locator("#fires-h"))
    expect(history).to_contain_text("skipped, task disabled")
    expect(
        page.locator("section", has=page.locator("#strip-h")).locator("rect.fire-enqueued")
    ).not_to_have_count(0)
    shot(page, "schedule-fires")
