"""``python -m scheduler_svc [--listen HOST:PORT] [--config FILE]``: same as ``tickwork serve``."""

from __future__ import annotations

import argparse

from scheduler_svc.server import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m scheduler_svc")
    parser.add_argument("--listen", default=None)
    parser.add_argument("--config", default=None)
    args = parser.parse_args()
    raise SystemExit(main(args.listen, args.config))
