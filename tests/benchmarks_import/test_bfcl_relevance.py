"""BFCL's relevance detection (irrelevance, live_irrelevance, live_relevance) in builtin/bfcl-ast, against BFCL's own
``_evaluate_single_relevance_entry`` (bfcl-eval 2026.3.23, installed without its model SDKs by scripts/test.sh) on
the same outputs: text in its prompting format decoded by its ``default_decode_ast_prompting``, tool calls by its
OpenAI function-calling handler's ``decode_ast``. Those functions are taken from bfcl-eval's source and run as they
are, because the modules that hold them import every provider SDK."""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import shutil
import sys
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import evalsi
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.errors import BadInputError
from evalsi.packs.benchmarks.bfcl_calls import DecodeError, text_calls
from evalsi.packs.benchmarks.bfcl_relevance import check_relevance
from evalsi.records import to_content
from evalsi.testing.threaded import ThreadedProvider

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"
BFCL = Path(importlib.util.find_spec("bfcl_eval").origin).parent  # type: ignore[arg-type,union-attr]

# Outputs a model could give: refusals, calls, and calls whose values BFCL's decoder refuses or accepts.
TEXT_OUTPUTS = (
    "I cannot answer that with the functions I have.", "Sorry", "None", "[]", "", "```\n[]\n```", "[f()]",
    "[weather.current(city='Boston')]", "weather.current(city='Boston')", "```python\nweather.current(city='x')\n```",
    "[weather.current(city=city_name)]", "[weather.current(city=-x)]", "[weather.current(city=+5)]",
    "[weather.current(city=math.pi)]", "[weather.current(city=x + 1)]", "[weather.current(city='a' * 3)]",
    "[weather.current(city=[c for c in cities])]", "[weather.current(city={**other})]", "[weather.current(**kw)]",
    "[weather.current(city=f'{x}')]", "[weather.current(city=1 < 2)]", "[weather.current(city=lambda: 1)]",
    "[weather.current(city=cities[0])]", "[weather.current(city=1 / 0)]", '[{"weather.current": {"city": "x"}}]',
    '{"name": "weather.current", "arguments": {}}', "'[weather.current(city=\"x\")]'", "[1, 2]",
    "[weather.current(city='a'), 'done']", "[geometry.triangle_area(base=10, height=5)]", "The answer is (x",
)


def _bfcl_function(path: Path, name: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """BFCL's function (or method) ``name`` from its source file, defined in ``namespace``."""
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)  # BFCL's own code
    function: Callable[..., Any] = namespace[name]
    return function


@pytest.fixture(scope="module")
def bfcl_decode() -> Callable[[str], Any]:
    """BFCL's prompting-mode decoder, ``default_decode_ast_prompting``."""
    for parser in ("java_parser", "js_parser"):  # tree-sitter parsers for Java and JavaScript, never used here
        stand_in = types.ModuleType(f"bfcl_eval.model_handler.parser.{parser}")
        stand_in.parse_java_function_call = stand_in.parse_javascript_function_call = None  # type: ignore[attr-defined]
        sys.modules.setdefault(stand_in.__name__, stand_in)
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting  # type: ignore[import-untyped]

    decode: Callable[[str], Any] = default_decode_ast_prompting
    return decode


@pytest.fixture(scope="module")
def reference(bfcl_decode: Callable[[str], Any]) -> Callable[[Any, str, bool], bool]:
    """``reference(model_result, category, function_calling)``: BFCL's verdict for one relevance entry."""
    from bfcl_eval.constants.enums import ReturnFormat  # type: ignore[import-untyped]
    from bfcl_eval.utils import is_empty_output  # type: ignore[import-untyped]

    default_decode_ast_prompting = bfcl_decode

    evaluate_entry = _bfcl_function(BFCL / "eval_checker" / "eval_runner.py", "_evaluate_single_relevance_entry",
                                    {"ReturnFormat": ReturnFormat, "is_empty_output": is_empty_output})
    fc_decode = _bfcl_function(BFCL / "model_handler" / "api_inference" / "openai_completion.py", "decode_ast",
                               {"json": json, "default_decode_ast_prompting": default_decode_ast_prompting})

    def check(model_result: Any, category: str, function_calling: bool) -> bool:
        handler = types.SimpleNamespace(is_fc_model=function_calling)
        handler.decode_ast = lambda result, language, has_tool_call_tag: fc_decode(
            handler, result, language, has_tool_call_tag)
        return bool(evaluate_entry(handler, "id", model_result, {}, "model", category)["valid"])

    return check


