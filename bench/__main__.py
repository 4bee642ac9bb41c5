"""``python -m bench``: run the benchmarks, print the table, write bench/results/<time>.json.

Examples::

    python -m bench --size small                 # every metric, small size
    python -m bench --size full --metric nextfire --metric tick
    python -m bench --size tiny --reps 1         # what the smoke test runs
    python -m bench --size small --metric dispatch --profile   # py-spy the services

Exit code 0 when every metric ran (targets missed or not), 1 when one failed to run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import signal
import sys
import tempfile
import traceback
from pathlib import Path

from bench import harness
from bench.harness import Config, MetricResult

METRICS = (
    "dispatch",
    "isolation",
    "scaleout",
    "lateness",
    "tick",
    "nextfire",
    "bulk",
    "floors",
)

#: Repetitions per size when --reps is not given (lateness runs fewer at full: 5 min each).
DEFAULT_REPS = {"tiny": 1, "small": 3, "full": 3}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=harness.SIZES, default="small")
    parser.add_argument(
        "--metric",
        action="append",
        choices=METRICS,
        help="run only this metric (repeatable); default: all",
    )
    parser.add_argument(
        "--metric-size",
        action="append",
        default=[],
        metavar="METRIC=SIZE",
        help="override the size of one metric, e.g. lateness=small",
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions per side")
    parser.add_argument("--no-pin", action="store_true", help="do not pin with taskset")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the services under py-spy; summaries printed, raw stacks kept in results/",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen metrics; return the exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM unwinds like Ctrl-C, so the services and databases of the run are cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or harness.RESULTS_DIR / f"{stamp}.json"
    sizes: dict[str, harness.Size] = {}
    for item in args.metric_size:
        metric, _, size = item.partition("=")
        if metric not in METRICS or size not in harness.SIZES:
            raise SystemExit(f"--metric-size: expected METRIC=SIZE, got {item!r}")
        sizes[metric] = size
    profile_dir = harness.RESULTS_DIR / f"{stamp}-profiles" if args.profile else None
    harness.compile_sources()
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    results: list[MetricResult] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="tickwork-bench-") as tmp:
        for metric in args.metric or METRICS:
            size = sizes.get(metric, args.size)
            cfg = Config(
                size=size,
                reps=args.reps or DEFAULT_REPS[size],
                pin=not args.no_pin,
                workdir=Path(tmp),
                profile_dir=profile_dir,
            )
            harness.pin_self(cfg)
            harness.log(f"== {metric} (size {size}, {cfg.reps} reps)")
            try:
                module = importlib.import_module(f"bench.{metric}")
                result: MetricResult = module.run(cfg)
                result.details = {"size": size, "reps": cfg.reps, **result.details}
                results.append(result)
            except Exception:
                failed = True
                harness.log(f"!! {metric} failed:\n{traceback.format_exc()}")
        if profile_dir is not None:
            for path in sorted(profile_dir.glob("*.txt")):
                print(harness.summarize_profile(path))
    harness.write_json(out, cfg, results, ["python", "-m", "bench", *(argv or sys.argv[1:])])
    print(harness.table(results))
    print(f"\nJSON: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
