"""Metric 4, next-fire-time cost: microseconds per computation over a fixed mix.

The mix: every (expression, zone) of :data:`MIX` against the same 200 ``after`` instants
(seeded: 2024-2031, a quarter of them in the hour around a DST change of the zone).
Measured, interleaved, each repetition timing the whole mix once per implementation:

- ``tickwork-cached``: ``scheduler_svc.firing.cron_schedule(expr, tz).next_fire_time(after)``
  (the scheduler's path; parsed schedules are cached),
- ``tickwork-parse``: ``CronSchedule(expr, tz).next_fire_time(after)`` (parse every time),
- ``cronsim``: ``next(CronSim(expr, after_local))``, how cronsim is called (it parses in its
  constructor),
- ``croniter``: ``croniter(expr, after_local).get_next(datetime)`` (likewise).

Expressions a peer cannot read (``L`` in croniter's 6-field mode, ...) are timed for every
implementation that can, and the per-implementation count is reported; the headline ratio
uses the subset all four read. Results are compared with cronsim's (same Debian DST rules):
disagreements are counted, not hidden.
"""

from __future__ import annotations

import datetime as dt
import importlib
import random
import time
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from bench import harness
from bench.harness import Config, Figure, MetricResult, Sample, column, median
from scheduler_svc.firing import cron_schedule
from tickwork.cron import CronSchedule

NAME = "nextfire"
UTC = dt.UTC

#: (expression, zone): leap day, Friday-13th OR rule, last day, steps, 6-field, DST zones.
MIX: tuple[tuple[str, str], ...] = (
    ("0 0 29 2 *", "UTC"),
    ("0 0 29 2 *", "Europe/Berlin"),
    ("0 0 13 * 5", "America/New_York"),
    ("0 0 L * *", "UTC"),
    ("0 0 L * *", "Australia/Sydney"),
    ("*/5 * * * *", "UTC"),
    ("*/5 * * * *", "Europe/London"),
    ("30 2 * * *", "Europe/Berlin"),
    ("30 1 * * *", "America/New_York"),
    ("0 * * * *", "Australia/Lord_Howe"),
    ("15 10 * * 1-5", "Asia/Tokyo"),
    ("0 9 * * MON#2", "Europe/Paris"),
    ("0 */2 1,15 * *", "America/Sao_Paulo"),
    ("*/10 * * * * *", "UTC"),
    ("0 30 2 * * *", "Europe/Berlin"),
    ("30 0 9 * * MON-FRI", "Europe/London"),
    ("*/15 */5 * * * *", "America/Los_Angeles"),
)

Impl = Callable[[str, str, dt.datetime], dt.datetime | None]


