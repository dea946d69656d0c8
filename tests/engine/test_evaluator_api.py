"""The @evaluator decorator, param binding, manifests and the registry."""

from __future__ import annotations

from typing import Literal

import pytest

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, Pack, Registry, evaluator, normalize_scores
from evalsi.v1alpha1.evaluator_pb2 import SCOPE_DATASET, SCOPE_RECORD
from evalsi.v1alpha1.score_pb2 import Score


@evaluator("acme/length-ok", version="1.2.0", requires=["output"], params={"limit": "max chars", "mode": "how"})
def length_ok(record, *, limit: int, mode: Literal["chars", "words"] = "chars") -> bool:
    """Output is short enough."""
    return len(record.output.text) <= limit


def test_decorator_builds_manifest_with_params_and_requirements() -> None:
    manifest = length_ok.manifest()
    assert manifest.name == "acme/length-ok" and manifest.version == "1.2.0"
    assert manifest.scope == SCOPE_RECORD
    assert manifest.requires.output and not manifest.requires.reference
    params = {p.name: p for p in manifest.params}
    assert params["limit"].required and params["limit"].type == "int"
    assert params["mode"].default.string_value == "chars"
    assert [c.string_value for c in params["mode"].choices] == ["chars", "words"]
    assert manifest.params_schema["required"] == ["limit"]
    assert manifest.description == "Output is short enough."


def test_bind_rejects_unknown_and_missing_params_naming_them() -> None:
    with pytest.raises(BadInputError, match=r"unknown param\(s\) limt \(accepted: limit, mode\)"):
        length_ok.bind({"limt": 3, "limit": 1})
    with pytest.raises(BadInputError, match=r"missing required param\(s\) limit"):
        length_ok.bind({})
    with pytest.raises(BadInputError, match="param 'limit' must be int"):
        length_ok.bind({"limit": "3"})
    with pytest.raises(BadInputError, match="must be one of chars, words"):
        length_ok.bind({"limit": 3, "mode": "lines"})
    assert length_ok.bind({"limit": 3}, alias="short").alias == "short"


def test_decorator_rejects_bad_declarations() -> None:
    with pytest.raises(ValueError, match="namespace/name"):
        evaluator("NoNamespace")(lambda r: True)
    with pytest.raises(ValueError, match="unknown requirement"):
        evaluator("a/b", requires=["outputs"])(lambda r: True)
    with pytest.raises(ValueError, match="needs a mapper"):
        evaluator("a/b", scope="dataset")(lambda values: 1.0)
    with pytest.raises(TypeError, match="keyword-only"):
        evaluator("a/b")(lambda a, b, c: True)


def test_dataset_scope_manifest() -> None:
    ev = evaluator("a/mean", scope="dataset", mapper=lambda r: 1.0, outputs=[Output("mean", "number")])(
        lambda values: sum(values) / len(values)
    )
    assert ev.manifest().scope == SCOPE_DATASET


def test_normalize_scores_accepts_bare_values_and_checks_names() -> None:
    two = evaluator("a/two", outputs=[Output("x", "number"), Output("ok")])(lambda r: None)
    scores = normalize_scores(two, {"x": 0.5, "ok": True})
    assert [(s.name, s.WhichOneof("value")) for s in scores] == [("x", "number"), ("ok", "passed")]
    with pytest.raises(TypeError, match="declared outputs"):
        normalize_scores(two, {"y": 1.0})
    one = evaluator("a/one")(lambda r: None)
    assert normalize_scores(one, True)[0].name == "passed"
    assert normalize_scores(one, Score(passed=False))[0].passed is False
    with pytest.raises(TypeError, match="must return"):
        normalize_scores(one, object())


def test_registry_resolves_full_versioned_and_bare_names() -> None:
    newer = evaluator("acme/length-ok", version="1.10.0")(lambda r: True)
    other = evaluator("other/length-ok")(lambda r: True)
    registry = Registry([Pack("acme", (length_ok, newer))])
    assert registry.resolve("length-ok").version == "1.10.0"  # newest by semantic version, not text
    assert registry.resolve("acme/length-ok@1.2.0").fn is length_ok.fn
    with pytest.raises(BadInputError, match=r"no version 9\.9\.9; installed: 1\.2\.0, 1\.10\.0"):
        registry.resolve("acme/length-ok@9.9.9")
    with pytest.raises(BadInputError, match="did you mean length-ok"):
        registry.resolve("lenght-ok")
    registry.add_pack(Pack("other", (other,)))
    with pytest.raises(BadInputError, match="ambiguous: acme/length-ok, other/length-ok"):
        registry.resolve("length-ok")
    assert registry.resolve("other/length-ok") is not None
    assert registry.evaluators(pack="other")[0].pack == "other"


def test_a_resolved_ref_follows_evaluators_added_later() -> None:
    registry = Registry([Pack("acme", (length_ok,))])
    assert registry.resolve(" length-ok ").version == "1.2.0"
    assert registry.resolve("length-ok") is registry.resolve("acme/length-ok")  # remembered, the same object
    registry.add(evaluator("acme/length-ok", version="2.0.0")(lambda r: True))
    assert registry.resolve("length-ok").version == "2.0.0"
    assert registry.resolve("acme/length-ok@1.2.0").fn is length_ok.fn
    with pytest.raises(BadInputError, match="unknown evaluator"):
        registry.resolve("nothing-like-it")
    with pytest.raises(BadInputError, match="unknown evaluator"):  # a failure is not remembered as anything
        registry.resolve("nothing-like-it")


def test_entry_points_register_core_and_judge_packs() -> None:
    registry = Registry.from_entry_points()
    assert {"core", "judge"} <= set(registry.packs)
    assert registry.packs["core"].default_on
    assert registry.resolve("exact-match").ref == "builtin/exact-match@1.0.0"


def test_a_bad_plugin_names_the_group_and_expected_type(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    bogus = metadata.EntryPoint(name="bogus", value="json:dumps", group="evalsi.packs")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [bogus])
    with pytest.raises(BadInputError, match=r"'bogus' in group 'evalsi.packs' \(json:dumps\) is a function, expected"):
        Registry.from_entry_points()
