"""Generate the Python protobuf code from proto/ into libs/common/evalsi, or check that it is current.

    python scripts/gen_proto.py          # regenerate
    python scripts/gen_proto.py --check  # exit 1 and list the files that differ when stale
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "libs" / "common"
# Directories of generated code; they hold nothing hand-written.
GENERATED_PACKAGES = ["evalsi/v1alpha1", "evalsi/bus/v1alpha1"]


def _include_dirs() -> list[str]:
    import grpc_tools
    from google.api import annotations_pb2  # googleapis-common-protos ships google/api/*.proto beside it

    well_known = resources.files(grpc_tools) / "_proto"
    googleapis = Path(annotations_pb2.__file__).resolve().parent.parent.parent
    return [str(PROTO_DIR), str(well_known), str(googleapis)]


def generate(out_dir: Path) -> None:
    from grpc_tools import protoc

    sources = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    args = ["protoc", *(f"-I{d}" for d in _include_dirs())]
    args += [f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *sources]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for package in GENERATED_PACKAGES:
        init = out_dir / package / "__init__.py"
        init.write_text('"""Generated from proto/' + package + ' by scripts/gen_proto.py; do not edit."""\n')


def _stale_files(fresh: Path) -> list[str]:
    stale = []
    for package in GENERATED_PACKAGES:
        new, old = fresh / package, OUT_DIR / package
        names = {p.name for p in new.glob("*.py*")} | {p.name for p in old.glob("*.py*")}
        for name in sorted(names):
            a, b = new / name, old / name
            if not (a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)):
                stale.append(f"{package}/{name}")
    return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when the generated code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        if args.check:
            stale = _stale_files(Path(tmp))
            if stale:
                print("generated protobuf code is stale; run `python scripts/gen_proto.py`:", *stale, sep="\n  ")
                return 1
            print("generated protobuf code is current")
            return 0
        for package in GENERATED_PACKAGES:
            target = OUT_DIR / package
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(Path(tmp) / package, target)
    print(f"generated {', '.join(GENERATED_PACKAGES)} under {OUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
