"""The core pack: registration, references and manifests."""

from __future__ import annotations

import pytest

from evalsi.evaluators import Registry
from evalsi.packs.core import PACK
from evalsi.v1alpha1 import evaluator_pb2, score_pb2

EXPECTED = {
    "builtin/exact-match": ["passed"],
    "builtin/fuzzy-match": ["similarity", "passed"],
    "builtin/numeric-match": ["passed"],
    "builtin/contains": ["passed"],
    "builtin/regex-match": ["passed"],
    "builtin/json-valid": ["passed"],
    "builtin/json-schema": ["passed"],
    "builtin/length": ["length", "in_range"],
    "builtin/latency": ["seconds", "within_budget"],
    "builtin/token-usage": ["input_tokens", "output_tokens", "total_tokens"],
    "builtin/cost": ["usd", "within_budget"],
}


def test_pack_contents() -> None:
    assert PACK.name == "core" and PACK.default_on and PACK.description
    assert {ev.name: [o.name for o in ev.outputs] for ev in PACK.evaluators} == EXPECTED
    assert all(ev.version == "1.0.0" and ev.pack == "core" and ev.scope == "record" for ev in PACK.evaluators)


def test_registry_resolves_core_evaluators() -> None:
    registry = Registry([PACK])
    assert set(registry.packs) == {"core"}
    assert registry.resolve("exact-match") is registry.resolve("builtin/exact-match@1.0.0")
    assert registry.resolve("builtin/exact-match").ref == "builtin/exact-match@1.0.0"
    assert [ev.name for ev in registry.evaluators(pack="core")] == sorted(EXPECTED)


@pytest.mark.parametrize("ev", PACK.evaluators, ids=lambda ev: ev.short_name)
def test_manifest_documents_everything(ev) -> None:
    manifest = ev.manifest()
    assert manifest.name == ev.name and manifest.version == "1.0.0" and manifest.pack == "core"
    assert manifest.description
    assert manifest.scheduling.pool == "cpu"
    assert [p.name for p in manifest.params] == [p.name for p in ev.params]
    for param in manifest.params:
        assert param.description, f"{ev.name}: param {param.name} has no description"
        assert param.type in {"bool", "float", "str", "list", "dict"}
    for output in manifest.outputs:
        assert output.description
        if output.type == score_pb2.VALUE_KIND_NUMBER:
            assert output.HasField("min") and output.min == 0.0
    assert set(manifest.params_schema["properties"].keys()) == {p.name for p in ev.params}


def test_manifest_details() -> None:
    registry = Registry([PACK])
    exact = registry.resolve("exact-match").manifest()
    assert exact.requires == evaluator_pb2.Requirements(output=True, reference=True)
    assert {p.name: p.default.bool_value for p in exact.params} == {
        "normalize": True, "ignore_punctuation": False, "ignore_articles": False,
    }
    fuzzy = registry.resolve("fuzzy-match").manifest()
    method = next(p for p in fuzzy.params if p.name == "method")
    assert [c.string_value for c in method.choices] == [
        "ratio", "partial_ratio", "token_sort_ratio", "token_set_ratio",
    ]
    similarity = fuzzy.outputs[0]
    assert (similarity.min, similarity.max) == (0.0, 1.0)
    regex = registry.resolve("regex-match").manifest()
    pattern = next(p for p in regex.params if p.name == "pattern")
    assert pattern.required and not pattern.HasField("default")
    assert list(regex.params_schema["required"]) == ["pattern"]
    for name in ("length", "latency", "token-usage", "cost"):
        outputs = registry.resolve(name).manifest().outputs
        assert not any(o.higher_is_better for o in outputs if o.type == score_pb2.VALUE_KIND_NUMBER)
    assert registry.resolve("latency").manifest().requires == evaluator_pb2.Requirements(usage=True)
