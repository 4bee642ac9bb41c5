"""Regenerate the Python stubs in client/tickwork/v1/ from protos/tickwork/v1/*.proto.

Usage: ``python scripts/gen_protos.py`` (regenerate) or ``python scripts/gen_protos.py --check``
(exit 1 when the committed stubs differ from what the protos generate; CI runs this).
Needs the ``dev`` extra (grpcio-tools and mypy-protobuf at pinned versions).
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
OUT_DIR = ROOT / "client"
GEN_DIR = OUT_DIR / "tickwork" / "v1"


def generate(out: Path) -> None:
    """Run protoc (from grpcio-tools) into ``out``; raises CalledProcessError on failure."""
    import grpc_tools

    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    bindir = Path(sys.executable).parent
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            f"--mypy_grpc_out={out}",
            *protos,
        ],
        check=True,
        cwd=ROOT,
    )
    (out / "tickwork" / "v1" / "__init__.py").write_text(
        '"""Generated protobuf and gRPC stubs of tickwork.v1 (do not edit)."""\n'
    )


def main() -> int:
    check = "--check" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        generate(out)
        fresh = out / "tickwork" / "v1"
        if check:
            names = sorted(p.name for p in fresh.iterdir())
            committed = sorted(p.name for p in GEN_DIR.iterdir() if p.name != "__pycache__")
            _, mismatch, errors = filecmp.cmpfiles(fresh, GEN_DIR, names, shallow=False)
            if names != committed or mismatch or errors:
                print(
                    "generated stubs are stale: run `python scripts/gen_protos.py` "
                    f"(differs: {sorted(set(names) ^ set(committed)) + mismatch + errors})"
                )
                return 1
            print("generated stubs are current")
            return 0
        if GEN_DIR.exists():
            shutil.rmtree(GEN_DIR)
        shutil.copytree(fresh, GEN_DIR)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
