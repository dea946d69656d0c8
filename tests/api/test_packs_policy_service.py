"""evalsi-policy runs only the packs a policy's project enabled (evalsi.yaml's evaluators:, docs/packs.md): a stored
policy whose pack is off (applied before the pack was turned off) is left out and reported once, and a --policy
file naming one is a usage error at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.pack_policy import load_pack_policy
from evalsi.policy import parse_policy_text
from evalsi.stores import open_metadata_store
from evalsi_policy.main import StoredPolicies, load_files

POLICY = """
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: {name}}}
spec:
  sampling: {{rate: 1.0}}
  cascade: [{{ref: builtin/contains}}, {{ref: {ref}}}]
"""
PACKS = load_pack_policy({"projects": {"support": {"packs": ["core", "agent"]}}})


async def test_a_stored_policy_of_a_pack_its_project_has_not_enabled_is_not_in_force(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry.from_entry_points()
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    try:
        agent = POLICY.format(name="loops", ref="builtin/loop-detection")
        # Stored directly, as the api stored them before evalsi.yaml turned agent off in shop.
        await store.put_policy("support", parse_policy_text(agent, source="a"))
        await store.put_policy("shop", parse_policy_text(agent, source="b"))
        await store.put_policy("shop", parse_policy_text(POLICY.format(name="core", ref="builtin/length"), source="c"))
        stored = StoredPolicies(store, registry, PACKS)
        with caplog.at_level(logging.ERROR, logger="evalsi.policy"):
            first = await stored.load()
            await stored.load()
        assert sorted((p.project, p.name) for p in first) == [("shop", "core"), ("support", "loops")]
        reports = [r.getMessage() for r in caplog.records if "loops" in r.getMessage()]
        assert reports == [
            "policy loops (generation 1) is not in force: project 'shop' has not enabled pack(s) agent that its "
            "cascade names (enabled: core); evaluators: in evalsi.yaml, docs/packs.md"
        ]
        # Without an evaluators: section only core is on: the agent policy is out everywhere.
        assert [(p.project, p.name) for p in await StoredPolicies(store, registry).load()] == [("shop", "core")]
    finally:
        await store.close()


def test_a_policy_file_of_a_pack_not_enabled_is_refused_at_start(tmp_path: Path) -> None:
    registry = Registry.from_entry_points()
    path = tmp_path / "loops.yaml"
    path.write_text(POLICY.format(name="loops", ref="builtin/loop-detection")
                    .replace("metadata: {name: loops}", "metadata: {name: loops, project: support}"))
    assert [p.name for p in load_files([str(path)], registry, PACKS)] == ["loops"]
    with pytest.raises(BadInputError) as refused:
        load_files([str(path)], registry)
    assert str(refused.value) == (
        f"--policy {path}: project 'support' has not enabled pack(s) agent that its cascade names (enabled: core); "
        "evaluators: in evalsi.yaml, docs/packs.md"
    )
