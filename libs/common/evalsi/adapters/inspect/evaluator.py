"""Inspect scorers as Evals.si evaluators: ``inspect_evaluator(match(), name="inspect/match")``.

Each record is handed to the scorer as the task state of a finished sample (the inverse of ``rows.sample_row``):
its input, the conversation (the input's messages, then the output's, or one assistant message with the output's
text), the output's text as the model's completion, the reference as the target (a JSON list as several
targets), its metadata, id and trial (as the epoch). The scorer's value becomes the declared output:

- ``kind="passed"`` (default): Inspect's ``C``, ``True`` or ``1`` pass and ``I``, ``N``, ``False`` or ``0`` fail;
  any other value (a partial ``P``, 0.5) is an evaluator error that says to declare ``kind="number"``;
- ``kind="number"``: Inspect's own ``value_to_float`` (``C`` 1, ``P`` 0.5, ``I`` 0, numbers as they are);
- ``kind="label"``: the value as a string.

A scorer that returns no score skips the record. A scorer that calls a model (``model_graded_qa``) is adapted by
``judged.inspect_judged_evaluator``, which hands it the run's judge as its model.
"""

from __future__ import annotations

from typing import Any, Literal

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ModelName,
    ModelOutput,
)
from inspect_ai.scorer import Score as InspectScore
from inspect_ai.scorer import Scorer, Target, value_to_float
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolCall

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Evaluator, Output, evaluator
from evalsi.packs.core.matching import reference_texts
from evalsi.records import content_text, from_value
from evalsi.v1alpha1.record_pb2 import Content, Message, Record
from evalsi.v1alpha1.score_pb2 import Score

# The release this adapter is a shim over and tested against (pyproject's `inspect` extra pins the same): a pack of
# adapted scorers declares it, `Pack(..., tier="wrapped", upstream=UPSTREAM)`.
UPSTREAM = "inspect-ai==0.3.285"
Kind = Literal["passed", "number", "label"]
KINDS: tuple[Kind, ...] = ("passed", "number", "label")
# The model name a task state carries when the record does not say which model produced it.
UNKNOWN_MODEL = "evalsi/record"
_PASSING = ("C", True, 1)
_FAILING = ("I", "N", False, 0)
# Each kind's output: its name (a single output's metric is the evaluator's alias either way) and type.
_OUTPUTS: dict[Kind, Output] = {"passed": Output("passed"), "number": Output("score", "number"),
                                "label": Output("label", "label")}


def inspect_evaluator(scorer: Scorer, *, name: str, kind: Kind = "passed", version: str = "0.1.0") -> Evaluator:
    """An Evals.si evaluator (``name``: ``namespace/name``) that grades each record with the Inspect ``scorer``;
    ``kind`` is the output it declares (module docstring). Pass it to ``evalsi.evaluate`` as an object, or put it
    in a pack."""
    check_kind(kind)
    to_float = value_to_float()

    @evaluator(name, version=version, requires=["output"], outputs=[_OUTPUTS[kind]],
               description=f"The Inspect scorer {name} over the record (an adapted scorer, tier wrapped).")
    async def graded(record: Record) -> Score:
        state = task_state(record)
        score = await scorer(state, state.target)
        if score is None:
            raise SkipRecord("the Inspect scorer returned no score")
        return record_score(score, kind, to_float)

    return graded


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise BadInputError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")


def output_of(kind: Kind) -> Output:
    return _OUTPUTS[kind]


def task_state(record: Record) -> TaskState:
    """The state of a finished sample whose input, output and target are the record's."""
    given = _messages(record.input) if record.input.WhichOneof("kind") == "messages" else []
    answered = _messages(record.output) if record.output.WhichOneof("kind") == "messages" else []
    completion = content_text(record.output)
    if not answered:
        answered = [ChatMessageAssistant(content=completion, source="generate")]
    if not given and record.HasField("input"):
        given = [ChatMessageUser(content=content_text(record.input), source="input")]
    metadata = {key: from_value(value) for key, value in record.metadata.items()}
    model = str(metadata.get("inspect.model") or UNKNOWN_MODEL)
    targets = reference_texts(record)[0] if record.HasField("reference") else []
    return TaskState(
        model=ModelName(model if "/" in model else f"evalsi/{model}"),  # Inspect's names are provider/model
        sample_id=record.id,
        epoch=record.provenance.trial + 1,
        input=given if record.input.WhichOneof("kind") == "messages" else content_text(record.input),
        messages=[*given, *answered],
        target=Target(targets),
        output=ModelOutput.from_content(model, completion),
        metadata=metadata,
        completed=True,
    )


def _messages(content: Content) -> list[ChatMessage]:
    return [_message(m) for m in content.messages.messages]


def _message(message: Message) -> ChatMessage:
    if message.role == "system":
        return ChatMessageSystem(content=message.content)
    if message.role == "assistant":
        calls = [ToolCall(id=c.id, function=c.name, arguments=from_value(c.arguments) if c.HasField("arguments")
                          else {}) for c in message.tool_calls]
        return ChatMessageAssistant(content=message.content, tool_calls=calls or None, source="generate")
    if message.role == "tool":
        return ChatMessageTool(content=message.content, tool_call_id=message.tool_call_id or None,
                               function=message.name or None)
    return ChatMessageUser(content=message.content)


def record_score(score: InspectScore, kind: Kind, to_float: Any) -> Score:
    """The Inspect score as the Evals.si score of the declared ``kind`` (module docstring)."""
    value = score.value
    out = Score(name=_OUTPUTS[kind].name, explanation=score.explanation or "")
    if kind == "label":
        out.label = str(value)
    elif kind == "number":
        out.number = to_float(value)
    elif isinstance(value, str | bool | int | float) and value in _PASSING:
        out.passed = True
    elif isinstance(value, str | bool | int | float) and value in _FAILING:
        out.passed = False
    else:
        raise ValueError(f"the Inspect scorer gave {value!r}, which is neither a pass nor a fail; declare "
                         "kind='number' (Inspect's value_to_float) or kind='label'")
    return out