def _records(category: str) -> list[Any]:
    return list(load_dataset(f"bfcl://{FIXTURES}/{category}"))


@pytest.mark.parametrize("category", ["irrelevance", "live_irrelevance", "live_relevance"])
def test_text_outputs_get_bfcls_verdicts_through_evaluate(reference: Any, category: str) -> None:
    records = _records(category)
    graded: list[tuple[Any, bool]] = []
    for text in TEXT_OUTPUTS:
        for record in records:
            copy = type(record)()
            copy.CopyFrom(record)
            copy.id = f"{record.id}/{len(graded)}"
            copy.output.CopyFrom(to_content(text))
            graded.append((copy, reference(text, category, False)))
    results = evalsi.evaluate([record for record, _ in graded], ["bfcl-ast"])
    scores = {result.record_id: result.scores[0] for result in results.results}
    for record, expected in graded:
        assert scores[record.id].passed == expected, (category, record.output.text, scores[record.id].explanation)
    verdicts = [expected for _r, expected in graded]
    assert True in verdicts and False in verdicts
    failed = next(scores[r.id] for r, expected in graded if not expected)
    prefix = "irrelevance_error:decoder_success" if "irrelevance" in category else "relevance_error:decoder_failed"
    assert failed.explanation.startswith(prefix)


def test_tool_call_outputs_get_bfcls_function_calling_verdicts(reference: Any) -> None:
    """Tool calls as an OpenAI-style model makes them (arguments as JSON text), against BFCL's function-calling
    handler: a call counts, arguments that are not a JSON object make it no call."""
    cases = [[("weather_current", '{"city": "Boston"}')], [("weather_current", "{}")],
             [("weather_current", '"Boston"')], [("weather_current", '{"city": "a"}'), ("f", "[1]")]]
    for category in ("irrelevance", "live_relevance"):
        record = _records(category)[0]
        for calls in cases:
            record.output.CopyFrom(to_content({"messages": [{"role": "assistant", "content": "", "tool_calls": [
                {"id": str(i), "function": {"name": name, "arguments": arguments}}
                for i, (name, arguments) in enumerate(calls)]}]}))
            ours = evalsi.evaluate([record], ["bfcl-ast"]).results[0].scores[0].passed
            assert ours == reference([{name: arguments} for name, arguments in calls], category, True), calls


def _output(rng: random.Random, functions: list[dict[str, Any]]) -> str:
    """An answer to a question offering ``functions``: a refusal, a call to one of them (its required parameters
    given, sometimes as values BFCL's decoder refuses), or several."""
    if not functions or rng.random() < 0.3:
        return rng.choice(["I can't help with that.", "[]", "None of the functions fit (the question", ""])
    calls = []
    for function in rng.sample(functions, rng.randint(1, min(2, len(functions)))):
        required = function.get("parameters", {}).get("required", [])
        values = ["'x'", "3", "-2.5", "[1, 'a']", "{'k': 1}", "name", "a.b", "-x", "(1, 2)", "2 * 3", "x + 1"]
        arguments = ", ".join(f"{param}={rng.choice(values)}" for param in required)
        calls.append(f"{function['name']}({arguments})")
    text = ", ".join(calls)
    return rng.choice([f"[{text}]", text, f"```\n[{text}]\n```"])


@pytest.mark.parametrize("category", ["irrelevance", "live_irrelevance", "live_relevance"])
def test_bfcls_own_data_gets_bfcls_verdicts(reference: Any, category: str) -> None:
    """Every question of BFCL's own v4 file for the category, read through bfcl:// (no possible_answer file: these
    categories have none), answered three ways each: the same verdicts as BFCL's."""
    rng = random.Random(category)
    records = list(load_dataset(f"bfcl://{BFCL / 'data'}/{category}"))
    assert len(records) > 10 and all(json.loads(r.reference.text)["ground_truth"] == [] for r in records)
    verdicts = []
    for record in records:
        reference_json = json.loads(record.reference.text)
        for _ in range(3):
            text = _output(rng, reference_json["function"])
            ours = check_relevance(partial(text_calls, text), reference_json["category"]).valid
            assert ours == reference(text, category, False), (record.id, text)
            verdicts.append(ours)
    assert 0.2 < sum(verdicts) / len(verdicts) < 0.8  # both verdicts well represented


