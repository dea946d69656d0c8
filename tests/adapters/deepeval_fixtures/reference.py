"""DeepEval's own measurement, for the contract tests: run by the adapter venv's python, it measures each job's
metric with DeepEval's ``measure()`` (synchronous) and DeepEval's own ``LocalModel`` pointed at the tests' local
OpenAI-compatible server, and writes the scores as JSON to the file named by its argument, with every connection
beyond this machine it tried (``blocked``: the offline guard refuses them). Nothing of the adapter is used here.

stdin: {"base_url": ..., "jobs": [{"cls": "FaithfulnessMetric", "kwargs": {...}, "case": {LLMTestCase fields}}]}
A case's ``tools_called``/``expected_tools`` (and a turn's ``tools_called``, a job's ``available_tools``) are lists
of ``ToolCall`` fields; a case's ``trace`` is its ``_trace_dict``, its ``mcp_servers`` ``MCPServer`` fields; a case
with ``turns`` (a list of ``Turn`` fields) is a ``ConversationalTestCase``.
"""

# ruff: noqa: E402 (the offline guard is installed before DeepEval loads)
from __future__ import annotations

import json
import os
import sys

from evalsi.testing import offline_guard

offline_guard.install()
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")

from deepeval import metrics
from deepeval.models import LocalModel
from deepeval.test_case import (
    ConversationalTestCase,
    LLMTestCase,
    MCPServer,
    MultiTurnParams,
    SingleTurnParams,
    ToolCall,
    ToolCallParams,
    Turn,
)

# The enum of each metric's evaluation_params (SingleTurnParams otherwise).
PARAMS = {"ToolCorrectnessMetric": ToolCallParams, "ConversationalGEval": MultiTurnParams}


def tool_calls(fields: dict, *keys: str) -> dict:
    calls = {key: [ToolCall(**call) for call in fields[key]] for key in keys if fields.get(key) is not None}
    return {**fields, **calls}


def test_case(fields: dict) -> LLMTestCase | ConversationalTestCase:
    fields = dict(fields)
    if "turns" in fields:
        return ConversationalTestCase(**{**fields, "turns": [Turn(**tool_calls(turn, "tools_called"))
                                                             for turn in fields["turns"]]})
    trace = fields.pop("trace", None)
    if fields.get("mcp_servers") is not None:
        fields["mcp_servers"] = [MCPServer(**server) for server in fields["mcp_servers"]]
    case = LLMTestCase(**tool_calls(fields, "tools_called", "expected_tools"))
    if trace is not None:
        case._trace_dict = trace  # as DeepEval's evaluate() sets it from an @observe'd run
    return case


def main() -> None:
    spec = json.load(sys.stdin)
    model = LocalModel(model="deepeval-reference", base_url=spec["base_url"], api_key="unused")
    out = []
    for job in spec["jobs"]:
        kwargs = dict(job["kwargs"])
        if "evaluation_params" in kwargs:
            enum = PARAMS.get(job["cls"], SingleTurnParams)
            kwargs["evaluation_params"] = [enum(p) for p in kwargs["evaluation_params"]]
        if "available_tools" in kwargs:
            kwargs["available_tools"] = [ToolCall(**tool) for tool in kwargs["available_tools"]]
        metric = getattr(metrics, job["cls"])(model=model, async_mode=False, **kwargs)
        metric.measure(test_case(job["case"]), _show_indicator=False)
        # successful: what DeepEval's evaluate() reports, asked after measuring (tool use leaves success unset).
        out.append({"score": metric.score, "success": metric.success, "reason": metric.reason,
                    "successful": metric.is_successful()})
    with open(sys.argv[1], "w") as answer:
        json.dump({"scores": out, "blocked": offline_guard.blocked}, answer)


if __name__ == "__main__":
    main()
