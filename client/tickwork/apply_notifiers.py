"""The ``[[notifiers]]`` tables of a configuration file, as Notifier messages (applied by
:func:`tickwork.apply.apply_config`, in the ApplyConfig transaction).

Example::

    [[notifiers]]
    name = "ops-hook"
    type = "webhook"                  # email | webhook | slack
    url = "https://hooks.example.com/tickwork"
    secret = "..."                    # HMAC-SHA256 key of the X-Tickwork-Signature header
    events = ["final_failure", "recovery", "auto_disabled"]   # the default
    every = false                     # true: every event, not only changes of state
    tasks = ["nightly-backup"]        # only these tasks' events (default: every task)

An email notifier takes ``to = ["ops@example.com"]`` (default: SMTP_TO) and sends through
the SMTP_* server. The server never returns a url or secret: whether one changed is the
server's answer (the change's fields ``url``, ``secret``), not a comparison made here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.v1 import notifier_pb2 as pb

TYPES = {
    "email": pb.NOTIFIER_TYPE_EMAIL,
    "webhook": pb.NOTIFIER_TYPE_WEBHOOK,
    "slack": pb.NOTIFIER_TYPE_SLACK,
}
EVENTS = {
    "final_failure": pb.NOTIFICATION_EVENT_FINAL_FAILURE,
    "recovery": pb.NOTIFICATION_EVENT_RECOVERY,
    "auto_disabled": pb.NOTIFICATION_EVENT_AUTO_DISABLED,
    "no_success": pb.NOTIFICATION_EVENT_NO_SUCCESS,
    "long_run": pb.NOTIFICATION_EVENT_LONG_RUN,
    "missed_fire": pb.NOTIFICATION_EVENT_MISSED_FIRE,
    "start_deadline": pb.NOTIFICATION_EVENT_START_DEADLINE,
    "no_active_worker": pb.NOTIFICATION_EVENT_NO_ACTIVE_WORKER,
    "worker_returned": pb.NOTIFICATION_EVENT_WORKER_RETURNED,
}
_KEYS = ("name", "type", "url", "secret", "to", "timeout_seconds", "events", "every", "tasks",
         "schedules")  # fmt: skip
_LISTS = ("to", "events", "tasks", "schedules")


@dataclass(frozen=True)
class NotifierSpec:
    """One ``[[notifiers]]`` table, as the Notifier message to put."""

    name: str
    message: pb.Notifier


def parse_notifiers(value: object, add_problem: Any) -> tuple[NotifierSpec, ...]:
    """The ``notifiers`` array of tables; each problem goes to ``add_problem(key, text)``
    naming its key (``notifiers[1].type``)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        add_problem("notifiers", "expected an array of tables ([[notifiers]])")
        return ()
    out = []
    for i, item in enumerate(value):
        spec = _notifier(f"notifiers[{i}]", item, add_problem)
        if spec is not None:
            out.append(spec)
    names = [s.name for s in out]
    for name in sorted({n for n in names if names.count(n) > 1}):
        add_problem("notifiers", f"the name {name!r} is declared twice")
    return tuple(out)


def _notifier(prefix: str, item: Mapping[str, Any], add_problem: Any) -> NotifierSpec | None:
    ok = True
    for key in item:
        if key not in _KEYS:
            add_problem(f"{prefix}.{key}", f"unknown key (expected one of {', '.join(_KEYS)})")
            ok = False
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        add_problem(f"{prefix}.name", "required: a non-empty string")
        ok = False
    kind = item.get("type")
    if kind not in TYPES:
        add_problem(f"{prefix}.type", f"expected one of {', '.join(TYPES)}, got {kind!r}")
        ok = False
    for key in ("url", "secret"):
        if key in item and not isinstance(item[key], str):
            add_problem(f"{prefix}.{key}", "expected a string")
            ok = False
    for key in _LISTS:
        if key in item and not (
            isinstance(item[key], list) and all(isinstance(v, str) for v in item[key])
        ):
            add_problem(f"{prefix}.{key}", "expected an array of strings")
            ok = False
    for i, event in enumerate(item.get("events") or ()):
        if event not in EVENTS:
            add_problem(f"{prefix}.events[{i}]", f"expected one of {', '.join(EVENTS)}")
            ok = False
    timeout = item.get("timeout_seconds", 0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        add_problem(f"{prefix}.timeout_seconds", "expected a number of seconds")
        ok = False
    if "every" in item and not isinstance(item["every"], bool):
        add_problem(f"{prefix}.every", "expected true or false")
        ok = False
    if not ok:
        return None
    message = pb.Notifier(
        name=str(name),
        type=TYPES[str(kind)],
        url=item.get("url", ""),
        secret=item.get("secret", ""),
        to=item.get("to", []),
        timeout_seconds=float(timeout),
        events=[EVENTS[e] for e in item.get("events", [])],
        every=item.get("every", False),
        tasks=item.get("tasks", []),
        schedules=item.get("schedules", []),
    )
    return NotifierSpec(str(name), message)
