"""DeepEval's RAG metrics graded by Evals.si, offline: the adapter's plugin (DeepEval in its own virtualenv) grades
two answers, one right and one wrong, and the run's judge is a local server answering from a script
(scripted_judge.py). With a real judge, pass its configuration instead (``{"provider": "openai", "model": ...}``).

    python rag_metrics.py [PLUGINS_DIR]

The first run builds DeepEval's virtualenv (about half a minute; cached under EVALSI_PLUGINS_CACHE after that).
"""

from __future__ import annotations

import sys
from pathlib import Path

from scripted_judge import reply

import evalsi
from evalsi.adapters.deepeval import PLUGIN_DIR
from evalsi.evaluators import Registry
from evalsi.plugins import load_plugins
from evalsi.testing.threaded import ThreadedProvider

QUESTION = "What is the capital of France?"
ROWS = [
    {"id": "right", "input": QUESTION, "output": "Paris is the capital of France.", "reference": "Paris",
     "context": ["Paris is the capital of France.", "France is in Europe."]},
    {"id": "wrong", "input": QUESTION, "output": "Lyon is the capital of France.", "reference": "Paris",
     "context": ["Lyon is a large city in France.", "France is in Europe."]},
]
EVALUATORS = [
    "deepeval/faithfulness",
    "deepeval/answer-relevancy",
    "deepeval/contextual-precision",
    {"ref": "deepeval/g-eval", "params": {"criteria": "Does the answer name the capital correctly?"}},
]


def main(plugins: Path) -> None:
    # The plugin is a directory inside the evalsi package: a link to it under a plugins directory serves it.
    plugins.mkdir(parents=True, exist_ok=True)
    if not (plugins / "deepeval").exists():
        (plugins / "deepeval").symlink_to(PLUGIN_DIR)
    registry = Registry.from_entry_points()
    with ThreadedProvider(reply) as judge, load_plugins(registry, plugins):
        results = evalsi.evaluate(ROWS, EVALUATORS, registry=registry,
                                  judge={"provider": "openai", "model": "scripted", "base_url": judge.base_url})
        print(results.table())
        for result in results.results:
            print(result.record_id, result.evaluator, [round(s.number, 3) for s in result.scores[:1]],
                  result.scores[0].explanation if result.scores else result.reason)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "plugins"))
