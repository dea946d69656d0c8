"""``evalsi cases run`` end to end: HTTP transport against the scripted agent, exit codes 0/3/2/1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "cases"


@pytest.fixture
def agent_url() -> Iterator[str]:
    with ThreadedAgent(ScriptedAgent.from_file(str(EXAMPLES / "agent.yaml"))) as agent:
        yield agent.base_url


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["cases", *args])
    return result.exit_code, result.output


def write(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text, encoding="utf-8")


def test_examples_pass_skip_and_pend_exit_0(agent_url: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, output = run("run", "--source", str(EXAMPLES / "golden"), "--agent-url", agent_url, "-o", str(out))
    assert code == 0, output
    assert "SKIP     chocolate-shop-tracking" in output and "lacks tool(s) search_orders" in output
    assert "PENDING  chocolate-shop-gift" in output
    assert "pass rate 100% (95% Wilson CI 34%–100%, n=2)" in output
    report = json.loads(out.read_text())
    assert report["summary"]["pass"] == 2 and report["summary"]["judge_pending"] == 1
    cupom = next(c for c in report["cases"] if c["id"] == "chocolate-shop-coupon")
    assert [c["name"] for c in cupom["checks"]][:2] == ["tools_called", "never_calls"]
    assert cupom["transcript"]["turns"][0]["tool_calls"][0] == {
        "name": "search_voucher", "arguments": {"active": True}, "end": "ok"}


def test_a_failing_case_exits_3_and_names_the_check(agent_url: str, tmp_path: Path) -> None:
    write(tmp_path, "leak.yaml", "id: leak\nagent: chocolate-shop\nturns:\n"
          "  - user: is there an active discount coupon?\n"
          "expect:\n  reply_omits: [choco10]\n  tools_called: [search_voucher]\n")
    code, output = run("run", "--source", str(tmp_path), "--agent-url", agent_url, "--format", "json")
    assert code == 3, output
    report = json.loads(output)
    (result,) = report["cases"]
    assert result["status"] == "fail" and result["reason"] == "failed: reply_omits"
    assert {c["name"]: c["status"] for c in result["checks"]} == {"tools_called": "pass", "reply_omits": "fail"}


def test_a_broken_case_is_reported_and_exits_2(agent_url: str, tmp_path: Path) -> None:
    write(tmp_path, "ok.yaml", "id: ok\nagent: chocolate-shop\nturns:\n  - user: oi\n")
    write(tmp_path, "bad.yaml", "id: bad\nagent: chocolate-shop\nstate:\n  cart: []\nturns:\n  - user: oi\n")
    code, output = run("run", "--source", str(tmp_path), "--agent-url", agent_url)
    assert code == 2, output
    assert "BROKEN   bad" in output and "bad.yaml:4: state.cart: unknown state key" in output
    assert "PASS     ok" in output
    code, output = run("validate", "--source", str(tmp_path))
    assert code == 2 and "1 valid, 1 broken" in output


def test_a_transport_failure_is_an_error_not_a_fail(tmp_path: Path) -> None:
    write(tmp_path, "c.yaml", "id: c\nagent: shop\nturns:\n  - user: oi\nexpect: {tools_called: [x]}\n")
    replies = {"oi": {"calls": [{"name": "x"}], "drop": True}}
    with ThreadedAgent(ScriptedAgent(agents={"shop": {"tools": ["x"]}}, replies=replies)) as agent:
        code, output = run("run", "--source", str(tmp_path), "--agent-url", agent.base_url, "--format", "json")
    assert code == 1, output
    (result,) = json.loads(output)["cases"]
    assert result["status"] == "error" and result["checks"] == []
    assert json.loads(output)["summary"]["fail"] == 0


def test_unreachable_agent_errors_every_case_and_says_so_once(tmp_path: Path) -> None:
    write(tmp_path, "c.yaml", "id: c\nagent: shop\nrequires: {tools: [x]}\nturns:\n  - user: oi\n")
    code, output = run("run", "--source", str(tmp_path), "--agent-url", "http://127.0.0.1:9", "--timeout", "2")
    assert code == 1, output
    assert output.count("notice: could not read agent shop's description") == 1
    assert "ERROR    c" in output


def test_bad_flags_exit_2(tmp_path: Path) -> None:
    code, output = run("run", "--source", str(EXAMPLES / "golden"))
    assert code == 2 and "exactly one of --agent-url" in output
    code, output = run("run", "--source", str(tmp_path / "nope"), "--agent-url", "http://127.0.0.1:9")
    assert code == 2 and "no such file" in output
    code, output = run("run", "--source", str(EXAMPLES / "golden"), "--agent-callable", "no_such_module_xyz:f")
    assert code == 2 and "cannot import" in output
    code, output = run("run", "--source", str(EXAMPLES / "golden"), "--agent-url", "ftp://x")
    assert code == 2 and "http://" in output


def test_agent_filter_and_callable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "mod", "scripted_shop.py", (
        "def respond(message, ctx):\n"
        "    return {'reply': 'Temos o CHOCO10.', 'tool_calls': [{'name': 'search_voucher', 'status': 'ok'}]}\n"))
    monkeypatch.syspath_prepend(str(tmp_path / "mod"))
    write(tmp_path / "cases", "a.yaml", "id: a\nagent: shop\nturns:\n  - user: oi\n"
          "expect: {tools_called: [search_voucher], reply_includes: [choco10]}\n")
    write(tmp_path / "cases", "b.yaml", "id: b\nagent: other\nturns:\n  - user: oi\n"
          "expect: {never_calls: [search_voucher]}\n")
    source = str(tmp_path / "cases")
    code, output = run("run", "--source", source, "--agent-callable", "scripted_shop:respond", "--agent", "shop")
    assert code == 0, output
    assert "PASS     a" in output and " b " not in output
    assert "could not read agent shop's description" in output
    code, output = run("run", "--source", source, "--agent-callable", "scripted_shop:respond")
    assert code == 3, output
    code, output = run("run", "--source", source, "--agent-callable", "scripted_shop:respond", "--agent", "ghost")
    assert code == 2 and "no case" in output


def test_run_help_names_the_store_source_and_how_it_is_reached() -> None:
    code, output = run("run", "--help")
    assert code == 0 and "Not built yet" not in output
    assert "'store'" in output and "--metadata-url" in output and "EVALSI_METADATA_URL" in output
