"""`evalsi sandbox probe` and `evalsi sandbox run` as an operator runs them: a real process, real rungs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evalsi.testing.sandbox_images import busybox_image


def _evalsi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "evalsi"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_run_json_reports_outcome_isolation_and_output(tmp_path: Path) -> None:
    image = busybox_image(tmp_path / "image")
    done = _evalsi("sandbox", "run", "--ladder", "bwrap", "--root", str(image), "--format", "json", "--timeout", "20",
                   "--memory", str(128 << 20), "--pids", "32", "--", "sh", "-c", "echo out; echo err >&2; exit 3",
                   cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    shown = json.loads(done.stdout)
    assert shown["outcome"] == {"kind": "exit", "code": 3}
    assert shown["stdout"] == "out\n" and shown["stderr"] == "err\n"
    isolation = shown["isolation"]
    assert (isolation["driver"], isolation["level"], isolation["enforcement"]) == ("bwrap", "namespaced", "full")
    assert "32" in isolation["bounds"]["pids"] and str(128 << 20) in isolation["bounds"]["memory"]
    assert isolation["bounds"]["timeout"] == "20s wall clock"


def test_run_denied_and_timeout_outcomes_in_json(tmp_path: Path) -> None:
    image = busybox_image(tmp_path / "image")
    denied = _evalsi("sandbox", "run", "--ladder", "bwrap", "--root", str(image), "--format", "json", "--",
                     "sh", "-c", "echo x > /etc/passwd", cwd=tmp_path)
    timed = _evalsi("sandbox", "run", "--ladder", "bwrap", "--root", str(image), "--format", "json", "--timeout", "1",
                    "--", "sleep", "30", cwd=tmp_path)
    assert json.loads(denied.stdout)["outcome"]["kind"] == "denied" and denied.returncode != 0
    assert json.loads(denied.stdout)["outcome"]["effect"] == "write to a read-only path"
    assert json.loads(timed.stdout)["outcome"] == {"kind": "timeout"} and timed.returncode == 124


def test_no_rung_meeting_the_minimum_is_sandbox_unavailable_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "workspace-marker"
    done = _evalsi("sandbox", "run", "--min-isolation", "vm", "--ladder", "bwrap", "--format", "json", "--",
                   "sh", "-c", f"touch {marker}", cwd=tmp_path)
    assert done.returncode != 0
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "SANDBOX_UNAVAILABLE" and error["requested"] == "vm"
    assert [rung["driver"] for rung in error["tried"]] == ["bwrap"]
    assert not marker.exists()


def test_the_config_file_sets_the_ladder_and_bad_flags_name_themselves(tmp_path: Path) -> None:
    (tmp_path / "evalsi.yaml").write_text("sandbox:\n  ladder: [bwrap]\n  resources: {timeout: 15s}\n")
    probe = _evalsi("sandbox", "probe", "--format", "json", "--ladder", "bwrap", cwd=tmp_path)
    shown = json.loads(probe.stdout)
    assert shown["ladder"] == ["bwrap"] and shown["rungs"][0]["available"] is True, probe.stderr
    bad_network = _evalsi("sandbox", "run", "--network", "allow:example.com", "--", "true", cwd=tmp_path)
    bad_ladder = _evalsi("sandbox", "run", "--ladder", "docker", "--", "true", cwd=tmp_path)
    assert bad_network.returncode == 2
    assert "--network: 'example.com' is not an endpoint; accepted: HOST:PORT" in bad_network.stderr
    assert bad_ladder.returncode == 2 and "--ladder: 'docker' is not a sandbox driver" in bad_ladder.stderr
    (tmp_path / "evalsi.yaml").write_text("sandbox:\n  resources: {pids: 0}\n")
    bad_config = _evalsi("sandbox", "run", "--", "true", cwd=tmp_path)
    assert bad_config.returncode == 2 and "evalsi.yaml: sandbox.resources.pids: 0 is out of range" in bad_config.stderr
