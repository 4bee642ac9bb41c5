"""Settings of the worker service, built once from the environment.

The worker's own variables (``WORKER_*``, WORKER_PASS_ENV among them) are read here only:
:func:`worker_seconds` is also how the scheduler service reads the three it shares
(WORKER_POLL_INTERVAL_SECONDS bounds its PollJob wait, WORKER_SHUTDOWN_GRACE_SECONDS and
WORKER_ABORT_GRACE_SECONDS the jobs' share of its stop, see :func:`job_finish_grace`). Every
error is an :class:`~tickwork.errors.InvalidSetting` whose details start with the variable or
field.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwork._channel import TlsConfig, resolve_token
from tickwork._requests import with_default_port
from tickwork.errors import InvalidArgument, InvalidSetting

__all__ = [
    "CLOSE_RESERVE_S",
    "DEFAULT_SERVER",
    "MAX_SLOTS",
    "REPORT_MARGIN_S",
    "WorkerSettings",
    "job_finish_grace",
    "worker_seconds",
]

DEFAULT_SERVER = "127.0.0.1:50051"
"""The scheduler service address a worker connects to when none is given."""
MAX_SLOTS = 256
"""The most slots (streams, jobs at once) one worker process runs."""
DEFAULT_SHUTDOWN_BOUND_S = 25.0
"""TICKWORK_SHUTDOWN_GRACE_SECONDS by default: SIGTERM to exit, below Kubernetes' 30 s."""
REPORT_MARGIN_S = 2.0
"""Seconds kept on stop, after an aborted job's abort grace, for its outcome to be sent and
recorded."""
CLOSE_RESERVE_S = 3.0
"""Seconds kept at the end of a stop for closing: streams, leases, the database."""


def stop_bound_problem(bound_s: float, abort_grace_s: float) -> str | None:
    """Why ``bound_s`` (TICKWORK_SHUTDOWN_GRACE_SECONDS) is too short to abort a running job
    (``abort_grace_s``, WORKER_ABORT_GRACE_SECONDS), report it ABORTED
    (:data:`REPORT_MARGIN_S`) and close (:data:`CLOSE_RESERVE_S`) before the process must
    exit, or None when it is long enough. A shorter bound would lose the aborted job's
    outcome: it would fail "lease lost" after the restart and be retried."""
    least = abort_grace_s + REPORT_MARGIN_S + CLOSE_RESERVE_S
    if bound_s >= least:
        return None
    return (
        f"TICKWORK_SHUTDOWN_GRACE_SECONDS: must be at least {least:g} s "
        f"(WORKER_ABORT_GRACE_SECONDS, {abort_grace_s:g} s, to stop a running job, "
        f"{REPORT_MARGIN_S:g} s to report it ABORTED and {CLOSE_RESERVE_S:g} s to close), got "
        f"{bound_s:g}; lower WORKER_ABORT_GRACE_SECONDS for a shorter stop"
    )


