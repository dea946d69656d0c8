"""`import evalsi` and the CLI's help load none of the heavy libraries: they are imported where they are used.

Not a timing test (timings belong to benchmarks/startup.py): each case runs in a fresh interpreter and lists
the heavy top-level packages in ``sys.modules`` when it exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = {"scipy", "numpy", "grpc", "pyarrow", "httpx", "aiohttp", "opentelemetry", "datasets", "pandas", "nats"}

_PROBE = """
import atexit, json, sys
atexit.register(lambda: open({out!r}, "w").write(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}}))))
sys.argv = {argv!r}
{body}
"""
_CLI = "from evalsi.cli.main import main\nmain()"


def loaded_packages(body: str, argv: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    probe = _PROBE.format(out=str(out), argv=argv, body=body)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize(
    ("body", "argv"),
    [
        ("import evalsi", ["-c"]),
        ("from evalsi import Client, Output, Record, SkipRecord, evaluator", ["-c"]),
        (_CLI, ["evalsi", "--help"]),
        (_CLI, ["evalsi", "eval", "--help"]),
        (_CLI, ["evalsi", "run", "--help"]),
        (_CLI, ["evalsi", "runs", "list", "--help"]),
        (_CLI, ["evalsi", "cases", "--help"]),
    ],
)
def test_no_heavy_library_loads(body: str, argv: list[str], tmp_path: Path) -> None:
    loaded = loaded_packages(body, argv, tmp_path)
    assert "evalsi" in loaded  # the probe saw the package itself, so an empty answer is not a pass
    assert loaded & HEAVY == set()


def test_the_probe_sees_heavy_imports(tmp_path: Path) -> None:
    """The same probe does report them once something uses them (an interval needs scipy)."""
    loaded = loaded_packages("from evalsi.stats import wilson", ["-c"], tmp_path)
    assert {"numpy", "scipy"} <= loaded


def test_lazy_names_are_the_real_objects() -> None:
    import evalsi
    from evalsi.client import Client
    from evalsi.errors import SkipRecord
    from evalsi.sdk import evaluate
    from evalsi.v1alpha1.record_pb2 import Record

    assert (evalsi.Client, evalsi.SkipRecord, evalsi.evaluate, evalsi.Record) == (Client, SkipRecord, evaluate, Record)
    assert set(evalsi.__all__) <= set(dir(evalsi))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        evalsi.nope  # noqa: B018 - the attribute access is the test
