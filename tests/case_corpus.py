"""A small case corpus and a real report of it, for the tests of cases on the server (API, CLI, web UI).

The report comes from ``evalsi cases run`` against the scripted agent (``evalsi.cases.testing``) with a
baseline, so it holds every kind of thing a report page shows: a pass with tool calls and their arguments, a
failed check, a judge_pending rubric, a skipped case, and the gate's regression.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.cli.main import cli

COUPON = """\
# The coupon question: consult the tool, never invent a code.
id: coupon
agent: shop
turns:
  - user: "any coupon?"
expect:
  tools_called: [search_voucher]
  reply_includes: [CHOCO10]
"""
CART = """\
id: cart
agent: shop
turns:
  - user: "add the 70% bar"
expect:
  tools_called: [add_to_cart]
  reply_omits: [sorry]
---
id: greet
agent: shop
turns:
  - user: "hello"
expect:
  reply_includes: [welcome]
  rubric: Greets the customer warmly.
"""
ORDERS = """\
id: track-order
agent: shop
requires:
  tools: [search_orders]
turns:
  - user: "where is my order?"
"""
OTHER_TENANT = """\
id: secret
agent: shop
tenant: store-b
turns:
  - user: "any coupon?"
"""
CASE_IDS = ["cart", "greet", "coupon", "track-order"]  # corpus order: cart.yaml (two cases), coupon.yaml, orders.yaml
TOOLS = ["search_voucher", "add_to_cart"]
REPLIES: dict[str, Any] = {
    "any coupon?": {"calls": [{"name": "search_voucher", "arguments": {"active": True, "store": "centro"},
                               "status": "ok"}], "reply": "Use CHOCO10 for 10% off."},
    "add the 70% bar": {"calls": [{"name": "search_products", "arguments": {"query": "70% bar"}, "status": "ok"}],
                        "reply": "Sorry, I could not add it."},
    "hello": {"reply": "Hello and welcome to the shop!"},
}
# What the run of the corpus gives: cart fails although the baseline says it passed (the gate's regression).
EXPECTED_STATUS = {"coupon": "pass", "cart": "fail", "greet": "judge_pending", "track-order": "skipped"}


def write_corpus(root: Path) -> Path:
    (root / "golden").mkdir(parents=True)
    (root / "golden" / "cart.yaml").write_text(CART, encoding="utf-8")
    (root / "golden" / "coupon.yaml").write_text(COUPON, encoding="utf-8")
    (root / "golden" / "orders.yaml").write_text(ORDERS, encoding="utf-8")
    (root / "golden" / "secret.yaml").write_text(OTHER_TENANT, encoding="utf-8")
    return root / "golden"


def write_baseline(path: Path) -> Path:
    """A baseline in which every case passed: the run's failing cart is a regression against it."""
    cases = {case_id: {"status": "pass", "score": None} for case_id in ("coupon", "cart")}
    path.write_text(json.dumps({"kind": "evalsi.cases.baseline/v1", "tolerance": None, "cases": cases}),
                    encoding="utf-8")
    return path


def cases_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["cases", *args])
    return result.exit_code, result.output


def run_report(tmp: Path, *extra: str, baseline: bool = True) -> tuple[int, str, Path]:
    """``evalsi cases run`` of the platform tenant's corpus against the scripted agent, with the baseline unless
    ``baseline`` is false; its exit code, output and the report file."""
    corpus = tmp / "golden" if (tmp / "golden").is_dir() else write_corpus(tmp)
    output = tmp / "report.json"
    gate = ["--baseline", str(write_baseline(tmp / "baseline.json"))] if baseline else []
    with ThreadedAgent(ScriptedAgent(agents={"shop": {"tools": TOOLS}}, replies=REPLIES)) as agent:
        code, text = cases_cli("run", "--source", str(corpus), "--tenant", "platform", "--agent-url",
                               agent.base_url, *gate, "--output", str(output), *extra)
    return code, text, output
