"""The runner and both transports against the scripted agent that obeys docs/agent-protocol.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.cases import (
    CallableTransport,
    Case,
    CaseRunner,
    HttpTransport,
    SeedRefused,
    TransportError,
    load_file,
    run_cases,
)
from evalsi.cases.testing import ScriptedAgent

AGENTS = {"shop": {"tools": ["search_voucher", "add_to_cart"], "capabilities": ["promotions"]}}


def case(tmp_path: Path, text: str) -> Case:
    path = tmp_path / "case.yaml"
    path.write_text(text, encoding="utf-8")
    (item,) = load_file(path)
    assert isinstance(item, Case), item
    return item


async def test_turn_reports_calls_arguments_ends_ui_and_reply() -> None:
    replies = {"cupom?": {
        "calls": [
            {"name": "load_skill", "status": "ok"},
            {"name": "search_voucher", "arguments": {"active": True}, "status": "ok"},
            {"name": "create_order", "arguments": {}, "status": "blocked", "gate": "confirm"},
            {"name": "add_to_cart", "status": "error", "error": "out of stock"},
        ],
        "ui": [{"component": "voucher_card", "items": [{"code": "CHOCO10"}]}],
        "reply": "Temos o CHOCO10.",
    }}
    async with ScriptedAgent(agents=AGENTS, replies=replies, token="s3cret") as agent:
        transport = HttpTransport(agent.base_url, token="s3cret")
        try:
            turn = await transport.turn("conv-1", "shop", "platform", "cupom?")
        finally:
            await transport.close()
    assert turn.reply == "Temos o CHOCO10."
    assert turn.tool_names == ["search_voucher", "create_order", "add_to_cart"]  # load_skill is not a call
    assert turn.tool_calls[0].arguments == {"active": True} and turn.tool_calls[0].end == "ok"
    assert (turn.tool_calls[1].end, turn.tool_calls[1].gate) == ("blocked", "confirm")
    assert (turn.tool_calls[2].end, turn.tool_calls[2].error) == ("error", "out of stock")
    assert turn.ui[0].component == "voucher_card" and turn.ui[0].items == 1


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"calls": [{"name": "search_voucher"}], "drop": True}, "POST"),
        ({"fail": "model overloaded"}, "model overloaded"),
        ({"http_status": 500}, "answered 500"),
        ({"delay": 2}, "timed out"),
    ],
)
async def test_transport_failures_raise_transport_error(entry: dict[str, Any], needle: str) -> None:
    async with ScriptedAgent(agents=AGENTS, replies={"oi": entry}) as agent:
        transport = HttpTransport(agent.base_url, timeout=0.5)
        try:
            with pytest.raises(TransportError, match=needle):
                await transport.turn("conv-1", "shop", "platform", "oi")
        finally:
            await transport.close()


async def test_seed_refusals_and_409() -> None:
    async with ScriptedAgent(agents=AGENTS, seeding=False) as agent:
        transport = HttpTransport(agent.base_url)
        with pytest.raises(SeedRefused, match="seeding disabled"):
            await transport.seed("c1", "shop", "platform", {"memory": {}})
        await transport.close()
    async with ScriptedAgent(agents=AGENTS, seed_support=False) as agent:
        transport = HttpTransport(agent.base_url)
        with pytest.raises(SeedRefused, match="no seed support"):
            await transport.seed("c1", "shop", "platform", {"memory": {}})
        await transport.close()
    async with ScriptedAgent(agents=AGENTS) as agent:
        transport = HttpTransport(agent.base_url)
        await transport.seed("c1", "shop", "platform", {"memory": {"facts": {"a": 1}}})
        assert agent.conversations[("platform", "c1")].state == {"memory": {"facts": {"a": 1}}}
        await transport.turn("c1", "shop", "platform", "oi")
        with pytest.raises(TransportError, match="409"):
            await transport.seed("c1", "shop", "platform", {"memory": {}})
        await transport.close()


async def test_runner_outcomes(tmp_path: Path) -> None:
    passing = case(tmp_path, "id: p\nagent: shop\nturns:\n  - user: cupom?\n"
                             "expect: {tools_called: [search_voucher], reply_omits: [SKU]}\n")
    failing = case(tmp_path, "id: f\nagent: shop\nturns:\n  - user: cupom?\nexpect: {never_calls: [search_voucher]}\n")
    needs = case(tmp_path, "id: r\nagent: shop\nrequires: {tools: [search_orders], capabilities: [handoff]}\n"
                           "turns:\n  - user: cupom?\n")
    persona = case(tmp_path, "id: s\nagent: shop\npersona: {goal: g}\n")
    seeded = case(tmp_path, "id: seeded\nagent: shop\nstate: {memory: {}}\nturns:\n  - user: cupom?\n")
    errors = case(tmp_path, "id: e\nagent: shop\nturns:\n  - user: boom\n")
    replies = {"cupom?": {"calls": [{"name": "search_voucher", "status": "ok"}], "reply": "CHOCO10"},
               "boom": {"fail": "crashed"}}
    async with ScriptedAgent(agents=AGENTS, replies=replies, seeding=False) as agent:
        report = await run_cases([passing, failing, needs, persona, seeded, errors], HttpTransport(agent.base_url))
        # the description is read once per agent, before any turn
        assert agent.requests.count(("GET", "/v1/agents/shop")) == 1
    status = {r.id: (r.status, r.reason) for r in report.results}
    assert status["p"][0] == "pass"
    assert status["f"] == ("fail", "failed: never_calls")
    assert status["r"][0] == "skipped" and "search_orders" in status["r"][1] and "handoff" in status["r"][1]
    assert status["s"][0] == "skipped" and "evalsi cases simulate" in status["s"][1]
    assert status["seeded"][0] == "skipped" and "seeding disabled" in status["seeded"][1]
    assert status["e"][0] == "error" and "crashed" in status["e"][1]
    summary = report.summary
    assert (summary.n, summary.pass_rate) == (2, 0.5)
    assert summary.ci_low == pytest.approx(0.0945, abs=1e-3) and summary.ci_high == pytest.approx(0.9055, abs=1e-3)


async def test_unreadable_description_runs_the_cases_and_says_so_once(tmp_path: Path) -> None:
    needs = case(tmp_path, "id: r\nagent: shop\nrequires: {tools: [search_orders]}\nturns:\n  - user: oi\n")
    again = case(tmp_path, "id: r2\nagent: shop\nrequires: {tools: [search_orders]}\nturns:\n  - user: oi\n")
    async with ScriptedAgent(agents=AGENTS, describe_status=503) as agent:
        report = await run_cases([needs, again], HttpTransport(agent.base_url))
    assert [r.status for r in report.results] == ["pass", "pass"]
    assert len(report.notices) == 1 and "requires unchecked" in report.notices[0]


async def test_open_allowlist_runs_a_case_requiring_any_tool(tmp_path: Path) -> None:
    needs = case(tmp_path, "id: r\nagent: shop\nrequires: {tools: [search_orders]}\nturns:\n  - user: oi\n")
    agents = {"shop": {"tools": [], "tools_open": True}}
    async with ScriptedAgent(agents=agents) as agent:
        report = await run_cases([needs], HttpTransport(agent.base_url))
    assert report.results[0].status == "pass"


async def test_each_case_gets_a_fresh_conversation(tmp_path: Path) -> None:
    one = case(tmp_path, "id: one\nagent: shop\nturns:\n  - user: a\n  - user: b\n")
    async with ScriptedAgent(agents=AGENTS) as agent:
        first = await run_cases([one], HttpTransport(agent.base_url))
        second = await run_cases([one], HttpTransport(agent.base_url))
        conv1, conv2 = first.results[0].conversation, second.results[0].conversation
        assert conv1 != conv2 and conv1 is not None and conv1.startswith("eval-one-")
        assert len(agent.conversations[("platform", conv1)].messages) == 4  # both turns in one conversation


async def test_phantom_action_across_turns_end_to_end(tmp_path: Path) -> None:
    lie = case(tmp_path, r"""id: lie
