"""The reverse adapter's conversational metrics inside a real DeepEval run, for the contract tests: run by the
adapter venv's python, it grades ``ConversationalTestCase``s with ``deepeval.evaluate`` and Evals.si evaluators as
DeepEval conversational metrics (``evalsi_metric(..., conversational=True)``), measures the first metric on each
case synchronously (``metric.measure``, recording a ``MissingTestCaseParamsError``) and with ``assert_test``, and
writes them as JSON to the file named by its argument.

stdin: {"cases": [{ConversationalTestCase fields, each turn {Turn fields, tools_called: [{ToolCall fields}]}}],
        "metrics": [{"evaluator": ..., other evalsi_metric keywords}]}
"""

# ruff: noqa: I001 (the adapter is imported before DeepEval, as the docs tell a user to, so its telemetry is off)
from __future__ import annotations

import json
import sys
from typing import Any

from evalsi.adapters.deepeval import evalsi_metric  # first: it turns DeepEval's telemetry off before DeepEval loads

from deepeval import assert_test, evaluate
from deepeval.errors import MissingTestCaseParamsError
from deepeval.evaluate import AsyncConfig, DisplayConfig, ErrorConfig
from deepeval.test_case import ConversationalTestCase, ToolCall, Turn


def turn(fields: dict[str, Any]) -> Turn:
    calls = fields.pop("tools_called", None)
    return Turn(**fields, tools_called=[ToolCall(**call) for call in calls] if calls else None)


def main() -> None:
    spec = json.load(sys.stdin)
    cases = [ConversationalTestCase(**{**case, "turns": [turn(dict(t)) for t in case["turns"]]})
             for case in spec["cases"]]
    metrics = [evalsi_metric(**options, conversational=True) for options in spec["metrics"]]
    result = evaluate(cases, metrics, async_config=AsyncConfig(run_async=True),
                      error_config=ErrorConfig(skip_on_missing_params=True),
                      display_config=DisplayConfig(show_indicator=False, print_results=False))
    graded = [{"name": test.name,
               "metrics": {m.name: {"score": m.score, "success": m.success, "reason": m.reason, "error": m.error}
                           for m in test.metrics_data or []}}
              for test in result.test_results]
    measured: list[float | str] = []
    for case in cases:  # the first metric, measured synchronously, without DeepEval's error handling
        try:
            measured.append(evalsi_metric(**spec["metrics"][0], conversational=True).measure(case))
        except MissingTestCaseParamsError as exc:
            measured.append(f"missing: {exc}")
    asserted: list[bool | str] = []
    for case in cases:  # assert_test with the first metric
        try:
            assert_test(case, [evalsi_metric(**spec["metrics"][0], conversational=True)], run_async=False)
            asserted.append(True)
        except AssertionError:
            asserted.append(False)
        except MissingTestCaseParamsError as exc:
            asserted.append(f"missing: {exc}")
    with open(sys.argv[1], "w") as answer:
        json.dump({"graded": graded, "measured": measured, "asserted": asserted}, answer)


if __name__ == "__main__":
    main()
