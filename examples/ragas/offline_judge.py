"""An offline judge for trying the RAGAS adapter without a model: an OpenAI-compatible server (Evals.si's
``FakeOpenAI``) whose answer to each RAGAS prompt is what the prompt's output schema asks for, computed from the
prompt's own input by fixed word-overlap rules. The same prompt always gets the same answer, whoever sends it: the
adapter's contract tests (tests/adapters/test_ragas_plugin.py) score through it and compare with RAGAS's own.

    python offline_judge.py 8765     # then: --judge-model offline-judge --judge-base-url http://127.0.0.1:8765/v1

RAGAS 0.4.3 renders every prompt as one text: an instruction, ``JSON Schema:\\n{...}`` naming the output model,
examples, then ``Now perform the same with the following input\\ninput: {...}\\nOutput:``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

from evalsi.testing import FakeOpenAI

SCHEMA = re.compile(r"JSON Schema:\n(\{.*?\})Do not use", re.S)
INPUT = re.compile(r"Now perform the same with the following input\ninput: (\{.*\})\nOutput:", re.S)
# A malformed answer for any prompt whose input mentions this word: RAGAS cannot parse it, nor its retries.
MALFORMED = "gibberish"
STOP = {"the", "and", "that", "this", "with", "from", "was", "were", "has", "have", "for", "are", "its", "it's"}


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOP}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]


def supported(statement: str, context: str) -> int:
    """1 when every content word of the statement occurs in the context."""
    return int(words(statement) <= words(context))


def entities(text: str) -> list[str]:
    return sorted(set(re.findall(r"\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)*\b", text)) - {"The", "It"})


def _nli(data: dict[str, Any]) -> dict[str, Any]:
    return {"statements": [{"statement": s, "reason": "word overlap", "verdict": supported(s, data["context"])}
                           for s in data["statements"]]}


def _classify(data: dict[str, Any]) -> dict[str, Any]:
    """Answer correctness: answer statements found in the reference are TP, the rest FP; reference statements
    not found in the answer are FN."""
    answer, truth = data["answer"], data["ground_truth"]
    joined_answer, joined_truth = " ".join(answer), " ".join(truth)
    return {
        "TP": [{"statement": s, "reason": "in the reference"} for s in answer if supported(s, joined_truth)],
        "FP": [{"statement": s, "reason": "not in the reference"} for s in answer if not supported(s, joined_truth)],
        "FN": [{"statement": s, "reason": "missing from the answer"} for s in truth if not supported(s, joined_answer)],
    }


def answer(prompt: str) -> str:
    """The judge's reply to one RAGAS prompt."""
    schema, given = SCHEMA.search(prompt), INPUT.search(prompt)
    if schema is None or given is None:
        raise ValueError(f"not a RAGAS prompt: {prompt[:120]!r}")
    title = json.loads(schema.group(1))["title"]
    data = json.loads(given.group(1))
    if MALFORMED in given.group(1):
        return "I cannot answer that in JSON."
    if title == "StatementGeneratorOutput":
        result: dict[str, Any] = {"statements": sentences(data["answer"])}
    elif title == "ClaimDecompositionOutput":
        result = {"claims": sentences(data["response"])}
    elif title in ("NLIStatementOutput",):
        result = _nli(data)
    elif title == "Verification":
        result = {"reason": "word overlap", "verdict": int(bool(words(data["context"]) & words(data["answer"])))}
    elif title == "ContextRecallClassifications":
        result = {"classifications": [{"statement": s, "reason": "word overlap",
                                       "attributed": supported(s, data["context"])}
                                      for s in sentences(data["answer"])]}
    elif title == "EntitiesList":
        result = {"entities": entities(data["text"])}
    elif title == "ResponseRelevanceOutput":
        response = data["response"]
        result = {"question": f"Which fact is this: {response.rstrip('.')}?",
                  "noncommittal": int("not sure" in response.lower())}
    elif title == "ClassificationWithReason":
        result = _classify(data)
    else:
        raise ValueError(f"no scripted answer for RAGAS prompt {title}")
    return json.dumps(result)


def reply(body: dict[str, Any]) -> str:
    """A FakeOpenAI reply: RAGAS sends its prompt as the last user message."""
    users = [m for m in body["messages"] if m.get("role") == "user"]
    content = users[-1]["content"]
    if isinstance(content, list):  # a content-part list, as langchain may send
        content = "".join(part.get("text", "") for part in content)
    return answer(content)


async def serve(port: int) -> None:
    async with FakeOpenAI(reply=reply, port=port) as server:
        print(f"offline RAGAS judge at {server.base_url}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
