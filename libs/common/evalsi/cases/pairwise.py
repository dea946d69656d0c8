"""``--pairwise``: our replayed conversation against the case's ``reference`` (the incumbent's real one).

Three rules make the verdict worth quoting. The judge sees "A" and "B", never which is ours. Every judge is
asked twice with the conversations swapped, and a verdict that flips is ``comparable``, marked
order-dependent. A reference with any ``origin: operator`` message (a person typed it) labels the pair
``vs: human-assisted``, and the summary counts those apart; the judge is not told.

Outcomes for ours: ``better``, ``comparable``, ``worse``, ``split`` (readable judges disagree) and ``unknown``
(no judge answered readably). It never changes pass/fail and is never part of the gate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from evalsi.cases.result import CaseResult
from evalsi.cases.transcript import Transcript
from evalsi.errors import InfraError
from evalsi.judges import JudgeClient
from evalsi.packs.judge.answers import parse_answer

OUTCOMES: tuple[str, ...] = ("better", "comparable", "worse", "split", "unknown")
PAIRWISE_TEMPLATE_VERSION = "cases-pairwise@1"
PAIRWISE_SYSTEM = (
    "You compare two customer-service conversations that start from the same customer request. Decide which "
    "one served the customer better: resolved the request correctly, without inventing facts. Length and "
    "politeness are not service. Answer with one JSON object and nothing else: "
    '{"reasoning": "<one sentence>", "winner": "A" | "B" | "tie"}'
)


def render_ours(transcript: Transcript) -> str:
    lines = []
    for turn in transcript.turns:
        lines += [f"customer: {turn.user}", f"agent: {turn.reply}"]
    return "\n".join(lines)


def render_reference(reference: Mapping[str, Any]) -> str:
    # ``origin`` is deliberately not rendered: the judge is not told a person typed a message.
    return "\n".join(f"{'customer' if m.get('role') == 'user' else 'agent'}: {m.get('text', '')}"
                     for m in reference.get("messages") or [])


def human_assisted(reference: Mapping[str, Any]) -> bool:
    return any(m.get("origin") == "operator" for m in reference.get("messages") or [])


def pairwise_messages(first: str, second: str) -> list[dict[str, str]]:
    user = f"## Conversation A\n\n{first}\n\n## Conversation B\n\n{second}"
    return [{"role": "system", "content": PAIRWISE_SYSTEM}, {"role": "user", "content": user}]


def _ours(winner: Any, ours_is_a: bool) -> str | None:
    if winner == "tie":
        return "comparable"
    if winner in ("A", "B"):
        return "better" if (winner == "A") == ours_is_a else "worse"
    return None


async def ask_judge(client: JudgeClient, ours: str, reference: str) -> dict[str, Any]:
    """One judge, both orders: its verdict for ours, and whether it flipped with the order."""
    template_hash = hashlib.sha256(PAIRWISE_TEMPLATE_VERSION.encode()).hexdigest()[:16]
    asked: list[dict[str, Any]] = []
    for ours_is_a in (True, False):
        first, second = (ours, reference) if ours_is_a else (reference, ours)
        try:
            completion = await client.complete(pairwise_messages(first, second), template_hash=template_hash)
        except InfraError as exc:
            asked.append({"ours_is": "A" if ours_is_a else "B", "verdict": None, "reason": f"no answer: {exc}"})
            continue
        answer = parse_answer(completion.text, "pairwise")
        asked.append({"ours_is": "A" if ours_is_a else "B", "verdict": _ours(answer.value, ours_is_a),
                      "reason": answer.explanation if answer.ok else f"{answer.explanation} ({answer.error})"})
    verdicts = [a["verdict"] for a in asked]
    if None in verdicts:  # without both orders there is no swap check: not a readable verdict
        return {"verdict": "unknown", "order_dependent": False, "asked": asked}
    if verdicts[0] == verdicts[1]:
        return {"verdict": verdicts[0], "order_dependent": False, "asked": asked}
    return {"verdict": "comparable", "order_dependent": True, "asked": asked}


async def compare_case(clients: Mapping[str, JudgeClient], result: CaseResult,
                       reference: Mapping[str, Any]) -> dict[str, Any]:
    ours, theirs = render_ours(Transcript(tuple(result.turns))), render_reference(reference)
    judges = {}
    for name, client in clients.items():
        judges[name] = await ask_judge(client, ours, theirs)
    readable = [j for j in judges.values() if j["verdict"] != "unknown"]
    verdicts = {j["verdict"] for j in readable}
    outcome = "unknown" if not readable else verdicts.pop() if len(verdicts) == 1 else "split"
    return {
        "outcome": outcome,
        "order_dependent": outcome == "comparable" and any(j["order_dependent"] for j in readable),
        "vs": "human-assisted" if human_assisted(reference) else "model",
        "source": reference.get("source"),
        "judges": judges,
    }


def pairwise_summary(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Outcome counts, model references and human-assisted ones apart (a win over a person is not a win)."""
    summary: dict[str, Any] = {vs: dict.fromkeys(OUTCOMES, 0) for vs in ("model", "human-assisted")}
    for result in results:
        if result.pairwise is not None:
            summary[result.pairwise["vs"]][result.pairwise["outcome"]] += 1
    summary["order_dependent"] = sum(1 for r in results if r.pairwise and r.pairwise["order_dependent"])
    return summary


def render_pairwise(summary: dict[str, Any]) -> str:
    parts = []
    for vs in ("model", "human-assisted"):
        counts = ", ".join(f"{n} {outcome}" for outcome, n in summary[vs].items() if n)
        if counts:
            parts.append(f"vs {vs}: {counts}")
    tail = f"; {summary['order_dependent']} order-dependent" if summary["order_dependent"] else ""
    return f"pairwise (never gates): {'; '.join(parts) or 'no case has a reference'}{tail}"
