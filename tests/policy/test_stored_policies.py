"""evalsi-policy's view of the policies applied through MonitorService: compiled once per generation, a broken one
reported once and left out."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalsi.evaluators import Registry
from evalsi.policy import parse_policy_text
from evalsi.stores import open_metadata_store
from evalsi_policy.main import StoredPolicies

POLICY = """
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: {name}}}
spec:
  sampling: {{rate: 1.0}}
  cascade: [{{ref: {ref}}}]
"""


async def test_compiled_once_per_generation_and_broken_ones_reported_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    try:
        await store.put_policy("shop", parse_policy_text(POLICY.format(name="ok", ref="builtin/contains"), source="a"))
        # Stored directly (MonitorService would refuse it): an evaluator this registry does not have.
        await store.put_policy("shop", parse_policy_text(POLICY.format(name="bad", ref="acme/missing"), source="b"))
        stored = StoredPolicies(store, Registry.from_entry_points())
        with caplog.at_level(logging.ERROR, logger="evalsi.policy"):
            first = await stored.load()
            second = await stored.load()
        assert [(p.project, p.name) for p in first] == [("shop", "ok")]
        assert second[0] is first[0]  # the same generation is not compiled again
        assert sum("shop/bad" in r.getMessage() for r in caplog.records) == 1  # one report, not one per reload
        await store.put_policy("shop", parse_policy_text(POLICY.format(name="ok", ref="builtin/length"), source="c"))
        (changed,) = await stored.load()
        assert changed is not first[0] and changed.cascade.stages[0].alias == "length"
    finally:
        await store.close()
