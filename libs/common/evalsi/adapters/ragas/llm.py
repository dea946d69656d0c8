"""A RAGAS LLM whose every generation is a call to the run's judge (``ctx.require_judge().complete``): cached,
rate-limited, retried and costed by the host; the plugin holds no key. Imported only in the RAGAS plugin's venv.
"""

from __future__ import annotations

from typing import Any

from langchain_core.outputs import Generation, LLMResult  # type: ignore[import-not-found]
from ragas.llms.base import BaseRagasLLM  # type: ignore[import-not-found]
from ragas.run_config import RunConfig  # type: ignore[import-not-found]

from evalsi.judges import Completion, JudgeClient

# Part of every judge cache key: a new RAGAS release renders new prompts, and each of n generations is its own.
TEMPLATE = "ragas-0.4.3"


class JudgeLLM(BaseRagasLLM):
    """The judge as RAGAS's LLM. Temperature and stop words are RAGAS's wishes; the run's judge configuration
    decides its model and sampling, as for every judged evaluator."""

    def __init__(self, judge: JudgeClient) -> None:
        # One attempt: the host's judge client already retried; RAGAS's own retries (10, with waits up to a
        # minute) would only delay an infrastructure error.
        super().__init__(run_config=RunConfig(max_retries=1))
        self._judge = judge
        self.completions: list[Completion] = []

    def generate_text(self, prompt: Any, n: int = 1, temperature: float = 0.01, stop: list[str] | None = None,
                      callbacks: Any = None) -> LLMResult:
        raise TypeError("the judge is asynchronous: RAGAS metrics are scored with single_turn_ascore, which calls "
                        "agenerate_text")

    async def agenerate_text(self, prompt: Any, n: int = 1, temperature: float | None = 0.01,
                             stop: list[str] | None = None, callbacks: Any = None) -> LLMResult:
        messages = [{"role": "user", "content": prompt.to_string()}]
        generations = []
        for index in range(n):
            completion = await self._judge.complete(messages, template_hash=f"{TEMPLATE}#{index}")
            self.completions.append(completion)
            generations.append(Generation(text=completion.text))
        return LLMResult(generations=[generations])

    def is_finished(self, response: LLMResult) -> bool:
        # The judge client returns only whole answers; a truncated one fails RAGAS's JSON parsing instead.
        return True
