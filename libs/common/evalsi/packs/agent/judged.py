"""Judged outcome evaluators: an LLM judge reads a whole session and decides whether it reached the user's goal.

Like the judge pack's evaluators: without a judge the session is skipped ``judge_pending`` (never a pass), a
provider failure after retries is an infrastructure error, and an unreadable answer is an evaluator error
(``UnparseableAnswer``, the answer's start in its reason), never a score.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.packs.agent._trajectory import Call, tool_calls
from evalsi.packs.agent.outcome import _ordered
from evalsi.packs.judge.answers import normalize
from evalsi.packs.judge.evaluators import ask, judged
from evalsi.packs.judge.templates import Template, template_from_text
from evalsi.records import canonical_json, content_text, has_content
from evalsi.v1alpha1.record_pb2 import TOOL_CALL_STATUS_OK, Content, Record
from evalsi.v1alpha1.score_pb2 import Score

NAME = "builtin/goal-judge"
TEMPLATE_NAME = "goal-judge"
TEMPLATE_VERSION = 1
# Tool arguments are shown compactly: the judge needs to see what was asked of a tool, not every byte of it.
ARGUMENT_CHARS = 200


@functools.cache
def goal_template() -> Template:
    """The versioned prompt (``goal-judge@1``); its hash keys the judge cache and is recorded on every score."""
    ref = f"{TEMPLATE_NAME}@{TEMPLATE_VERSION}"
    path = resources.files("evalsi.packs.agent") / "templates" / f"{TEMPLATE_NAME}.v{TEMPLATE_VERSION}.txt"
    return template_from_text(
        path.read_text(encoding="utf-8"),
        name=TEMPLATE_NAME,
        version=TEMPLATE_VERSION,
        kind="session",
        source=f"built-in template {ref}",
    )


def user_text(content: Content) -> str:
    """What the user said in a turn: the last user message of a conversation, else the content's text."""
    if content.WhichOneof("kind") == "messages":
        for message in reversed(content.messages.messages):
            if message.role == "user":
                return message.content
    return content_text(content)


def _compact(call: Call) -> str:
    arguments = canonical_json(call.arguments) if call.arguments is not None else ""
    if len(arguments) > ARGUMENT_CHARS:
        arguments = arguments[:ARGUMENT_CHARS] + "..."
    if call.errored:
        outcome = f" -> error: {call.error or 'failed'}"
    elif call.blocked:
        outcome = " -> blocked (did not run)"
    elif call.status == TOOL_CALL_STATUS_OK:
        outcome = " -> ok"
    else:
        outcome = ""
    return f"{call.name}({arguments}){outcome}"


def transcript(turns: Sequence[Record]) -> str:
    """The session as the judge reads it: per turn the user's input, the agent's tool calls, its output."""
    parts = []
    for index, record in enumerate(turns, 1):
        lines = [f"## Turn {index}"]
        if has_content(record, "input"):
            lines.append(f"User: {user_text(record.input)}")
        lines.extend(f"Tool call: {_compact(call)}" for call in tool_calls(record.trajectory))
        if has_content(record, "output"):
            lines.append(f"Agent: {content_text(record.output)}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def session_goal(turns: Sequence[Record], given: str | None) -> tuple[str, str]:
    """(goal, where it came from): the param, else the first turn's metadata ``goal``, else its user input."""
    if given is not None:
        return given.strip(), "param"
    first = turns[0]
    if "goal" in first.metadata:
        value = first.metadata["goal"]
        if value.WhichOneof("kind") != "string_value" or not value.string_value.strip():
            raise ValueError(f"metadata 'goal' of record {first.id!r} must be a non-empty string")
        return value.string_value.strip(), "metadata"
    text = user_text(first.input).strip() if has_content(first, "input") else ""
    if not text:
        raise SkipRecord("no goal: set param 'goal', metadata 'goal' on the first turn, or give it an input")
    return text, "input"


def _check(*, goal: str | None, pass_score: int) -> None:
    if goal is not None and not goal.strip():
        raise BadInputError(f"evaluator {NAME}: param 'goal' is empty; leave it unset to read the session's goal")
    if not 1 <= pass_score <= 5:
        raise BadInputError(f"evaluator {NAME}: param 'pass_score' must be between 1 and 5, got {pass_score}")


@evaluator(
    NAME,
    version="1.0.0",
    pack="agent",
    scope="session",
    requires=["judge"],
    check=_check,
    outputs=[
        Output("passed", "boolean", description="The judge scored the session at least pass_score of 5."),
        Output(
            "score",
            "number",
            min=0.0,
            max=1.0,
            description="How well the session achieved the goal: the judge's 1-5 as (s - 1) / 4.",
        ),
    ],
    params={
        "goal": "The user's goal; unset to read the first turn's metadata 'goal', else its user input.",
        "pass_score": "The lowest judge score (1-5) that counts as the goal achieved.",
    },
)
async def goal_judge(
    records: list[Record], ctx: EvalContext, *, goal: str | None = None, pass_score: int = 4
) -> list[Score]:
    """An LLM judge reads the whole session (user inputs, tool calls, agent outputs) and scores 1-5 how well it
    achieved the user's goal. Template ``goal-judge@1``."""
    turns = _ordered(records)
    goal_text, goal_source = session_goal(turns, goal)
    judge = ctx.require_judge()
    template = goal_template()
    answer, completion = await ask(judge, template, {"goal": goal_text, "transcript": transcript(turns)}, "1-5")
    raw = float(answer.value)  # type: ignore[arg-type]  # ask() raised on an answer with no 1-5 score
    scores = [
        Score(name="passed", passed=raw >= pass_score),
        Score(name="score", number=normalize(raw, "1-5")),
    ]
    # The judgement (explanation, metadata, and the tokens, counted once per result) on the first score; the
    # second carries the same explanation and metadata.
    judged(scores[0], answer, template, completion, turns=len(turns), goal_source=goal_source)
    scores[1].explanation = scores[0].explanation
    scores[1].metadata.MergeFrom(scores[0].metadata)
    return scores


EVALUATORS = (goal_judge,)