def job_finish_grace(bound_s: float, shutdown_grace_s: float, abort_grace_s: float) -> float:
    """Seconds a running job gets on stop before it is aborted: ``shutdown_grace_s``
    (WORKER_SHUTDOWN_GRACE_SECONDS), cut so that the abort (``abort_grace_s``,
    WORKER_ABORT_GRACE_SECONDS, plus :data:`REPORT_MARGIN_S`) and the close
    (:data:`CLOSE_RESERVE_S`) still fit in ``bound_s`` (TICKWORK_SHUTDOWN_GRACE_SECONDS);
    never below 0. Defaults: min(15, 25 - 5 - 2 - 3) = 15 s."""
    room = bound_s - abort_grace_s - REPORT_MARGIN_S - CLOSE_RESERVE_S
    return max(0.0, min(shutdown_grace_s, room))


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker connects, waits and stops. All durations are in seconds.

    Attributes:
        server (str): gRPC target of the scheduler service, ``"HOST:PORT"`` (any target
            ``grpc.aio.insecure_channel`` accepts). Env ``TICKWORK_SERVER``.
        poll_interval_s (float): > 0. The longest the server keeps a PollJob waiting before
            it answers NoJob. Informative on the worker (the server bounds the wait): it only
            bounds how long a stopping worker waits for the answer to its last poll.
            Env ``WORKER_POLL_INTERVAL_SECONDS``.
        shutdown_grace_s (float): >= 0. On stop (SIGTERM, SIGINT) the running job may finish
            within this (cut to fit ``stop_bound_s``: :attr:`job_finish_grace_s`); then it is
            aborted and reported ABORTED. Env ``WORKER_SHUTDOWN_GRACE_SECONDS``.
        stop_bound_s (float): > 0. The bound from SIGTERM to the process's exit: the job's
            finish grace, its abort grace and the close fit in it. Env
            ``TICKWORK_SHUTDOWN_GRACE_SECONDS`` (the embedded worker gets its service's).
        abort_grace_s (float): >= 0. Handed to handlers as ``JobContext.abort_grace_s``: the
            time between SIGTERM and SIGKILL when a job's process is stopped.
            Env ``WORKER_ABORT_GRACE_SECONDS``.
        reconnect_backoff_base_s (float): > 0. First delay before reconnecting after the
            stream broke or the server was unreachable; doubles per failed attempt.
        reconnect_backoff_cap_s (float): >= ``reconnect_backoff_base_s``. Largest such delay
            (before jitter, which only shortens it to between half and all of it).
        log_flush_interval_s (float): > 0. A running job's output lines are sent in batches
            at most this often.
        handshake_timeout_s (float): > 0. Longest wait for the server's Welcome after Hello
            before the connection counts as failed.
        outcome_ack_timeout_s (float): > 0. Longest wait for OutcomeAck after an Outcome
            before the connection counts as broken.
        token (str): bearer token with the ``worker`` role, for a server with access
            control; empty for none. Env ``TICKWORK_TOKEN``. Not shown in ``repr``.
        tls (TlsConfig | None): TLS to the server (CA, client certificate for mutual TLS);
            None for plaintext. Env ``TICKWORK_TLS``, ``TICKWORK_TLS_CA_FILE``,
            ``TICKWORK_TLS_CLIENT_CERT_FILE``, ``TICKWORK_TLS_CLIENT_KEY_FILE``,
            ``TICKWORK_TLS_SERVER_NAME``.
        handlers (tuple[str, ...]): the only handlers this worker runs (an allow-list; a
            job of another handler fails without running); empty allows every handler.
            Env ``WORKER_HANDLERS``, comma-separated.
        slots (int): 1 to :data:`MAX_SLOTS`. The jobs this worker runs at once: it opens one
            stream per slot, each taking one job at a time (the service's
            TICKWORK_MAX_RUNNING_JOBS caps them across all workers). Env ``WORKER_SLOTS``,
            ``tickwork worker --slots``.
        pass_env (tuple[str, ...]): names of the worker's variables its jobs get beside the
            few every job gets (PATH, HOME, LANG, ...); a job never inherits the rest of
            the worker's environment. Names of settings (``TICKWORK_*``, ``WORKER_*``,
            ``SCHEDULER_*``, ``SMTP_*``, ``DATABASE_URL``) are refused. Env
            ``WORKER_PASS_ENV``, comma-separated.

    Raises:
        InvalidSetting: on construction, when a value is out of range; it names the field.
    """

    server: str = DEFAULT_SERVER
    poll_interval_s: float = 3.0
    shutdown_grace_s: float = 15.0
    abort_grace_s: float = 5.0
    stop_bound_s: float = DEFAULT_SHUTDOWN_BOUND_S
    reconnect_backoff_base_s: float = 0.5
    reconnect_backoff_cap_s: float = 10.0
    log_flush_interval_s: float = 0.2
    handshake_timeout_s: float = 10.0
    outcome_ack_timeout_s: float = 30.0
    token: str = field(default="", repr=False)
    tls: TlsConfig | None = None
    handlers: tuple[str, ...] = ()
    slots: int = 1
    pass_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate the values.

        Raises:
            InvalidSetting: a value is out of range; the details name the field.
        """
        if not self.server or self.server != self.server.strip() or " " in self.server:
            raise InvalidSetting(f"server must be a HOST:PORT target, got {self.server!r}")
        positive = (
            "poll_interval_s",
            "reconnect_backoff_base_s",
            "reconnect_backoff_cap_s",
            "log_flush_interval_s",
            "handshake_timeout_s",
            "outcome_ack_timeout_s",
            "stop_bound_s",
        )
        for name in positive:
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise InvalidSetting(
                    f"{name} must be a finite number of seconds > 0, got {value!r}"
                )
        for name in ("shutdown_grace_s", "abort_grace_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise InvalidSetting(
                    f"{name} must be a finite number of seconds >= 0, got {value!r}"
                )
        problem = stop_bound_problem(self.stop_bound_s, self.abort_grace_s)
        if problem is not None:
            raise InvalidSetting(problem)
        if isinstance(self.slots, bool) or not 1 <= self.slots <= MAX_SLOTS:
            raise InvalidSetting(
                f"slots must be a whole number from 1 to {MAX_SLOTS}, got {self.slots!r}"
            )
        if self.reconnect_backoff_cap_s < self.reconnect_backoff_base_s:
            raise InvalidSetting(
                "reconnect_backoff_cap_s must be >= reconnect_backoff_base_s, got "
                f"{self.reconnect_backoff_cap_s!r} < {self.reconnect_backoff_base_s!r}"
            )

    @property
    def job_finish_grace_s(self) -> float:
        """Seconds the running job gets on stop before it is aborted (see
        :func:`job_finish_grace`)."""
        return job_finish_grace(self.stop_bound_s, self.shutdown_grace_s, self.abort_grace_s)

    @classmethod
    def from_env(
        cls,
        server: str | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        slots: int | None = None,
    ) -> WorkerSettings:
        """Build the settings from the environment; unset or empty variables keep defaults.

        Args:
            server (str | None): the scheduler service address; overrides ``TICKWORK_SERVER``
                when given (the ``--server`` option).
            environ (Mapping[str, str] | None): the variables to read; ``os.environ`` if None.
            token (str | None): overrides ``TICKWORK_TOKEN`` when given (``--token``).
            tls (TlsConfig | None): overrides the TLS variables when given.
            slots (int | None): overrides ``WORKER_SLOTS`` when given (``--slots``).

        Returns:
            WorkerSettings: the validated settings.

        Raises:
            InvalidSetting: a variable is not a number, is out of range, or names an unknown
                handler; the details start with the variable's name.
        """
        env = os.environ if environ is None else environ
        values = _worker_variables(env)
        if slots is not None:
            values["slots"] = slots
        try:
            target = with_default_port(server or env.get("TICKWORK_SERVER") or DEFAULT_SERVER)
        except InvalidArgument as err:
            raise InvalidSetting(f"TICKWORK_SERVER: {err.details}") from None
        return cls(
            server=target,
            token=resolve_token(token, env),
            tls=tls if tls is not None else TlsConfig.from_env(env),
            stop_bound_s=_stop_bound(env),
            **values,
        )

    @classmethod
    def embedded(
        cls, server: str, token: str, environ: Mapping[str, str] | None = None
    ) -> WorkerSettings:
        """The settings of the worker ``tickwork serve`` runs in its own process.

        Only the worker's own variables (``WORKER_*``) are read: the embedded worker
        reaches its service at ``server`` (a unix socket, plaintext) with ``token``, so
        ``TICKWORK_SERVER``, ``TICKWORK_TOKEN`` and the TLS variables do not apply to it.

        Raises:
            InvalidSetting: a variable is not a number, is out of range, or names an unknown
                handler; the details start with the variable's name.
        """
        env = os.environ if environ is None else environ
        return cls(server=server, token=token, tls=None, **_worker_variables(env))


