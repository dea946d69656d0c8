"""A tiny Inspect AI task that runs offline: Inspect's mockllm/model answers from a script (variant a or b, two
"models" to compare), Inspect's includes() and Evals.si's exact-match (through evalsi_scorer) score it.

    python capitals.py LOG_DIR [--variant a|b]

writes the eval's log (LOG_DIR/*.eval) for `evalsi import inspect` (docs/adapters.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from inspect_ai import Task, task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, system_message

from evalsi.adapters.inspect import evalsi_scorer

SAMPLES = [
    Sample(input="Capital of France?", target="Paris", id="fr", metadata={"topic": "geo"}),
    Sample(input="Capital of Italy?", target="Rome", id="it", metadata={"topic": "geo"}),
    Sample(input="2+2?", target=["4", "four"], id="sum", metadata={"topic": "math"}),
]
# One answer per epoch and question: variant b answers better than a.
ANSWERS = {
    "a": {"Capital of France?": ["Paris", "Lyon"], "Capital of Italy?": ["Milan", "Rome"], "2+2?": ["4", "5"]},
    "b": {"Capital of France?": ["Paris", "Paris"], "Capital of Italy?": ["Rome", "Rome"], "2+2?": ["4", "four"]},
}


def scripted(variant: str) -> Any:
    """mockllm answering each question in turn from the script, with its token usage (so nothing is counted by a
    tokenizer that would have to be downloaded)."""
    asked: dict[str, int] = {}

    def respond(messages: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        question = messages[-1].text
        turn = asked.get(question, 0)
        asked[question] = turn + 1
        output = ModelOutput.from_content("mockllm/model", ANSWERS[variant][question][turn % 2])
        output.usage = ModelUsage(input_tokens=12, output_tokens=2, total_tokens=14)
        return output

    return get_model("mockllm/model", custom_outputs=respond)


@task
def capitals() -> Task:
    return Task(
        dataset=SAMPLES,
        solver=[system_message("Answer with the answer only."), generate()],
        scorer=[includes(), evalsi_scorer("builtin/exact-match")],
        epochs=2,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("--variant", choices=sorted(ANSWERS), default="a")
    args = parser.parse_args()
    (log,) = inspect_eval(capitals(), model=scripted(args.variant), log_dir=args.log_dir, display="none")
    print(f"{log.status}: {log.location}")


if __name__ == "__main__":
    main()
