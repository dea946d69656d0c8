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
