"""A custom evaluator next to a built-in one, evaluated embedded, clustered by topic.

python examples/custom_evaluator/run.py
"""

from __future__ import annotations

from pathlib import Path

import evalsi
from evalsi import Output, SkipRecord, evaluator

DATA = Path(__file__).resolve().parent.parent / "quickstart" / "qa.jsonl"


@evaluator(
    "acme/answer-brevity",
    version="1.0.0",
    requires=["output"],
    outputs=[Output("words", "number", min=0, higher_is_better=False), Output("brief")],
    params={"max_words": "an answer longer than this is not brief"},
)
def answer_brevity(record, *, max_words: int = 3) -> dict[str, object]:
    """How many words the answer takes, and whether that is brief."""
    words = len(record.output.text.split())
    if words == 0:
        raise SkipRecord("empty output")
    return {"words": float(words), "brief": words <= max_words}


if __name__ == "__main__":
    results = evalsi.evaluate(
        data=DATA,
        evaluators=[
            "exact-match",
            {"ref": "exact-match", "alias": "lenient-match", "params": {"ignore_punctuation": True}},
            answer_brevity,
        ],
        cluster_by="topic",
    )
    print(results.table())
    print(f"lenient minus strict: {results.metric('lenient-match').mean - results.metric('exact-match').mean:+.3f}")
