"""Inspect scorers that call a model, as Evals.si evaluators whose model is the run's judge.

``inspect_judged_evaluator(lambda model: model_graded_qa(model=model), name="inspect/graded-qa")``: for each
record the scorer is made with an Inspect ``Model`` whose every generation is a call to the judge the evaluation
configured (``ctx.judge``: our judge client, so cached, rate-limited, retried and costed like every judge call).
Inspect's own providers, keys and retries are never used; a judge failure after our retries is an infra error
of the record, never a score.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    GenerateConfig,
    Model,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    get_model,
    modelapi,
)
from inspect_ai.scorer import Scorer, value_to_float
from inspect_ai.tool import ToolChoice, ToolInfo

from evalsi.adapters.inspect.evaluator import Kind, check_kind, output_of, record_score, task_state
from evalsi.errors import SkipRecord
from evalsi.evaluators import EvalContext, Evaluator, evaluator
from evalsi.judges.client import JudgeClient
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

# The provider and model name Inspect's transcript shows for the judge's answers.
JUDGE_API = "evalsi"
JUDGE_MODEL = f"{JUDGE_API}/judge"


class JudgeModelAPI(ModelAPI):
    """An Inspect model provider that answers through an Evals.si judge client (``get_model("evalsi/judge",
    judge=..., template=...)``)."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, *, judge: JudgeClient, template: str,
                 **model_args: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())
        self.judge = judge
        self.template = template

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        if tools:
            raise ValueError("the run's judge answers text prompts; this Inspect scorer offered it tools")
        messages = [{"role": message.role, "content": message.text} for message in input]
        answer = await self.judge.complete(messages, template_hash=self.template)
        output = ModelOutput.from_content(JUDGE_MODEL, answer.text)
        # Given, so Inspect never estimates tokens with a tokenizer it would download.
        output.usage = ModelUsage(input_tokens=answer.input_tokens, output_tokens=answer.output_tokens,
                                  total_tokens=answer.input_tokens + answer.output_tokens)
        return output

    def should_retry(self, ex: Exception) -> bool:
        return False  # the judge client has retried already, under our policy


@modelapi(name=JUDGE_API)
def _judge_api() -> type[ModelAPI]:
    """Registers the provider with Inspect, as its own providers are (a model needs its provider's registry entry)."""
    return JudgeModelAPI


def inspect_judged_evaluator(
    make_scorer: Callable[[Model], Scorer], *, name: str, kind: Kind = "passed", version: str = "0.1.0"
) -> Evaluator:
    """An Evals.si evaluator (``name``: ``namespace/name``) grading each record with the Inspect scorer
    ``make_scorer(model)`` makes, ``model`` being the run's judge; ``kind`` as for ``inspect_evaluator``. It
    requires a judge: without one, records are skipped as ``judge_pending``."""
    check_kind(kind)
    to_float = value_to_float()
    template = f"inspect:{name}@{version}"  # the judge cache keys on it: another scorer never reuses these answers

    @evaluator(name, version=version, requires=["output", "judge"], outputs=[output_of(kind)],
               description=f"The Inspect scorer {name} over the record, its model calls answered by the run's judge.")
    async def graded(record: Record, ctx: EvalContext) -> Score:
        model = get_model(JUDGE_MODEL, memoize=False, judge=ctx.require_judge(), template=template)
        state = task_state(record)
        score: Any = await make_scorer(model)(state, state.target)
        if score is None:
            raise SkipRecord("the Inspect scorer returned no score")
        return record_score(score, kind, to_float)

    return graded
