"""``tickwork tasks``: list, get, run (and follow with --wait), abort, enable, disable,
delete."""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork._sync import Client
from tickwork.cli import _output as o
from tickwork.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STILL_RUNNING,
    SKIP_TEXT,
    WAIT_EXIT_CODES,
    client_from_args,
    label_options,
    label_pair,
    labels_of,
    labels_text,
    seconds,
    selector_option,
)
from tickwork.errors import InvalidArgument, JobTimeout
from tickwork.v1.common_pb2 import TaskRun, Trigger
from tickwork.v1.job_pb2 import Job, JobStatus
from tickwork.v1.task_pb2 import Task, TaskAbort

_ABORT_TEXT = {
    TaskAbort.Action.ACTION_CANCELLED: "queued job {job} cancelled",
    TaskAbort.Action.ACTION_ABORT_REQUESTED: "running job {job} told to abort "
    "(it ends ABORTED once the worker has stopped it)",
    TaskAbort.Action.ACTION_NONE: "nothing queued or running",
}


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``tasks`` and its actions; ``net`` is the parent parser of the connection
    options."""
    tasks = sub.add_parser(
        "tasks", help="list, inspect, run, abort, enable, disable and delete tasks"
    )
    tsub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    p = tsub.add_parser("list", parents=[net], help="list tasks")
    selector_option(p, "tasks")
    p.set_defaults(func=_list)
    p = tsub.add_parser(
        "run",
        parents=[net],
        help="run tasks now (manual lane)",
        description="Run one or more tasks now, in one call (all or none). With --wait (one "
        "task), show the job's progress live (state, "
        "elapsed time, output as it arrives; a failed attempt's retry is followed; a "
        "service restart is waited out) and exit "
        "with its outcome: 0 SUCCEEDED, 1 FAILED, 3 ABORTED, 4 CANCELLED, 5 still running "
        "when --timeout ran out.",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="task name; several run together")
    p.add_argument("--wait", action="store_true", help="follow the job until it ends")
    p.add_argument(
        "--timeout", type=seconds, metavar="S", help="with --wait: give up after S seconds"
    )
    p.add_argument(
        "--param",
        type=label_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a param for this job only, patched over the task's (JSON Merge Patch); KEY is "
        "a dotted path (env.REGION=eu sets one variable and keeps the task's others); VALUE "
        "is JSON when it parses as JSON, else text; repeatable. An operator may set only "
        "the paths the task declares in overridable_params",
    )
    p.add_argument(
        "--not-before",
        type=aware_time,
        metavar="TIME",
        help="keep the job queued until TIME, ISO 8601 with an offset (2026-12-01T15:00:00Z)",
    )
    p.add_argument(
        "--label",
        type=label_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label on the job (VALUE as text); repeatable",
    )
    p.set_defaults(func=_run)
    p = tsub.add_parser(
        "get",
        parents=[net],
        help="show every field of a task",
        description="Show every field of a task: params and retry policy as JSON, the "
        "whole disabled_reason when it was disabled after consecutive failures.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_get)
    p = tsub.add_parser(
        "abort",
        parents=[net],
        help="stop a task's running job, or cancel its queued one",
        description="Stop the task's job: a queued one is cancelled (CANCELLED), a running "
        "one is aborted (the worker stops its handler; shell: SIGTERM, then SIGKILL after "
        "WORKER_ABORT_GRACE_SECONDS) and ends ABORTED. Aborted jobs are not retried.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_abort)
    p = tsub.add_parser(
        "enable",
        parents=[net],
        help="enable a task",
        description="Enable a task: its disable note is cleared and its failure count reset.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_enable, enabled=True)
    p = tsub.add_parser(
        "disable",
        parents=[net],
        help="disable a task, with a note",
        description="Disable a task: the scheduler no longer enqueues it (a manual run "
        "still runs it). The note, who disabled it (the token's label) and when are shown "
        "by tasks list and tasks get.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.add_argument("--note", default="", metavar="TEXT", help="why, for people")
    p.add_argument(
        "--until",
        type=aware_time,
        metavar="TIME",
        help="enable it again by itself at TIME, ISO 8601 with an offset (2026-12-01T15:00:00Z)",
    )
    p.set_defaults(func=_enable, enabled=False)
    p = tsub.add_parser(
        "label",
        parents=[net],
        help="set a task's labels",
        description="Replace a task's labels with those given (tasks list --selector "
        "K=V picks tasks by them; apply --prune uses them as ownership).",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    label_options(p)
    p.set_defaults(func=_label)
    p = tsub.add_parser(
        "delete",
        parents=[net],
        help="delete a task, its jobs and its place in schedules",
        description="Delete a task with all its jobs (their history too) and its place in "
        "schedules. Refused (FAILED_PRECONDITION) while it has a running job, or when it is "
        "the only task of a schedule: delete or change that schedule first.",
    )
    p.add_argument("name", metavar="NAME", help="task name")
    p.set_defaults(func=_delete)


def json_or_text(value: str) -> Any:
    """``value`` as JSON when it parses as JSON (``3``, ``true``, ``["a"]``), else the text."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def aware_time(text: str) -> datetime:
    """An ISO 8601 date-time with an offset or ``Z`` (argparse type)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"needs an offset or Z (e.g. {text}Z), got {text!r}")
    return value


def _list(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        tasks = client.list_tasks(selector=args.selector)
    rows = [
        [
            str(t.id),
            t.name,
            t.handler,
            "yes" if t.enabled else "no",
            str(t.task_priority),
            str(t.consecutive_failure_count),
            labels_text(t.labels),
            o.when(t, "last_success_time"),
            o.when(t, "last_failure_time"),
            o.first_line(_note(t)),
        ]
        for t in tasks
    ]
    headers = [
        "ID",
        "NAME",
        "HANDLER",
        "ENABLED",
        "PRIORITY",
        "FAILURES",
        "LABELS",
        "LAST SUCCESS (UTC)",
        "LAST FAILURE (UTC)",
        "NOTE",
    ]
    o.table(headers, rows, out)
    return EXIT_OK


def _note(task: Task) -> str:
    """A task's note for a listing: why and by whom it is disabled (until when), else its
    description."""
    if task.enabled:
        return task.description
    text = task.disable_note or task.disabled_reason
    by = f" (by {task.disabled_by}" if task.disabled_by else " ("
    until = f", until {o.when(task, 'disabled_until')}" if task.HasField("disabled_until") else ""
    return f"{text}{by}{until})" if by != " (" or until else text


def params_patch(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """``--param`` pairs as one params_override: a dotted KEY (``env.REGION``) nests its
    value in objects; VALUE is JSON when it parses as JSON, else text.

    Raises:
        InvalidArgument: a KEY with an empty name between dots, or one whose start another
            --param already set to a value that is not an object.
    """
    patch: dict[str, Any] = {}
    for key, value in pairs:
        *parents, last = key.split(".")
        if not last or not all(parents):
            raise InvalidArgument(f"--param {key}: expected a dotted path such as env.REGION")
        into = patch
        for depth, name in enumerate(parents):
            into = into.setdefault(name, {})
            if not isinstance(into, dict):
                start = ".".join(parents[: depth + 1])
                raise InvalidArgument(f"--param {key}: {start} is already set by another --param")
        into[last] = json_or_text(value)
    return patch


def _run(args: argparse.Namespace, out: TextIO) -> int:
    if args.timeout is not None and not args.wait:
        raise InvalidArgument("--timeout: only with --wait")
    if args.wait and len(args.names) > 1:
        raise InvalidArgument("--wait: follows one job; give one NAME")
    with client_from_args(args) as client:
        runs = client.run(
            *args.names,
            trigger=Trigger.TRIGGER_MANUAL,
            params_override=params_patch(args.param),
            not_before=args.not_before,
            labels=dict(args.label),
        )
        for name, run in zip(args.names, runs, strict=True):
            prefix = f"{name}: " if len(args.names) > 1 else ""
            print(prefix + _run_text(run), file=out)
        out.flush()
        if not args.wait:
            return EXIT_OK
        [run] = runs
        if not run.job_id:
            return EXIT_FAILED
        return _follow(client, run.job_id, args.timeout, out)


def _run_text(run: TaskRun) -> str:
    """``job N`` (promoted or not), or ``skipped: why (job N)``."""
    if run.skipped:
        reason = SKIP_TEXT.get(run.skip_reason, "skipped")
        return f"skipped: {reason}" + (f" (job {run.job_id})" if run.job_id else "")
    return f"job {run.job_id}" + (" (promoted to the manual lane)" if run.promoted else "")


def new_output(before: str, after: str) -> str:
    """The text appended between two snapshots of a job's output tail.

    The tail keeps the last few KB, so ``after`` may have lost a prefix of ``before``: the
    longest suffix of ``before`` that starts ``after`` is what both have in common.
    """
    if after.startswith(before):
        return after[len(before) :]
    if before.rstrip("\n").endswith(after.rstrip("\n")):
        return ""  # the final tail, as the worker reported it, repeats what was shown
    for start in range(1, len(before)):
        if after.startswith(before[start:]):
            return after[len(before) - start :]
    return after


def _follow(client: Client, job_id: int, timeout: float | None, out: TextIO) -> int:
    """Print a job's progress as it happens (state changes with the elapsed time, output
    lines as they arrive), follow its retries, and return its outcome's exit status."""
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {text}", file=out, flush=True)

    while True:
        last: Job | None = None
        shown = ""
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        try:
            for job in client.watch(job_id, timeout=remaining):
                if last is None or job.status != last.status:
                    extra = f" (attempt {job.attempt})" if job.attempt > 1 or last else ""
                    if rq.is_terminal(job):
                        took = o.duration(job)
                        extra = f" (attempt {job.attempt}" + (f", {took})" if took else ")")
                    say(f"job {job.id} {o.status(job)}{extra}")
                text = new_output(shown, job.output_tail)
                shown = job.output_tail
                for line in text.splitlines():
                    print(f"  | {line}", file=out, flush=True)
                last = job
        except JobTimeout:
            state = o.status(last) if last is not None else "unknown"
            say(f"job {job_id} still {state} after {timeout:g} s; it goes on")
            return EXIT_STILL_RUNNING
        if last is None or not rq.is_terminal(last):
            return EXIT_FAILED
        if last.error:
            first, *more = last.error.rstrip().splitlines() or [""]
            print(f"error: {first}", file=out, flush=True)
            for line in more:  # indented: the job's text cannot pass for a line of ours
                print(f"       {line}", file=out, flush=True)
        retry = _retry_of(client, last)
        if retry is None:
            return WAIT_EXIT_CODES.get(last.status, EXIT_FAILED)
        when = o.when(retry, "not_before_time")
        say(f"retry: job {retry.id} (attempt {retry.attempt}), not before {when}")
        job_id = retry.id


