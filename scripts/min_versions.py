"""Print the runtime dependencies of pyproject.toml pinned to their floors, one per line.

Usage: ``python scripts/min_versions.py > pins.txt`` then ``pip install -r pins.txt``: CI
(.ci/run) installs them into a venv of their own and runs tests/smoke_min_versions.py
there, so that every floor pyproject.toml claims is one that works. Every runtime
dependency must have a ``>=`` floor: one without is an error (exit 1), so that none can be
left unproven. Extras are kept (``sqlalchemy[asyncio]==2.0.30``).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def floor_pins(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """``name[extras]==floor`` for every ``[project] dependencies`` entry of ``pyproject``.

    Raises:
        ValueError: a dependency has no ``>=`` floor (the message names it).
    """
    project = tomllib.loads(pyproject.read_text())["project"]
    pins = []
    for text in project["dependencies"]:
        req = Requirement(text)
        floors = [spec.version for spec in req.specifier if spec.operator == ">="]
        if len(floors) != 1:
            raise ValueError(f"{text!r}: a runtime dependency needs exactly one >= floor")
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        pins.append(f"{req.name}{extras}=={floors[0]}")
    return pins


def main() -> int:
    """Print the pins; exit 1 naming a dependency without a floor."""
    try:
        print("\n".join(floor_pins()))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
