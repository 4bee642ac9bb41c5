"""A job's environment is built, never inherited: the worker's service settings (tokens,
database URL, SMTP password) must not reach a job, whose output viewers read.

Every job process gets :data:`BASE_VARIABLES` of the worker's environment (those set), the
variables the operator names in WORKER_PASS_ENV, then its task's ``env`` param, then the
job's ``TICKWORK_*`` variables (:data:`tickwork._context.ENV_NAMES`, which win; a task may
not set them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from tickwork._context import ENV_NAMES

from ._base import JobContext

__all__ = ["BASE_VARIABLES", "base_environment", "job_environment"]

#: The worker's variables every job gets when they are set: where programs are, who and
#: where the user is, language and time zone, temporary folder and terminal.
BASE_VARIABLES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "TERM",
)


def base_environment(environ: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``environ`` a job starts with: :data:`BASE_VARIABLES` and the names
    in ``pass_env`` (WORKER_PASS_ENV), those that are set."""
    names = dict.fromkeys([*BASE_VARIABLES, *pass_env])
    return {name: environ[name] for name in names if name in environ}


def job_environment(ctx: JobContext, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a job's process: ``ctx.base_env`` (the worker's
    :func:`base_environment`; when None, this process's without pass-through), then
    ``extra`` (the task's own variables), then the job's identity from ``ctx`` and its
    ``ctx.env`` (which win)."""
    base = ctx.base_env if ctx.base_env is not None else base_environment(os.environ)
    env = {k: v for k, v in base.items() if k not in ENV_NAMES}
    env.update(extra or {})
    env.update(
        {
            "TICKWORK_JOB_ID": str(ctx.job_id),
            "TICKWORK_TASK_ID": str(ctx.task_id),
            "TICKWORK_TASK": ctx.task_name,
            "TICKWORK_ATTEMPT": str(ctx.attempt),
        }
    )
    env.update(ctx.env)
    return env