agent: shop
turns:
  - user: adiciona
  - user: e aí?
expect:
  must_not: [phantom_action, tool_error]
  claims: {add_to_cart: '\b(?:adicion(?:ei|ad[oa]s?)|coloquei)\b'}
""")
    replies = {"adiciona": {"calls": [{"name": "add_to_cart", "status": "blocked", "gate": "stock"}],
                            "reply": "Vou verificar."},
               "e aí?": {"reply": "Já adicionei!"}}
    async with ScriptedAgent(agents=AGENTS, replies=replies) as agent:
        report = await run_cases([lie], HttpTransport(agent.base_url))
    checks = {c.name: c.status for c in report.results[0].checks}
    assert checks == {"must_not.phantom_action": "fail", "must_not.tool_error": "pass"}


async def test_callable_transport(tmp_path: Path) -> None:
    class Shop:
        def describe(self, agent: str) -> dict[str, Any]:
            return {"id": agent, "tools": ["add_to_cart"]}

        async def respond(self, message: str, ctx: Any) -> dict[str, Any]:
            if message == "boom":
                raise RuntimeError("no model")
            sku = ctx.state.get("evidence", {}).get("ids", ["?"])[0]
            return {"reply": f"Adicionei ({len(ctx.history)} antes)",
                    "tool_calls": [{"name": "add_to_cart", "arguments": {"sku": sku}, "status": "ok"}]}

    seeded = case(tmp_path, "id: s\nagent: shop\nrequires: {tools: [add_to_cart]}\nstate: {evidence: {ids: [SKU-1]}}\n"
                            "turns:\n  - user: a\n  - user: b\nexpect: {tools_called: [add_to_cart]}\n")
    boom = case(tmp_path, "id: b\nagent: shop\nturns:\n  - user: boom\n")
    runner = CaseRunner(CallableTransport(Shop()))
    report = await runner.run([seeded, boom])
    assert report.results[0].status == "pass"
    assert report.results[0].turns[1].reply == "Adicionei (1 antes)"
    assert report.results[0].turns[0].tool_calls[0].arguments == {"sku": "SKU-1"}
    assert report.results[1].status == "error" and "no model" in report.results[1].reason


async def test_callable_function_without_description_or_statuses(tmp_path: Path) -> None:
    def respond(message: str, ctx: Any) -> dict[str, Any]:
        return {"reply": "ok", "tool_calls": [{"name": "create_order"}]}

    gated = case(tmp_path, "id: g\nagent: shop\nturns:\n  - user: a\n"
                           "expect: {blocked_gates: ['create_order:confirm'], tools_called: [create_order]}\n")
    report = await CaseRunner(CallableTransport(respond)).run([gated])
    result = report.results[0]
    assert result.status == "pass"
    assert {c.name: c.status for c in result.checks} == {"tools_called": "pass", "blocked_gates": "skipped"}
    assert len(report.notices) == 1
