"""Email to the system addresses when a task is auto-disabled (aiosmtplib).

A failed email is logged, never raised: notification must not stop the scheduler.
"""

from __future__ import annotations

import logging
from email.message import EmailMessage

import aiosmtplib

from scheduler_svc.records import TaskRecord
from scheduler_svc.settings import SmtpSettings

log = logging.getLogger(__name__)


def auto_disable_message(smtp: SmtpSettings, task: TaskRecord, last_error: str) -> EmailMessage:
    """The email telling that ``task`` was disabled: names the task, count and last error."""
    msg = EmailMessage()
    msg["From"] = smtp.sender
    msg["To"] = ", ".join(smtp.recipients)
    msg["Subject"] = (
        f"[tickwork] task {task.name!r} disabled after "
        f"{task.consecutive_failure_count} consecutive failures"
    )
    msg.set_content(
        f"The task {task.name!r} (id {task.id}) failed {task.consecutive_failure_count} "
        "times in a row when run by the scheduler and has been disabled.\n\n"
        f"Last error:\n{last_error}\n\n"
        f"Re-enable it with: tickwork tasks enable {task.name}\n"
    )
    return msg


async def send_auto_disable_email(smtp: SmtpSettings, task: TaskRecord, last_error: str) -> bool:
    """Send the auto-disable email; True when sent. Errors are logged and return False."""
    msg = auto_disable_message(smtp, task, last_error)
    try:
        await aiosmtplib.send(
            msg,
            hostname=smtp.host,
            port=smtp.port,
            username=smtp.username or None,
            password=smtp.password or None,
            start_tls=smtp.starttls,
            use_tls=smtp.use_tls,
            timeout=smtp.timeout_s,
        )
    except Exception:
        log.exception(
            "auto-disable email failed", extra={"task_id": task.id, "smtp_host": smtp.host}
        )
        return False
    log.info("auto-disable email sent", extra={"task_id": task.id})
    return True
