"""`evalsi analyze slice`: per-slice n, mean and interval against scipy and statsmodels on a seeded dataset, the
built-in fields, dotted metadata paths, and the refusals (exit 2) with what would be accepted."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
from report_helpers import evalsi
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

import evalsi as sdk
from evalsi.runs.results import EvaluationResults

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict]]:
    """200 records in three groups (and a nested language), outputs near their references by chance; graded by
    exact-match (pass/fail) and fuzzy-match (a similarity number)."""
    rng = random.Random(20261202)
    rows = []
    for i in range(200):
        reference = " ".join(rng.choice(WORDS) for _ in range(3))
        output = reference if rng.random() < 0.5 else " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        rows.append({"id": f"r{i:03d}", "input": f"q{i}", "output": output, "reference": reference,
                     "group": rng.choice(["small", "medium", "large"]),
                     "meta": {"lang": rng.choice(["en", "sl"])} if i % 10 else {}})
    out = tmp_path_factory.mktemp("slices")
    data = out / "seeded.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with sdk.evaluate(str(data), ["exact-match", "fuzzy-match"], name="seeded") as results:
        saved = results.save(out / "seeded.json")
    return data, saved, rows


def values_by_record(saved: Path, evaluator: str, score: str) -> dict[str, float]:
    document = json.loads(saved.read_text())
    return {r["recordId"]: float(s.get("number", s.get("passed", False)))
            for r in document["results"] if r["evaluator"] == evaluator for s in r["scores"] if s["name"] == score}


def slices(*args: str) -> dict[str, dict]:
    done = evalsi("analyze", "slice", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return {s["value"]: s for s in json.loads(done.stdout)["slices"]}


def test_numbers_per_slice_are_student_t_as_scipy_computes_it(seeded: tuple[Path, Path, list[dict]]) -> None:
    _, saved, rows = seeded
    got = slices("fuzzy-match.similarity", "--by", "group", str(saved))
    values = values_by_record(saved, "fuzzy-match", "similarity")
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups[row["group"]].append(values[row["id"]])
    assert set(got) == {"small", "medium", "large"}
    for group, x in groups.items():
        sample = np.asarray(x)
        low, high = stats.t.interval(0.95, sample.size - 1, loc=sample.mean(), scale=stats.sem(sample))
        assert got[group]["n"] == sample.size and got[group]["method"] == "t"
        assert got[group]["mean"] == pytest.approx(sample.mean(), rel=1e-12)
        assert (got[group]["low"], got[group]["high"]) == pytest.approx((max(low, 0.0), min(high, 1.0)), rel=1e-9)


def test_pass_fail_per_slice_is_wilson_as_statsmodels_computes_it(seeded: tuple[Path, Path, list[dict]]) -> None:
    _, saved, rows = seeded
    got = slices("exact-match", "--by", "meta.lang", str(saved), "--confidence", "0.9")
    values = values_by_record(saved, "exact-match", "passed")
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups[row["meta"].get("lang", "(missing)")].append(values[row["id"]])
    assert set(got) == {"en", "sl", "(missing)"} and got["(missing)"]["n"] == 20
    for lang, x in groups.items():
        expected = proportion_confint(int(sum(x)), len(x), alpha=0.1, method="wilson")
        assert got[lang]["method"] == "wilson" and got[lang]["mean"] == pytest.approx(sum(x) / len(x))
        assert (got[lang]["low"], got[lang]["high"]) == pytest.approx(expected, rel=1e-12)


def test_a_record_in_two_sources_makes_the_slice_cluster_robust(seeded: tuple[Path, Path, list[dict]],
                                                                tmp_path: Path) -> None:
    data, saved, rows = seeded
    with sdk.evaluate(str(data), ["fuzzy-match"], name="again", params={"fuzzy-match": {"threshold": 0.5}}) as again:
        second = again.save(tmp_path / "again.json")
    got = slices("fuzzy-match.similarity", "--by", "group", str(saved), str(second))
    values = values_by_record(saved, "fuzzy-match", "similarity")
    small = [row["id"] for row in rows if row["group"] == "small"]
    y = np.asarray([values[i] for i in small] * 2)
    codes = np.asarray(list(range(len(small))) * 2)
    fit = sm.OLS(y, np.ones(y.size)).fit(cov_type="cluster", use_t=True,
                                         cov_kwds={"groups": codes, "use_correction": True, "df_correction": True})
    low, high = fit.conf_int(alpha=0.05)[0]
    assert got["small"]["n"] == 2 * len(small) and got["small"]["clusters"] == len(small)
    assert got["small"]["method"] == "cluster-t"
    assert (got["small"]["low"], got["small"]["high"]) == pytest.approx((low, min(high, 1.0)), rel=1e-9)


def test_built_in_fields_need_no_data(seeded: tuple[Path, Path, list[dict]], saved: dict[str, Path]) -> None:
    by_run = slices("exact-match", "--by", "run", str(saved["baseline"]), str(saved["candidate"]))
    for name in ("baseline", "candidate"):
        summary = EvaluationResults.load(saved[name]).metric("exact-match")
        assert by_run[name]["n"] == summary.n and by_run[name]["mean"] == pytest.approx(summary.mean)
        assert (by_run[name]["low"], by_run[name]["high"]) == pytest.approx((summary.ci.low, summary.ci.high))
    by_trial = slices("exact-match", "--by", "trial", str(saved["baseline"]))
    assert list(by_trial) == ["0"] and by_trial["0"]["n"] == 30
    table = evalsi("analyze", "slice", "exact-match", "--by", "evaluator", str(saved["baseline"]), "--format", "md")
    assert table.returncode == 0 and "| exact-match | 30 | 0.567 | [0.392, 0.726] | wilson |" in table.stdout


def test_a_key_no_record_has_is_refused_with_the_keys_present(seeded: tuple[Path, Path, list[dict]]) -> None:
    _, saved, _ = seeded
    done = evalsi("analyze", "slice", "exact-match", "--by", "grup", str(saved))
    assert done.returncode == 2
    assert "--by 'grup': no record has this metadata key (did you mean 'group'?)" in done.stderr
    assert "the records' metadata keys: group, meta, meta.lang; or one of evaluator, trial, run" in done.stderr


def test_an_unknown_metric_or_missing_source_is_exit_2(saved: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = evalsi("analyze", "slice", "exact-mach", "--by", "run", str(saved["baseline"]))
    assert unknown.returncode == 2 and "METRIC 'exact-mach'" in unknown.stderr
    assert "(did you mean 'exact-match'?)" in unknown.stderr
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALSI_SERVER", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    missing = evalsi("analyze", "slice", "exact-match", "--by", "run", "nope.json")
    assert missing.returncode == 2 and "nope.json: no such saved result file here" in missing.stderr


def test_a_metadata_key_without_the_records_says_to_give_data(saved: dict[str, Path], tmp_path: Path) -> None:
    document = json.loads(saved["baseline"].read_text())
    document["manifest"]["dataset"] = document["spec"]["dataset"]["path"] = str(tmp_path / "gone.jsonl")
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(document))
    done = evalsi("analyze", "slice", "exact-match", "--by", "topic", str(moved))
    assert done.returncode == 2 and "give them with --data FILE" in done.stderr
    data = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "qa.jsonl"
    got = slices("exact-match", "--by", "topic", str(moved), "--data", str(data))
    assert sum(s["n"] for s in got.values()) == 30 and got["science"]["n"] == 10
