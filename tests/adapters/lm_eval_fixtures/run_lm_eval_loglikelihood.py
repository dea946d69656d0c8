"""Runs lm-eval in its own virtualenv for tests/adapters/test_lm_eval_loglikelihood.py, offline (an audit hook refuses
and notes every connection off this machine): the multiple-choice task tasks/evalsi_ll_choice.yaml scored by
``--model evalsi`` from the CLI and by lm-eval's own ``local-completions`` (remote tokenizer backend) from
``simple_evaluate``, against the same local completions server; the perplexity task tasks/evalsi_ll_rolling.yaml
by both, with the server's tokenizer (``tokenizer_backend=remote``), and the multiple-choice task again with it;
then the errors: a server that returns no
logprobs, a loglikelihood_rolling request without a tokenizer. Writes what it saw to OUT as JSON."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

from evalsi.testing import offline_guard

offline_guard.install()

from evalsi.adapters.lm_eval.model import EvalsiLM  # noqa: E402, I001

import lm_eval  # noqa: E402
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.models.openai_completions import LocalCompletionsAPI  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

TASK = "evalsi_ll_choice"
ROLLING = "evalsi_ll_rolling"
# Short windows, so the fixture's longer text is scored in several (lm-eval's default is 2048 tokens).
MAX_LENGTH = 8


def _scores(results: dict[str, Any]) -> dict[str, Any]:
    """Per document: each choice's (log-likelihood, is_greedy) as lm-eval logged them, and the task's accuracy."""
    samples = {str(s["doc_id"]): [list(r[0]) for r in s["resps"]] for s in results["samples"][TASK]}
    return {"acc": results["results"][TASK]["acc,none"], "samples": samples}


def _rolling(results: dict[str, Any]) -> dict[str, Any]:
    samples = {str(s["doc_id"]): s["resps"][0][0] for s in results["samples"][ROLLING]}
    metrics = {k: v for k, v in results["results"][ROLLING].items() if k.endswith(",none")}
    return {"metrics": metrics, "samples": samples}


def _error(call: Any) -> str:
    try:
        call()
    except Exception as exc:  # the error is what this records
        return f"{type(exc).__name__}: {exc}"
    return ""


def main(spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    base = spec["base_url"]
    tasks = TaskManager(include_path=spec["tasks"])
    # --model evalsi from lm-eval's CLI, as a user runs it.
    sys.argv = ["lm_eval", "run", "--model", "evalsi", "--model_args",
                f"model=tiny,provider=openai-compatible,base_url={base}/v1,concurrency=3,usage_log={spec['usage']}",
                "--tasks", TASK, "--include_path", spec["tasks"], "--log_samples", "--output_path", spec["out"]]
    runpy.run_module("evalsi.adapters.lm_eval", run_name="__main__", alter_sys=True)
    ours = EvalsiLM(model="tiny", provider="openai-compatible", base_url=f"{base}/v1")
    evalsi = _scores(lm_eval.simple_evaluate(model=ours, tasks=[TASK], task_manager=tasks, log_samples=True))
    reference = LocalCompletionsAPI(model="tiny", base_url=f"{base}/v1/completions", tokenizer_backend="remote")
    upstream = _scores(lm_eval.simple_evaluate(model=reference, tasks=[TASK], task_manager=tasks, log_samples=True))
    rolling_ours = EvalsiLM(model="tiny", provider="openai-compatible", base_url=f"{base}/v1",
                            tokenizer_backend="remote", max_length=MAX_LENGTH)
    rolling_theirs = LocalCompletionsAPI(model="tiny", base_url=f"{base}/v1/completions", tokenizer_backend="remote",
                                         max_length=MAX_LENGTH)
    # The multiple-choice task sent as token ids, its prompts (9 to 12 tokens) left-truncated to the window.
    tokenized = {name: _scores(lm_eval.simple_evaluate(model=lm, tasks=[TASK], task_manager=tasks, log_samples=True))
                 for name, lm in (("evalsi", rolling_ours), ("upstream", rolling_theirs))}
    # An empty context: conditioned on the BOS token, which needs the tokenizer.
    empty = Instance(request_type="loglikelihood", doc={}, arguments=("", "Paris is big"), idx=0)
    empty_context = [list(lm.loglikelihood([empty])[0]) for lm in (rolling_ours, rolling_theirs)]
    rolled = {name: _rolling(lm_eval.simple_evaluate(model=lm, tasks=[ROLLING], task_manager=tasks, log_samples=True))
              for name, lm in (("evalsi", rolling_ours), ("upstream", rolling_theirs))}
    plain = EvalsiLM(model="tiny", provider="openai-compatible", base_url=f"{base}/plain/v1")
    request = Instance(request_type="loglikelihood", doc={}, arguments=("Q: Why?\nA:", " Because"), idx=0)
    rolling = Instance(request_type="loglikelihood_rolling", doc={}, arguments=("Some text.",), idx=0)
    Path(out_path).write_text(json.dumps({
        "evalsi": evalsi, "upstream": upstream, "rolling_evalsi": rolled["evalsi"],
        "rolling_upstream": rolled["upstream"], "tokenized_evalsi": tokenized["evalsi"],
        "tokenized_upstream": tokenized["upstream"], "empty_context": empty_context,
        "no_logprobs": _error(lambda: plain.loglikelihood([request])),
        "rolling": _error(lambda: ours.loglikelihood_rolling([rolling])),
        "blocked": offline_guard.blocked,
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
