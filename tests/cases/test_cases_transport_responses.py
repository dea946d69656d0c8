"""The OpenAI Responses-compatible transport against the scripted Responses endpoint, and the CLI over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cases import DescriptionUnavailable, SeedRefused, TransportError, load_file, run_cases
from evalsi.cases.testing import ThreadedAgent
from evalsi.cases.testing_protocols import ScriptedResponses
from evalsi.cases.transport_responses import ResponsesTransport, output_end
from evalsi.cli.main import cli

CALLS = {
    "cupom?": {
        "calls": [
            {"name": "load_skill", "status": "ok"},
            {"name": "search_voucher", "arguments": {"active": True}, "status": "ok"},
            {"name": "create_order", "arguments": {}, "status": "blocked", "gate": "confirm"},
            {"name": "add_to_cart", "status": "error", "error": "out of stock"},
            {"name": "lookup", "status": None},
        ],
        "reply": "Temos o CHOCO10.",
    },
}


@pytest.mark.parametrize("stream", [True, False])
async def test_a_turn_reports_calls_ends_and_reply_streamed_or_not(stream: bool) -> None:
    async with ScriptedResponses(replies=CALLS) as server:
        transport = ResponsesTransport(server.base_url, stream=stream)
        try:
            turn = await transport.turn("conv-1", "shop", "platform", "cupom?")
        finally:
            await transport.close()
    (path, body), = server.requests
    assert path == "/v1/responses" and body["model"] == "shop" and body["stream"] is stream
    assert "previous_response_id" not in body
    assert turn.reply == "Temos o CHOCO10."
    assert turn.tool_names == ["search_voucher", "create_order", "add_to_cart", "lookup"]  # load_skill dropped
    assert turn.tool_calls[0].arguments == {"active": True} and turn.tool_calls[0].end == "ok"
    assert (turn.tool_calls[1].end, turn.tool_calls[1].gate) == ("blocked", "confirm")
    assert (turn.tool_calls[2].end, turn.tool_calls[2].error) == ("error", "out of stock")
    assert turn.tool_calls[3].end is None  # no function_call_output: the end is unknown
    assert turn.latency_ms is not None and turn.ttfb_ms is not None


async def test_the_server_may_answer_json_to_a_streamed_request_and_model_overrides_the_agent() -> None:
    async with ScriptedResponses(replies=CALLS, stream=False) as server:
        transport = ResponsesTransport(server.base_url, model="gpt-agent")
        try:
            turn = await transport.turn("conv-1", "shop", "platform", "cupom?")
        finally:
            await transport.close()
    assert server.requests[0][1]["model"] == "gpt-agent"
    assert turn.reply == "Temos o CHOCO10." and turn.tool_calls[0].end == "ok"


@pytest.mark.parametrize("stream", [True, False])
async def test_turns_of_a_conversation_are_chained_with_previous_response_id(stream: bool) -> None:
    def remember(message: str, earlier: list[str]) -> dict[str, str]:
        return {"reply": f"you said {' / '.join(earlier) or 'nothing'} before"}

    async with ScriptedResponses(default=remember) as server:
        transport = ResponsesTransport(server.base_url, stream=stream)
        try:
            await transport.turn("conv-a", "shop", "platform", "one")
            second = await transport.turn("conv-a", "shop", "platform", "two")
            other = await transport.turn("conv-b", "shop", "platform", "three")
        finally:
            await transport.close()
    bodies = [body for _, body in server.requests]
    assert "previous_response_id" not in bodies[0]
    assert bodies[1]["previous_response_id"] == "resp_1"
    assert "previous_response_id" not in bodies[2]  # another conversation starts its own chain
    assert second.reply == "you said one before" and other.reply == "you said nothing before"


@pytest.mark.parametrize(
    ("entry", "stream", "needle"),
    [
        ({"drop": True, "calls": [{"name": "x"}]}, True, "dropped mid-stream|ClientPayloadError"),
        ({"malformed": True}, True, "not JSON"),
        ({"malformed": True}, False, "'output' is not a list"),
        ({"fail": "model overloaded"}, True, "model overloaded"),
        ({"fail": "model overloaded"}, False, "model overloaded"),
        ({"http_status": 500}, True, "answered 500"),
    ],
)
async def test_broken_answers_are_transport_errors(entry: dict, stream: bool, needle: str) -> None:
    async with ScriptedResponses(default=entry) as server:
        transport = ResponsesTransport(server.base_url, stream=stream)
        try:
            with pytest.raises(TransportError, match=needle):
                await transport.turn("conv-1", "shop", "platform", "hi")
        finally:
            await transport.close()


async def test_an_unknown_previous_response_is_a_transport_error() -> None:
    async with ScriptedResponses() as server:
        transport = ResponsesTransport(server.base_url)
        transport._last[("platform", "conv-1")] = "resp_gone"
        try:
            with pytest.raises(TransportError, match="previous_response_not_found"):
                await transport.turn("conv-1", "shop", "platform", "hi")
        finally:
            await transport.close()


async def test_no_description_and_no_seed() -> None:
    transport = ResponsesTransport("http://127.0.0.1:9")
    with pytest.raises(DescriptionUnavailable):
        await transport.describe("shop", "platform")
    with pytest.raises(SeedRefused):
        await transport.seed("c", "shop", "platform", {"memory": {}})
    await transport.close()


def test_output_end_mapping() -> None:
    assert output_end("plain text result") == ("ok", None, None)
    assert output_end('{"items": []}') == ("ok", None, None)
    assert output_end('{"error": "boom"}') == ("error", None, "boom")
    assert output_end({"error": {"message": "bad"}}) == ("error", None, "bad")
    assert output_end('{"status": "blocked", "gate": "confirm"}') == ("blocked", "confirm", None)


async def test_runner_skips_a_seeded_case_and_runs_the_rest_saying_so_once(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("id: a\nagent: shop\nstate:\n  memory: {facts: {}}\nturns:\n  - user: hi\n")
    (tmp_path / "b.yaml").write_text("id: b\nagent: shop\nrequires: {tools: [search_voucher]}\nturns:\n"
                                     "  - user: cupom?\nexpect: {tools_called: [search_voucher]}\n")
    items = [*load_file(tmp_path / "a.yaml"), *load_file(tmp_path / "b.yaml")]
    async with ScriptedResponses(replies=CALLS) as server:
        report = await run_cases(items, ResponsesTransport(server.base_url))
    statuses = {r.id: (r.status, r.reason) for r in report.results}
    assert statuses["a"][0] == "skipped" and "seed refused" in statuses["a"][1]
    assert statuses["b"][0] == "pass"
    assert len(report.notices) == 1 and "description" in report.notices[0]


def test_cli_run_over_responses_exits_0_then_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "c.yaml").write_text("id: c\nagent: shop\nturns:\n  - user: cupom?\n"
                                  "expect:\n  tools_called: [search_voucher]\n  reply_includes: [choco10]\n")
    with ThreadedAgent(ScriptedResponses(replies=CALLS)) as server:  # type: ignore[arg-type]
        result = CliRunner().invoke(cli, ["cases", "run", "--source", str(cases), "--agent-url", server.base_url,
                                          "--transport", "responses", "--format", "json"])
        assert result.exit_code == 0, result.output
        (case,) = json.loads(result.output[result.output.index("{"):])["cases"]
        assert case["status"] == "pass"
        (cases / "c.yaml").write_text("id: c\nagent: shop\nturns:\n  - user: cupom?\n"
                                      "expect: {never_calls: [search_voucher]}\n")
        result = CliRunner().invoke(cli, ["cases", "run", "--source", str(cases), "--agent-url", server.base_url,
                                          "--transport", "responses"])
        assert result.exit_code == 3, result.output


def test_cli_refuses_a_protocol_transport_for_a_callable(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("id: c\nagent: shop\nturns:\n  - user: hi\n")
    result = CliRunner().invoke(cli, ["cases", "run", "--source", str(tmp_path), "--agent-callable", "m:f",
                                      "--transport", "a2a"])
    assert result.exit_code == 2 and "--transport a2a needs --agent-url" in result.output
