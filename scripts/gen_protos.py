"""Regenerate the Python stubs in client/tickwork/v1/ from protos/tickwork/v1/*.proto.

Usage: ``python scripts/gen_protos.py`` (regenerate) or ``python scripts/gen_protos.py --check``
(exit 1 when the committed stubs differ from what the protos generate; CI runs this).
Needs the ``dev`` extra (grpcio-tools and mypy-protobuf at pinned versions).

The protos import ``google/api/field_behavior.proto``, which the installed
googleapis-common-protos package ships. Both modes first copy it (and any other imported
googleapis file listed in :data:`DEPS`) into ``.ci/proto-deps/`` (ignored by git, never
committed): protoc reads it there, and ``buf.yaml`` names that folder as a module of the
workspace (not linted), so ``buf lint`` needs no network and no registry. Run this before
``buf lint`` on a fresh checkout.
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
DEPS_DIR = ROOT / ".ci" / "proto-deps"
#: The googleapis protos the protos import, as paths inside googleapis-common-protos.
DEPS = ("google/api/field_behavior.proto",)


def place_deps() -> Path:
    """Copy :data:`DEPS` from the installed googleapis-common-protos into
    :data:`DEPS_DIR` (replacing what was there) and return that folder."""
    import google.api.field_behavior_pb2 as field_behavior

    # site-packages/google/api/field_behavior_pb2.py -> site-packages
    package_root = Path(field_behavior.__file__).resolve().parent.parent.parent
    if DEPS_DIR.exists():
        shutil.rmtree(DEPS_DIR)
    for dep in DEPS:
        target = DEPS_DIR / dep
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package_root / dep, target)
    return DEPS_DIR


def generate(out: Path) -> None:
    """Run protoc (from grpcio-tools) into ``out``; raises CalledProcessError on failure."""
    import grpc_tools

    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    deps = place_deps()
    bindir = Path(sys.executable).parent
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{deps}",
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
