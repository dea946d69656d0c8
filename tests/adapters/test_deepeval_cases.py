"""The DeepEval adapter's record <-> test case mapping (pure), and that the adapter's package loads without DeepEval
(the host that loads its plugin has none). The agentic and conversational mappings are checked here on their edge
cases, without DeepEval's venv; test_deepeval_agentic.py checks them against DeepEval itself."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from google.protobuf import json_format

from evalsi.adapters.deepeval import PLUGIN_DIR, UPSTREAM
from evalsi.adapters.deepeval.cases import (
    case_fields,
    case_row,
    chatbot_role,
    expected_tool_fields,
    tool_call_fields,
    turn_fields,
)
from evalsi.errors import BadInputError, SkipRecord
from evalsi.plugins.manifest import MANIFEST_NAME, read_manifest
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record


def test_a_record_maps_to_a_test_case_and_back() -> None:
    row = {"id": "r1", "input": "Capital of France?", "output": "Paris", "reference": "Paris",
           "context": ["Paris is the capital of France.", "France is in Europe."], "metadata": {"topic": "geo"}}
    fields = case_fields(make_record(**row))
    assert fields == {"input": "Capital of France?", "actual_output": "Paris", "expected_output": "Paris",
                      "retrieval_context": ["Paris is the capital of France.", "France is in Europe."],
                      "context": ["Paris is the capital of France.", "France is in Europe."]}
    assert case_row(**fields, name="r1", metadata={"topic": "geo"}) == row
    bare = case_fields(make_record(input="hi", output="hello"))
    assert bare == {"input": "hi", "actual_output": "hello"}  # absent fields stay absent, never ""
    assert case_row(input="q", actual_output=None, context=["c"]) == {"input": "q", "context": ["c"]}


def test_the_package_names_its_plugin_without_importing_deepeval() -> None:
    code = ("import sys, evalsi.adapters.deepeval as d; print(d.PLUGIN_DIR); "
            "print('deepeval' in sys.modules, d.OFFLINE_ENV['DEEPEVAL_TELEMETRY_OPT_OUT'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == [str(PLUGIN_DIR), "False 1"]
    manifest = read_manifest(PLUGIN_DIR / MANIFEST_NAME)
    assert manifest.package == UPSTREAM and manifest.share_host_packages
    assert (manifest.tier, manifest.upstream) == ("wrapped", UPSTREAM)
    assert manifest.entrypoint == "evalsi.adapters.deepeval.metrics:pack"


def _agent(steps: list[dict[str, Any]], **fields: Any) -> Record:
    record = make_record(id="a", input="q", **fields)
    json_format.ParseDict({"trajectory": {"steps": steps}}, record)
    return record


def test_tool_calls_map_to_deepevals_tool_calls_in_start_order() -> None:
    record = _agent([
        {"type": "STEP_TYPE_TOOL", "startTime": "2026-01-01T00:00:02Z",
         "toolCall": {"name": "b", "arguments": '{"x": 1}'}},  # OpenAI's JSON text of arguments, decoded
        {"type": "STEP_TYPE_TOOL", "name": "a", "startTime": "2026-01-01T00:00:01Z", "toolCall": {"result": [1, 2]}},
        {"type": "STEP_TYPE_LLM", "name": "think", "startTime": "2026-01-01T00:00:00Z"},
    ])
    assert tool_call_fields(record) == [{"name": "a", "output": [1, 2]}, {"name": "b", "input_parameters": {"x": 1}}]
    with pytest.raises(ValueError, match=r"trajectory.steps\[0\] \(c\): the arguments must be a JSON object"):
        tool_call_fields(_agent([{"type": "STEP_TYPE_TOOL", "toolCall": {"name": "c", "arguments": [1]}}]))


def test_expected_tools_come_from_the_param_then_the_reference_then_the_metadata() -> None:
    tools = [{"name": "a", "arguments": {"x": 1}, "output": "ok"}, "b"]
    want = [{"name": "a", "input_parameters": {"x": 1}, "output": "ok"}, {"name": "b"}]
    both = _agent([], reference='{"expected_tools": ["r"]}', metadata={"expected_tools": ["m"]})
    assert expected_tool_fields(both, tools) == want
    assert expected_tool_fields(both, None) == [{"name": "r"}]  # a text reference holding JSON is read
    assert expected_tool_fields(_agent([], reference={"tool_calls": ["t"]}), None) == [{"name": "t"}]
    assert expected_tool_fields(_agent([], metadata={"expected_tools": ["m"]}), None) == [{"name": "m"}]
    with pytest.raises(SkipRecord, match="no expected tools"):
        expected_tool_fields(_agent([], reference="Paris"), None)
    with pytest.raises(BadInputError, match=r"param 'expected'\[0\] must be a tool name or an object"):
        expected_tool_fields(both, [{"arguments": {}}])
    with pytest.raises(ValueError, match="metadata 'expected_tools' must be a list"):
        expected_tool_fields(_agent([], metadata={"expected_tools": "a"}), None)


def test_a_records_conversation_and_its_chatbot_role() -> None:
    messages = [{"role": "system", "content": "Be a tutor."}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [{"name": "look"}]},
                {"role": "tool", "content": "found", "tool_call_id": "1"}, {"role": "assistant", "content": "hello"}]
    record = make_record(input={"messages": messages}, output="bye")
    assert turn_fields(record) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                   {"role": "assistant", "content": "bye"}]
    assert chatbot_role(record, None) == "Be a tutor."
    assert chatbot_role(record, "A pirate.") == "A pirate."
    assert chatbot_role(make_record(input="hi", metadata={"chatbot_role": "A clerk."}), None) == "A clerk."
    with pytest.raises(SkipRecord, match="no chatbot role"):
        chatbot_role(make_record(input="hi"), None)
    with pytest.raises(SkipRecord, match="no conversation"):
        turn_fields(make_record(input={"messages": [{"role": "system", "content": "Be a tutor."}]}))
