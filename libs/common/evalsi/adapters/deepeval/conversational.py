"""DeepEval's conversational (multi-turn) metrics as Evals.si evaluators, judged. A record holding a conversation
(its input a list of messages, its output the last reply) becomes a ``ConversationalTestCase`` of ``Turn``s
(``cases.turn_fields``), as the agent pack reads one record as a conversation. A session's records are not
gathered into one conversation: the plugin protocol carries record and dataset scopes only. Runs in DeepEval's
virtualenv."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deepeval import metrics as deepeval_metrics  # type: ignore[import-not-found]
from deepeval.test_case import (  # type: ignore[import-not-found]
    ConversationalTestCase,
    MultiTurnParams,
    Turn,
)

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.cases import chatbot_role, turn_fields
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.adapters.deepeval.scoring import (
    COMMON_PARAMS,
    VERSION,
    check_criteria,
    check_optional_text,
    check_threshold,
    measure,
    outputs,
    template,
)
from evalsi.errors import BadInputError
from evalsi.evaluators import EvalContext, Evaluator, evaluator
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

MAX_WINDOW = 50  # turns a sliding window may hold: each verdict prompt shows the whole window
MAX_ROLE = 4000  # characters of the chatbot_role param: it is sent to the judge with every record
# What Conversational G-Eval shows the judge of each turn: who speaks, and what they say.
SHOWN = [MultiTurnParams.ROLE, MultiTurnParams.CONTENT]


def conversation(record: Record, role: str | None = None) -> ConversationalTestCase:
    """The record's conversation as DeepEval's test case, with the assistant's role when one is given."""
    return ConversationalTestCase(turns=[Turn(**turn) for turn in turn_fields(record)], chatbot_role=role)


@dataclass(frozen=True)
class WindowedSpec:
    """A conversational metric that judges each assistant turn within a sliding window of the turns before it."""

    slug: str
    cls: str
    about: str
    window: int  # DeepEval's default window_size


WINDOWED = (
    WindowedSpec("turn-relevancy", "TurnRelevancyMetric", window=10,
                 about="assistant turns relevant to the conversation before them / assistant turns"),
    WindowedSpec("conversation-completeness", "ConversationCompletenessMetric", window=3,
                 about="user intentions the conversation satisfied / user intentions"),
)


def _check_window(*, threshold: float, window_size: int, **_: Any) -> None:
    check_threshold(threshold=threshold)
    if not 1 <= window_size <= MAX_WINDOW:
        raise BadInputError(f"param window_size: {window_size} is outside [1, {MAX_WINDOW}] (turns per window)")


def windowed_evaluator(spec: WindowedSpec) -> Evaluator:
    """The evaluator ``deepeval/<slug>`` measuring each record's conversation with DeepEval's ``spec.cls``."""
    make: Callable[..., Any] = getattr(deepeval_metrics, spec.cls)
    default = spec.window

    @evaluator(f"deepeval/{spec.slug}", version=VERSION, requires=("input", "judge"), outputs=outputs(spec.about),
               check=_check_window,
               description=f"DeepEval's {spec.cls} ({UPSTREAM}) over the record's conversation, its model calls "
                           "answered by the run's judge.",
               params={**COMMON_PARAMS, "window_size": f"turns shown to the judge per verdict (default {default})"})
    async def measured(record: Record, ctx: EvalContext, *, threshold: float = 0.5, include_reason: bool = True,
                       strict_mode: bool = False, window_size: int = default) -> list[Score]:
        model = JudgeLLM(ctx.require_judge(), template(spec.slug))
        metric = make(threshold=threshold, model=model, include_reason=include_reason, strict_mode=strict_mode,
                      window_size=window_size, async_mode=True, verbose_mode=False)
        return await measure(metric, model, conversation(record))

    return measured


@evaluator("deepeval/knowledge-retention", version=VERSION, requires=("input", "judge"),
           outputs=outputs("assistant turns that neither forget nor contradict what the user said / assistant turns"),
           check=check_threshold,
           description=f"DeepEval's KnowledgeRetentionMetric ({UPSTREAM}): the judge gathers what the user said and "
                       "checks each assistant turn against it.",
           params=COMMON_PARAMS)
async def knowledge_retention(record: Record, ctx: EvalContext, *, threshold: float = 0.5,
                              include_reason: bool = True, strict_mode: bool = False) -> list[Score]:
    model = JudgeLLM(ctx.require_judge(), template("knowledge-retention"))
    metric = deepeval_metrics.KnowledgeRetentionMetric(
        threshold=threshold, model=model, include_reason=include_reason, strict_mode=strict_mode, async_mode=True,
        verbose_mode=False)
    return await measure(metric, model, conversation(record))


def _check_role(*, threshold: float, chatbot_role: str | None, **_: Any) -> None:
    check_threshold(threshold=threshold)
    check_optional_text("chatbot_role", chatbot_role, MAX_ROLE, "to read it from the record")


@evaluator("deepeval/role-adherence", version=VERSION, requires=("input", "judge"),
           outputs=outputs("assistant turns in character for the chatbot role / assistant turns"), check=_check_role,
           description=f"DeepEval's RoleAdherenceMetric ({UPSTREAM}): the judge names the assistant turns out of "
                       "character for the chatbot's role.",
           params={"chatbot_role": "the role the assistant plays (unset: metadata chatbot_role, else the input's "
                                   "system message)", **COMMON_PARAMS})
async def role_adherence(record: Record, ctx: EvalContext, *, chatbot_role: str | None = None,
                         threshold: float = 0.5, include_reason: bool = True, strict_mode: bool = False
                         ) -> list[Score]:
    role = _role(record, chatbot_role)
    model = JudgeLLM(ctx.require_judge(), template("role-adherence"))
    metric = deepeval_metrics.RoleAdherenceMetric(threshold=threshold, model=model, include_reason=include_reason,
                                                  strict_mode=strict_mode, async_mode=True, verbose_mode=False)
    return await measure(metric, model, conversation(record, role))


_role = chatbot_role  # the param of role_adherence shadows the function's name


@evaluator("deepeval/conversational-g-eval", version=VERSION, requires=("input", "judge"),
           outputs=outputs("Conversational G-Eval's normalized grade against the criteria"), check=check_criteria,
           description=f"DeepEval's ConversationalGEval ({UPSTREAM}): the judge writes evaluation steps for the "
                       "criteria, then grades the whole conversation by them.",
           params={"criteria": "what to grade in the conversation, in words",
                   "name": "the metric's name in DeepEval's prompts",
                   "threshold": COMMON_PARAMS["threshold"], "strict_mode": COMMON_PARAMS["strict_mode"]})
async def conversational_g_eval(record: Record, ctx: EvalContext, *, criteria: str,
                                name: str = "Conversational G-Eval", threshold: float = 0.5,
                                strict_mode: bool = False) -> list[Score]:
    # The template key holds the criteria: steps derived for one criteria are never reused for another.
    model = JudgeLLM(ctx.require_judge(), f"{template('conversational-g-eval')}:{name}:{criteria}")
    metric = deepeval_metrics.ConversationalGEval(name=name, criteria=criteria, evaluation_params=SHOWN,
                                                  threshold=threshold, model=model, strict_mode=strict_mode,
                                                  async_mode=True, verbose_mode=False)
    return await measure(metric, model, conversation(record))


CONVERSATIONAL = (*(windowed_evaluator(spec) for spec in WINDOWED), knowledge_retention, role_adherence,
                  conversational_g_eval)
