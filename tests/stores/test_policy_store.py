"""Online policies in the metadata store (MonitorService's storage), against SQLite and a real Postgres."""

from __future__ import annotations

import asyncio

import pytest

from evalsi.errors import BadInputError
from evalsi.stores import SqlMetadataStore, StoredPolicy
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy


def policy(name: str, *, rate: float = 0.5, ref: str = "builtin/exact-match", labels: dict | None = None):
    document = OnlineEvalPolicy(api_version="evals.si/v1alpha1", kind="OnlineEvalPolicy")
    document.metadata.name = name
    document.metadata.labels.update(labels or {})
    document.spec.sampling.rate = rate
    document.spec.cascade.add(ref=ref).params.update({"normalize": True, "case": "lower"})
    return document


async def test_apply_creates_then_changes_only_when_the_spec_does(metadata_store: SqlMetadataStore) -> None:
    first, created = await metadata_store.put_policy("support", policy("prod"))
    assert created and isinstance(first, StoredPolicy)
    assert (first.project, first.name, first.generation) == ("support", "prod", 1)
    assert first.policy.metadata.project == "support" and len(first.spec_hash) == 64

    same, changed = await metadata_store.put_policy("support", policy("prod"))
    assert not changed
    assert (same.generation, same.spec_hash, same.updated_at) == (1, first.spec_hash, first.updated_at)

    second, changed = await metadata_store.put_policy("support", policy("prod", rate=0.25))
    assert changed and second.generation == 2 and second.spec_hash != first.spec_hash
    assert second.updated_at >= first.updated_at

    read = await metadata_store.get_policy("support", "prod")
    assert read == second and read is not None and read.policy.spec.sampling.rate == 0.25


async def test_struct_params_in_another_order_are_the_same_spec(metadata_store: SqlMetadataStore) -> None:
    a = policy("p")
    b = policy("p")
    b.spec.cascade[0].params.Clear()
    b.spec.cascade[0].params.update({"case": "lower", "normalize": True})
    await metadata_store.put_policy("x", a)
    _, changed = await metadata_store.put_policy("x", b)
    assert not changed


async def test_projects_are_apart_and_listing_is_ordered(metadata_store: SqlMetadataStore) -> None:
    for project, name in [("beta", "b"), ("alpha", "z"), ("alpha", "a"), ("beta", "a")]:
        await metadata_store.put_policy(project, policy(name))

    assert [p.name for p in await metadata_store.list_policies("alpha")] == ["a", "z"]
    assert [(p.project, p.name) for p in await metadata_store.list_policies()] == [
        ("alpha", "a"), ("alpha", "z"), ("beta", "a"), ("beta", "b"),
    ]
    assert await metadata_store.get_policy("gamma", "a") is None
    assert await metadata_store.list_policies("gamma") == []
    # An empty project is the default one, as for runs.
    await metadata_store.put_policy("", policy("d"))
    assert [p.name for p in await metadata_store.list_policies("default")] == ["d"]


async def test_delete_says_whether_there_was_one(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.put_policy("alpha", policy("p"))
    await metadata_store.put_policy("beta", policy("p"))

    assert await metadata_store.delete_policy("alpha", "p") is True
    assert await metadata_store.delete_policy("alpha", "p") is False
    assert await metadata_store.get_policy("alpha", "p") is None
    assert await metadata_store.get_policy("beta", "p") is not None
    # Applying again after a delete starts a new history.
    again, created = await metadata_store.put_policy("alpha", policy("p", rate=0.1))
    assert created and again.generation == 1


async def test_concurrent_applies_of_one_document_count_once(metadata_store: SqlMetadataStore) -> None:
    outcomes = await asyncio.gather(*(metadata_store.put_policy("alpha", policy("p")) for _ in range(6)))
    assert sorted(changed for _, changed in outcomes) == [False] * 5 + [True]
    assert {stored.generation for stored, _ in outcomes} == {1}


async def test_a_policy_needs_a_name(metadata_store: SqlMetadataStore) -> None:
    with pytest.raises(BadInputError, match=r"metadata\.name: "):
        await metadata_store.put_policy("alpha", policy(""))
    assert await metadata_store.list_policies() == []
