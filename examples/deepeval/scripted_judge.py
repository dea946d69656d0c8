"""A scripted judge for DeepEval's metrics, so the example (rag_metrics.py) and the adapter's contract tests run
offline: it answers each of DeepEval's prompts (recognized by its opening words, DeepEval 4.3.1's templates) with
the JSON that prompt's schema asks for. A prompt that mentions Lyon is about the wrong answer: its first verdict
is unfavourable, G-Eval grades it 2 of 10 (8 otherwise), Conversational G-Eval 3 (9 otherwise) and task
completion 0.25 (0.75 otherwise). ``reply`` is what a local OpenAI-compatible server
(``evalsi.testing.ThreadedProvider``) answers a chat completion request with; a real judge model replaces it.
"""

from __future__ import annotations

import json
from typing import Any

# Opening words of each prompt (DeepEval 4.3.1's templates) -> what it asks for.
ITEMS = {
    "Given the text, breakdown and generate a list of statements": "statements",
    "Based on the given text, please generate a comprehensive list of FACTUAL": "truths",
    "Based on the given text, please extract a comprehensive list of FACTUAL": "claims",
    "Based on the given text, please generate a list of OPINIONS": "opinions",
}
# Verdict prompts, and the verdict that is bad news for each (a biased or toxic opinion is a "yes").
VERDICTS = {
    "For the provided list of statements, determine whether each statement is relevant": "no",
    "Based on the given claims, which is a list of strings": "no",
    "Given the input, expected output, and retrieval context, please generate a list of JSON": "no",
    "For EACH sentence in the given expected output below": "no",
    "For each context in contexts, which is a list of strings": "no",
    "Based on the given opinions, which is a list of strings, generate a list of JSON objects to indicate whether "
    "EACH opinion is biased": "yes",
    "Based on the given opinions, which is a list of strings, generate a list of JSON objects to indicate whether "
    "EACH opinion is toxic": "yes",
    "For the provided list of tool calls, determine whether each tool call input parameter": "no",
}
# Prompts asking for one verdict (conversational metrics), and the bad-news verdict (knowledge retention's "yes" is
# a fact forgotten or contradicted).
VERDICT = {
    "Based on the given list of message exchanges between a user and an LLM, generate a JSON object to indicate "
    "whether the LAST `assistant` message is relevant": "no",
    "Based on the given list of message exchanges between a user and an LLM, generate a JSON object to indicate "
    "whether given user intention was satisfied": "no",
    "You are given an AI-generated message": "yes",
}
INTENTIONS = "Based on the given list of message exchanges between a user and an LLM, generate a JSON object to " \
    "extract all user intentions"
KNOWLEDGE = "You are given a conversation between an AI assistant and a user."
OUT_OF_CHARACTER = "Based on the given list of message exchanges between a user and an LLM chatbot, generate a JSON " \
    "object to specify which `ai_message` did not adhere"
TASK = "Given an agentic workflow comprised of a human input, AI response, and tools used by the AI"
TASK_VERDICT = "Given the task (desired outcome) and the actual achieved outcome"
CONVERSATION_GRADE = "You are given a set of Evaluation Steps"
RELEVANCY = "Based on the input and context, please generate a JSON object to indicate whether each statement"
STEPS = "Given an evaluation criteria which outlines how you should judge"
GRADE = "You are an evaluator. Given the following evaluation steps"


def prompt_of(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def answer(prompt: str) -> str:
    """The JSON answer to one of DeepEval's prompts."""
    prompt = prompt.lstrip()  # some templates open with a blank line
    wrong = "Lyon" in prompt
    for opening, key in ITEMS.items():
        if prompt.startswith(opening):
            # Items carry the wrong answer on, so the verdict prompt that lists them is recognized as wrong too.
            first = "Lyon is the capital of France." if wrong else "Paris is the capital of France."
            return json.dumps({key: [first, "It is on the Seine."]})
    for opening, bad in VERDICTS.items():
        if prompt.startswith(opening):
            good = "yes" if bad == "no" else "no"
            verdicts = [bad if wrong else good, good]  # first: context precision weighs rank
            return json.dumps({"verdicts": [{"verdict": v, "reason": f"scripted {v}"} for v in verdicts]})
    if prompt.startswith(RELEVANCY):
        verdicts = ["no" if wrong else "yes", "yes"]
        return json.dumps({"verdicts": [{"statement": f"statement {i}", "verdict": v, "reason": f"scripted {v}"}
                                        for i, v in enumerate(verdicts)]})
    for opening, bad in VERDICT.items():
        if prompt.startswith(opening):
            good = "yes" if bad == "no" else "no"
            return json.dumps({"verdict": bad if wrong else good, "reason": f"scripted {bad if wrong else good}"})
    if prompt.startswith(INTENTIONS):
        return json.dumps({"intentions": ["User wants to know the capital of France."]})
    if prompt.startswith(KNOWLEDGE):
        return json.dumps({"data": {"Country": "France"}})
    if prompt.startswith(OUT_OF_CHARACTER):  # the second turn (the first reply) out of character in the wrong one
        return json.dumps({"verdicts": [{"index": 1, "reason": "scripted: out of character"}] if wrong else []})
    if prompt.startswith(TASK):
        outcome = "The agent named Lyon as the capital." if wrong else "The agent named Paris as the capital."
        return json.dumps({"task": "Name the capital of France.", "outcome": outcome})
    if prompt.startswith(TASK_VERDICT):
        return json.dumps({"verdict": 0.25 if wrong else 0.75, "reason": "scripted task verdict"})
    if prompt.startswith(CONVERSATION_GRADE):
        return json.dumps({"reason": "scripted conversation grade", "score": 3 if wrong else 9})
    if prompt.startswith(STEPS):
        return json.dumps({"steps": ["Check the answer names the capital.", "Check it is correct."]})
    if prompt.startswith(GRADE):
        return json.dumps({"reason": "scripted grade", "score": 2 if wrong else 8})
    # The remaining prompts ask for a reason for the score.
    return json.dumps({"reason": "the scripted judge's reason for the score"})


def reply(body: dict[str, Any]) -> str:
    """The local server's reply to a chat completion request."""
    return answer(prompt_of(body))
