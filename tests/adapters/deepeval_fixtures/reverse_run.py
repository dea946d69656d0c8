"""The reverse adapter inside a real DeepEval run, for the contract tests: run by the adapter venv's python, it
grades test cases with ``deepeval.evaluate`` and Evals.si evaluators as DeepEval metrics (``evalsi_metric``),
runs ``assert_test`` on each case with the first metric, and writes each case's metrics as JSON to the file named
by its argument (with whether DeepEval's telemetry is off).

stdin: {"cases": [{LLMTestCase fields}], "metrics": [{"evaluator": ..., other evalsi_metric keywords}]}
"""

# ruff: noqa: I001 (the adapter is imported before DeepEval, as the docs tell a user to, so its telemetry is off)
from __future__ import annotations

import json
import sys

from evalsi.adapters.deepeval import evalsi_metric  # first: it turns DeepEval's telemetry off before DeepEval loads

from deepeval import assert_test, evaluate
from deepeval.errors import MissingTestCaseParamsError
from deepeval.evaluate import AsyncConfig, DisplayConfig, ErrorConfig
from deepeval.telemetry import telemetry_opt_out
from deepeval.test_case import LLMTestCase


def main() -> None:
    spec = json.load(sys.stdin)
    cases = [LLMTestCase(**case) for case in spec["cases"]]
    metrics = [evalsi_metric(**options) for options in spec["metrics"]]
    # A case that lacks what an evaluator needs is skipped, as DeepEval skips its own metrics' (the default is to
    # fail the run with MissingTestCaseParamsError).
    result = evaluate(cases, metrics, async_config=AsyncConfig(run_async=True),
                      error_config=ErrorConfig(skip_on_missing_params=True),
                      display_config=DisplayConfig(show_indicator=False, print_results=False))
    graded = [{"name": test.name, "input": test.input, "success": test.success,
               "metrics": {m.name: {"score": m.score, "success": m.success, "reason": m.reason, "error": m.error}
                           for m in test.metrics_data or []}}
              for test in result.test_results]
    asserted: list[bool | str] = []
    for case in cases:  # assert_test with the first metric, measured synchronously
        try:
            assert_test(case, [evalsi_metric(**spec["metrics"][0])], run_async=False)
            asserted.append(True)
        except AssertionError:
            asserted.append(False)
        except MissingTestCaseParamsError as exc:
            asserted.append(f"missing: {exc}")
    with open(sys.argv[1], "w") as answer:
        json.dump({"graded": graded, "asserted": asserted, "telemetry_off": telemetry_opt_out()}, answer)


if __name__ == "__main__":
    main()
