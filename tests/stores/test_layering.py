"""The trace model sits below ingest: online policies, the stores and the model itself never import ``evalsi.ingest``.

Two checks, because each misses what the other sees: the source of every module (function-level and
``TYPE_CHECKING`` imports included, which a process may never execute), and a fresh interpreter's
``sys.modules`` after importing the packages (an import reached through another package).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import evalsi

PACKAGE_ROOT = Path(evalsi.__file__).parent
BELOW_INGEST = ("policy", "stores", "traces")


def imported_modules(path: Path, *, located: Path | None = None) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``path`` names, relative ones resolved as if the file
    were at ``located`` (by default where it is)."""
    located = located or path
    module = ".".join(("evalsi", *located.relative_to(PACKAGE_ROOT).with_suffix("").parts))
    package = module if located.name == "__init__.py" else module.rsplit(".", 1)[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            target = node.module or ""
            if node.level:
                target = f"{base}.{target}" if target else base
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)  # ``from evalsi import ingest``
    return names


def is_ingest(module: str) -> bool:
    return module == "evalsi.ingest" or module.startswith("evalsi.ingest.")


@pytest.mark.parametrize("package", BELOW_INGEST)
def test_no_module_of_the_package_imports_ingest_in_its_source(package: str) -> None:
    sources = sorted((PACKAGE_ROOT / package).rglob("*.py"))
    assert sources, f"evalsi/{package} has no modules: the check would pass on nothing"
    offenders = {
        str(path.relative_to(PACKAGE_ROOT)): sorted(filter(is_ingest, imported_modules(path))) for path in sources
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_importing_the_packages_loads_no_ingest_module() -> None:
    code = (
        "import json, sys\n"
        + "".join(f"import evalsi.{package}\n" for package in BELOW_INGEST)
        + "import evalsi.stores.traces, evalsi.stores.traces.clickhouse, evalsi.stores.traces.sqlite\n"
        + "print(json.dumps(sorted(m for m in sys.modules if m.startswith('evalsi.'))))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                       text=True).stdout)
    assert "evalsi.stores.traces.sqlite" in loaded  # the probe saw the imports it made
    assert [name for name in loaded if is_ingest(name)] == []


def test_the_source_check_sees_an_ingest_import(tmp_path: Path) -> None:
    """The walker itself: relative and absolute forms of an ingest import are all found."""
    source = tmp_path / "probe.py"
    source.write_text("import evalsi.ingest.mappers\nfrom ..ingest import online\nfrom evalsi import ingest\n"
                      "def later():\n    from evalsi.ingest.assembly import x\n")
    found = imported_modules(source, located=PACKAGE_ROOT / "policy" / "probe.py")
    assert {"evalsi.ingest.mappers", "evalsi.ingest", "evalsi.ingest.online", "evalsi.ingest.assembly"} <= found
