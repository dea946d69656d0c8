"""OnlineEvalPolicy YAML: the seed's example parses, errors name their path and line, validation lists problems."""

from __future__ import annotations

import pytest
from policy_helpers import REGISTRY

from evalsi.errors import BadInputError
from evalsi.policy import compile_policy, parse_policy_text

SEED = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: prod-support-agent
  labels: {evals.si/project: support}
spec:
  selector: 'resource["service.name"] == "support-agent" && span.type == "agent"'
  sampling:
    rate: 0.05
    always: ["trace.error", "feedback.negative", "latency > 2s"]
  cascade:
    - {ref: test/pii-leak}
    - ref: test/llm-judge
      when: "scores.all(s, s.passed)"
      params: {rubric: helpfulness}
  window: 5m
  alerts:
    - when: "mean('llm-judge') < 0.7"
      notify: http://127.0.0.1:9/hook
      minSamples: 20
      secretEnv: HOOK_SECRET
  promote:
    when: "score('llm-judge') < 0.5"
    dataset: datasets/support-regressions
"""


def test_the_seed_example_parses_and_compiles() -> None:
    policy = parse_policy_text(SEED, source="policy.yaml")
    assert policy.metadata.project == "support"
    assert policy.spec.window.seconds == 300
    assert policy.spec.alerts[0].min_samples == 20
    compiled = compile_policy(policy, registry=REGISTRY)
    assert [s.alias for s in compiled.cascade.stages] == ["pii-leak", "llm-judge"]
    assert compiled.window_s == 300 and compiled.rate == 0.05
    assert [r.kind for r in compiled.always] == ["error", "feedback", "latency"]
    assert compiled.always[2].threshold_s == 2.0
    assert compiled.promote_dataset == "datasets/support-regressions"


def test_unknown_field_names_path_and_line() -> None:
    text = SEED.replace("    rate: 0.05", "    rtae: 0.05")
    with pytest.raises(BadInputError) as info:
        parse_policy_text(text, source="policy.yaml")
    assert "policy.yaml:9: spec.sampling.rtae: unknown field; did you mean rate?" in str(info.value)


def test_bad_duration_names_the_window() -> None:
    with pytest.raises(BadInputError) as info:
        parse_policy_text(SEED.replace("window: 5m", "window: soon"), source="p.yaml")
    assert "spec.window" in str(info.value) and "duration" in str(info.value)


def test_wrong_kind() -> None:
    with pytest.raises(BadInputError, match="kind: must be OnlineEvalPolicy"):
        parse_policy_text(SEED.replace("kind: OnlineEvalPolicy", "kind: EvalRun"), source="p.yaml")


def test_validation_lists_every_problem() -> None:
    text = (
        SEED.replace("latency > 2s", "latency > p99")
        .replace("test/pii-leak", "test/pii-lek")
        .replace("http://127.0.0.1:9/hook", "slack://agent-oncall")
        .replace("rate: 0.05", "rate: 1.5")
        .replace("mean('llm-judge') < 0.7", "mean('llm-judge') <")
    )
    with pytest.raises(BadInputError) as info:
        compile_policy(parse_policy_text(text, source="p.yaml"), registry=REGISTRY, source="p.yaml")
    message = str(info.value)
    assert "spec.sampling.always[2]" in message and "not built yet" in message
    assert "spec.cascade[0] (test/pii-lek): unknown evaluator" in message
    assert "spec.alerts[0].notify" in message and "slack" in message
    assert "spec.sampling.rate: must be between 0 and 1" in message
    assert "spec.alerts[0].when: invalid CEL" in message


def test_bad_params_and_when() -> None:
    text = SEED.replace("{rubric: helpfulness}", "{rubrik: x}").replace("scores.all(s, s.passed)", "scores.all(s,")
    with pytest.raises(BadInputError) as info:
        compile_policy(parse_policy_text(text, source="p.yaml"), registry=REGISTRY)
    assert "spec.cascade[1] (test/llm-judge)" in str(info.value) and "rubrik" in str(info.value)


def refused(text: str) -> str:
    with pytest.raises(BadInputError) as info:
        compile_policy(parse_policy_text(text, source="p.yaml"), registry=REGISTRY, source="p.yaml")
    return str(info.value)


def test_conditions_name_metrics_the_cascade_scores_and_earlier_stages_only() -> None:
    message = refused(
        SEED.replace("scores.all(s, s.passed)", "score('llm-judge') > 0.5")
        .replace("mean('llm-judge') < 0.7", "mean('llm-jugde') < 0.7")
        .replace("score('llm-judge') < 0.5", "score('helpfulness') < 0.5")
    )
    assert message == (
        "p.yaml: 3 problems in the policy:\n"
        "  - spec.cascade[1].when: score('llm-judge'): no metric 'llm-judge' is scored by earlier stages; "
        "earlier stages score: pii-leak\n"
        "  - spec.alerts[0].when: mean('llm-jugde'): no metric 'llm-jugde' is scored by the cascade; "
        "did you mean llm-judge?\n"
        "  - spec.promote.when: score('helpfulness'): no metric 'helpfulness' is scored by the cascade; "
        "the cascade score: pii-leak, llm-judge"
    )


def test_conditions_and_selectors_are_type_checked_when_applied() -> None:
    message = refused(
        SEED.replace('span.type == "agent"', 'span.duration_s > "1s"')
        .replace("scores.all(s, s.passed)", "scores.all(s, s.value)")
        .replace("mean('llm-judge') < 0.7", "n('llm-judge') + 0.5 > 20")
        .replace("score('llm-judge') < 0.5", "score('llm-judge')")
    )
    assert message.splitlines()[1:] == [
        "  - spec.selector: > cannot order double and string (in 'resource[\"service.name\"] == \"support-agent\" "
        "&& span.duration_s > \"1s\"' at column 64)",
        "  - spec.cascade[1].when: the condition of all() must be a bool; 's.value' is a double "
        "(in 'scores.all(s, s.value)' at column 15)",
        "  - spec.alerts[0].when: + mixes int and double, which CEL does not do in arithmetic; convert one side, "
        "e.g. double(n('llm-judge')) (in \"n('llm-judge') + 0.5 > 20\" at column 16)",
        "  - spec.promote.when: a when condition must be true or false; \"score('llm-judge')\" is a double",
    ]


def test_an_alert_on_a_count_against_a_fraction_compiles_and_evaluates() -> None:
    compiled = compile_policy(
        parse_policy_text(SEED.replace("mean('llm-judge') < 0.7", "n('llm-judge') >= 0.5"), source="p.yaml"),
        registry=REGISTRY,
    )
    assert compiled.alerts[0].when == "n('llm-judge') >= 0.5"
