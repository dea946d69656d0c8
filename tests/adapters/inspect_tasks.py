"""Real Inspect AI evals for the adapter's tests, in-process and offline: Inspect's ``mockllm/model`` answers from a
script, every answer with its usage (so Inspect never counts tokens with a tokenizer it would download)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Scorer, exact, includes
from inspect_ai.solver import Solver, generate, system_message

CAPITALS = [
    Sample(input="Capital of France?", target="Paris", id="fr", metadata={"topic": "geo", "level": 1}),
    Sample(input="2+2?", target=["4", "four"], id=2, metadata={"topic": "math"}),
    Sample(input="Capital of Italy?", target="Rome", id="it", metadata={"topic": "geo"}),
]
# The answers to each question, one per epoch: some right, some wrong, one right but for Inspect's `exact` only.
ANSWERS_A = {"Capital of France?": ["Paris", "Lyon", "Paris."], "2+2?": ["4", "5", "four"],
             "Capital of Italy?": ["Milan", "Rome", "Rome"]}
ANSWERS_B = {"Capital of France?": ["Paris", "Paris", "Paris"], "2+2?": ["4", "4", "four"],
             "Capital of Italy?": ["Rome", "Rome", "Milan"]}

Answer = Callable[[list[ChatMessage], int], ModelOutput]


def text_answers(answers: Mapping[str, Sequence[str]]) -> Answer:
    def answer(messages: list[ChatMessage], call: int) -> ModelOutput:
        texts = answers[messages[-1].text]
        return ModelOutput.from_content("mockllm/model", texts[call % len(texts)])

    return answer


def with_usage(output: ModelOutput, input_tokens: int, output_tokens: int) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=input_tokens, output_tokens=output_tokens,
                              total_tokens=input_tokens + output_tokens, input_tokens_cache_read=1,
                              total_cost=0.001 * output_tokens)
    return output


def scripted_model(answer: Answer) -> Any:
    """mockllm answering by the conversation's first user message and how often that was asked (epochs run
    concurrently, so the order of calls is not the order of epochs: only the counts per question are fixed)."""
    calls: dict[str, int] = {}

    def respond(messages: list[ChatMessage], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        question = next(m.text for m in messages if m.role == "user")
        call = calls.get(question, 0)
        calls[question] = call + 1
        output = answer(messages, call)
        return with_usage(output, 10 + len(question), 3) if output.usage is None else output

    return get_model("mockllm/model", custom_outputs=respond)


def run_task(
    log_dir: Path,
    answer: Answer,
    *,
    samples: Sequence[Sample] = CAPITALS,
    scorers: Sequence[Scorer] | None = None,
    solver: Sequence[Solver] | None = None,
    epochs: int = 3,
    log_format: str = "eval",
    **task_args: Any,
) -> EvalLog:
    task = Task(
        dataset=list(samples),
        solver=list(solver) if solver is not None else [system_message("Answer briefly."), generate()],
        scorer=list(scorers) if scorers is not None else [exact(), includes()],
        epochs=epochs,
        name="capitals",
        **task_args,
    )
    (log,) = inspect_eval(task, model=scripted_model(answer), log_dir=str(log_dir), display="none",
                          log_format=log_format)
    return log
