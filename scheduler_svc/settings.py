"""Settings of the scheduler service, built once from the environment.

The environment variable names are part of the product (docs/operations/configuration.md
lists them):
SCHEDULER_IS_ENABLED, WORKER_IS_ENABLED, SCHEDULER_POLL_INTERVAL_SECONDS,
WORKER_POLL_INTERVAL_SECONDS, SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT, DATABASE_URL,
plus TICKWORK_LISTEN, TICKWORK_LEASE_TTL_SECONDS, TICKWORK_HEARTBEAT_INTERVAL_SECONDS, the
SMTP_* variables of :mod:`scheduler_svc.notify`, the access-control and TLS variables
(TICKWORK_TOKENS, TICKWORK_TOKENS_FILE, TICKWORK_TLS_CERT_FILE, TICKWORK_TLS_KEY_FILE,
TICKWORK_TLS_CLIENT_CA_FILE, TICKWORK_INSECURE), TICKWORK_METRICS_LISTEN,
TICKWORK_CONSOLE_LISTEN, TICKWORK_RETENTION_DAYS, TICKWORK_MAX_RUNNING_JOBS,
TICKWORK_SHUTDOWN_GRACE_SECONDS and the TICKWORK_NOTIFY_* variables of
:mod:`scheduler_svc.sender`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler_svc.errors import SettingsError

if TYPE_CHECKING:
    from sqlalchemy.engine import url as sa_url

    from scheduler_svc.auth import Principal

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_CONSOLE_LISTEN = "127.0.0.1:8484"
DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./tickwork.db"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name}: expected true or false, got {raw!r}")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected a number of seconds, got {raw!r}") from None
    if not math.isfinite(value):  # nan passes every "> 0" check; inf overflows timedelta
        raise SettingsError(f"{name}: expected a number of seconds, got {raw!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected an integer, got {raw!r}") from None


def _worker_seconds(env: Mapping[str, str], name: str) -> float:
    """A WORKER_* duration the service shares with its workers, read as the worker reads it
    (:func:`worker_svc.settings.worker_seconds`); its error in the service's terms. Imported
    here, not at the top: the command line imports this module on every run."""
    from tickwork.errors import InvalidSetting
    from worker_svc.settings import worker_seconds

    try:
        return worker_seconds(env, name)
    except InvalidSetting as err:
        raise SettingsError(err.details) from None


@dataclass(frozen=True)
class SmtpSettings:
    """Where auto-disable emails go. ``host`` empty means email is off."""

    host: str = ""
    port: int = 25
    starttls: bool = False
    use_tls: bool = False
    username: str = ""
    password: str = field(default="", repr=False)
    sender: str = "tickwork@localhost"
    recipients: tuple[str, ...] = ()
    timeout_s: float = 10.0

    @property
    def enabled(self) -> bool:
        """True when a host and at least one recipient are configured."""
        return bool(self.host and self.recipients)


@dataclass(frozen=True)
class NotifySettings:
    """How the notification sender retries (TICKWORK_NOTIFY_*). Seconds.

    A delivery that fails is tried again after ``backoff_base_s * 2^(attempts-1)`` (at most
    ``backoff_cap_s``, with jitter), up to ``max_attempts`` attempts in all, then given up.
    """

    max_attempts: int = 8
    backoff_base_s: float = 5.0
    backoff_cap_s: float = 900.0
    #: How often the sender looks for due deliveries when nothing wakes it.
    poll_interval_s: float = 1.0


#: The largest TICKWORK_MAX_RUNNING_JOBS: each slot is a lease row every waiting worker
#: stream tries in turn.
MAX_RUNNING_JOBS_LIMIT = 1024


@dataclass(frozen=True)
class Settings:
    """Everything the scheduler service reads from its environment. Times are seconds."""

    listen: str = DEFAULT_LISTEN
    database_url: str = DEFAULT_DATABASE_URL
    scheduler_is_enabled: bool = True
    worker_is_enabled: bool = True
    scheduler_poll_interval_s: float = 60.0
    worker_poll_interval_s: float = 3.0
    auto_disable_task_failure_count: int = 5
    lease_ttl_s: float = 15.0
    heartbeat_interval_s: float = 3.0
    scheduler_lease_ttl_s: float = 10.0
    #: Jobs that may run at once across every worker (TICKWORK_MAX_RUNNING_JOBS): the
    #: number of worker slot leases. 1 is one job at a time: one active worker, the
    #: others standby.
    max_running_jobs: int = 1
    #: On stop, how long jobs that workers connected here are running may take to finish
    #: and report before they are told to abort (WORKER_SHUTDOWN_GRACE_SECONDS, which the
    #: embedded worker also reads for its own job); cut to fit ``shutdown_grace_s``, see
    #: :attr:`job_finish_grace_s`.
    worker_shutdown_grace_s: float = 15.0
    #: An aborted job's SIGTERM-to-SIGKILL grace (WORKER_ABORT_GRACE_SECONDS, shared with
    #: the workers): the stop keeps this long, and a report's margin, for the abort.
    worker_abort_grace_s: float = 5.0
    #: The bound from SIGTERM to the process's exit (TICKWORK_SHUTDOWN_GRACE_SECONDS): the
    #: running jobs' finish grace, their abort grace and the server's close all fit in it.
    #: Below a container manager's kill grace (Kubernetes: 30 s by default).
    shutdown_grace_s: float = 25.0
    smtp: SmtpSettings = SmtpSettings()
    notify: NotifySettings = NotifySettings()
    #: {sha256 hex of a token: who it is}; access control is on when not empty.
    tokens: Mapping[str, Principal] = field(default_factory=dict, repr=False)
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: When set, every client must present a certificate signed by this CA (mutual TLS).
    tls_client_ca_file: str = ""
    #: Serve on a non-loopback address without tokens or TLS anyway.
    insecure: bool = False
    #: HOST:PORT of the Prometheus /metrics endpoint; empty: no metrics endpoint.
    metrics_listen: str = ""
    #: HOST:PORT of the web console (TICKWORK_CONSOLE_LISTEN); empty: no console.
    console_listen: str = DEFAULT_CONSOLE_LISTEN
    #: keep_days of the built-in retention task when it is first created; 0: no built-in
    #: retention task and schedule are created.
    retention_days: int = 30

    @property
    def kill_deadline_s(self) -> float:
        """How long after a job's lease expired its old run's processes may still live,
        seconds: one heartbeat interval plus a second. A worker's guard SIGKILLs a job's
        processes once the worker sent no heartbeat for the lease TTL minus one interval (at
        least two intervals, at most the TTL), so they are dead at most one interval (plus
        the guard's 0.1 s check) after the lease expired, even when the last heartbeat sent
        never arrived. A lease-lost job's retry is not ready before its lease's expiry plus
        this."""
        return self.heartbeat_interval_s + 1.0

    @property
    def job_finish_grace_s(self) -> float:
        """Seconds a running job gets to finish on stop before it is told to abort:
        WORKER_SHUTDOWN_GRACE_SECONDS, cut so that the abort and the close still fit in
        TICKWORK_SHUTDOWN_GRACE_SECONDS (see :func:`worker_svc.settings.job_finish_grace`)."""
        from worker_svc.settings import job_finish_grace

        return job_finish_grace(
            self.shutdown_grace_s, self.worker_shutdown_grace_s, self.worker_abort_grace_s
        )

    @property
    def tls_enabled(self) -> bool:
        """True when the server has a certificate and key."""
        return bool(self.tls_cert_file)

    def __post_init__(self) -> None:
        if self.scheduler_poll_interval_s <= 0:
            raise SettingsError("SCHEDULER_POLL_INTERVAL_SECONDS: must be > 0")
        if self.worker_poll_interval_s <= 0:
            raise SettingsError("WORKER_POLL_INTERVAL_SECONDS: must be > 0")
        if self.lease_ttl_s <= 0:
            raise SettingsError("TICKWORK_LEASE_TTL_SECONDS: must be > 0")
        if not 0 < self.heartbeat_interval_s < self.lease_ttl_s:
            raise SettingsError(
                "TICKWORK_HEARTBEAT_INTERVAL_SECONDS: must be > 0 and below the lease TTL"
            )
        if not self.worker_shutdown_grace_s >= 0:
            raise SettingsError("WORKER_SHUTDOWN_GRACE_SECONDS: must be >= 0")
        if not self.shutdown_grace_s > 0:
            raise SettingsError("TICKWORK_SHUTDOWN_GRACE_SECONDS: must be > 0")
        from worker_svc.settings import stop_bound_problem

        problem = stop_bound_problem(self.shutdown_grace_s, self.worker_abort_grace_s)
        if problem is not None:
            raise SettingsError(problem)
        if not 1 <= self.max_running_jobs <= MAX_RUNNING_JOBS_LIMIT:
            raise SettingsError(
                f"TICKWORK_MAX_RUNNING_JOBS: must be from 1 to {MAX_RUNNING_JOBS_LIMIT}, "
                f"got {self.max_running_jobs}"
            )
        if self.scheduler_lease_ttl_s <= 0:
            # The leader renews every TTL/3: 0 would renew in a busy loop.
            raise SettingsError("TICKWORK_SCHEDULER_LEASE_TTL_SECONDS: must be > 0")
        _check_smtp(self.smtp)
        _check_notify(self.notify)
        _check_address(self.listen, "TICKWORK_LISTEN (--listen)")
        check_database_url(self.database_url)
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise SettingsError(
                "TICKWORK_TLS_CERT_FILE, TICKWORK_TLS_KEY_FILE: give both or neither"
            )
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise SettingsError(
                "TICKWORK_TLS_CLIENT_CA_FILE: mutual TLS needs TICKWORK_TLS_CERT_FILE and "
                "TICKWORK_TLS_KEY_FILE too"
            )
        if self.metrics_listen:
            _check_address(self.metrics_listen, "TICKWORK_METRICS_LISTEN")
        if self.console_listen:
            _check_address(self.console_listen, "TICKWORK_CONSOLE_LISTEN")
        if self.retention_days < 0:
            raise SettingsError("TICKWORK_RETENTION_DAYS: must be >= 0 (0: no built-in task)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build settings from ``env`` (default ``os.environ``); ``overrides`` win.

        Raises SettingsError naming the variable when a value cannot be used.
        """
        e = os.environ if env is None else env
        recipients = tuple(
            a.strip() for a in e.get("SMTP_TO", "").replace(";", ",").split(",") if a.strip()
        )
        smtp = SmtpSettings(
            host=e.get("SMTP_HOST", ""),
            port=_int(e, "SMTP_PORT", 25),
            starttls=_bool(e, "SMTP_STARTTLS", False),
            use_tls=_bool(e, "SMTP_TLS", False),
            username=e.get("SMTP_USER", ""),
            password=e.get("SMTP_PASSWORD", ""),
            sender=e.get("SMTP_FROM", "tickwork@localhost"),
            recipients=recipients,
            timeout_s=_float(e, "SMTP_TIMEOUT_SECONDS", 10.0),
        )
        values: dict[str, object] = {
            "listen": e.get("TICKWORK_LISTEN") or DEFAULT_LISTEN,
            "database_url": database_url_from_env(e),
            "scheduler_is_enabled": _bool(e, "SCHEDULER_IS_ENABLED", True),
            "worker_is_enabled": _bool(e, "WORKER_IS_ENABLED", True),
            "scheduler_poll_interval_s": _float(e, "SCHEDULER_POLL_INTERVAL_SECONDS", 60.0),
            "worker_poll_interval_s": _worker_seconds(e, "WORKER_POLL_INTERVAL_SECONDS"),
            "auto_disable_task_failure_count": _int(
                e, "SCHEDULER_AUTO_DISABLE_TASK_FAILURE_COUNT", 5
            ),
            "lease_ttl_s": _float(e, "TICKWORK_LEASE_TTL_SECONDS", 15.0),
            "heartbeat_interval_s": _float(e, "TICKWORK_HEARTBEAT_INTERVAL_SECONDS", 3.0),
            "scheduler_lease_ttl_s": _float(e, "TICKWORK_SCHEDULER_LEASE_TTL_SECONDS", 10.0),
            "max_running_jobs": _int(e, "TICKWORK_MAX_RUNNING_JOBS", 1),
            "worker_shutdown_grace_s": _worker_seconds(e, "WORKER_SHUTDOWN_GRACE_SECONDS"),
            "worker_abort_grace_s": _worker_seconds(e, "WORKER_ABORT_GRACE_SECONDS"),
            "shutdown_grace_s": _float(e, "TICKWORK_SHUTDOWN_GRACE_SECONDS", 25.0),
            "smtp": smtp,
            "notify": NotifySettings(
                max_attempts=_int(e, "TICKWORK_NOTIFY_MAX_ATTEMPTS", 8),
                backoff_base_s=_float(e, "TICKWORK_NOTIFY_BACKOFF_SECONDS", 5.0),
                backoff_cap_s=_float(e, "TICKWORK_NOTIFY_BACKOFF_CAP_SECONDS", 900.0),
            ),
            "tokens": _tokens(e),
            "tls_cert_file": e.get("TICKWORK_TLS_CERT_FILE", "").strip(),
            "tls_key_file": e.get("TICKWORK_TLS_KEY_FILE", "").strip(),
            "tls_client_ca_file": e.get("TICKWORK_TLS_CLIENT_CA_FILE", "").strip(),
            "insecure": _bool(e, "TICKWORK_INSECURE", False),
            "metrics_listen": e.get("TICKWORK_METRICS_LISTEN", "").strip(),
            # Set but empty turns the console off.
            "console_listen": e.get("TICKWORK_CONSOLE_LISTEN", DEFAULT_CONSOLE_LISTEN).strip(),
            "retention_days": _int(e, "TICKWORK_RETENTION_DAYS", 30),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _check_smtp(smtp: SmtpSettings) -> None:
    """Refuse SMTP settings that cannot work, or that would leave email silently off."""
    if smtp.timeout_s <= 0:
        raise SettingsError("SMTP_TIMEOUT_SECONDS: must be > 0")
    if not 1 <= smtp.port <= 65535:
        raise SettingsError(f"SMTP_PORT: must be a number from 1 to 65535, got {smtp.port}")
    if smtp.starttls and smtp.use_tls:
        raise SettingsError(
            "SMTP_STARTTLS, SMTP_TLS: choose one (SMTP_TLS: implicit TLS, usually port 465; "
            "SMTP_STARTTLS: upgrade a plain connection, usually port 587)"
        )
    if smtp.host and not smtp.recipients:
        raise SettingsError(
            "SMTP_HOST, SMTP_TO: SMTP_HOST is set but SMTP_TO is empty, so no email would "
            "be sent; set SMTP_TO (comma-separated addresses) or unset SMTP_HOST"
        )
    if smtp.recipients and not smtp.host:
        raise SettingsError(
            "SMTP_TO, SMTP_HOST: SMTP_TO is set but SMTP_HOST is empty, so no email would "
            "be sent; set SMTP_HOST (the SMTP server) or unset SMTP_TO"
        )


def _check_notify(notify: NotifySettings) -> None:
    """Refuse retry settings that would never send or never stop."""
    if notify.max_attempts < 1:
        raise SettingsError("TICKWORK_NOTIFY_MAX_ATTEMPTS: must be >= 1")
    if notify.backoff_base_s <= 0:
        raise SettingsError("TICKWORK_NOTIFY_BACKOFF_SECONDS: must be > 0")
    if notify.backoff_cap_s < notify.backoff_base_s:
        raise SettingsError(
            "TICKWORK_NOTIFY_BACKOFF_CAP_SECONDS: must be >= TICKWORK_NOTIFY_BACKOFF_SECONDS"
        )


def _check_address(address: str, variable: str) -> None:
    """``address`` is HOST:PORT with PORT 0..65535 in ASCII digits (0: any free port).

    Raises SettingsError naming ``variable`` otherwise: gRPC would serve a port such as
    99999 on another (a free) port without a word.
    """
    _, sep, port = address.rpartition(":")
    if not sep:
        raise SettingsError(f"{variable}: expected HOST:PORT, got {address!r}")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise SettingsError(
            f"{variable}: port must be a number from 1 to 65535 (0: any free port), got {address!r}"
        )


def database_url_from_env(env: Mapping[str, str] | None = None) -> str:
    """DATABASE_URL from ``env`` (default ``os.environ``), or :data:`DEFAULT_DATABASE_URL`
    when it is unset or empty; the one place the variable is read. Not checked here (see
    :func:`check_database_url`)."""
    return (os.environ if env is None else env).get("DATABASE_URL") or DEFAULT_DATABASE_URL


#: The SQLAlchemy drivers DATABASE_URL may name (any ``sqlite`` one is served by sqlite3).
_POSTGRESQL_DRIVERS = ("postgresql+asyncpg",)


def check_database_url(url: str) -> None:
    """DATABASE_URL is a SQLite URL naming a file, or a ``postgresql+asyncpg`` URL whose
    port, if given, is a number from 1 to 65535.

    Args:
        url (str): the URL, as SQLAlchemy reads it.

    Raises:
        SettingsError: it is not a database URL, names another driver, has a port that is
            not a number from 1 to 65535, or is an in-memory SQLite database (no file:
            every task and job would be lost when the service stops). The message does not
            repeat the URL, which may hold a password.
    """
    import sqlalchemy as sa
    from sqlalchemy.exc import ArgumentError

    # The port is not repeated: an unencoded "@" in a password can make a part of it one.
    bad_port = "DATABASE_URL: the port (HOST:PORT) must be a number from 1 to 65535"
    try:
        parsed = sa.engine.make_url(url)
        port = parsed.port
    except ArgumentError:
        raise SettingsError(
            "DATABASE_URL: not a database URL (e.g. sqlite+aiosqlite:///./tickwork.db or "
            "postgresql+asyncpg://USER@HOST/DB)"
        ) from None
    except ValueError:  # SQLAlchemy reads the port with int()
        raise SettingsError(bad_port) from None
    if port is not None and not 1 <= port <= 65535:
        raise SettingsError(bad_port)
    if parsed.get_backend_name() == "sqlite":
        if _sqlite_in_memory(parsed):
            raise SettingsError(
                "DATABASE_URL: SQLite needs a database file, e.g. "
                "sqlite+aiosqlite:///./tickwork.db (in memory, every task and job would be "
                "lost when the service stops)"
            )
        return
    if parsed.drivername in _POSTGRESQL_DRIVERS:
        return
    raise SettingsError(
        f"DATABASE_URL: unsupported driver {parsed.drivername!r}; use sqlite:///PATH, "
        "sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST/DB"
    )


def _sqlite_in_memory(url: sa_url.URL) -> bool:
    """Whether the SQLite ``url`` names no file: an empty database, ``:memory:``, or a
    URI (``?uri=true``) database ``file::memory:`` or ``mode=memory``."""
    database = url.database or ""
    modes = url.query.get("mode", ())
    if database in ("", ":memory:") or "memory" in ((modes,) if isinstance(modes, str) else modes):
        return True
    return database.startswith("file::memory:")


def _tokens(env: Mapping[str, str]) -> dict[str, Principal]:
    """The tokens of TICKWORK_TOKENS and the file named by TICKWORK_TOKENS_FILE."""
    # Imported here: auth imports gRPC, which reading the other settings does not need.
    from scheduler_svc.auth import TokenConfigError, parse_tokens

    out: dict[str, Principal] = {}
    try:
        out.update(parse_tokens(env.get("TICKWORK_TOKENS", ""), "TICKWORK_TOKENS"))
        path = env.get("TICKWORK_TOKENS_FILE", "").strip()
        if path:
            try:
                text = Path(path).expanduser().read_text()
            except OSError as err:
                raise SettingsError(
                    f"TICKWORK_TOKENS_FILE: cannot read {path}: {err.strerror}"
                ) from None
            out.update(parse_tokens(text, f"TICKWORK_TOKENS_FILE ({path})"))
    except TokenConfigError as err:
        raise SettingsError(str(err)) from None
    return out
