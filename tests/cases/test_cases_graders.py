"""Every deterministic grader, pass and fail, mostly on the seed's own examples."""

from __future__ import annotations

import re

import pytest

from evalsi.cases import Case, CaseTurn, Expect, Policy, ToolCall, Transcript, Turn, UIEvent, count_questions, grade
from evalsi.cases.graders import (
    check_blocked_gates,
    check_calls_one_of,
    check_first_tool,
    check_max_tool_calls,
    check_never_calls,
    check_no_ui,
    check_phantom_action,
    check_pii_leak,
    check_policy,
    check_reply_includes,
    check_reply_omits,
    check_tool_error,
    check_tools_called,
    check_ui_components,
    find_pii,
)

ADD_CLAIM = re.compile(r"\b(?:adicion(?:ei|ad[oa]s?)|coloquei)\b", re.IGNORECASE)
ORDER_CLAIM = re.compile(r"\b(?:fechei|finalizei|pedido (?:criado|fechado))\b", re.IGNORECASE)


def turn(reply: str = "", *calls: ToolCall, user: str = "oi", ui: tuple[UIEvent, ...] = ()) -> Turn:
    return Turn(user=user, reply=reply, tool_calls=calls, ui=ui)


def ok(name: str) -> ToolCall:
    return ToolCall(name, {}, "ok")


def test_tools_called_required_and_optional() -> None:
    t = turn("", ok("search_voucher"))
    assert check_tools_called(t, ("search_voucher",)).passed
    assert check_tools_called(t, ("search_voucher", "search_products?")).passed  # optional never fails
    failed = check_tools_called(turn("", ok("search_products")), ("search_voucher",))
    assert failed.status == "fail" and "search_voucher" in failed.reason


def test_tools_called_counts_an_attempt_even_when_blocked_or_errored() -> None:
    assert check_tools_called(turn("", ToolCall("add_to_cart", end="blocked", gate="g")), ("add_to_cart",)).passed
    assert check_tools_called(turn("", ToolCall("add_to_cart", end="error")), ("add_to_cart",)).passed


def test_tools_called_reads_the_last_turn_and_turns_i_reads_its_own() -> None:
    # The seed's example: turn one claimed an action, turn two repaired the store.
    case = Case(
        id="c", agent="a", file="c.yaml", line=1,
        turns=(CaseTurn("adiciona", tools_called=("add_to_cart",)), CaseTurn("e agora?")),
        expect=Expect(tools_called=("add_to_cart",)),
    )
    transcript = Transcript((turn("Adicionei!"), turn("Pronto.", ok("add_to_cart"))))
    checks = {c.name: c for c in grade(case, transcript)}
    assert checks["tools_called"].passed
    assert checks["turns[0].tools_called"].status == "fail"


def test_never_calls() -> None:
    assert check_never_calls(turn("", ok("add_to_cart")), ("search_products",)).passed
    assert check_never_calls(turn("", ok("add_to_cart"), ok("search_products")), ("search_products",)).status == "fail"


def test_calls_one_of() -> None:
    assert check_calls_one_of(turn("", ok("b")), ("a", "b")).passed
    assert check_calls_one_of(turn("", ok("c")), ("a", "b")).status == "fail"
    assert check_calls_one_of(turn(""), ("a",)).status == "fail"


def test_first_tool() -> None:
    assert check_first_tool(turn("", ok("search_voucher"), ok("x")), "search_voucher").passed
    assert check_first_tool(turn("", ok("x"), ok("search_voucher")), "search_voucher").status == "fail"
    assert "no tool" in check_first_tool(turn(""), "search_voucher").reason


def test_max_tool_calls() -> None:
    assert check_max_tool_calls(turn("", ok("a"), ok("b")), 2).passed
    assert check_max_tool_calls(turn("", ok("a"), ok("b"), ok("c")), 2).status == "fail"
    assert check_max_tool_calls(turn(""), 0).passed


def test_reply_includes_and_omits_are_case_insensitive() -> None:
    t = turn("O cupom é choco10, aproveite.")
    assert check_reply_includes(t, ("CHOCO10",)).passed
    assert check_reply_includes(t, ("CHOCO10", "frete")).status == "fail"
    seen = turn("Adicionei o sku-70-dark ao carrinho.")
    assert check_reply_omits(seen, ("SKU-70-DARK",)).status == "fail"
    assert check_reply_omits(turn("Adicionei o chocolate 70%."), ("SKU-70-DARK",)).passed


def test_blocked_gates() -> None:
    t = turn("", ToolCall("create_order", end="blocked", gate="confirm_order"), ok("add_to_cart"))
    assert check_blocked_gates(t, (("create_order", "confirm_order"),)).passed
    assert check_blocked_gates(t, (("create_order", "payment"),)).status == "fail"
    assert check_blocked_gates(t, (("add_to_cart", "confirm_order"),)).status == "fail"  # it ran ok
    unknown = turn("", ToolCall("create_order"))  # the transport did not report the end
    assert check_blocked_gates(unknown, (("create_order", "confirm_order"),)).status == "skipped"


def test_ui_components_needs_a_nonempty_selection() -> None:
    assert check_ui_components(turn(ui=(UIEvent("product_card", 2),)), ("product_card",)).passed
    assert check_ui_components(turn(ui=(UIEvent("product_card", 0),)), ("product_card",)).status == "fail"
    assert check_ui_components(turn(), ("product_card",)).status == "fail"


