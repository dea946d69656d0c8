"""The reference agent as a case target: `evalsi cases run --agent-harness FILE`."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner
from harness_helpers import make_config

from evalsi.cases import load_cases, run_cases
from evalsi.cases.transport_harness import HarnessTransport
from evalsi.cli.main import cli
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider

CASE = """\
id: weather-paris
agent: reference
turns:
  - user: "weather in Paris?"
  - user: "and tomorrow?"
expect:
  tools_called: [get_weather]
  never_calls: [broken]
  reply_includes: ["21"]
  must_not: [tool_error]
"""


async def test_cases_graded_against_the_harness(tmp_path: Path) -> None:
    (tmp_path / "case.yaml").write_text(CASE)
    async with FakeOpenAI() as server:
        server.enqueue(("text", "Hello."), ("tool_calls", [{"name": "get_weather", "arguments": {"city": "Paris"}}]),
                       ("text", "Still 21 C."))
        transport = HarnessTransport(make_config(server.base_url, tools={"python": ["harness_tools:get_weather"]}))
        report = await run_cases(load_cases(tmp_path), transport)
        second_turn = server.requests[1]["messages"]
    (result,) = report.results
    assert result.status == "pass", result.reason
    # The second turn continues the first: the earlier exchange is in the conversation sent to the model.
    assert [m["role"] for m in second_turn] == ["user", "assistant", "user"]
    assert result.turns[-1].tool_calls[0].name == "get_weather"
    assert result.turns[-1].tool_calls[0].end == "ok"


def test_cases_cli_takes_agent_harness(tmp_path: Path) -> None:
    (tmp_path / "case.yaml").write_text(CASE)
    with ThreadedProvider(lambda body: "It is 21 C.") as server:
        server.enqueue(("text", "Hi."), ("tool_calls", [{"name": "get_weather", "arguments": {"city": "Paris"}}]))
        config = tmp_path / "harness.yaml"
        config.write_text(yaml.safe_dump({"model": {"model": "m", "base_url": server.base_url, "max_retries": 0},
                                          "tools": {"python": ["harness_tools:get_weather"]}}))
        result = CliRunner().invoke(cli, ["cases", "run", "--source", str(tmp_path / "case.yaml"),
                                          "--agent-harness", str(config), "--no-report"])
    assert result.exit_code == 0, result.output
    assert "weather-paris" in result.output and "pass" in result.output