#: The worker's durations: variable -> (field of WorkerSettings, whether 0 is allowed).
_SECONDS = {
    "WORKER_POLL_INTERVAL_SECONDS": ("poll_interval_s", False),
    "WORKER_SHUTDOWN_GRACE_SECONDS": ("shutdown_grace_s", True),
    "WORKER_ABORT_GRACE_SECONDS": ("abort_grace_s", True),
}


def worker_seconds(env: Mapping[str, str], variable: str) -> float:
    """One of the worker's durations, in seconds: WORKER_POLL_INTERVAL_SECONDS (> 0,
    default 3), WORKER_SHUTDOWN_GRACE_SECONDS (>= 0, default 15) or
    WORKER_ABORT_GRACE_SECONDS (>= 0, default 5); unset or empty gives the default.

    Raises:
        InvalidSetting: ``NAME: what is wrong`` (not a finite number, or out of range).
    """
    field, zero_ok = _SECONDS[variable]
    value = _seconds(env, variable, float(getattr(WorkerSettings, field)))
    minimum = ">=" if zero_ok else ">"
    if value < 0 or (value == 0 and not zero_ok):
        raise InvalidSetting(f"{variable}: must be {minimum} 0, got {value:g}")
    return value


def _stop_bound(env: Mapping[str, str]) -> float:
    """TICKWORK_SHUTDOWN_GRACE_SECONDS of a dedicated worker: > 0, default 25.

    Raises:
        InvalidSetting: ``TICKWORK_SHUTDOWN_GRACE_SECONDS: what is wrong``.
    """
    name = "TICKWORK_SHUTDOWN_GRACE_SECONDS"
    value = _seconds(env, name, DEFAULT_SHUTDOWN_BOUND_S)
    if value <= 0:
        raise InvalidSetting(f"{name}: must be > 0, got {value:g}")
    return value


