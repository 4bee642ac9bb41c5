"""Every benchmark of ``bench/`` runs at tiny size, so none of them rots.

Each metric runs as docs/benchmarks.md's command would run it (``python -m bench --size tiny``), in
a subprocess, and must exit 0 and write finite figures. The peers come with the ``bench``
extra that CI installs: a missing peer fails here, loudly, instead of being skipped.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
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
PEERS = ("procrastinate", "psycopg", "apscheduler", "croniter", "cronsim")


def test_peers_are_installed() -> None:
    missing = [name for name in PEERS if importlib.util.find_spec(name) is None]
    assert not missing, f'bench peers missing: {missing}; pip install -e ".[bench]"'


@pytest.mark.timeout(60)
@pytest.mark.parametrize("metric", METRICS)
def test_benchmark_runs_at_tiny_size(metric: str, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    argv = [sys.executable, "-m", "bench", "--size", "tiny", "--reps", "1"]
    proc = subprocess.run(
        [*argv, "--metric", metric, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=55,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    doc = json.loads(out.read_text())
    assert doc["size"] == "tiny"
    (result,) = doc["metrics"]
    assert result["metric"] == metric
    assert result["figures"], "a metric without figures"
    for figure in result["figures"]:
        assert math.isfinite(figure["tickwork"]), figure
        if figure["peer"] is not None:
            assert math.isfinite(figure["peer"]), figure
