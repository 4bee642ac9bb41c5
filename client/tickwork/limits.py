"""Limits the service, the worker and the SDK share, in one place (no imports: a job
process may read them without loading the client)."""

from __future__ import annotations

__all__ = ["MAX_SECONDS", "OUTPUT_TAIL_CHARS"]

MAX_SECONDS = 10 * 366 * 86400
"""The longest interval, timeout or wait, seconds (ten years): beyond it datetimes and gRPC
deadlines overflow."""

OUTPUT_TAIL_CHARS = 4096
"""The most of a job's output kept (Job.output_tail): its last 4,096 characters. The
worker sends, the service stores and the console shows no more."""