def test_relevance_files_need_no_possible_answers_and_ast_ones_still_do(tmp_path: Path) -> None:
    for name in ("BFCL_v3_irrelevance.json", "BFCL_v3_simple.json"):
        (tmp_path / name).write_text((FIXTURES / name).read_text())
    records = list(load_dataset(f"bfcl://{tmp_path}/irrelevance"))
    assert [r.id for r in records] == ["irrelevance_0", "irrelevance_1"]
    assert records[0].metadata["bfcl_category"].string_value == "irrelevance"
    with pytest.raises(BadInputError, match=r"simple_0.*no possible answer in .*possible_answer/BFCL_v3_simple"):
        list(load_dataset(f"bfcl://{tmp_path}/simple"))
    empty = _records("live_irrelevance")[1]  # BFCL's live_irrelevance offers some questions no function at all
    assert empty.id == "live_irrelevance_1-1-0" and list(empty.metadata["tools"].list_value.values) == []
    question = json.loads((FIXTURES / "BFCL_v3_simple.json").read_text().splitlines()[0])
    (tmp_path / "BFCL_v3_simple.json").write_text(json.dumps({**question, "function": []}) + "\n")
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer" / "BFCL_v3_simple.json").write_text(
        (FIXTURES / "possible_answer" / "BFCL_v3_simple.json").read_text())
    with pytest.raises(BadInputError, match=r"function: expected a list .* \(at least one\)"):
        list(load_dataset(f"bfcl://{tmp_path}/simple"))


def test_text_is_decoded_as_bfcls_prompting_decoder_does(bfcl_decode: Callable[[str], Any]) -> None:
    """The same calls, or a failure where BFCL's decoder fails, on every kind of output above and on generated
    answers to BFCL's own live_simple questions (whose values the AST checker then grades)."""
    rng = random.Random(16)
    questions = [json.loads(r.reference.text)["function"] for r in load_dataset(f"bfcl://{BFCL / 'data'}/live_simple")]
    texts = [*TEXT_OUTPUTS, *(_output(rng, functions) for functions in questions)]
    failures = 0
    for text in texts:
        try:
            expected = bfcl_decode(text)
        except Exception:  # BFCL's decoder raises whatever its parser or eval raises
            expected = None
        if expected is None:
            with pytest.raises(DecodeError):
                text_calls(text)
            failures += 1
        else:
            assert text_calls(text) == expected, text
    assert 0.1 < failures / len(texts) < 0.9


def test_a_run_on_a_model_target(tmp_path: Path) -> None:
    """evalsi run on a live_irrelevance file alone (no possible_answer/ beside it), a local OpenAI-compatible model
    answering one question in prose and calling a function it was not offered for the other."""

    def reply(body: dict[str, Any]) -> str:
        if "joke" in body["messages"][-1]["content"]:
            return "Why did the accountant cross the road? To reconcile the other side."
        return "[weather.current(city='Boston'), weather.current(city='San Francisco')]"

    (tmp_path / "bfcl").mkdir()
    shutil.copy(FIXTURES / "BFCL_v3_live_irrelevance.json", tmp_path / "bfcl")
    with ThreadedProvider(reply) as server:
        (tmp_path / "run.yaml").write_text(json.dumps({
            "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "bfcl"}, "spec": {
                "target": {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": server.base_url}},
                "dataset": {"path": "bfcl/BFCL_v3_live_irrelevance.json", "format": "bfcl"},
                "evaluators": [{"ref": "builtin/bfcl-ast"}]}}))
        done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(tmp_path / "o.json")])
    assert done.exit_code == 0, done.output
    results = {r["recordId"]: r["scores"][0] for r in json.loads((tmp_path / "o.json").read_text())["results"]}
    assert results["live_irrelevance_0-0-0"].get("passed") is True
    assert results["live_irrelevance_1-1-0"].get("passed", False) is False
    assert results["live_irrelevance_1-1-0"]["explanation"].startswith("irrelevance_error:decoder_success")
