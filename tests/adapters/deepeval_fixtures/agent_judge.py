"""A scripted judge for DeepEval's trace and multi-turn metrics (test_deepeval_multiturn.py), offline: it answers
each of their prompts (recognized by its opening words, DeepEval 4.3.1's templates) with the JSON its schema asks for,
and hands every other prompt to examples/deepeval's scripted judge. As there, a prompt that mentions Lyon is about the
wrong run: its grades are lower, its first verdict unfavourable and its on-topic question answered wrong.

Every reason (and every extracted task or response) it writes ends with a digest of the prompt it answers: the
reasons DeepEval builds from them then equal only where every prompt was the same, so comparing DeepEval's reasons
checks the test case each side built (the trace, the turns, the tool calls) and not just the scripted numbers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from deepeval_fixtures.venv import scripted_reply

# Prompts asking for a 0-1 grade and a reason -> the grade of the right run and of the wrong one.
GRADES = {
    "You are an **adversarial plan adherence evaluator**": (0.8, 0.2),
    "You are a **plan quality evaluator**": (0.9, 0.4),
    "You are an **efficiency auditor**": (0.7, 0.3),
    "You are an expert evaluator assessing the **goal accuracy**": (1.0, 0.5),
    "You are an expert evaluator assessing the **planning quality**": (0.8, 0.6),
    "You are an expert evaluator assessing the **Tool Selection Quality**": (0.9, 0.3),
    "You are an expert evaluator assessing the **Tool Argument Quality**": (1.0, 0.4),
    "Evaluate whether the tools (primitives) selected and used by the agent": (0.9, 0.5),
    "Evaluate whether the arguments passed to each tool (primitive) used by the agent": (0.8, 0.2),
}
PLAN = "You are a **systems analyst** evaluating an AI agent's execution trace."
TASK = "You are a **trace analyst** tasked with extracting"
QA_PAIRS = "Your task is to extract question-answer (QA) pairs"
QA_VERDICT = "You are given:\n- A list of **relevant topics**"
JUSTIFICATION = "You are an expert evaluator providing a **final justification**"
CLAIMS = "Extract every factual-sounding claim"
TRUTHS = "Extract factual, explicit truths from the REFERENCE CONTEXT"
# Verdict lists, one per claim, context node or sentence: the first is bad news for the wrong run.
VERDICTS = (
    "For each claim, determine whether it is supported",
    "Given the user message, assistant output, and retrieval context, please generate a list of JSON objects",
    "For EACH sentence in the given assistant output below",
)
RELEVANCY = "Based on the user message and"

fallback: Callable[[dict[str, Any]], str] = scripted_reply()


def answer(prompt: str) -> str | None:
    """The JSON answer to one of the trace and multi-turn metrics' prompts; None for another prompt."""
    prompt = prompt.lstrip()
    wrong = "Lyon" in prompt
    for opening, (good, bad) in GRADES.items():
        if prompt.startswith(opening):
            return json.dumps({"score": bad if wrong else good, "reason": f"scripted grade {bad if wrong else good}"})
    if prompt.startswith(PLAN):
        city = "Lyon" if wrong else "Paris"
        return json.dumps({"plan": ["Find the capital of France.", f"Get the weather in {city}."]})
    if prompt.startswith(TASK):
        return json.dumps({"task": "Tell the weather in the capital of France."})
    if prompt.startswith(QA_PAIRS):
        return json.dumps({"qa_pairs": [{"question": "What is the capital of France?",
                                         "response": "Lyon." if wrong else "Paris."},
                                        {"question": "Tell me a joke.", "response": "I only talk geography."}]})
    if prompt.startswith(QA_VERDICT):
        # The on-topic question answered right is a true positive, wrong (Lyon) a false negative; the off-topic
        # one declined is a true negative.
        verdict = "TN" if "joke" in prompt else ("FN" if wrong else "TP")
        return json.dumps({"verdict": verdict, "reason": f"scripted {verdict}"})
    if prompt.startswith(JUSTIFICATION):  # asked without a schema: the judge's text is the reason
        return "Scripted final justification."
    if prompt.startswith(CLAIMS):
        return json.dumps({"claims": [f"{'Lyon' if wrong else 'Paris'} is the capital of France.",
                                      "It is sunny there."]})
    if prompt.startswith(TRUTHS):
        return json.dumps({"truths": ["Paris is the capital of France.", "It is sunny in France today."]})
    for opening in VERDICTS:
        if prompt.startswith(opening):
            verdicts = ["no" if wrong else "yes", "yes"]
            return json.dumps({"verdicts": [{"verdict": v, "reason": f"scripted {v}"} for v in verdicts]})
    if prompt.startswith(RELEVANCY):
        verdicts = ["no" if wrong else "yes", "yes"]
        return json.dumps({"verdicts": [{"statement": f"statement {i}", "verdict": v, "reason": f"scripted {v}"}
                                        for i, v in enumerate(verdicts)]})
    return None


STAMPED = ("reason", "task", "response")  # free-text fields of the answers (verdicts are literals, left alone)


def _stamp(value: Any, digest: str) -> Any:
    if isinstance(value, dict):
        return {key: f"{item} [{digest}]" if key in STAMPED and isinstance(item, str) else _stamp(item, digest)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_stamp(item, digest) for item in value]
    return value


def reply(body: dict[str, Any]) -> str:
    """The local server's reply to a chat completion request, stamped with its prompt's digest."""
    prompt = str(body["messages"][-1]["content"])
    text = answer(prompt)
    text = fallback(body) if text is None else text
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:10]
    try:
        return json.dumps(_stamp(json.loads(text), digest))
    except json.JSONDecodeError:  # a plain-text answer (a reason asked without a schema)
        return f"{text} [{digest}]"
