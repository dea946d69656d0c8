"""Simulated users, trials with pass@k / pass^k, and default reports: FakeOpenAI plays the persona against the
scripted agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.cases import CallableTransport, HttpTransport, load_cases, run_cases
from evalsi.cases.simulate import Simulator, find_stop, persona_system_prompt
from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.cli.cases_inputs import default_report_path
from evalsi.cli.main import cli
from evalsi.judges import JudgeConfig
from evalsi.judges.panel import JudgeSet
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider

PERSONA_CASE = """\
id: presente
agent: shop
persona:
  goal: "find a birthday present; does not know product names"
  style: "short messages"
  opens_with: "oi, queria um presente"
  knows:
    orcamento: "até R$ 100"
    ocasiao: "aniversário"
  max_turns: 4
expect:
  tools_called: [search_products]
  reply_omits: ["SKU-SECRET"]
"""
AGENTS = {"shop": {"tools": ["search_products", "create_order"], "side_effect_tools": ["create_order"]}}
REPLIES = {
    "oi, queria um presente": {"reply": "Claro! Qual o orçamento?"},
    "até R$ 100": {"calls": [{"name": "search_products", "status": "ok"}], "reply": "Sugiro a caixa de trufas."},
}


def persona_script(*messages: str) -> Any:
    """The persona's n-th generated message (after opens_with) is messages[n]."""
    def reply(body: dict[str, Any]) -> str:
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")  # opens_with counts
        return messages[min(said - 1, len(messages) - 1)]

    return reply


def write_case(directory: Path, text: str = PERSONA_CASE, name: str = "presente.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text, encoding="utf-8")
    return directory


async def simulate(tmp_path: Path, server: FakeOpenAI, agent: ScriptedAgent, text: str = PERSONA_CASE,
                   trials: int = 1) -> Any:
    config = JudgeConfig.from_mapping({"model": "persona-m", "base_url": server.base_url, "max_retries": 0,
                                       "name": "persona"})
    async with JudgeSet({"persona": config}, cache=False) as persona:
        simulator = Simulator(HttpTransport(agent.base_url), persona.clients["persona"], trials=trials)
        return await simulator.run(load_cases(write_case(tmp_path / "cases", text)))


async def test_persona_talks_until_goal_met_and_the_transcript_is_graded_and_marked_simulated(tmp_path: Path) -> None:
    async with ScriptedAgent(agents=AGENTS, replies=REPLIES) as agent, \
            FakeOpenAI(persona_script("até R$ 100", "obrigado! <<goal_met>>")) as server:
        report = await simulate(tmp_path, server, agent)
    (result,) = report.results
    assert result.status == "pass", result.reason
    assert [turn.user for turn in result.turns] == ["oi, queria um presente", "até R$ 100"]
    assert result.stop == {"reason": "goal_met", "turn": 2, "said": "obrigado!"}
    assert result.conversation.startswith("sim-presente-")
    doc = report.to_dict()
    assert doc["simulated"] is True
    assert doc["cases"][0]["simulated"] is True and doc["cases"][0]["transcript"]["simulated"] is True
    system = server.requests[0]["messages"][0]["content"]
    assert "orcamento: até R$ 100" in system and "never invent a fact" in system and "não sei" in system
    assert "<<goal_met>>" in system and "<<gave_up>>" in system
    # the persona sees the agent's replies as the other side of the chat
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "Claro! Qual o orçamento?"}


async def test_gave_up_and_max_turns_are_recorded(tmp_path: Path) -> None:
    async with ScriptedAgent(agents=AGENTS, replies=REPLIES) as agent, \
            FakeOpenAI(persona_script("<<gave_up>>")) as server:
        report = await simulate(tmp_path, server, agent)
    (result,) = report.results
    assert result.stop == {"reason": "gave_up", "turn": 1, "said": ""}
    assert result.status == "fail" and "tools_called" in result.reason  # graded like a replay
    async with ScriptedAgent(agents=AGENTS, replies=REPLIES) as agent, \
            FakeOpenAI(persona_script("hmm", "e aí?")) as server:
        report = await simulate(tmp_path, server, agent)
    (result,) = report.results
    assert len(result.turns) == 4 and result.stop == {"reason": "max_turns", "turn": 4, "said": None}


async def test_refused_seed_is_an_error_in_simulation(tmp_path: Path) -> None:
    text = PERSONA_CASE + "state:\n  memory: {facts: {a: b}}\n"
    async with ScriptedAgent(agents=AGENTS, replies=REPLIES, seeding=False) as agent, \
            FakeOpenAI(persona_script("<<goal_met>>")) as server:
        report = await simulate(tmp_path, server, agent, text)
    (result,) = report.results
    assert result.status == "error" and "seed refused" in result.reason and not server.requests


def test_find_stop_and_prompt_without_knows() -> None:
    assert find_stop("ok <<gave_up>> <<goal_met>>") == ("gave_up", "ok")
    assert find_stop("só mais uma coisa") == (None, "só mais uma coisa")
    assert "(none: you know no specifics)" in persona_system_prompt({"goal": "g"})


async def test_run_skips_persona_cases_pointing_at_simulate(tmp_path: Path) -> None:
    report = await run_cases(load_cases(write_case(tmp_path)), CallableTransport(lambda m, ctx: "oi"))
    (result,) = report.results
    assert result.status == "skipped" and "evalsi cases simulate" in result.reason


# --- CLI ----------------------------------------------------------------------------------------------------


@pytest.fixture
def agent() -> Iterator[ScriptedAgent]:
    with ThreadedAgent(ScriptedAgent(agents=AGENTS, replies=REPLIES)) as scripted:
        yield scripted


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["cases", *args])
    return result.exit_code, result.output


