"""The floors pyproject.toml claims: scripts/min_versions.py pins every runtime dependency
to its floor (CI installs those pins in a venv of their own and runs scripts/smoke.py
there); here, the pins are derived as CI derives them, and the smoke script passes on this
interpreter, so that neither rots."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from scripts.min_versions import floor_pins
from tests.harness import REPO, base_env


def test_every_runtime_dependency_is_pinned_to_its_floor() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {Requirement(pin).name: Requirement(pin) for pin in floor_pins()}
    assert len(pins) == len(deps)
    for text in deps:
        req = Requirement(text)
        pin = pins[req.name]
        (floor,) = [s.version for s in req.specifier if s.operator == ">="]
        assert str(pin.specifier) == f"=={floor}"
        assert pin.extras == req.extras
        assert req.specifier.contains(floor)  # the floor is inside the claimed range


def test_a_dependency_without_a_floor_is_refused(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["grpcio>=1.85.1", "tzdata"]\n')
    with pytest.raises(ValueError, match="'tzdata': a runtime dependency needs"):
        floor_pins(pyproject)


def test_the_smoke_script_passes_here() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "smoke.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=base_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "smoke test passed" in result.stdout
