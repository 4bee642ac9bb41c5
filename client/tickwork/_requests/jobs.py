"""Jobs: the ListJobs request, paging of every list call, and the timing of a job watch
(deadline, resuming after the service went away, when a job has ended)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import grpc

from tickwork._requests.checks import check_type, parse_job_status
from tickwork.errors import InvalidArgument, TickworkError
from tickwork.limits import MAX_SECONDS
from tickwork.v1.job_pb2 import Job, JobStatus, ListJobsRequest

MAX_PAGE_SIZE = 1000
"""Largest page the list RPCs return."""

TERMINAL_STATUSES: frozenset[int] = frozenset(
    {
        JobStatus.JOB_STATUS_SUCCEEDED,
        JobStatus.JOB_STATUS_FAILED,
        JobStatus.JOB_STATUS_ABORTED,
        JobStatus.JOB_STATUS_CANCELLED,
    }
)
"""Job states after which a job never changes again."""


def list_jobs_request(
    task_id: int, statuses: Iterable[JobStatus | str], schedule_id: int, selector: str = ""
) -> ListJobsRequest:
    """Build the first ListJobs request (page size and token are set per page). A single
    status may be given alone; ``selector`` is a label selector (``"k=v,k2=v2"``)."""
    if isinstance(statuses, str):
        statuses = [statuses]
    check_type(selector, str, "selector")
    return ListJobsRequest(
        task_id=task_id,
        statuses=[parse_job_status(s) for s in statuses],
        schedule_id=schedule_id,
        label_selector=selector,
    )


def page_size(limit: int | None, collected: int) -> int:
    """Page size for the next list call: what is still wanted, at most 1000."""
    if limit is None:
        return MAX_PAGE_SIZE
    return max(1, min(MAX_PAGE_SIZE, limit - collected))


def check_limit(limit: int) -> int:
    """Validate a ``limit`` argument (at least 1); raises InvalidArgument."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit: expected a positive int, got {limit!r}")
    return limit


def is_terminal(job: Job) -> bool:
    """True when the job has ended (SUCCEEDED, FAILED, ABORTED or CANCELLED)."""
    return job.status in TERMINAL_STATUSES


def resume_delay_s(error: TickworkError, last: Job | None, resumed: int) -> float | None:
    """Whether a job watch that failed with ``error`` is taken up again, and after how many
    seconds: only when it was UNAVAILABLE (the service restarting, a replica going away)
    after the watch had already shown a state (``last``), so a wrong address or a service
    that is down from the start still fails at once. ``resumed`` is how many times this
    watch has been taken up already: the delay grows from 0.1 s to 2 s. None: raise."""
    if error.code != grpc.StatusCode.UNAVAILABLE or last is None:
        return None
    return float(min(2.0, 0.1 * 2**resumed))


def watch_deadline(timeout: float | None) -> float | None:
    """The ``time.monotonic()`` at which a watch of ``timeout`` seconds gives up."""
    return None if timeout is None else time.monotonic() + timeout


def remaining_s(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (from :func:`watch_deadline`), at least 0."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def wait_timeout(timeout: float | None) -> float | None:
    """A wait's timeout in seconds: None, inf or more than ten years wait forever (gRPC
    deadlines overflow beyond that); NaN or negative raise InvalidArgument."""
    if timeout is None:
        return None
    if math.isnan(timeout) or timeout < 0:
        raise InvalidArgument(f"timeout: expected seconds >= 0 or None, got {timeout!r}")
    return None if timeout > MAX_SECONDS else float(timeout)
