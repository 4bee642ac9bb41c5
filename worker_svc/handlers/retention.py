"""The ``tickwork.retention`` handler: delete old job and fire history.

The built-in task ``tickwork-retention`` runs it on the built-in schedule of the same name.
It asks the scheduler service to purge, over the worker's connection
(``WorkerService.PurgeHistory``, allowed only for a running retention job); the service
reads ``keep_days`` from the task's params, so editing the task is how retention is changed.
"""

from __future__ import annotations

from typing import Any

import grpc

from ._base import HandlerResult, InvalidParams, JobContext, JobFailed

__all__ = ["RetentionHandler"]


class RetentionHandler:
    """Delete ended jobs and fire records older than ``keep_days`` days.

    Params (a JSON object):

    - ``keep_days`` (int, required): days of history to keep, >= 1.
    """

    name = "tickwork.retention"
    runs_in_worker: bool = True
    """It runs on the worker's event loop (and starts the job's processes itself)."""

    def validate(self, params: dict[str, Any]) -> None:
        """Check ``keep_days``; raises InvalidParams naming it."""
        unknown = sorted(set(params) - {"keep_days"})
        if unknown:
            raise InvalidParams(f"unknown param {unknown[0]!r}; known: keep_days")
        value = params.get("keep_days")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidParams(f"keep_days: expected a whole number of days >= 1, got {value!r}")

    async def run(self, params: dict[str, Any], ctx: JobContext) -> HandlerResult:
        """Ask the service to purge; report what was deleted."""
        self.validate(params)
        if ctx.service is None:
            raise JobFailed("tickwork.retention runs only in a worker connected to the service")
        try:
            answer = await ctx.service.purge_history()
        except grpc.RpcError as err:
            code = err.code().name if isinstance(err, grpc.aio.AioRpcError) else "ERROR"
            details = err.details() if isinstance(err, grpc.aio.AioRpcError) else str(err)
            raise JobFailed(f"PurgeHistory failed: {code}: {details}") from None
        cutoff = answer.cutoff_time.ToDatetime().isoformat(timespec="seconds")
        line = (
            f"kept {answer.keep_days} days: deleted {answer.jobs_deleted} jobs and "
            f"{answer.fires_deleted} fire records before {cutoff}Z, and "
            f"{answer.requests_deleted} request-id answers over 24 hours old"
        )
        ctx.log("stdout", line)
        return HandlerResult(output_tail=line + "\n")
