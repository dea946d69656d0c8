"""``evalsi policies`` against a served API: apply, list, get, stats, delete, and their exit codes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from api_doubles import Api
from click.testing import CliRunner, Result

from evalsi.cli.main import cli
from evalsi.traces import OnlineScore

NOW = 28_333_334 * 60.0  # the start of a one-minute window

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: prod-support}}
spec:
  sampling: {{rate: {rate}}}
  cascade:
    - {{ref: builtin/regex-match, alias: no-ssn, params: {{pattern: "\\\\d{{3}}-\\\\d{{2}}", mode: search}}}}
    - {{ref: builtin/exact-match, when: "scores.all(s, s.passed)"}}
  window: 1m
"""


@pytest.fixture
async def server_url(api: Api) -> str:
    api.now = NOW + 30
    await api.start()
    return api.http


async def invoke(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args), catch_exceptions=False)


def write(tmp_path: Path, rate: float = 0.5, name: str = "policy.yaml") -> str:
    path = tmp_path / name
    path.write_text(POLICY.format(rate=rate))
    return str(path)


async def test_apply_list_get_delete(server_url: str, tmp_path: Path, api: Api) -> None:
    path = write(tmp_path)
    result = await invoke("policies", "apply", "-f", path, "--server", server_url, "--project", "support")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "policy prod-support (project support): created, generation 1"
    result = await invoke("policies", "apply", "-f", path, "--server", server_url, "--project", "support")
    assert "unchanged, generation 1" in result.output
    changed = write(tmp_path, rate=0.2, name="changed.yaml")
    result = await invoke("policies", "apply", "-f", changed, "--server", server_url, "--project", "support",
                          "--dry-run")
    assert "configured, generation 2 (dry run: nothing stored)" in result.output
    assert api.store.policies[("support", "prod-support")].generation == 1
    result = await invoke("policies", "apply", "-f", changed, "--server", server_url, "--project", "support")
    assert "configured, generation 2" in result.output

    result = await invoke("policies", "list", "--server", server_url, "--project", "support")
    assert result.exit_code == 0
    row = next(line for line in result.output.splitlines() if "prod-support" in line)
    assert "no-ssn → builtin/exact-match" in row and "0.2" in row and "1m" in row
    result = await invoke("policies", "list", "--server", server_url, "--project", "support", "--format", "json")
    assert [p["generation"] for p in json.loads(result.output)] == ["2"]
    result = await invoke("policies", "list", "--server", server_url)  # another project
    assert result.exit_code == 0 and "prod-support" not in result.output and "no policies" in result.output

    # `get` prints YAML that `apply -f` takes back unchanged.
    result = await invoke("policies", "get", "prod-support", "--server", server_url, "--project", "support")
    assert result.exit_code == 0 and result.output.startswith("# generation 2, updated ")
    (tmp_path / "got.yaml").write_text(result.output)
    result = await invoke("policies", "apply", "-f", str(tmp_path / "got.yaml"), "--server", server_url)
    assert result.output.strip() == "policy prod-support (project support): unchanged, generation 2"

    result = await invoke("policies", "delete", "prod-support", "--server", server_url, "--project", "support")
    assert result.output.strip() == "policy prod-support (project support) deleted; it was at generation 2"
    result = await invoke("policies", "get", "prod-support", "--server", server_url, "--project", "support")
    assert result.exit_code == 2
    assert "error: name: policy 'prod-support' not found in project 'support'" in result.output
    assert "hint: choose the project with --project NAME or EVALSI_PROJECT=NAME" in result.output


