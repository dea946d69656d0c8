"""Inspect scorers as an evaluator plugin (examples/inspect/plugin): built into its own virtualenv and served from
its own process over the plugin protocol, they grade imported records as Inspect graded the samples."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from inspect_ai.log import EvalLog
from inspect_ai.scorer import CORRECT

import evalsi
from evalsi.adapters.inspect import log_rows
from evalsi.evaluators import Registry
from evalsi.plugins import load_plugins

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inspect" / "plugin"


def test_the_example_plugin_grades_imported_records_as_inspect_did(capitals_log: EvalLog, tmp_path: Path) -> None:
    plugins_dir = tmp_path / "plugins"
    shutil.copytree(EXAMPLE, plugins_dir / "inspect", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    rows = list(log_rows(capitals_log.location))
    registry = Registry.from_entry_points()
    with load_plugins(registry, plugins_dir, cache_dir=tmp_path / "venvs") as plugins:
        assert registry.resolve("inspect/includes").pack == "inspect/scorers"
        (host,) = plugins.hosts
        assert host.pid != os.getpid()
        with evalsi.evaluate(rows, ["inspect/includes", "inspect/exact", "inspect/f1"], registry=registry) as results:
            ours = {(r.record_id, r.trial, r.evaluator): r.scores[0] for r in results.results}
            assert results.metric("f1").n == 9
    for row in rows:
        key = (row["id"], row["trial"])
        assert ours[(*key, "includes")].passed == (row["metadata"]["inspect.includes"] == CORRECT), key
        assert ours[(*key, "exact")].passed == (row["metadata"]["inspect.exact"] == CORRECT), key