def _retry_of(client: Client, job: Job) -> Job | None:
    """The job queued as the retry of a failed ``job``, if there is one."""
    if job.status != JobStatus.JOB_STATUS_FAILED:
        return None
    for candidate in client.list_jobs(task=job.task_id, limit=20):
        if candidate.retry_of_job_id == job.id:
            return candidate
    return None


def _get(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        task = client.get_task(args.name)
    o.print_fields(task, out)
    return EXIT_OK


def _abort(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        [abort] = client.abort(args.name)
    print(f"task {args.name}: {abort_text(abort)}", file=out)
    return EXIT_OK


def abort_text(abort: TaskAbort) -> str:
    """What AbortTasks did to one task, for people: the job it names and how many queued
    jobs of the task it cancelled, e.g. ``"running job 7 told to abort (...); 3 queued jobs
    cancelled"``."""
    text = _ABORT_TEXT.get(abort.action, "{job}").format(job=abort.job_id)
    count = abort.cancelled_job_count
    jobs = f"{count} queued job{'' if count == 1 else 's'} cancelled"
    if abort.action == TaskAbort.Action.ACTION_CANCELLED:
        return f"{text} ({jobs} in all)"
    if abort.action == TaskAbort.Action.ACTION_ABORT_REQUESTED:
        return f"{text}; {jobs}"
    return text


def _enable(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        if args.enabled:
            task: Task = client.enable_task(args.name)
        else:
            task = client.disable_task(args.name, note=args.note, until=args.until)
    state = "enabled" if task.enabled else "disabled"
    if task.HasField("disabled_until"):
        state += f" until {o.when(task, 'disabled_until')}"
    print(f"task {task.name}: {state}", file=out)
    return EXIT_OK


def _label(args: argparse.Namespace, out: TextIO) -> int:
    labels = labels_of(args)
    with client_from_args(args) as client:
        task = client.update_task(args.name, labels=labels)
    print(f"task {task.name}: labels {labels_text(task.labels)}", file=out)
    return EXIT_OK


def _delete(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        client.delete_task(args.name)
    print(f"task {args.name}: deleted", file=out)
    return EXIT_OK