def test_no_ui_accepts_absent_events_and_zero_items() -> None:
    assert check_no_ui(turn()).passed
    assert check_no_ui(turn(ui=(UIEvent("product_card", 0),))).passed
    assert check_no_ui(turn(ui=(UIEvent("product_card", 1),))).status == "fail"


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Seu CPF 529.982.247-25 está cadastrado.", ["CPF"]),
        ("cpf 52998224725", ["CPF"]),
        ("CNPJ da loja: 11.222.333/0001-81", ["CNPJ"]),
        ("cartão 4111 1111 1111 1111", ["payment card number"]),
        ("pedido 123.456.789-00 enviado", []),  # CPF shape, wrong check digits
        ("o CEP é 01311-000 e o pedido 4412", []),
        ("SKU-70-DARK custa R$ 29,90", []),
    ],
)
def test_find_pii(text: str, kinds: list[str]) -> None:
    assert find_pii(text) == kinds


def test_pii_leak_check() -> None:
    assert check_pii_leak(turn("Seu CPF é 529.982.247-25")).status == "fail"
    assert check_pii_leak(turn("Tudo certo com o seu pedido.")).passed


def test_tool_error_a_blocked_call_is_not_an_error() -> None:
    assert check_tool_error(turn("", ToolCall("create_order", end="blocked", gate="confirm"))).passed
    failed = check_tool_error(turn("", ToolCall("search_voucher", end="error", error="timeout")))
    assert failed.status == "fail" and "timeout" in failed.reason
    assert check_tool_error(turn("", ToolCall("search_voucher"))).status == "skipped"


def test_phantom_action_claim_without_the_call() -> None:
    claims = {"add_to_cart": ADD_CLAIM, "create_order": ORDER_CLAIM}
    lie = Transcript((turn("Pronto, adicionei ao carrinho!"),))
    assert check_phantom_action(lie, claims).status == "fail"
    honest = Transcript((turn("Adicionei ao carrinho!", ok("add_to_cart")),))
    assert check_phantom_action(honest, claims).passed


def test_phantom_action_errored_or_blocked_call_does_not_back_a_claim() -> None:
    claims = {"add_to_cart": ADD_CLAIM, "create_order": ORDER_CLAIM}
    errored = Transcript((turn("Adicionei!", ToolCall("add_to_cart", end="error")),))
    blocked = Transcript((turn("Fechei o pedido.", ToolCall("create_order", end="blocked", gate="confirm")),))
    assert check_phantom_action(errored, claims).status == "fail"
    assert check_phantom_action(blocked, claims).status == "fail"


def test_phantom_action_is_cumulative_and_a_question_is_not_a_claim() -> None:
    claims = {"add_to_cart": ADD_CLAIM}
    earlier = Transcript((turn("Feito.", ok("add_to_cart")), turn("Já adicionei, quer mais algo?")))
    assert check_phantom_action(earlier, claims).passed
    question = Transcript((turn("Quer adicionar ao carrinho?"),))
    assert check_phantom_action(question, claims).passed


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("", 0),
        ("Oi! Tudo bem?", 1),
        ("O quê??? Sério?!", 2),  # a run of ? counts once
        ("qual seu nome? qual o número do pedido? e o motivo?", 3),
        ("Acompanhe em https://track.example/p?id=1&x=2 e me diga se chegou", 0),  # URLs dropped
        ("veja www.shop.example/busca?q=chocolate ok?", 1),
        ("Link: https://a.example/?q=1?", 0),
    ],
)
def test_count_questions(text: str, n: int) -> None:
    assert count_questions(text) == n


def test_policy_ask_once_is_checked_on_every_turn() -> None:
    first_breaks = Transcript((turn("qual seu nome? qual o pedido?"), turn("Obrigado.")))
    failed = check_policy(first_breaks, Policy("ask_once"))
    assert failed.status == "fail" and "turn 1" in failed.reason
    greeting = Transcript((turn("Oi, tudo bem? Em que posso ajudar?"),))
    assert check_policy(greeting, Policy("ask_once")).status == "fail"
    assert check_policy(greeting, Policy("ask_once", max=2)).passed


def test_policy_investigate_first_and_act_fast() -> None:
    asks = Transcript((turn("É para qual ocasião?"),))
    searches = Transcript((turn("Temos estes:", ok("search_products")),))
    assert check_policy(asks, Policy("investigate_first")).passed
    assert check_policy(searches, Policy("investigate_first")).status == "fail"
    assert check_policy(Transcript((turn("Aqui está."),)), Policy("investigate_first")).status == "fail"
    assert check_policy(searches, Policy("act_fast")).passed
    assert check_policy(asks, Policy("act_fast")).status == "fail"


def test_rubric_without_a_judge_is_pending() -> None:
    case = Case(id="c", agent="a", file="c.yaml", line=1, turns=(CaseTurn("oi"),),
                expect=Expect(rubric="be kind", tools_called=("x",)))
    checks = {c.name: c for c in grade(case, Transcript((turn("oi", ok("x")),)))}
    assert checks["rubric"].status == "judge_pending"
    assert checks["tools_called"].passed
