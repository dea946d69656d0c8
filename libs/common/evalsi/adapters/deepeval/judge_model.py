"""DeepEval's model, answered by the run's judge: every ``a_generate`` is one call to the Evals.si judge client
(``ctx.require_judge()``: cached, rate-limited, retried and costed by the host; in a plugin it travels back to the
host over the plugin protocol, so the plugin holds no key and DeepEval's providers are never used).

DeepEval's metrics ask for JSON matching a pydantic schema (statements, verdicts, a reason). The judge answers
text; it is parsed into the schema as DeepEval parses a local model's answer (``trim_and_load_json``, then the
schema's validation). An answer that is not such JSON raises ``UnreadableAnswer``: the record's evaluator error,
never a score.
"""

from __future__ import annotations

import asyncio
from typing import Any

from deepeval.errors import DeepEvalError  # type: ignore[import-not-found]
from deepeval.models import DeepEvalBaseLLM  # type: ignore[import-not-found]
from deepeval.models.llms.utils import trim_and_load_json  # type: ignore[import-not-found]
from pydantic import BaseModel, ValidationError

from evalsi.judges import Completion, JudgeClient

# How much of an unreadable answer an error quotes.
_QUOTED = 300


class UnreadableAnswer(ValueError):
    """The judge's answer is not the JSON DeepEval's metric asked for."""


def parse_answer(text: str, schema: type[BaseModel]) -> BaseModel:
    """``text`` read into ``schema`` (the JSON object it holds, trailing commas forgiven, as DeepEval reads it)."""
    try:
        return schema.model_validate(trim_and_load_json(text))
    except (DeepEvalError, ValidationError, ValueError) as exc:
        raise UnreadableAnswer(f"the judge's answer is not the JSON DeepEval's {schema.__name__} asks for "
                               f"({type(exc).__name__}: {str(exc)[:_QUOTED]}); answer: {text[:_QUOTED]!r}") from None


class JudgeLLM(DeepEvalBaseLLM):
    """A DeepEval model whose answers come from an Evals.si judge client; ``completions`` keeps every answer
    (for the score's cost). ``template`` keys the judge cache, so another metric never reuses these answers."""

    def __init__(self, judge: JudgeClient, template: str) -> None:
        self.judge = judge
        self.template = template
        self.completions: list[Completion] = []
        # The loop the judge client answers on: a metric measured synchronously in a worker thread
        # (scoring.measure's threaded) has its calls answered there.
        self.loop = asyncio.get_running_loop()
        super().__init__("evalsi-judge")

    def load_model(self, *args: Any, **kwargs: Any) -> JudgeLLM:
        return self

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        return "evalsi judge"

    def generate(self, prompt: str, schema: type[BaseModel] | None = None, **kwargs: Any) -> Any:
        # The judge client is asynchronous: on the loop's own thread a blocking call would never be answered; from a
        # worker thread (a metric whose a_measure asks the model synchronously, measured in one) it waits for the
        # loop to answer.
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:  # no loop runs in this thread
            on_loop = False
        if on_loop:
            raise RuntimeError("the Evals.si judge answers asynchronously: measure DeepEval metrics with a_measure, "
                               "or synchronously in a worker thread")
        return asyncio.run_coroutine_threadsafe(self.a_generate(prompt, schema, **kwargs), self.loop).result()

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None, **kwargs: Any) -> Any:
        if not isinstance(prompt, str):
            raise UnreadableAnswer(f"DeepEval sent the judge a {type(prompt).__name__} prompt; the run's judge "
                                   "answers text prompts (multimodal test cases are not supported)")
        completion = await self.judge.complete([{"role": "user", "content": prompt}], template_hash=self.template)
        self.completions.append(completion)
        return completion.text if schema is None else parse_answer(completion.text, schema)


class NoModel(DeepEvalBaseLLM):
    """The model of a DeepEval metric that scores in code (tool correctness): DeepEval builds a model for every
    metric, its default an OpenAI client that wants a key; this one holds none and refuses any call."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        super().__init__("none")

    def load_model(self, *args: Any, **kwargs: Any) -> NoModel:
        return self

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        return "none (scored in code)"

    def generate(self, *args: Any, **kwargs: Any) -> str:
        raise RuntimeError(f"{self.metric} scores without a model, yet DeepEval asked one")

    async def a_generate(self, *args: Any, **kwargs: Any) -> str:
        return self.generate()
