"""validate_eval_run: evaluators, params, judges, gates, targets and dataset paths, checked before anything runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsi.errors import BadInputError
from evalsi.evaluators import Pack, Registry, evaluator
from evalsi.runs.spec import bind_evaluators, parse_eval_run, validate_eval_run

REGISTRY = Registry.from_entry_points()


def make_run(tmp_path: Path, spec: dict[str, Any], data: str = '{"id": "a", "output": "x", "reference": "x"}\n') -> Any:
    (tmp_path / "data.jsonl").write_text(data)
    document = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "t"},
        "spec": {"dataset": {"path": "data.jsonl"}, "evaluators": [{"ref": "exact-match"}], **spec},
    }
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(document)), source="run.yaml")


def problems(tmp_path: Path, spec: dict[str, Any], **kwargs: Any) -> str:
    run = make_run(tmp_path, spec)
    with pytest.raises(BadInputError) as info:
        validate_eval_run(run, registry=REGISTRY, base_dir=tmp_path, **kwargs)
    return str(info.value)


def test_a_good_spec_validates(tmp_path: Path) -> None:
    run = make_run(
        tmp_path,
        {
            "evaluators": [
                {"ref": "exact-match"},
                {"ref": "llm-judge", "judge": "strict", "params": {"rubric": "helpfulness"}},
            ],
            "judges": {"strict": {"connector": "openai-compatible", "model": "m", "baseUrl": "http://127.0.0.1:1/v1"}},
            "gates": ["metric('exact-match').mean >= 0.5", "metric('llm-judge').ci_low > 0.2"],
        },
    )
    validate_eval_run(run, registry=REGISTRY, base_dir=tmp_path)


def test_unknown_evaluator_names_its_index_and_a_suggestion(tmp_path: Path) -> None:
    message = problems(tmp_path, {"evaluators": [{"ref": "exact-match"}, {"ref": "exact-mach"}]})
    assert "spec.evaluators[1] (exact-mach): unknown evaluator 'exact-mach'; did you mean exact-match" in message


def test_bad_params_name_the_evaluator(tmp_path: Path) -> None:
    message = problems(tmp_path, {"evaluators": [{"ref": "fuzzy-match", "params": {"treshold": 0.5}}]})
    assert message.startswith("spec.evaluators[0] (fuzzy-match):") and "unknown param(s) treshold" in message
    message = problems(tmp_path, {"evaluators": [{"ref": "regex-match"}]})
    assert "spec.evaluators[0] (regex-match)" in message and "missing required param(s) pattern" in message


def test_whole_number_params_bind_as_integers(tmp_path: Path) -> None:
    @evaluator("test/min-words")
    def min_words(record: Any, *, n: int = 1) -> bool:
        return True

    registry = Registry([Pack("test", (min_words,))])
    run = make_run(tmp_path, {"evaluators": [{"ref": "test/min-words", "params": {"n": 3}}]})
    (bound,) = bind_evaluators(run, registry)
    assert bound.params == {"n": 3} and isinstance(bound.params["n"], int)


def test_duplicate_aliases(tmp_path: Path) -> None:
    message = problems(tmp_path, {"evaluators": [{"ref": "exact-match"}, {"ref": "builtin/exact-match"}]})
    assert "spec.evaluators[1]: alias 'exact-match' is already used by spec.evaluators[0]" in message


def test_an_evaluator_that_needs_a_judge_must_name_one_that_exists(tmp_path: Path) -> None:
    message = problems(tmp_path, {"evaluators": [{"ref": "llm-judge"}]})
    assert (
        "spec.evaluators[0] (llm-judge): needs a judge and uses 'default', which spec.judges does not define"
    ) in message
    message = problems(
        tmp_path,
        {"evaluators": [{"ref": "llm-judge", "judge": "strict"}], "judges": {"default": {"model": "m"}}},
    )
    assert "uses 'strict'" in message and "(defined: default)" in message


def test_judges_are_checked_with_their_path(tmp_path: Path) -> None:
    message = problems(
        tmp_path,
        {"evaluators": [{"ref": "llm-judge"}], "judges": {"default": {"connector": "gemini", "model": "m"}}},
    )
    assert "spec.judges.default.provider: must be one of openai, openai-compatible, anthropic" in message


def test_gates_compile_and_name_metrics_the_run_produces(tmp_path: Path) -> None:
    message = problems(tmp_path, {"gates": ["metric('exact-match').mean >="]})
    assert message.startswith("spec.gates[0]: invalid CEL")
    message = problems(tmp_path, {"gates": ["metric('exact-match').mean > 0", "metric('exact-macth').mean > 0"]})
    assert (
        "spec.gates[1]: metric 'exact-macth' is not produced by any evaluator of this run; did you mean exact-match?"
    ) in message
    message = problems(tmp_path, {"gates": ["metric('exact-match').meen > 0"]})
    assert message.startswith("spec.gates[0]: metric('exact-match') has no field 'meen'; did you mean mean?")


def test_a_gate_of_the_wrong_types_is_refused_before_the_run_with_its_position(tmp_path: Path) -> None:
    message = problems(tmp_path, {"gates": ["metric('exact-match').mean >= 0.5", "metric('exact-match').mean == 'a'"]})
    assert message == (
        "spec.gates[1]: == compares double with string, which are never equal "
        "(in \"metric('exact-match').mean == 'a'\" at column 28)"
    )


def test_a_count_against_a_fraction_is_a_valid_gate(tmp_path: Path) -> None:
    validate_eval_run(make_run(tmp_path, {"gates": ["metric('exact-match').n >= 0.5"]}), registry=REGISTRY,
                      base_dir=tmp_path)


def test_pass_k_gates_need_enough_trials(tmp_path: Path) -> None:
    model = {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": "http://127.0.0.1:1/v1"}}
    message = problems(tmp_path, {"target": model, "trials": 3, "gates": ["metric('exact-match').passHatK(5) > 0"]})
    assert "needs at least 5 trials per sample; spec.trials is 3" in message


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    message = problems(tmp_path, {"trials": -1, "evaluators": [{"ref": "nope"}], "gates": ["1 +"]})
    assert message.startswith("3 problems in the run spec:")
    assert "spec.trials: must be >= 1" in message and "spec.evaluators[0]" in message and "spec.gates[0]" in message


def test_agent_targets_are_checked_and_reserved_fields_refused_not_crashed(tmp_path: Path) -> None:
    message = problems(tmp_path, {"target": {"agent": {"a2a": {"url": "agent.local", "timeout": "30s"}}}})
    assert message == "spec.target.agent.a2a.url: expected an http:// or https:// URL, got 'agent.local'"
    message = problems(tmp_path, {"target": {"agent": {"a2a": {"url": "http://agent"}}}, "sandbox": {"class": "x"}})
    assert message == ("spec.sandbox.class: 'x' is not a sandbox class here; accepted: default (standalone servers "
                       "have one sandbox pool)")
    message = problems(tmp_path, {"sinks": [{"mlflow": {"experiment": "x"}}]})
    assert "spec.sinks: sinks are not built yet" in message


def test_trials_with_given_outputs_come_from_the_data(tmp_path: Path) -> None:
    message = problems(tmp_path, {"trials": 3})
    assert "spec.trials: 3 trials need a target that generates outputs" in message


def test_model_target_checks(tmp_path: Path) -> None:
    message = problems(tmp_path, {"target": {"model": {"connector": "openai", "baseUrl": "http://x/v1"}}})
    assert "spec.target.model.model: required" in message
    bad_template = {"model": {"model": "m", "promptTemplate": "Q: {{question}}"}}
    assert "spec.target.model.promptTemplate: unknown placeholder {{question}}" in problems(
        tmp_path, {"target": bad_template}
    )
    bad_price = {"model": {"model": "m", "params": {"price_per_1k_input": "cheap"}}}
    assert "spec.target.model.params.price_per_1k_input: must be a number" in problems(tmp_path, {"target": bad_price})


def test_the_dataset_must_exist(tmp_path: Path) -> None:
    message = problems(tmp_path, {"dataset": {"path": "missing.jsonl"}})
    assert "spec.dataset.path: 'missing.jsonl': no such file" in message


def test_dataset_paths_stay_inside_the_datasets_dir(tmp_path: Path) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    (allowed / "ok.jsonl").write_text('{"output": "a", "reference": "a"}\n')
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"output": "a", "reference": "a"}\n')
    run = make_run(tmp_path, {"dataset": {"path": "ok.jsonl"}})
    validate_eval_run(run, registry=REGISTRY, datasets_dir=allowed)

    for path in ("../secret.jsonl", str(outside)):
        message = problems(tmp_path, {"dataset": {"path": path}}, datasets_dir=allowed)
        assert "spec.dataset.path" in message and "outside the allowed datasets directory" in message
        assert str(allowed.resolve()) not in message  # the server's paths are not the caller's business
    os.symlink(outside, allowed / "link.jsonl")
    message = problems(tmp_path, {"dataset": {"path": "link.jsonl"}}, datasets_dir=allowed)
    assert "'link.jsonl' leads outside the allowed datasets directory" in message and str(outside) not in message
    os.symlink(tmp_path, allowed / "up")
    message = problems(tmp_path, {"dataset": {"path": "up/secret.jsonl"}}, datasets_dir=allowed)
    assert "outside the allowed datasets directory" in message
