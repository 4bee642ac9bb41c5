"""``tickwork schedules create``, ``update``, ``get`` and ``preview``: a schedule's timing,
catch-up, jitter, bounds and overlap policy from flags named after its fields, and its next
fire times with the starts its jitter gives them."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork.cli import _output as o
from tickwork.cli._common import EXIT_OK, client_from_args, count
from tickwork.cli._tasks import aware_time
from tickwork.errors import InvalidArgument
from tickwork.jitter import jitter_text, stable_delay_s
from tickwork.v1.schedule_pb2 import JitterMode, OverlapPolicy, Schedule

#: Flag -> SDK keyword of the catch-up, jitter and bounds fields.
_TIMING_FLAGS = {
    "catch_up_window": "catch_up_window_seconds",
    "max_catch_up_runs": "max_catch_up_runs",
    "jitter": "jitter_seconds",
    "jitter_mode": "jitter_mode",
    "start_time": "start_time",
    "end_time": "end_time",
    "overlap_policy": "overlap_policy",
    "max_buffered": "max_buffered",
    "start_deadline": "start_deadline_seconds",
}


def time_or_none(text: str) -> dt.datetime | None:
    """An ISO 8601 date-time with an offset, or ``none`` to remove the bound (argparse
    type)."""
    return None if text.strip().lower() == "none" else aware_time(text)


class _Suppressed:
    """Adds arguments to ``parser`` that are absent from the namespace when not given."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def add_argument(self, *names: str, **kwargs: Any) -> None:
        self.parser.add_argument(*names, default=argparse.SUPPRESS, **kwargs)


def _timing_flags(parser: argparse.ArgumentParser) -> None:
    """The timing flags; each left out is absent from the parsed namespace (so that
    ``--end-time none`` can be told from no ``--end-time``)."""
    p = _Suppressed(parser)
    p.add_argument("--timezone", metavar="ZONE", help="IANA zone the expression is read in")
    p.add_argument(
        "--catch-up",
        dest="catch_up_policy",
        metavar="POLICY",
        help="after downtime: SKIP (default), RUN_ONCE or RUN_ALL",
    )
    p.add_argument(
        "--catch-up-window",
        type=float,
        metavar="SECONDS",
        help="how old a missed window may be and still fire after downtime (default 5)",
    )
    p.add_argument(
        "--max-catch-up-runs",
        type=int,
        metavar="N",
        help="RUN_ALL's cap on the windows fired after downtime (0: 100; at most 10,000)",
    )
    p.add_argument(
        "--jitter",
        type=float,
        metavar="SECONDS",
        help="most delay added to each fire's start (0 to 86400; default 0)",
    )
    p.add_argument(
        "--jitter-mode",
        metavar="MODE",
        help="RANDOM (a new delay per fire, the default) or STABLE (one from the name)",
    )
    p.add_argument(
        "--start-time",
        type=time_or_none,
        metavar="TIME",
        help="no fire before this ISO 8601 time with an offset ('none': no bound)",
    )
    p.add_argument(
        "--end-time",
        type=time_or_none,
        metavar="TIME",
        help="no fire at or after this time; after --start-time ('none': no bound)",
    )
    p.add_argument(
        "--overlap-policy",
        type=_overlap_policy,
        metavar="POLICY",
        help="what a fire does while a job of its task is queued or running: SKIP (default), "
        "BUFFER_ONE, BUFFER_ALL, REPLACE or ALLOW",
    )
    p.add_argument(
        "--max-buffered",
        type=int,
        metavar="N",
        help="the cap on waiting fires under BUFFER_ALL and on queued jobs under ALLOW: "
        "0 (meaning 100) to 10000",
    )
    p.add_argument(
        "--start-deadline",
        type=float,
        metavar="SECONDS",
        help="notify (start_deadline) when a fire's job has not started this long after the "
        "fire time; 0: never",
    )
    p.add_argument("--description", help="free text")


def _overlap_policy(text: str) -> str:
    """An overlap policy's name, checked (``buffer-all`` and ``BUFFER_ALL`` alike)."""
    try:
        policy = rq.parse_overlap_policy(text)
    except InvalidArgument as err:
        raise argparse.ArgumentTypeError(err.details.split(": ", 1)[-1]) from None
    return OverlapPolicy.Name(policy).removeprefix("OVERLAP_POLICY_")