async def test_bad_policies_exit_2_naming_the_field(server_url: str, tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text(POLICY.format(rate=0.5).replace("window: 1m", "windw: 1m"))
    result = await invoke("policies", "apply", "-f", str(typo), "--server", server_url)
    assert result.exit_code == 2 and "typo.yaml" in result.output and "spec.windw" in result.output

    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(POLICY.format(rate=0.5).replace("builtin/exact-match", "builtin/exact-mach"))
    result = await invoke("policies", "apply", "-f", str(unknown), "--server", server_url)
    assert result.exit_code == 2 and "spec.cascade[1] (builtin/exact-mach)" in result.output

    result = await invoke("policies", "stats", "nope", "--server", server_url)
    assert result.exit_code == 2 and "policy 'nope' not found" in result.output
    result = await invoke("policies", "stats", "nope", "--server", server_url, "--windows", "2", "--since", "1h")
    assert result.exit_code == 2 and "--windows or --since" in result.output


def _score(trace: int, metric: str, at: float, **fields: object) -> OnlineScore:
    return OnlineScore(trace_id=f"{trace:032x}", revision=1, policy="prod-support", stage=metric, metric=metric,
                       evaluator=f"builtin/{metric}@1.0.0", scored_at=at, **fields)  # type: ignore[arg-type]


async def test_stats_table_windows_and_json(server_url: str, tmp_path: Path, api: Api) -> None:
    await invoke("policies", "apply", "-f", write(tmp_path), "--server", server_url)
    api.scores.add(
        "default",
        _score(1, "no-ssn", NOW - 50, outcome="scored", value=1.0, passed=True),
        _score(2, "no-ssn", NOW + 5, outcome="scored", value=0.0, passed=False),
        _score(3, "no-ssn", NOW + 6, outcome="scored", value=1.0, passed=True),
        _score(3, "exact-match", NOW + 7, outcome="skipped", reason="no content: the trace has no output"),
        _score(4, "exact-match", NOW + 8, outcome="error", reason="infra: provider answered 503"),
    )
    result = await invoke("policies", "stats", "prod-support", "--server", server_url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("policy prod-support (project default), generation 1 · window 1m")
    assert "4 traces evaluated" in lines[0]
    ssn = next(line for line in lines if "no-ssn" in line)
    assert "pass/fail" in ssn and " 3 " in ssn and "0.667" in ssn and "wilson" in ssn
    skipped = next(line for line in lines if "exact-match" in line)
    assert "1 (1 no content)" in skipped and skipped.rstrip(" │").endswith("1")

    result = await invoke("policies", "stats", "prod-support", "--server", server_url, "--windows", "1")
    assert result.exit_code == 0
    assert "3 traces evaluated" in result.output and result.output.count("window 2023-11-14") == 1

    result = await invoke("policies", "stats", "prod-support", "--server", server_url, "--windows", "2",
                          "--format", "json")
    stats = json.loads(result.output)
    assert [w["tracesEvaluated"] for w in stats["windows"]] == ["1", "3"]
    # Protobuf JSON leaves out zeros: exact-match has no scored value, only a skip and an error.
    assert {m["metric"]: m.get("n") for m in stats["metrics"]} == {"exact-match": None, "no-ssn": "3"}
    assert [m.get("errors") for m in stats["metrics"]] == ["1", None]


async def test_stats_by_window_name_the_alerts_fired(server_url: str, tmp_path: Path, api: Api,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", "s")  # applying refuses an alert whose signing secret is unset
    path = tmp_path / "alerting.yaml"
    path.write_text(POLICY.format(rate=1.0) + """\
  alerts:
    - {when: "mean('no-ssn') < 0.8", notify: "https://hooks.example/x", minSamples: 2, secretEnv: HOOK_SECRET}
""")
    assert (await invoke("policies", "apply", "-f", str(path), "--server", server_url)).exit_code == 0
    api.scores.add(
        "default",
        _score(1, "no-ssn", NOW - 50, outcome="scored", value=0.0, passed=False),  # one sample: not evaluated
        _score(2, "no-ssn", NOW + 5, outcome="scored", value=0.0, passed=False),
        _score(3, "no-ssn", NOW + 6, outcome="scored", value=1.0, passed=True),
    )
    result = await invoke("policies", "stats", "prod-support", "--server", server_url, "--windows", "2")
    assert result.exit_code == 0, result.output
    fired = [line for line in result.output.splitlines() if line.startswith("alert fired")]
    assert fired == ["alert fired: mean('no-ssn') < 0.8 (mean('no-ssn') = 0.5)"]
    # Printed after the window it fired in, the second.
    assert result.output.index("alert fired") > result.output.rindex("window 2023-11-14")
