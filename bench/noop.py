"""The no-op work every dispatch and lateness benchmark runs (imported by workers)."""

from __future__ import annotations


def noop() -> None:
    """Do nothing: the benchmark measures the scheduler, not the task."""
