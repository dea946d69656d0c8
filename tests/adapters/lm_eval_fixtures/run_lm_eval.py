"""Runs lm-eval in its own virtualenv for tests/adapters/test_lm_eval_model.py, offline (an audit hook refuses and
notes every connection or name lookup off this machine): the CLI entry point ``python -m evalsi.adapters.lm_eval``
with --log_samples, then ``lm_eval.simple_evaluate`` from Python with an ``EvalsiLM``, a multiple-choice task
(failing against this chat-only server), a chat-template run, and the multiple-choice task logged by lm-eval's dummy
model. Writes what it saw to OUT as JSON."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

from evalsi.testing import offline_guard

offline_guard.install()

# After the hook, so import-time calls are watched too; the adapter first, as its docs say, so the opt-outs it sets
# are in place before lm-eval's loggers and tasks import datasets and huggingface_hub.
from evalsi.adapters.lm_eval.model import EvalsiLM  # noqa: E402, I001

import lm_eval  # noqa: E402
from lm_eval.loggers import EvaluationTracker  # noqa: E402
from lm_eval.models.dummy import DummyLM  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402


def _cli(spec: dict[str, Any]) -> None:
    args = f"model=model-a,provider=openai-compatible,base_url={spec['base_url']},usage_log={spec['usage_a']}"
    sys.argv = ["lm_eval", "run", "--model", "evalsi", "--model_args", args, "--tasks", "evalsi_capitals",
                "--include_path", spec["tasks"], "--log_samples", "--output_path", spec["out_a"]]
    runpy.run_module("evalsi.adapters.lm_eval", run_name="__main__", alter_sys=True)


def _save(results: dict[str, Any], out: str) -> None:
    samples = results.pop("samples")
    tracker = EvaluationTracker(output_path=out)
    tracker.general_config_tracker.model_name_sanitized = "run"
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])


def main(spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    _cli(spec)
    tasks = TaskManager(include_path=spec["tasks"])
    lm = EvalsiLM(model="model-b", provider="openai-compatible", base_url=spec["base_url"],
                  price_per_1k_input="2.0", price_per_1k_output="10", concurrency="2")
    results = lm_eval.simple_evaluate(model=lm, tasks=["evalsi_capitals"], task_manager=tasks, log_samples=True)
    metric_b = results["results"]["evalsi_capitals"]["exact_match,none"]
    _save(results, spec["out_b"])
    try:
        lm_eval.simple_evaluate(model=lm, tasks=["evalsi_capitals_choice"], task_manager=tasks)
        refusal = ""
    except Exception as exc:  # the refusal is what this records
        refusal = f"{type(exc).__name__}: {exc}"
    # --apply_chat_template: lm-eval builds a conversation (here a system instruction and the question).
    chat = EvalsiLM(model="model-chat", provider="openai-compatible", base_url=spec["base_url"])
    _save(lm_eval.simple_evaluate(model=chat, tasks=["evalsi_capitals"], task_manager=tasks, limit=1,
                                  apply_chat_template=True, system_instruction="Answer with the city only.",
                                  log_samples=True), spec["out_chat"])
    choice = lm_eval.simple_evaluate(model=DummyLM(), tasks=["evalsi_capitals_choice"], task_manager=tasks,
                                     log_samples=True)
    _save(choice, spec["out_choice"])
    usage = {"calls": lm.usage.calls, "input_tokens": lm.usage.input_tokens, "output_tokens": lm.usage.output_tokens,
             "cost_usd": lm.usage.cost_usd, "retries": lm.usage.retries}
    Path(out_path).write_text(json.dumps({"metric_b": metric_b, "usage_b": usage, "refusal": refusal,
                                          "blocked": offline_guard.blocked}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