def test_simulate_cli_requires_staging_or_a_covering_eval_profile(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = str(write_case(tmp_path / "cases"))
    base = ("simulate", "--source", source, "--agent-url", agent.base_url, "--persona-model", "m")
    code, output = cli_run(*base)
    assert code == 2 and "--staging" in output and "--eval-profile" in output
    code, output = cli_run(*base, "--eval-profile", "dry", "--eval-tools", "search_products")
    assert code == 2 and "create_order are not covered" in output
    assert ("POST", "/v1/responses") not in agent.requests  # refused before a turn
    with ThreadedProvider(persona_script("até R$ 100", "<<goal_met>>")) as server:
        code, output = cli_run(*base, "--persona-base-url", server.base_url, "--eval-profile", "dry",
                               "--eval-tools", "create_order", "--format", "json", "--no-report")
        assert server.request_headers and not list(tmp_path.glob("evals"))
    assert code == 0, output
    doc = json.loads(output)
    assert doc["simulated"] is True and doc["cases"][0]["stop"]["reason"] == "goal_met"
    assert "eval profile dry" in doc["notices"][0]


def test_simulate_cli_staging_writes_the_default_report(agent: ScriptedAgent, tmp_path: Path) -> None:
    source = str(write_case(tmp_path / "cases"))
    with ThreadedProvider(persona_script("até R$ 100", "<<goal_met>>")) as server:
        code, output = cli_run("simulate", "--source", source, "--agent-url", agent.base_url, "--staging",
                               "--persona-model", "m", "--persona-base-url", server.base_url)
    assert code == 0, output
    assert "simulated: true" in output and "stop: goal_met at turn 2" in output
    (written,) = (tmp_path / "evals" / "reports").glob("*-shop.json")
    assert json.loads(written.read_text())["simulated"] is True and f"report: {written}" in output


def test_simulate_reads_persona_cases_from_the_store(agent: ScriptedAgent, tmp_path: Path) -> None:
    # `evalsi cases import` then `simulate --source store`: the stored case, not a directory, is what runs.
    source = str(write_case(tmp_path / "cases"))
    store = f"sqlite:///{tmp_path / 'evalsi.db'}"
    code, output = cli_run("import", "--source", source, "--metadata-url", store)
    assert code == 0, output
    (tmp_path / "cases" / "presente.yaml").unlink()  # gone from disk: only the store has it now
    base = ("simulate", "--source", "store", "--metadata-url", store, "--agent-url", agent.base_url, "--staging",
            "--persona-model", "m")
    with ThreadedProvider(persona_script("até R$ 100", "<<goal_met>>")) as server:
        code, output = cli_run(*base, "--persona-base-url", server.base_url, "--format", "json", "--no-report")
    assert code == 0, output
    doc = json.loads(output)
    assert [case["id"] for case in doc["cases"]] == ["presente"] and doc["cases"][0]["stop"]["reason"] == "goal_met"
    code, output = cli_run(*base, "--tenant", "other", "--no-report")  # another tenant's store has no such case
    assert code == 2 and "no case stored in project 'default', tenant 'other'" in output


def test_trials_report_pass_at_k_and_pass_hat_k(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "mod"
    module.mkdir()
    (module / "flaky_shop.py").write_text(
        "calls = {'n': 0}\n"
        "def respond(message, ctx):\n"
        "    calls['n'] += 1\n"
        "    ok = calls['n'] % 2 == 1\n"  # trials 1 and 3 pass, 2 fails
        "    return {'reply': 'CHOCO10' if ok else 'não sei', 'tool_calls': []}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(module))
    cases = write_case(tmp_path / "cases", "id: c\nagent: shop\nturns:\n  - user: cupom?\n"
                       "expect: {reply_includes: [choco10]}\n", "c.yaml")
    out = tmp_path / "report.json"
    code, output = cli_run("run", "--source", str(cases), "--agent-callable", "flaky_shop:respond", "--trials", "3",
                           "-o", str(out))
    assert code == 3, output
    trials = json.loads(out.read_text())["trials"]
    (case,) = trials["cases"]
    assert (case["n"], case["c"], case["outcomes"]) == (3, 2, ["pass", "fail", "pass"])
    assert case["pass_at_k"] == {"1": 0.6667, "2": 1.0, "3": 1.0}
    assert case["pass_hat_k"] == {"1": 0.6667, "2": 0.3333, "3": 0.0}
    assert [row["k"] for row in trials["by_k"]] == [1, 2, 3]
    assert trials["by_k"][1]["pass_hat_k"]["mean"] == 0.3333
    assert "k=2: pass@k 100%" in output and "trial 3" in output
    conversations = [c["conversation"] for c in json.loads(out.read_text())["cases"]]
    assert len(set(conversations)) == 3  # a fresh conversation per trial
    code, output = cli_run("run", "--source", str(cases), "--agent-callable", "flaky_shop:respond", "--trials", "2",
                           "--update-baseline")
    assert code == 2 and "--trials" in output


def test_default_report_path_and_no_report(tmp_path: Path) -> None:
    (tmp_path / "evals" / "golden").mkdir(parents=True)
    path = default_report_path(str(tmp_path / "evals" / "golden"), "loja/x")
    assert path.parent == tmp_path / "evals" / "reports" and path.name.endswith("-loja_x.json")
    path = default_report_path(str(tmp_path / "cases"), "shop")
    assert path.parent == tmp_path / "evals" / "reports"
    code, output = cli_run("run", "--source", str(tmp_path), "--agent-url", "http://127.0.0.1:9", "--no-report",
                           "-o", "x.json")
    assert code == 2 and "--no-report" in output
