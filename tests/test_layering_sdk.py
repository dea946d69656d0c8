"""The engine does not depend on the user-facing SDK: nothing under ``evalsi.runs``, ``evalsi.service``,
``evalsi.bus``, ``evalsi.stores`` or the services imports ``evalsi.sdk`` (the SDK drives the engine, not the other
way round). Checked on the source, counting imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "libs" / "common" / "evalsi"
ENGINE = [PACKAGE / name for name in ("runs", "service", "bus", "stores")] + sorted(
    path for path in (ROOT / "services").iterdir() if path.is_dir()
)


def _sdk_imports(path: Path) -> list[str]:
    """``line: statement`` for each import of ``evalsi.sdk`` in ``path`` (absolute, or ``from evalsi import sdk``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            module = node.module if not node.level else _absolute(path, node.level, node.module)
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(name == "evalsi.sdk" or name.startswith("evalsi.sdk.") for name in names):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _absolute(path: Path, level: int, module: str) -> str:
    package = path.parent.relative_to(PACKAGE.parent).parts if PACKAGE in path.parents else ()
    return ".".join([*package[: len(package) - (level - 1)], module])


def _sources() -> list[Path]:
    return [path for folder in ENGINE for path in sorted(folder.rglob("*.py")) if "_pb2" not in path.name]


def test_the_engine_folders_exist_and_hold_code() -> None:
    assert all(folder.is_dir() for folder in ENGINE)
    assert len(_sources()) > 50


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_engine_module_imports_the_sdk(path: Path) -> None:
    assert _sdk_imports(path) == [], f"{path.relative_to(ROOT)} imports evalsi.sdk"


def test_the_check_finds_an_import_of_the_sdk(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from evalsi.sdk import evaluate\n    import evalsi.sdk as s\n", encoding="utf-8")
    assert [line.split(":")[0] for line in _sdk_imports(module)] == ["2", "3"]
