"""``tickwork jobs``: list, get, watch, cancel."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork.cli import _output as o
from tickwork.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    WAIT_EXIT_CODES,
    client_from_args,
    positive_int,
    selector_option,
)
from tickwork.v1.common_pb2 import Trigger
from tickwork.v1.job_pb2 import Job, JobStatus


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``jobs`` and its actions; ``net`` is the parent parser of the connection
    options."""
    jobs = sub.add_parser("jobs", help="list, inspect, watch and cancel jobs")
    jsub = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    p = jsub.add_parser("list", parents=[net], help="list jobs, newest first")
    p.add_argument("--task", metavar="NAME", help="only this task's jobs")
    p.add_argument(
        "--status",
        action="append",
        default=[],
        metavar="STATUS",
        help="only jobs in this state (QUEUED, RUNNING, SUCCEEDED, FAILED, ABORTED, "
        "CANCELLED); repeat or separate with commas",
    )
    p.add_argument("--limit", type=positive_int, default=20, metavar="N", help="default 20")
    selector_option(p, "jobs (labels given by tasks run --label)")
    p.set_defaults(func=_list)
    p = jsub.add_parser("get", parents=[net], help="show every field of a job")
    p.add_argument("job_id", type=positive_int, metavar="ID")
    p.set_defaults(func=_get)
    p = jsub.add_parser(
        "watch",
        parents=[net],
        help="print a job's state changes until it ends",
        description="Print one line per state change until the job ends. Exit status: 0 "
        "when it SUCCEEDED, 1 otherwise.",
    )
    p.add_argument("job_id", type=positive_int, metavar="ID")
    p.set_defaults(func=_watch)
    p = jsub.add_parser("cancel", parents=[net], help="cancel a queued job")
    p.add_argument("job_id", type=positive_int, metavar="ID")
    p.set_defaults(func=_cancel)


def _list(args: argparse.Namespace, out: TextIO) -> int:
    statuses = [s for text in args.status for s in text.split(",") if s.strip()]
    with client_from_args(args) as client:
        jobs = client.list_jobs(
            task=args.task, statuses=statuses, limit=args.limit, selector=args.selector
        )
    rows = [
        [
            str(j.id),
            j.task_name,
            o.status(j),
            rq.enum_label(Trigger, j.trigger),
            str(j.attempt),
            o.when(j, "enqueue_time"),
            o.when(j, "start_time"),
            o.when(j, "finish_time"),
            o.first_line(j.error),
        ]
        for j in jobs
    ]
    headers = [
        "ID", "TASK", "STATUS", "TRIGGER", "ATTEMPT", "ENQUEUED", "STARTED", "FINISHED", "ERROR",
    ]  # fmt: skip
    o.table(headers, rows, out)
    return EXIT_OK


def _get(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        job = client.get_job(args.job_id)
    o.print_fields(job, out, skip=("output_tail",))
    print("output_tail:", file=out)
    for line in job.output_tail.rstrip().splitlines():
        print(f"  {line}", file=out)
    return EXIT_OK


def _watch(args: argparse.Namespace, out: TextIO) -> int:
    last: Job | None = None
    with client_from_args(args) as client:
        for job in client.watch(args.job_id):
            if last is None or job.status != last.status:
                field = {
                    JobStatus.JOB_STATUS_QUEUED: "enqueue_time",
                    JobStatus.JOB_STATUS_RUNNING: "start_time",
                }.get(job.status, "finish_time")
                stamp = o.when(job, field)
                if stamp == "-":
                    stamp = o.iso_utc(datetime.now(UTC))
                line = f"{stamp}  job {job.id}  {job.task_name}  {o.status(job)}"
                if job.status == JobStatus.JOB_STATUS_RUNNING:
                    line += f"  (attempt {job.attempt})"
                if rq.is_terminal(job) and job.error:
                    line += f"  {o.first_line(job.error, 100)}"
                print(line, file=out, flush=True)
            last = job
    if last is None or not rq.is_terminal(last):
        return EXIT_FAILED
    return WAIT_EXIT_CODES.get(last.status, EXIT_FAILED)


def _cancel(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        job = client.cancel_job(args.job_id)
    print(f"job {job.id} {o.status(job)}", file=out)
    return EXIT_OK