def afters(count: int = 200, seed: int = 6) -> list[dt.datetime]:
    """``count`` aware UTC instants, a quarter of them within an hour of a DST change."""
    rng = random.Random(seed)
    lo = dt.datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    hi = dt.datetime(2031, 1, 1, tzinfo=UTC).timestamp()
    out = []
    transitions = [
        dt.datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # Europe spring forward
        dt.datetime(2026, 10, 25, 1, 0, tzinfo=UTC),  # Europe fall back
        dt.datetime(2026, 3, 8, 7, 0, tzinfo=UTC),  # US spring forward
        dt.datetime(2026, 11, 1, 6, 0, tzinfo=UTC),  # US fall back
    ]
    for i in range(count):
        if i % 4 == 0:
            base = transitions[(i // 4) % len(transitions)]
            out.append(base + dt.timedelta(seconds=rng.uniform(-3600, 3600)))
        else:
            out.append(dt.datetime.fromtimestamp(rng.uniform(lo, hi), UTC))
    return out


def _tickwork_cached(expr: str, tz: str, after: dt.datetime) -> dt.datetime | None:
    return cron_schedule(expr, tz).next_fire_time(after)


def _tickwork_parse(expr: str, tz: str, after: dt.datetime) -> dt.datetime | None:
    return CronSchedule(expr, tz).next_fire_time(after)


def _peers() -> dict[str, Impl]:
    cronsim: Any = importlib.import_module("cronsim").CronSim
    croniter: Any = importlib.import_module("croniter").croniter
    zones: dict[str, ZoneInfo] = {}

    def zone(tz: str) -> ZoneInfo:
        z = zones.get(tz)
        if z is None:
            z = zones[tz] = ZoneInfo(tz)
        return z

    def use_cronsim(expr: str, tz: str, after: dt.datetime) -> dt.datetime | None:
        result: dt.datetime = next(cronsim(expr, after.astimezone(zone(tz))))
        return result

    def use_croniter(expr: str, tz: str, after: dt.datetime) -> dt.datetime | None:
        six = len(expr.split()) == 6
        it = croniter(expr, after.astimezone(zone(tz)), second_at_beginning=six)
        result: dt.datetime = it.get_next(dt.datetime)
        return result

    return {"cronsim": use_cronsim, "croniter": use_croniter}


def _supported(impl: Impl, expr: str, tz: str, after: dt.datetime) -> bool:
    try:
        impl(expr, tz, after)
    except Exception:
        return False
    return True


def _time_mix(impl: Impl, cases: list[tuple[str, str, dt.datetime]], rounds: int) -> float:
    """Microseconds per computation: best of ``rounds`` passes over ``cases``."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for expr, tz, after in cases:
            impl(expr, tz, after)
        best = min(best, (time.perf_counter_ns() - t0) / 1000 / len(cases))
    return best


def run(cfg: Config) -> MetricResult:
    """Time the four implementations over the mix, interleaved."""
    harness.require("cronsim", "croniter")
    instants = afters(cfg.pick(20, 200, 500))
    rounds: int = cfg.pick(1, 5, 10)
    impls: dict[str, Impl] = {
        "tickwork-cached": _tickwork_cached,
        "tickwork-parse": _tickwork_parse,
        **_peers(),
    }
    all_cases = [(e, z, a) for e, z in MIX for a in instants]
    common = [
        (e, z, a)
        for e, z in MIX
        if all(_supported(impl, e, z, instants[0]) for impl in impls.values())
        for a in instants
    ]
    per_impl = {
        name: [(e, z, a) for e, z in MIX if _supported(impl, e, z, instants[0]) for a in instants]
        for name, impl in impls.items()
    }
    # Exactness: tickwork against cronsim on the common subset (same Debian DST rules).
    disagree = [
        (e, z, a.isoformat())
        for e, z, a in common
        if _as_utc(_tickwork_cached(e, z, a)) != _as_utc(impls["cronsim"](e, z, a))
    ]

    def runner(name: str) -> Callable[[int], Sample]:
        def one(rep: int) -> Sample:
            return {
                "us_common": _time_mix(impls[name], common, rounds),
                "us_all_readable": _time_mix(impls[name], per_impl[name], rounds),
            }

        return one

    samples = harness.interleave(cfg.reps, {name: runner(name) for name in impls})
    peer = column(samples["cronsim"], "us_common")
    figures = []
    for name in ("tickwork-cached", "tickwork-parse"):
        ours = column(samples[name], "us_common")
        figures.append(
            Figure(
                NAME,
                f"{name} vs cronsim (common mix)",
                "us/call",
                median(ours),
                median(peer),
                "cronsim",
                target="<= cronsim" if name == "tickwork-cached" else "",
                met=median(ours) <= median(peer) if name == "tickwork-cached" else None,
                tickwork_samples=ours,
                peer_samples=peer,
            )
        )
    croniter_us = column(samples["croniter"], "us_common")
    cached = column(samples["tickwork-cached"], "us_common")
    figures.append(
        Figure(
            NAME,
            "tickwork-cached vs croniter (common mix)",
            "us/call",
            median(cached),
            median(croniter_us),
            "croniter",
            tickwork_samples=cached,
            peer_samples=croniter_us,
        )
    )
    details = {
        "mix": MIX,
        "instants": len(instants),
        "common_expressions": sorted({(e, z) for e, z, _ in common}),
        "readable_calls": {name: len(cases) for name, cases in per_impl.items()},
        "all_calls": len(all_cases),
        "disagreements_with_cronsim": disagree[:50],
        "disagreement_count": len(disagree),
        "samples": samples,
    }
    harness.log(f"  disagreements with cronsim on the common mix: {len(disagree)} of {len(common)}")
    return MetricResult(NAME, figures, details)


def _as_utc(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else value.astimezone(UTC)
