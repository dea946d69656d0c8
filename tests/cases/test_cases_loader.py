"""The case loader: the seed's format, and bad input named by file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.cases import BrokenCase, Case, load_cases, load_file
from evalsi.errors import BadInputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cases" / "golden"


def write(tmp_path: Path, text: str, name: str = "case.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def broken(path: Path) -> BrokenCase:
    (item,) = load_file(path)
    assert isinstance(item, BrokenCase), item
    return item


def test_examples_load() -> None:
    items = load_cases(EXAMPLES)
    assert all(isinstance(item, Case) for item in items)
    by_id = {item.id: item for item in items if isinstance(item, Case)}
    seen = by_id["chocolate-shop-add-seen"]
    assert set(seen.state) == {"evidence", "memory", "history", "briefing"}
    assert seen.requires.tools == ("add_to_cart",)
    assert seen.tenant == "platform"
    assert by_id["chocolate-shop-coupon"].expect.tools_called == ("search_voucher", "search_products?")
    assert by_id["chocolate-shop-coupon"].expect.policy is not None
    assert by_id["chocolate-shop-coupon"].expect.policy.max == 1


def test_unknown_state_key_names_file_line_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, """id: c
agent: a
state:
  memory: {}
  cart: [1, 2]
turns:
  - user: oi
""")
    item = broken(path)
    assert item.error.startswith(f"{path}:5: state.cart: unknown state key")
    assert "evidence, memory, history, briefing" in item.error
    assert item.id == "c"


@pytest.mark.parametrize(
    ("body", "where", "needle"),
    [
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpectt: {}\n", ":5: expectt", "unknown key"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  max_tool_calls: many\n", ":6: expect.max_tool_calls",
         "integer"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  claims:\n    add_to_cart: '(adicionei'\n",
         ":7: expect.claims.add_to_cart", "does not compile"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  must_not: [pii_leak, rude]\n", ":6: expect.must_not[1]",
         "unknown detector"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  must_not: [phantom_action]\n", ":6: expect.must_not",
         "claims"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  policy: ask_twice\n", ":6: expect.policy",
         "unknown policy"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  policy: {ask_once: {max: 0}}\n",
         ":6: expect.policy.ask_once.max", "integer >= 1"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  blocked_gates: [create_order]\n",
         ":6: expect.blocked_gates[0]", "tool:gate"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nexpect:\n  min_score: 2\n", ":6: expect.min_score", "[0, 1]"),
        ("id: c\nagent: a\nturns:\n  - text: oi\n", ":4: turns[0].text", "unknown key"),
        ("id: c\nagent: a\nturns: []\n", ":3: turns", "non-empty list"),
        ("id: c\nagent: a\n", ":1: (document)", "exactly one of 'turns'"),
        ("agent: a\nturns:\n  - user: oi\n", ":1: (document)", "missing required key 'id'"),
        ("id: c\nagent: a\nrequires: {tools: add_to_cart, gpus: 1}\nturns:\n  - user: oi\n", ":3: requires.gpus",
         "unknown key"),
        ("id: c\nagent: a\nstate:\n  evidence:\n    cards:\n      - {id: X}\nturns:\n  - user: oi\n",
         ":6: state.evidence.cards[0]", "url"),
        ("id: c\nagent: a\nstate:\n  history:\n    - {role: system, content: x}\nturns:\n  - user: oi\n",
         ":5: state.history[0].role", "'user' or 'assistant'"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nturns:\n  - user: oi\n", ":5: turns", "duplicate key"),
        ("id: c\nagent: a\nturns:\n  - user: oi\nreference:\n  messages:\n    - {role: bot, text: x}\n",
         ":7: reference.messages[0].role", "'user' or 'assistant'"),
    ],
)
def test_bad_input_names_file_line_and_field(tmp_path: Path, body: str, where: str, needle: str) -> None:
    path = write(tmp_path, body)
    item = broken(path)
    assert item.error.startswith(f"{path}{where}"), item.error
    assert needle in item.error


def test_malformed_yaml_is_broken_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "id: c\nagent: a\nturns:\n  - user: [oi\n")
    item = broken(path)
    assert f"{path}:" in item.error and "invalid YAML" in item.error


def test_a_broken_case_is_kept_beside_the_valid_ones(tmp_path: Path) -> None:
    write(tmp_path, "id: good\nagent: a\nturns:\n  - user: oi\n", "a.yaml")
    write(tmp_path, "id: bad\nagent: a\nstate: {cart: 1}\nturns:\n  - user: oi\n", "b.yaml")
    write(tmp_path, "id: good\nagent: a\nturns:\n  - user: oi\n", "c.yaml")
    items = load_cases(tmp_path)
    assert [type(item).__name__ for item in items] == ["Case", "BrokenCase", "BrokenCase"]
    assert "duplicate case id 'good'" in items[2].error and "a.yaml:1" in items[2].error


def test_several_documents_in_one_file(tmp_path: Path) -> None:
    path = write(tmp_path, "id: one\nagent: a\nturns:\n  - user: oi\n---\nid: two\nagent: a\npersona: {goal: g}\n")
    items = load_file(path)
    assert [item.id for item in items] == ["one", "two"]
    assert items[1].line == 6


def test_missing_or_empty_source_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        load_cases(tmp_path / "nope")
    with pytest.raises(BadInputError, match="no case files"):
        load_cases(tmp_path)


def test_tenant_and_persona_and_reference(tmp_path: Path) -> None:
    path = write(tmp_path, """id: sim
agent: a
tenant: store-b
persona:
  goal: "descobrir o que comprar de presente"
  knows: {orcamento: "até R$ 100"}
  max_turns: 8
reference:
  source: "helpdesk chat 34403117"
  messages:
    - {role: user, text: "tem creatina?"}
    - {role: assistant, text: "segue o link", origin: operator}
""")
    (item,) = load_file(path)
    assert isinstance(item, Case)
    assert item.tenant == "store-b" and item.persona is not None and item.reference is not None
