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


def _spec(tmp_path: Path) -> Path:
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in [
        {"id": "1", "output": "it is ok"}, {"id": "2", "output": "nope"}, {"id": "3", "output": "ok ok"}]))
    spec = tmp_path / "run.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: plugin-run}\n"
        "spec:\n  target: {outputs: {}}\n  dataset: {path: qa.jsonl}\n"
        "  evaluators:\n    - ref: acme/has-word\n      params: {word: ok}\n"
        "  gates:\n    - \"metric('has-word').mean >= 0.6\"\n")
    return spec


def test_evalsi_run_embedded_runs_a_plugin_and_gates_on_it(plugins_dir: Path, venv_cache: Path,
                                                            tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    env = {**os.environ, "EVALSI_PLUGINS_CACHE": str(venv_cache)}
    done = subprocess.run([EVALSI, "run", "-f", str(spec), "--plugins-dir", str(plugins_dir), "--format", "json"],
                          capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    [summary] = [s for s in document["summaries"] if s["metric"] == "has-word"]
    assert summary["n"] == "3" and abs(summary["mean"] - 2 / 3) < 1e-9
    assert document["state"] == "RUN_STATE_SUCCEEDED" and [g["passed"] for g in document["gates"]] == [True]
    plan = subprocess.run([EVALSI, "run", "-f", str(spec), "--plugins-dir", str(plugins_dir), "--dry-run",
                           "--format", "json"], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr[-3000:]
    planned = json.loads(plan.stdout)  # planned with the plugin's evaluator, on the pool it declared
    assert planned["evaluations"] == 3 and planned["pools"] == {"cpu": ["has-word"]}
    without = subprocess.run([EVALSI, "run", "-f", str(spec)], capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in env.items() if k != "EVALSI_PLUGINS_DIR"}, cwd=tmp_path)
    assert without.returncode == 2 and "acme/has-word" in without.stderr


def test_evalsi_catalog_lists_and_shows_a_plugins_evaluators(plugins_dir: Path, venv_cache: Path,
                                                             tmp_path: Path) -> None:
    env = {**os.environ, "EVALSI_PLUGINS_CACHE": str(venv_cache), "EVALSI_PLUGINS_DIR": str(plugins_dir)}
    listed = subprocess.run([EVALSI, "catalog", "list", "--format", "json"], capture_output=True, text=True,
                            timeout=120, env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    by_name = {m["name"]: m for m in json.loads(listed.stdout)}
    assert by_name["acme/has-word"]["tier"] == "community" and "builtin/exact-match" in by_name
    packs = subprocess.run([EVALSI, "catalog", "packs"], capture_output=True, text=True, timeout=120, env=env,
                           cwd=tmp_path)
    assert packs.returncode == 0 and "acme/checks" in packs.stdout and "community" in packs.stdout
    shown = subprocess.run([EVALSI, "catalog", "show", "acme/has-word"], capture_output=True, text=True,
                           timeout=120, env=env, cwd=tmp_path)
    assert shown.returncode == 0 and "word" in shown.stdout and "tier community" in shown.stdout
