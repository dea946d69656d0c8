"""`evalsi eval --plugins-dir`: a plugin's evaluators named on the command line, run embedded, stopped after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EVALSI = str(Path(sys.executable).parent / "evalsi")


def test_evalsi_eval_runs_a_plugin(plugins_dir: Path, venv_cache: Path, tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in [
        {"id": "1", "output": "it is ok"}, {"id": "2", "output": "nope"}, {"id": "3", "output": "ok"}]))
    env = {**os.environ, "EVALSI_PLUGINS_CACHE": str(venv_cache), "EVALSI_PLUGINS_DIR": str(plugins_dir)}
    done = subprocess.run([EVALSI, "eval", "--data", str(data), "-e", "acme/has-word", "--format", "json"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    [summary] = [s for s in document["summaries"] if s["metric"] == "has-word"]
    assert summary["n"] == "3" and abs(summary["mean"] - 2 / 3) < 1e-9
    plugin_pids = {int(r["scores"][0]["explanation"].split("|")[1]) for r in document["results"]}
    assert len(plugin_pids) == 1 and not any(Path(f"/proc/{pid}").exists() for pid in plugin_pids)


def test_without_a_plugins_dir_the_plugin_is_unknown(tmp_path: Path) -> None:
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "1", "output": "ok"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "EVALSI_PLUGINS_DIR"}
    done = subprocess.run([EVALSI, "eval", "--data", str(data), "-e", "acme/has-word"], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2 and "unknown evaluator 'acme/has-word'" in done.stderr
