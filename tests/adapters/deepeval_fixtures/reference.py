"""DeepEval's own measurement, for the contract tests: run by the adapter venv's python, it measures each job's
metric with DeepEval's ``measure()`` (synchronous) and DeepEval's own ``LocalModel`` pointed at the tests' local
OpenAI-compatible server, and writes the scores as JSON to the file named by its argument. Nothing of the
adapter is used here.

stdin: {"base_url": ..., "jobs": [{"cls": "FaithfulnessMetric", "kwargs": {...}, "case": {LLMTestCase fields}}]}
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")

from deepeval import metrics
from deepeval.models import LocalModel
from deepeval.test_case import LLMTestCase, SingleTurnParams


def main() -> None:
    spec = json.load(sys.stdin)
    model = LocalModel(model="deepeval-reference", base_url=spec["base_url"], api_key="unused")
    out = []
    for job in spec["jobs"]:
        kwargs = dict(job["kwargs"])
        if "evaluation_params" in kwargs:
            kwargs["evaluation_params"] = [SingleTurnParams(p) for p in kwargs["evaluation_params"]]
        metric = getattr(metrics, job["cls"])(model=model, async_mode=False, **kwargs)
        metric.measure(LLMTestCase(**job["case"]), _show_indicator=False)
        out.append({"score": metric.score, "success": metric.success, "reason": metric.reason})
    with open(sys.argv[1], "w") as answer:
        json.dump(out, answer)


if __name__ == "__main__":
    main()
