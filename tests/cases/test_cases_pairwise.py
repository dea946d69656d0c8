"""--pairwise: ours against the case's reference, both orders, outcomes, human-assisted counted apart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from evalsi.cases import CallableTransport, Case, load_file, render_table, run_cases
from evalsi.cases.judging import Panel, PanelConfig
from evalsi.cli.main import cli
from evalsi.judges.panel import JudgeSet
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider

CASE = """\
id: creatina
agent: shop
turns:
  - user: tem creatina?
expect: {reply_includes: [creatina]}
reference:
  source: "helpdesk chat 34403117"
  messages:
    - {role: user, text: "tem creatina?"}
    - {role: assistant, text: "temos sim! qual seu objetivo?"%s}
"""


def respond(message: str, ctx: Any) -> str:
    return "Temos creatina OURS-MARK, 300g."


def the_case(tmp_path: Path, operator: bool = False) -> Case:
    path = tmp_path / "case.yaml"
    path.write_text(CASE % (", origin: operator" if operator else ""), encoding="utf-8")
    (item,) = load_file(path)
    assert isinstance(item, Case)
    return item


def prefers_ours(body: dict[str, Any]) -> str:
    text = body["messages"][1]["content"]
    ours_is_a = text.index("OURS-MARK") < text.index("## Conversation B")
    return '{"reasoning": "served", "winner": "%s"}' % ("A" if ours_is_a else "B")


def prefers_reference(body: dict[str, Any]) -> str:
    return prefers_ours(body).replace('"A"', '"X"').replace('"B"', '"A"').replace('"X"', '"B"')


def by_model(**replies: Any) -> Any:
    return lambda body: replies[body["model"]](body)


async def pairwise(tmp_path: Path, server: FakeOpenAI, models: list[str], operator: bool = False) -> Any:
    config = PanelConfig.from_mapping({"judges": [{"model": m, "base_url": server.base_url, "max_retries": 0}
                                                  for m in models]}, "panel")
    async with JudgeSet(config.judges, cache=False) as judges:
        return await run_cases([the_case(tmp_path, operator)], CallableTransport(respond),
                               panel=Panel(config, dict(judges.clients)), pairwise=True)


async def test_a_judge_preferring_position_a_is_comparable_order_dependent(tmp_path: Path) -> None:
    async with FakeOpenAI(lambda body: '{"winner": "A"}') as server:
        report = await pairwise(tmp_path, server, ["j"])
    verdict = report.results[0].pairwise
    assert verdict["outcome"] == "comparable" and verdict["order_dependent"] is True
    assert len(server.requests) == 2  # asked twice, with the conversations swapped
    first, second = (r["messages"][1]["content"] for r in server.requests)
    assert first.index("OURS-MARK") < first.index("## Conversation B") < second.index("OURS-MARK")
    assert "comparable (order-dependent) vs: model" in render_table(report)


async def test_better_worse_split_and_unknown(tmp_path: Path) -> None:
    replies = {"good": prefers_ours, "bad": prefers_reference, "tie": lambda body: '{"winner": "tie"}',
               "garbage": lambda body: "I like both"}
    async with FakeOpenAI(by_model(**replies)) as server:
        outcomes = {}
        for models in (["good"], ["bad"], ["tie"], ["good", "bad"], ["garbage"], ["good", "garbage"]):
            report = await pairwise(tmp_path, server, models)
            outcomes["+".join(models)] = report.results[0].pairwise["outcome"]
    assert outcomes == {"good": "better", "bad": "worse", "tie": "comparable", "good+bad": "split",
                        "garbage": "unknown", "good+garbage": "better"}


async def test_the_judge_is_not_told_which_is_ours_nor_about_the_operator(tmp_path: Path) -> None:
    async with FakeOpenAI(prefers_ours) as server:
        report = await pairwise(tmp_path, server, ["j"], operator=True)
    prompt = " ".join(m["content"] for r in server.requests for m in r["messages"]).lower()
    assert "operator" not in prompt and "ours" not in prompt.replace("ours-mark", "")
    assert not re.search(r"\b(?:incumbent|reference|candidate)\b", prompt)
    verdict = report.results[0].pairwise
    assert verdict["vs"] == "human-assisted" and verdict["outcome"] == "better"
    assert report.pairwise["human-assisted"]["better"] == 1 and report.pairwise["model"]["better"] == 0
    assert report.results[0].status == "pass"  # pairwise never changes pass/fail


def test_cli_pairwise_needs_a_judge_and_never_gates(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "pw_shop.py").write_text("def respond(message, ctx):\n    return 'Temos creatina OURS-MARK.'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mod"))
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "c.yaml").write_text(CASE % "", encoding="utf-8")
    args = ["cases", "run", "--source", str(tmp_path / "cases"), "--agent-callable", "pw_shop:respond", "--pairwise"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--pairwise needs a judge" in result.output
    with ThreadedProvider(prefers_reference) as server:
        result = CliRunner().invoke(cli, [*args, "--judge-model", "j", "--judge-base-url", server.base_url])
    assert result.exit_code == 0, result.output  # worse than the incumbent is not a failure
    assert "pairwise (never gates): vs model: 1 worse" in result.output