def add_parsers(ssub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``create``, ``update``, ``get`` and ``preview`` to ``tickwork schedules``."""
    p = ssub.add_parser("create", parents=[net], help="create a schedule")
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument(
        "--task", dest="tasks", action="append", required=True, metavar="TASK",
        help="a task it runs (repeat for several)",
    )  # fmt: skip
    timing = p.add_mutually_exclusive_group(required=True)
    timing.add_argument("--cron", metavar="EXPR", help="cron expression")
    timing.add_argument("--interval", type=int, metavar="SECONDS", help="interval, seconds")
    _timing_flags(p)
    p.add_argument("--disabled", action="store_true", help="create it disabled")
    p.set_defaults(func=_create)
    p = ssub.add_parser("update", parents=[net], help="change the given fields of a schedule")
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument("--cron", metavar="EXPR", help="cron expression")
    p.add_argument("--interval", type=int, metavar="SECONDS", help="interval (clears the cron)")
    p.add_argument("--task", dest="tasks", action="append", metavar="TASK", help="replace tasks")
    _timing_flags(p)
    p.set_defaults(func=_update)
    p = ssub.add_parser("get", parents=[net], help="show a schedule's fields")
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.set_defaults(func=_get)
    p = ssub.add_parser(
        "preview", parents=[net], help="a schedule's next fire times and their jittered starts"
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument("--count", type=count, default=5, metavar="N", help="default 5")
    p.set_defaults(func=_preview)


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    """The SDK keywords of the timing flags given (a bound given as ``none`` is kept, as
    None, to remove it)."""
    given = vars(args)
    out = {keyword: given[flag] for flag, keyword in _TIMING_FLAGS.items() if flag in given}
    for key in ("timezone", "catch_up_policy", "description"):
        if key in given:
            out[key] = given[key]
    return out


def _create(args: argparse.Namespace, out: TextIO) -> int:
    fields = {k: v for k, v in _fields(args).items() if v is not None}
    with client_from_args(args) as client:
        schedule = client.create_schedule(
            args.name,
            args.tasks,
            cron=args.cron,
            interval_seconds=args.interval,
            enabled=not args.disabled,
            **fields,
        )
    print(
        f"schedule {schedule.name}: created, next run {o.when(schedule, 'next_run_time')}", file=out
    )
    _print_start(schedule, out)
    return EXIT_OK


def _update(args: argparse.Namespace, out: TextIO) -> int:
    fields = _fields(args)
    if args.cron is not None:
        fields["cron"] = args.cron
    if args.interval is not None:
        fields["interval_seconds"] = args.interval
    if args.tasks:
        fields["tasks"] = args.tasks
    with client_from_args(args) as client:
        schedule = client.update_schedule(args.name, **fields)
    print(
        f"schedule {schedule.name}: updated, next run {o.when(schedule, 'next_run_time')}", file=out
    )
    _print_start(schedule, out)
    return EXIT_OK


def _get(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedule = client.get_schedule(args.name)
    o.print_fields(schedule, out)
    _print_start(schedule, out)
    return EXIT_OK


def _print_start(schedule: Schedule, out: TextIO) -> None:
    """The jittered start of the next run: exact for STABLE, a range for RANDOM."""
    if not schedule.HasField("next_run_time") or schedule.jitter_seconds <= 0:
        return
    nominal = rq.to_datetime(schedule.next_run_time)
    if schedule.jitter_mode == JitterMode.JITTER_MODE_STABLE:
        start = nominal + dt.timedelta(
            seconds=stable_delay_s(schedule.name, schedule.jitter_seconds)
        )
        print(f"next start  {o.iso_utc(start)} (stable jitter)", file=out)
    else:
        latest = nominal + dt.timedelta(seconds=schedule.jitter_seconds)
        print(
            f"next start  between {o.iso_utc(nominal)} and {o.iso_utc(latest)} (random jitter)",
            file=out,
        )


def _preview(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedule = client.get_schedule(args.name)
        times = _next_times(client, schedule, args.count)
    mode = "STABLE" if schedule.jitter_mode == JitterMode.JITTER_MODE_STABLE else "RANDOM"
    stable = stable_delay_s(schedule.name, schedule.jitter_seconds) if mode == "STABLE" else None
    rows = []
    for when in times:
        if schedule.jitter_seconds <= 0:
            start = o.iso_utc(when)
        elif stable is not None:
            start = o.iso_utc(when + dt.timedelta(seconds=stable))
        else:
            start = f"by {o.iso_utc(when + dt.timedelta(seconds=schedule.jitter_seconds))}"
        rows.append([o.iso_utc(when), start])
    o.table(["FIRE TIME (UTC)", "START (UTC)"], rows, out)
    text = jitter_text(schedule.name, schedule.jitter_seconds, mode)
    if text:
        print(f"starts: {text}", file=out)
    if not times:
        print("no next run (disabled, or past its end time)", file=out)
    return EXIT_OK


def _next_times(client: Any, schedule: Schedule, n: int) -> list[dt.datetime]:
    """The schedule's next ``n`` nominal fire times from its next run, before its end time
    (an interval schedule's are one interval apart, as if each run took no time)."""
    if not schedule.HasField("next_run_time"):
        return []
    first = rq.to_datetime(schedule.next_run_time)
    if schedule.cron_expression:
        after = first - dt.timedelta(microseconds=1)
        answer = client.describe_cron(schedule.cron_expression, schedule.timezone, after, n)
        times = [rq.to_datetime(p.fire_time) for p in answer.fire_times]
    else:
        step = dt.timedelta(seconds=schedule.interval_seconds)
        times = [first + k * step for k in range(n)]
    if schedule.HasField("end_time"):
        end = rq.to_datetime(schedule.end_time)
        times = [t for t in times if t < end]
    return times
