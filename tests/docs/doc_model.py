"""The model the doc blocks meet: a local OpenAI-compatible server (``evalsi.testing.FakeOpenAI``) that answers
as a capable model would, so the docs' runs and gates come out as the docs say.

- A judge prompt gets a verdict on the scale its template asks for: ``"A"`` for the pairwise template, 4 for
  a 1-to-5 scale, otherwise 1 (a pass on pass-fail and 0-1 scales, and still a score on 1-5).
- A question one of the ``examples/`` datasets holds gets that row's reference (the capitals of
  ``examples/runs/capitals.jsonl``, ...), as a model that knows the answer would give.
- Anything else gets the stand-in's echo.

Run: ``python doc_model.py PORT``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from evalsi.testing.providers import FakeOpenAI, echo_reply

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAIRWISE_ASK = '"A" or "B" or "tie"'  # the pairwise template's answer format
ONE_TO_FIVE_ASKS = ("1 to 5", "<1-5>")  # the llm-judge and goal-judge templates' wording


def known_answers(examples: Path = EXAMPLES) -> dict[str, str]:
    """Each example row's input text mapped to its reference text."""
    answers: dict[str, str] = {}
    for path in examples.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            if isinstance(row.get("input"), str) and isinstance(row.get("reference"), str):
                answers[row["input"].strip()] = row["reference"]
    return answers


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def reply_for(body: dict[str, Any], answers: dict[str, str]) -> str:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    prompt = "\n".join(_text(m.get("content")) for m in messages)
    if PAIRWISE_ASK in prompt:
        return json.dumps({"reasoning": "doc test: A answers the question", "score": "A"})
    if '"score"' in prompt:
        score = 4 if any(ask in prompt for ask in ONE_TO_FIVE_ASKS) else 1
        return json.dumps({"reasoning": "doc test: a good answer", "score": score})
    users = [_text(m.get("content")).strip() for m in messages if m.get("role") == "user"]
    if users and users[-1] in answers:
        return answers[users[-1]]
    return echo_reply(body)


async def serve(port: int) -> None:
    answers = known_answers()
    parent = os.getppid()
    async with FakeOpenAI(lambda body: reply_for(body, answers), port=port):
        print(f"doc model on 127.0.0.1:{port}", flush=True)
        while os.getppid() == parent:  # until the test stops it, or is itself killed (then no teardown comes)
            await asyncio.sleep(1)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
