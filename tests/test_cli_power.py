"""`evalsi power`: records needed per metric, for the test `evalsi compare` uses, from results or a given spread."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from statsmodels.stats.power import TTestPower

from evalsi.cli.main import cli
from evalsi.stats import mcnemar_sample_size

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("power")
    before, after = where / "before.json", where / "after.json"
    assert run("eval", "--data", str(QUICKSTART / "qa.jsonl"), "-e", "exact-match", "-o", str(before))[0] == 0
    assert run("eval", "--data", str(QUICKSTART / "qa_improved.jsonl"), "-e", "exact-match", "-o", str(after))[0] == 0
    return before, after


def test_a_given_number_spread_sizes_the_paired_t_test_as_statsmodels_does() -> None:
    code, out, _ = run("power", "--kind", "number", "--sd", "0.3", "--diff", "0.05", "--format", "json")
    assert code == 0
    [row] = json.loads(out)["metrics"]
    expected = TTestPower().solve_power(effect_size=0.05 / 0.3, alpha=0.05, power=0.8)
    assert row["test"] == "paired-t" and row["needed"] == math.ceil(expected)


def test_metrics_compared_at_once_size_each_at_alpha_over_n() -> None:
    code, out, _ = run("power", "--kind", "pass-fail", "--discordance", "0.2", "--diff", "0.05", "--metrics", "4",
                       "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["alpha"] == pytest.approx(0.0125)
    assert doc["metrics"][0]["needed"] == mcnemar_sample_size(0.05, 0.2, 0.0125, 0.8)


def test_from_two_results_the_discordance_is_measured_on_their_pairs(saved: tuple[Path, Path]) -> None:
    before, after = saved
    code, out, _ = run("power", str(before), str(after), "--diff", "0.1", "--format", "json")
    assert code == 0
    [row] = json.loads(out)["metrics"]
    a = {r["recordId"]: r["scores"][0].get("passed", False) for r in json.loads(before.read_text())["results"]}
    b = {r["recordId"]: r["scores"][0].get("passed", False) for r in json.loads(after.read_text())["results"]}
    discordant = sum(a[k] != b[k] for k in a) / len(a)
    assert row["metric"] == "exact-match" and row["test"] == "mcnemar" and row["measured"] is True
    assert row["spread"] == pytest.approx(discordant) and row["records"] == 30
    assert row["needed"] == mcnemar_sample_size(0.1, discordant, 0.05, 0.8)
    assert 0 < row["mde"] < 1


def test_from_one_result_the_spread_is_assumed_and_said_so(saved: tuple[Path, Path]) -> None:
    code, out, _ = run("power", str(saved[0]), "--diff", "0.1")
    assert code == 0
    assert "exact-match" in out and "assumed" in out and "mcnemar" in out


@pytest.mark.parametrize(("args", "message"), [
    (("--diff", "0"), "0 cannot be detected"),
    (("--kind", "number", "--sd", "0.3", "--diff", "nan"), "nan cannot be detected"),
    (("--kind", "pass-fail", "--rate", "0.5", "--diff", "3"), "beyond what a pass rate can move"),
    (("--diff", "0.1"), "give saved RESULTS to size from, or --kind"),
    (("--kind", "pass-fail", "--diff", "0.1"), "give one of --discordance or --rate"),
    (("--kind", "number", "--rate", "0.5", "--diff", "0.1"), "--kind number: give --sd"),
])
def test_what_is_missing_is_named(args: tuple[str, ...], message: str) -> None:
    code, _, err = run("power", *args)
    assert code == 2 and message in err
