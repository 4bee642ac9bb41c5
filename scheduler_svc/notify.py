"""How one event is delivered through one notifier: email (aiosmtplib, the SMTP_* server),
webhook (a JSON POST signed with HMAC-SHA256, RFC 2104) and Slack (an incoming webhook).

:func:`deliver` returns "" when the receiver took the event, else a one-line error that
names neither the URL nor a secret (both may hold credentials); it never raises. The
HTTP requests run on a thread (the standard library's urllib), never on the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import urllib.error
import urllib.request
from email.message import EmailMessage
from typing import Any

import aiosmtplib

from scheduler_svc.records import TaskRecord
from scheduler_svc.settings import SmtpSettings
from scheduler_svc.store.outbox import EventRecord, NotifierRecord
from scheduler_svc.values import EventKind, NotifierType

log = logging.getLogger(__name__)

#: The notifier the SMTP_* variables make: auto-disable emails to SMTP_TO, as ever.
SMTP_NOTIFIER = "smtp"
#: The header holding ``sha256=<hex HMAC-SHA256 of the body under the secret>``.
SIGNATURE_HEADER = "X-Tickwork-Signature"
#: The header holding the event id (also the body's ``id``): the same on every retry.
EVENT_ID_HEADER = "X-Tickwork-Event-Id"
#: A webhook or Slack request's timeout when the notifier sets none, seconds.
DEFAULT_TIMEOUT_S = 10.0

_TITLES = {
    EventKind.FINAL_FAILURE: "failed",
    EventKind.RECOVERY: "recovered",
    EventKind.AUTO_DISABLED: "was disabled",
    EventKind.NO_SUCCESS: "has not succeeded in time",
    EventKind.LONG_RUN: "is still running",
    EventKind.TEST: "test notification",
}


def smtp_notifier(smtp: SmtpSettings) -> NotifierRecord | None:
    """The notifier of the SMTP_* variables (None when email is off): every auto-disable
    to SMTP_TO. A notifier declared under the same name replaces it."""
    if not smtp.enabled:
        return None
    return NotifierRecord(
        name=SMTP_NOTIFIER, type=NotifierType.EMAIL, events=(EventKind.AUTO_DISABLED,), every=True
    )


def payload(event: EventRecord) -> dict[str, Any]:
    """The JSON body of a webhook: ``id`` (the event id, stable across retries), ``type``
    (an :class:`EventKind` value), ``occurred_at`` (ISO 8601, UTC), ``state_change``,
    ``task`` ({id, name}), ``schedule_id``, then the kind's fields (``job`` {id, status,
    attempt, trigger, error, started_at, finished_at, fire_time}, ``consecutive_failures``,
    ``failing_since``, ``reason``, ``notifier``)."""
    return {
        "id": event.event_id,
        "type": str(event.kind),
        "occurred_at": event.occurred_at.isoformat(),
        "state_change": event.state_change,
        "task": {"id": event.task_id, "name": event.task_name},
        "schedule_id": event.schedule_id,
        **event.details,
    }


def signature(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of ``body``
    keyed with ``secret`` (UTF-8)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def summary(event: EventRecord) -> str:
    """One line for people: the task, what happened, and the last error's first line."""
    if event.kind == EventKind.TEST:
        return f"tickwork: test notification through {event.details.get('notifier', '')!r}"
    special = _service_summary(event)
    if special:
        return special
    line = f"tickwork: task {event.task_name!r} {_TITLES.get(event.kind, str(event.kind))}"
    count = event.details.get("consecutive_failures")
    if event.kind == EventKind.AUTO_DISABLED and count:
        line += f" after {count} consecutive failures"
    error = str(event.details.get("job", {}).get("error", "")).strip()
    if error and event.kind != EventKind.RECOVERY:
        line += f": {error.splitlines()[0][:300]}"
    return line


def _service_summary(event: EventRecord) -> str:
    """The line of an event of a schedule or of the service, "" for a task's event."""
    d = event.details
    schedule = str(d.get("schedule", {}).get("name", ""))
    if event.kind == EventKind.MISSED_FIRE:
        count = int(d.get("missed_count", 0))
        times = d.get("fire_times") or [""]
        return (
            f"tickwork: schedule {schedule!r} missed {count} fire{'s' * (count != 1)}"
            f" (catch-up {d.get('catch_up_policy', '')}), the first at {times[0]}"
        )
    if event.kind == EventKind.START_DEADLINE:
        return (
            f"tickwork: task {event.task_name!r} has not started"
            f" {d.get('start_deadline_seconds', 0):g} s after its fire at"
            f" {d.get('job', {}).get('fire_time', '')} (schedule {schedule!r})"
        )
    if event.kind == EventKind.NO_ACTIVE_WORKER:
        count = int(d.get("waiting_jobs", 0))
        jobs = "1 ready job has" if count == 1 else f"{count} ready jobs have"
        return (
            f"tickwork: {jobs} waited over {d.get('lease_ttl_seconds', 0):g} s"
            " with no active worker"
        )
    if event.kind == EventKind.WORKER_RETURNED:
        return "tickwork: a worker is active again"
    return ""