def _worker_variables(env: Mapping[str, str]) -> dict[str, Any]:
    """The worker's own variables (durations and WORKER_HANDLERS), checked one by one so
    that an error names the variable, not the field.

    Raises:
        InvalidSetting: ``NAME: what is wrong``.
    """
    values: dict[str, Any] = {
        field: worker_seconds(env, variable) for variable, (field, _) in _SECONDS.items()
    }
    values["handlers"] = _handlers(env)
    values["slots"] = _slots(env)
    values["pass_env"] = _pass_env(env)
    return values


#: Prefixes of the variables that configure tickwork itself, never passed to a job.
SETTING_PREFIXES = ("TICKWORK_", "WORKER_", "SCHEDULER_", "SMTP_")
#: Other variables that configure tickwork itself, never passed to a job.
SETTING_NAMES = frozenset({"DATABASE_URL"})


def _pass_env(env: Mapping[str, str]) -> tuple[str, ...]:
    """WORKER_PASS_ENV: comma-separated names of variables a job gets (empty: none beyond
    the few every job gets).

    Raises:
        InvalidSetting: ``WORKER_PASS_ENV: what is wrong``: a name that is not a variable
            name, or names a setting of tickwork's (a job must never get those).
    """
    names = [n.strip() for n in env.get("WORKER_PASS_ENV", "").split(",") if n.strip()]
    for name in names:
        if "=" in name or "\0" in name or any(c.isspace() for c in name):
            raise InvalidSetting(f"WORKER_PASS_ENV: {name} is not a variable name")
        if name.startswith(SETTING_PREFIXES) or name in SETTING_NAMES:
            raise InvalidSetting(
                f"WORKER_PASS_ENV: {name} is a setting of tickwork's and never reaches a job"
            )
    return tuple(dict.fromkeys(names))


def _slots(env: Mapping[str, str]) -> int:
    """WORKER_SLOTS: a whole number from 1 to :data:`MAX_SLOTS`; unset or empty gives 1.

    Raises:
        InvalidSetting: ``WORKER_SLOTS: what is wrong``.
    """
    raw = env.get("WORKER_SLOTS", "").strip()
    if not raw:
        return 1
    try:
        value = int(raw)
    except ValueError:
        raise InvalidSetting(f"WORKER_SLOTS: expected a whole number, got {raw!r}") from None
    if not 1 <= value <= MAX_SLOTS:
        raise InvalidSetting(f"WORKER_SLOTS: must be from 1 to {MAX_SLOTS}, got {value}")
    return value


def _handlers(env: Mapping[str, str]) -> tuple[str, ...]:
    """WORKER_HANDLERS: comma-separated names of known handlers (empty: every handler).

    Raises:
        InvalidSetting: a name is not one of ``handler_names()`` (built-in or entry point): a
            misspelt allow-list would otherwise start a worker that runs nothing.
    """
    from worker_svc.handlers import handler_names

    names = tuple(h.strip() for h in env.get("WORKER_HANDLERS", "").split(",") if h.strip())
    known = handler_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidSetting(
            f"WORKER_HANDLERS: unknown handler{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; known handlers: {', '.join(known)}"
        )
    return names


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """Read a duration in seconds from ``env[name]``.

    Args:
        env (Mapping[str, str]): the environment.
        name (str): the variable name.
        default (float): seconds to use when the variable is unset or empty.

    Returns:
        float: the duration in seconds, a finite number (range checks are the caller's).

    Raises:
        InvalidSetting: the value is not a finite number; the details start with the variable.
    """
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InvalidSetting(f"{name}: expected a number of seconds, got {raw!r}")
    return value
