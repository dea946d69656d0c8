"""DeepEval's other multi-turn metrics as Evals.si evaluators, judged: the turn-level RAG metrics (faithfulness, and
the contextual relevancy, precision and recall of each reply's retrieved context), goal accuracy, tool use and topic
adherence. A record is one conversation (``conversational.conversation``'s mapping) whose last reply, the record's
output, carries the record's context and the trajectory's tool calls (``traces.rag_turn_fields``,
``traces.tool_turn_fields``); the expected outcome is the record's reference. Runs in DeepEval's virtualenv."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.test_case import ConversationalTestCase, ToolCall, Turn  # type: ignore[import-not-found]

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.cases import expected_list
from evalsi.adapters.deepeval.conversational import MAX_WINDOW
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.adapters.deepeval.scoring import COMMON_PARAMS, VERSION, check_threshold, measure, outputs, template
from evalsi.adapters.deepeval.traces import rag_turn_fields, tool_turn_fields
from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import EvalContext, Evaluator, evaluator
from evalsi.records import content_text, from_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

MAX_TOPICS = 50  # relevant topics: every one is shown to the judge with every question
MAX_TOPIC = 500  # characters of one topic
AVAILABLE_METADATA = "available_tools"  # where tool use reads the tools the agent could call, when no param does


def _turns(fields: list[dict[str, Any]]) -> list[Turn]:
    return [Turn(**{**turn, "tools_called": [ToolCall(**call) for call in turn["tools_called"]]})
            if "tools_called" in turn else Turn(**turn) for turn in fields]


@dataclass(frozen=True)
class TurnRagSpec:
    """A turn-level RAG metric: each reply's retrieved context judged within a window of the turns before it."""

    slug: str
    cls: str
    about: str
    expects: bool  # reads the expected outcome (the record's reference)
    # Measured by DeepEval's synchronous measure in a worker thread: DeepEval 4.3.1's TurnFaithfulnessMetric.a_measure
    # asks each interaction's reason with the synchronous model.generate, which would block the judge's loop.
    threaded: bool = False


TURN_RAG = (
    TurnRagSpec("turn-faithfulness", "TurnFaithfulnessMetric", expects=False, threaded=True,
                about="mean over the replies with context of their claims the context supports / claims"),
    TurnRagSpec("turn-contextual-relevancy", "TurnContextualRelevancyMetric", expects=False,
                about="mean over the replies with context of their context's statements relevant to the user"),
    TurnRagSpec("turn-contextual-precision", "TurnContextualPrecisionMetric", expects=True,
                about="mean over the replies with context of the weighted precision of the chunks useful for the "
                      "expected outcome, by rank"),
    TurnRagSpec("turn-contextual-recall", "TurnContextualRecallMetric", expects=True,
                about="mean over the replies with context of the expected outcome's sentences the context supports"),
)


def _check_window(*, threshold: float, window_size: int, **_: Any) -> None:
    check_threshold(threshold=threshold)
    if not 1 <= window_size <= MAX_WINDOW:
        raise BadInputError(f"param window_size: {window_size} is outside [1, {MAX_WINDOW}] (turns per window)")


def turn_rag_evaluator(spec: TurnRagSpec) -> Evaluator:
    """The evaluator ``deepeval/<slug>`` measuring each record's conversation with DeepEval's ``spec.cls``."""
    make: Callable[..., Any] = getattr(deepeval_metrics, spec.cls)
    requires = ("input", "output", "context", *(("reference",) if spec.expects else ()), "judge")

    @evaluator(f"deepeval/{spec.slug}", version=VERSION, requires=requires, outputs=outputs(spec.about),
               check=_check_window,
               description=f"DeepEval's {spec.cls} ({UPSTREAM}) over the record's conversation, its last reply "
                           "holding the record's context, its model calls answered by the run's judge.",
               params={**COMMON_PARAMS, "window_size": "turns shown to the judge per reply (default 10)"})
    async def measured(record: Record, ctx: EvalContext, *, threshold: float = 0.5, include_reason: bool = True,
                       strict_mode: bool = False, window_size: int = 10) -> list[Score]:
        case = ConversationalTestCase(
            turns=_turns(rag_turn_fields(record)),
            expected_outcome=content_text(record.reference) if spec.expects else None)
        model = JudgeLLM(ctx.require_judge(), template(spec.slug))
        metric = make(threshold=threshold, model=model, eval_mode="llm", include_reason=include_reason,
                      strict_mode=strict_mode, window_size=window_size, async_mode=not spec.threaded,
                      verbose_mode=False)
        return await measure(metric, model, case, threaded=spec.threaded)

    return measured


@evaluator("deepeval/goal-accuracy", version=VERSION, requires=("input", "output", "judge"),
           outputs=outputs("mean of the judge's goal and plan grades over the conversation's user goals"),
           check=check_threshold,
           description=f"DeepEval's GoalAccuracyMetric ({UPSTREAM}): for each user goal, the judge grades whether "
                       "the replies (and the tools called, the trajectory's on the last reply) achieve it, and the "
                       "plan they follow.",
           params=COMMON_PARAMS)