async def deliver(notifier: NotifierRecord, event: EventRecord, smtp: SmtpSettings) -> str:
    """Send ``event`` through ``notifier`` now; "" when delivered, else the error."""
    try:
        if notifier.type == NotifierType.EMAIL:
            return await _email(notifier, event, smtp)
        body, headers = _http_request(notifier, event)
        timeout = float(notifier.config.get("timeout_seconds") or DEFAULT_TIMEOUT_S)
        url = str(notifier.config.get("url", ""))
        return await asyncio.to_thread(_post, url, body, headers, timeout)
    except Exception as exc:  # a notifier never stops the sender
        return f"{type(exc).__name__}: {exc}"[:500]


def _http_request(notifier: NotifierRecord, event: EventRecord) -> tuple[bytes, dict[str, str]]:
    headers = {"Content-Type": "application/json", "User-Agent": "tickwork"}
    if notifier.type == NotifierType.SLACK:
        return json.dumps({"text": summary(event)}).encode(), headers
    body = json.dumps(payload(event), separators=(",", ":")).encode()
    headers[EVENT_ID_HEADER] = event.event_id
    secret = str(notifier.config.get("secret", ""))
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    return body, headers


def _post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> str:
    """POST on this thread; "" on a 2xx answer. The error names no URL."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            answer.read(65536)
            return ""
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except urllib.error.URLError as err:
        return f"unreachable: {err.reason}"[:500]
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"


def auto_disable_message(smtp: SmtpSettings, task: TaskRecord, last_error: str) -> EmailMessage:
    """The email telling that ``task`` was disabled: names the task, count and last error."""
    return _auto_disable_email(
        smtp, smtp.recipients, task.name, task.id, task.consecutive_failure_count, last_error
    )


def _auto_disable_email(
    smtp: SmtpSettings,
    recipients: tuple[str, ...],
    name: str,
    task_id: int | None,
    count: int,
    last_error: str,
) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = smtp.sender
    msg["To"] = ", ".join(recipients)
    msg["Subject"] = f"[tickwork] task {name!r} disabled after {count} consecutive failures"
    msg.set_content(
        f"The task {name!r} (id {task_id}) failed {count} "
        "times in a row when run by the scheduler and has been disabled.\n\n"
        f"Last error:\n{last_error}\n\n"
        f"Re-enable it with: tickwork tasks enable {name}\n"
    )
    return msg


def _email_message(
    smtp: SmtpSettings, recipients: tuple[str, ...], event: EventRecord
) -> EmailMessage:
    job = event.details.get("job", {})
    if event.kind == EventKind.AUTO_DISABLED:
        count = int(event.details.get("consecutive_failures", 0))
        error = str(job.get("error", ""))
        return _auto_disable_email(smtp, recipients, event.task_name, event.task_id, count, error)
    msg = EmailMessage()
    msg["From"] = smtp.sender
    msg["To"] = ", ".join(recipients)
    msg["Subject"] = "[" + summary(event).replace(": ", "] ", 1)[:200]
    lines = [summary(event), "", f"Event id: {event.event_id}", f"At: {event.occurred_at}"]
    if job:
        lines += [f"Job: {job.get('id')} ({job.get('status')}, attempt {job.get('attempt')})"]
        if job.get("error"):
            lines += ["", "Error:", str(job["error"])]
    msg.set_content("\n".join(lines) + "\n")
    return msg


async def _email(notifier: NotifierRecord, event: EventRecord, smtp: SmtpSettings) -> str:
    if not smtp.host:
        return "no SMTP server: set SMTP_HOST"
    recipients = tuple(notifier.config.get("to") or ()) or smtp.recipients
    if not recipients:
        return "no recipients: set the notifier's to, or SMTP_TO"
    disabling = event.kind == EventKind.AUTO_DISABLED
    try:
        await aiosmtplib.send(
            _email_message(smtp, recipients, event),
            hostname=smtp.host,
            port=smtp.port,
            username=smtp.username or None,
            password=smtp.password or None,
            start_tls=smtp.starttls,
            use_tls=smtp.use_tls,
            timeout=smtp.timeout_s,
        )
    except Exception as exc:
        what = "auto-disable email failed" if disabling else "notification email failed"
        log.exception(what, extra={"task_id": event.task_id, "smtp_host": smtp.host})
        return f"{type(exc).__name__}: {exc}"[:500]
    if disabling:
        log.info("auto-disable email sent", extra={"task_id": event.task_id})
    return ""
