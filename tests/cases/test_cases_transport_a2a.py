"""The A2A transport (JSON-RPC, polled) against the scripted A2A agent, and the CLI over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cases import DescriptionUnavailable, SeedRefused, TransportError, load_file, run_cases
from evalsi.cases.testing import ThreadedAgent
from evalsi.cases.testing_protocols import ScriptedA2A
from evalsi.cases.transport_a2a import A2ATransport
from evalsi.cli.main import cli

CARD = {"name": "shop", "skills": [{"id": "promotions", "name": "Promotions", "description": "vouchers", "tags": []}]}
CALLS = {
    "cupom?": {
        "calls": [
            {"name": "load_knowledge"},
            {"name": "search_voucher", "arguments": {"active": True}, "status": "ok"},
            {"name": "create_order", "status": "blocked", "gate": "confirm"},
            {"name": "add_to_cart", "status": "error", "error": "out of stock"},
            {"name": "lookup", "status": None},
        ],
        "ui": [{"component": "voucher_card", "items": [{"code": "CHOCO10"}]}],
        "reply": "Temos o CHOCO10.",
        "polls": 3,
    },
}


def transport(server: ScriptedA2A, **kwargs: float) -> A2ATransport:
    return A2ATransport(server.base_url, poll_interval=0.01, **kwargs)


def methods(server: ScriptedA2A) -> list[str]:
    return [body["method"] for _, body in server.requests if body is not None]


async def test_a_turn_polls_to_completion_with_calls_ui_and_reply() -> None:
    async with ScriptedA2A(card=CARD, replies=CALLS) as server:
        client = transport(server)
        try:
            turn = await client.turn("conv-1", "shop", "platform", "cupom?")
        finally:
            await client.close()
    assert methods(server) == ["message/send", "tasks/get", "tasks/get", "tasks/get"]
    send = server.requests[0][1]["params"]
    assert send["message"]["contextId"] == "conv-1" and send["configuration"]["blocking"] is False
    assert turn.reply == "Temos o CHOCO10."
    assert turn.tool_names == ["search_voucher", "create_order", "add_to_cart", "lookup"]  # load_knowledge dropped
    assert turn.tool_calls[0].arguments == {"active": True} and turn.tool_calls[0].end == "ok"
    assert (turn.tool_calls[1].end, turn.tool_calls[1].gate) == ("blocked", "confirm")
    assert (turn.tool_calls[2].end, turn.tool_calls[2].error) == ("error", "out of stock")
    assert turn.tool_calls[3].end is None
    assert [(u.component, u.items) for u in turn.ui] == [("voucher_card", 1)]
    assert turn.latency_ms is not None and turn.ttfb_ms is not None


async def test_a_direct_message_answer_is_a_turn() -> None:
    async with ScriptedA2A(default={"direct": True, "reply": "olá"}) as server:
        client = transport(server)
        try:
            turn = await client.turn("conv-1", "shop", "platform", "oi")
        finally:
            await client.close()
    assert turn.reply == "olá" and turn.tool_calls == () and methods(server) == ["message/send"]


async def test_the_context_keeps_the_conversation_and_input_required_continues_the_task() -> None:
    def remember(message: str, earlier: list[str]) -> dict:
        if message == "quero um presente":
            return {"state": "input-required", "message": "Para qual ocasião?", "polls": 0}
        return {"reply": f"{message} depois de {' / '.join(earlier)}", "calls": [{"name": "search_products"}]}

    async with ScriptedA2A(default=remember) as server:
        client = transport(server)
        try:
            first = await client.turn("conv-a", "shop", "platform", "quero um presente")
            second = await client.turn("conv-a", "shop", "platform", "aniversário")
            other = await client.turn("conv-b", "shop", "platform", "oi")
        finally:
            await client.close()
    sends = [body["params"]["message"] for _, body in server.requests if body["method"] == "message/send"]
    assert first.reply == "Para qual ocasião?" and first.tool_calls == ()
    assert sends[1]["contextId"] == "conv-a" and "taskId" not in sends[0]
    assert sends[1]["taskId"] in server.tasks and "taskId" not in sends[2]  # input-required: continued
    assert second.reply == "aniversário depois de quero um presente"
    assert second.tool_names == ["search_products"]  # the earlier turn's messages are not counted again
    assert other.reply == "oi depois de "


async def test_a_task_that_never_finishes_times_out_as_a_transport_error_and_is_canceled() -> None:
    async with ScriptedA2A(default={"never": True}) as server:
        client = transport(server, timeout=0.3)
        try:
            with pytest.raises(TransportError, match=r"no final state within 0\.3s"):
                await client.turn("conv-1", "shop", "platform", "oi")
        finally:
            await client.close()
    assert len(server.canceled) == 1 and "tasks/get" in methods(server)


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"state": "failed", "message": "tool backend down"}, "ended failed: tool backend down"),
        ({"state": "canceled"}, "ended canceled"),
        ({"rpc_error": "internal"}, "JSON-RPC error -32603: internal"),
        ({"malformed": "json"}, "not JSON"),
        ({"malformed": "result"}, "no result"),
        ({"malformed": "state"}, "unknown state 'bogus'"),
    ],
)
async def test_failed_tasks_and_malformed_answers_are_transport_errors(entry: dict, needle: str) -> None:
    async with ScriptedA2A(default=entry) as server:
        client = transport(server)
        try:
            with pytest.raises(TransportError, match=needle):
                await client.turn("conv-1", "shop", "platform", "oi")
        finally:
            await client.close()


async def test_the_card_is_the_description_and_there_is_no_seed() -> None:
    async with ScriptedA2A(card=CARD) as server:
        client = transport(server)
        try:
            description = await client.describe("shop", "platform")
            with pytest.raises(SeedRefused):
                await client.seed("c", "shop", "platform", {"memory": {}})
        finally:
            await client.close()
    assert description.capabilities == frozenset({"promotions"}) and description.tools_open
    async with ScriptedA2A(card_status=404) as server:
        client = transport(server)
        try:
            with pytest.raises(DescriptionUnavailable, match="404"):
                await client.describe("shop", "platform")
        finally:
            await client.close()


async def test_runner_checks_capabilities_from_skills(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("id: a\nagent: shop\nrequires: {capabilities: [human_handoff]}\n"
                                     "turns:\n  - user: oi\n")
    (tmp_path / "b.yaml").write_text("id: b\nagent: shop\nrequires: {capabilities: [promotions], tools: [x]}\n"
                                     "turns:\n  - user: cupom?\nexpect: {tools_called: [search_voucher]}\n")
    items = [*load_file(tmp_path / "a.yaml"), *load_file(tmp_path / "b.yaml")]
    async with ScriptedA2A(card=CARD, replies=CALLS) as server:
        report = await run_cases(items, transport(server))
    statuses = {r.id: (r.status, r.reason) for r in report.results}
    assert statuses["a"][0] == "skipped" and "human_handoff" in statuses["a"][1]
    assert statuses["b"][0] == "pass"


def test_cli_run_over_a2a_exits_0_then_3_and_a_timeout_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "c.yaml").write_text("id: c\nagent: shop\nturns:\n  - user: cupom?\n"
                                  "expect:\n  tools_called: [search_voucher]\n  reply_includes: [choco10]\n")
    replies = {**CALLS, "slow": {"never": True}}
    with ThreadedAgent(ScriptedA2A(card=CARD, replies=replies)) as server:  # type: ignore[arg-type]
        def run(*extra: str) -> tuple[int, str]:
            result = CliRunner().invoke(cli, ["cases", "run", "--source", str(cases), "--agent-url", server.base_url,
                                              "--transport", "a2a", *extra])
            return result.exit_code, result.output

        code, output = run("--format", "json")
        assert code == 0, output
        (case,) = json.loads(output[output.index("{"):])["cases"]
        assert case["status"] == "pass"
        (cases / "c.yaml").write_text("id: c\nagent: shop\nturns:\n  - user: cupom?\n"
                                      "expect: {never_calls: [search_voucher]}\n")
        code, output = run()
        assert code == 3, output
        (cases / "c.yaml").write_text("id: c\nagent: shop\nturns:\n  - user: slow\nexpect: {no_ui: true}\n")
        code, output = run("--timeout", "0.5", "--format", "json")
        assert code == 1, output  # an error, never a failed case
        (case,) = json.loads(output[output.index("{"):])["cases"]
        assert case["status"] == "error" and "no final state within 0.5s" in case["reason"]