async def goal_accuracy(record: Record, ctx: EvalContext, *, threshold: float = 0.5, include_reason: bool = True,
                        strict_mode: bool = False) -> list[Score]:
    case = ConversationalTestCase(turns=_turns(tool_turn_fields(record)))
    model = JudgeLLM(ctx.require_judge(), template("goal-accuracy"))
    metric = deepeval_metrics.GoalAccuracyMetric(
        threshold=threshold, model=model, eval_mode="llm", include_reason=include_reason, strict_mode=strict_mode,
        async_mode=True, verbose_mode=False)
    return await measure(metric, model, case)


def _check_topics(*, threshold: float, relevant_topics: list, **_: Any) -> None:
    check_threshold(threshold=threshold)
    if (not isinstance(relevant_topics, list) or not 0 < len(relevant_topics) <= MAX_TOPICS
            or not all(isinstance(t, str) and 0 < len(t.strip()) <= MAX_TOPIC for t in relevant_topics)):
        raise BadInputError(f"param relevant_topics: 1 to {MAX_TOPICS} topics, each a text of 1 to {MAX_TOPIC} "
                            f"characters (got {relevant_topics!r})"[:500])


@evaluator("deepeval/topic-adherence", version=VERSION, requires=("input", "output", "judge"),
           outputs=outputs("question-answer pairs the judge finds rightly answered or rightly refused for the "
                           "relevant topics / pairs"),
           check=_check_topics,
           description=f"DeepEval's TopicAdherenceMetric ({UPSTREAM}): the judge pairs the conversation's questions "
                       "with their answers and checks each answers on-topic questions and declines the others.",
           params={"relevant_topics": "the topics the assistant may talk about (a list of texts)", **COMMON_PARAMS})
async def topic_adherence(record: Record, ctx: EvalContext, *, relevant_topics: list, threshold: float = 0.5,
                          include_reason: bool = True, strict_mode: bool = False) -> list[Score]:
    case = ConversationalTestCase(turns=_turns(tool_turn_fields(record)))
    # The topics are in the template key: pairs judged against some topics are never reused for others.
    model = JudgeLLM(ctx.require_judge(), f"{template('topic-adherence')}:{chr(31).join(relevant_topics)}")
    metric = deepeval_metrics.TopicAdherenceMetric(
        relevant_topics=list(relevant_topics), threshold=threshold, model=model, eval_mode="llm",
        include_reason=include_reason, strict_mode=strict_mode, async_mode=True, verbose_mode=False)
    return await measure(metric, model, case)


def available_tools(record: Record, given: list | None) -> list[dict[str, Any]]:
    """The tools the agent could call: the param when given, else the metadata's ``available_tools``; each a tool
    name or an object with a ``name`` (and optionally ``description``, ``input_parameters``). None: skipped."""
    if given is not None:
        items = given
        tools = expected_list(given, "param 'available_tools'", BadInputError)
    elif AVAILABLE_METADATA in record.metadata:
        items = from_value(record.metadata[AVAILABLE_METADATA])
        tools = expected_list(items, f"metadata '{AVAILABLE_METADATA}'", ValueError)
    else:
        raise SkipRecord(f"no available tools: set param 'available_tools' or metadata '{AVAILABLE_METADATA}'")
    # The judge reads each tool's description, which expected_list (made for expected calls) does not keep.
    for tool, item in zip(tools, items, strict=True):
        if isinstance(item, dict) and isinstance(item.get("description"), str):
            tool["description"] = item["description"]
    return tools


def _check_tools(*, threshold: float, available_tools: list | None, **_: Any) -> None:
    check_threshold(threshold=threshold)
    if available_tools is not None:
        expected_list(available_tools, "param 'available_tools'", BadInputError)


@evaluator("deepeval/tool-use", version=VERSION, requires=("input", "output", "trajectory", "judge"),
           outputs=outputs("the lower of the judge's mean tool selection and mean argument grades"),
           check=_check_tools,
           description=f"DeepEval's ToolUseMetric ({UPSTREAM}): the judge grades the tools the replies called (the "
                       "trajectory's, on the last reply) against the tools available, and their arguments.",
           params={"available_tools": "the tools the agent could call: names or {name, description, "
                                      "input_parameters} objects; unset to read metadata available_tools",
                   **COMMON_PARAMS})
async def tool_use(record: Record, ctx: EvalContext, *, available_tools: list | None = None, threshold: float = 0.5,
                   include_reason: bool = True, strict_mode: bool = False) -> list[Score]:
    tools = [ToolCall(**tool) for tool in _available(record, available_tools)]
    case = ConversationalTestCase(turns=_turns(tool_turn_fields(record)))
    model = JudgeLLM(ctx.require_judge(), f"{template('tool-use')}:{'|'.join(repr(t) for t in tools)}")
    metric = deepeval_metrics.ToolUseMetric(
        available_tools=tools, threshold=threshold, model=model, eval_mode="llm", include_reason=include_reason,
        strict_mode=strict_mode, async_mode=True, verbose_mode=False)
    return await measure(metric, model, case)


_available = available_tools  # the param of tool_use shadows the function's name

MULTITURN = (*(turn_rag_evaluator(spec) for spec in TURN_RAG), goal_accuracy, topic_adherence, tool_use)
