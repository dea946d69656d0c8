"""`evalsi catalog` without a server: tiers in `list`, `show` and `packs`, every installed pack allowed and the
default-on ones on; `evalsi serve` refusing an evaluators: section that names a pack not installed. The served
catalog (--server) is tests/api/test_packs_served.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cli.catalog import _print_table
from evalsi.cli.main import cli


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_catalog_packs_lists_every_installed_pack_with_its_tier() -> None:
    code, out, err = run("catalog", "packs", "--format", "json")
    assert code == 0, err
    packs = {p["name"]: p for p in json.loads(out)}
    assert {"core", "judge", "agent", "code"} <= set(packs)
    assert packs["core"]["tier"] == "native" and packs["core"]["enabled"] and packs["core"]["defaultOn"]
    assert packs["judge"]["enabled"] is False and packs["judge"]["defaultOn"] is False
    assert all(p["allowed"] for p in packs.values())  # embedded: no allowlist
    assert packs["core"]["evaluators"] >= 10 and packs["core"]["upstream"] == ""
    code, out, _ = run("catalog", "packs")
    row = next(line for line in out.splitlines() if line.startswith("│ core "))
    assert "native" in row and "yes" in row


def test_catalog_list_and_show_carry_the_tier() -> None:
    code, out, err = run("catalog", "list", "--pack", "core", "--format", "json")
    assert code == 0, err
    assert {m["tier"] for m in json.loads(out)} == {"native"}
    code, out, _ = run("catalog", "list", "--pack", "judge")
    header = next(line for line in out.splitlines() if "evaluator" in line and "tier" in line)
    assert header.index("pack") < header.index("tier") < header.index("scope")
    assert "judge (on)" not in out  # judge is not on by default
    code, out, _ = run("catalog", "list", "--pack", "core")
    assert "core (on)" in out
    code, out, _ = run("catalog", "show", "exact-match")
    assert code == 0 and out.startswith("builtin/exact-match@1.0.0  (pack core, tier native, scope record")


def test_all_is_for_a_server() -> None:
    code, _, err = run("catalog", "list", "--all")
    assert code == 2 and "--all: only with --server" in err
    code, _, err = run("catalog", "list", "--server", "http://127.0.0.1:8080", "--project", "a.b")
    assert code == 2 and "'a.b' is not a valid project name" in err


def test_serve_refuses_a_pack_that_is_not_installed_before_starting_anything(tmp_path: Path) -> None:
    config = tmp_path / "evalsi.yaml"
    config.write_text("evaluators:\n  projects:\n    support: {packs: [core, rgg]}\n")
    evalsi = Path(sys.executable).parent / "evalsi"
    completed = subprocess.run([str(evalsi), "serve", "--config", str(config), "--state-dir", str(tmp_path / "s")],
                               capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    # The hint names the closest installed pack (rag, where the rag pack is installed).
    assert completed.stderr.startswith(
        f"error: {config}: evaluators.projects.support.packs: 'rgg' is not an installed pack; "
    )
    assert not (tmp_path / "s").exists()  # nothing started, nothing written


def test_a_description_in_square_brackets_is_printed_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    # rich reads "[...]" as console markup unless told otherwise: a description's "[doc-id]" vanished from the table.
    _print_table(("evaluator", "description"), [("acme/cites", "cites [doc-id] and [bold]x[/bold]")])
    out = capsys.readouterr().out
    assert "[doc-id]" in out and "[bold]x[/bold]" in out
