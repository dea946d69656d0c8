"""Packs stored per project (migration 8, ``SqlProjectPacks``) on SQLite and a real Postgres, and ``LivePacks``
applying them over evalsi.yaml's evaluators: section: what a set answers, what another replica sees after its
reload, and what is refused with the field named."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import grpc
import pytest

from evalsi.api.errors import ApiError
from evalsi.api.live_packs import LivePacks
from evalsi.errors import BadInputError
from evalsi.pack_policy import load_pack_policy
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.testing.services import PostgresServer
from evalsi.v1alpha1.catalog_service_pb2 import PackNames

INSTALLED = {"core": True, "judge": False, "rag": False, "agent": False}
CONFIGURED = load_pack_policy({"allowed_packs": ["core", "judge", "agent"],
                               "projects": {"support": {"packs": ["core", "judge"]}}})


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlMetadataStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'evalsi.db'}"
    else:
        dsn = request.getfixturevalue("postgres").dsn
        name = f"t_{uuid.uuid4().hex[:16]}"
        admin = await asyncpg.connect(dsn)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    opened = await open_metadata_store(url)
    try:
        yield opened
    finally:
        await opened.close()


async def test_each_list_is_stored_on_its_own_and_none_goes_back_to_the_config(store: SqlMetadataStore) -> None:
    assert await store.list_project_packs() == []
    first = await store.set_enabled_packs("support", ["core", "rag"], at=10.0, by="user:a")
    assert (first.packs, first.allowed_packs, first.updated_by) == (("core", "rag"), None, "user:a")
    # The owner's allowlist does not undo the admin's packs, nor the other way round.
    both = await store.set_allowed_packs("support", ["core", "rag", "judge"], at=11.0, by="user:root")
    assert (both.packs, both.allowed_packs, both.updated_at) == (("core", "rag"), ("core", "rag", "judge"), 11.0)
    await store.set_allowed_packs("shop", [], at=12.0, by="user:root")  # an empty allowlist: nothing allowed
    cleared = await store.set_enabled_packs("support", None, at=13.0, by="user:a")
    assert (cleared.packs, cleared.allowed_packs) == (None, ("core", "rag", "judge"))
    assert [(s.project, s.packs, s.allowed_packs) for s in await store.list_project_packs()] == [
        ("shop", None, ()), ("support", None, ("core", "rag", "judge"))]


async def test_live_packs_apply_stored_lists_over_the_config_on_every_replica(store: SqlMetadataStore) -> None:
    here = await LivePacks(CONFIGURED, store, clock=lambda: 5.0).start()
    other = await LivePacks(CONFIGURED, store).start()
    try:
        assert here.current().enabled("support", INSTALLED) == {"core", "judge"}
        answer = await here.set_enabled("support", PackNames(names=["core", "agent", "core"]), INSTALLED, "user:a")
        assert (list(answer.enabled), answer.enabled_stored, answer.allowed_stored) == (["agent", "core"], True,
                                                                                         False)
        assert list(answer.allowed) == ["agent", "core", "judge"]
        assert other.current().enabled("support", INSTALLED) == {"core", "judge"}  # until its reload
        await other.reload()
        assert other.current().enabled("support", INSTALLED) == {"core", "agent"}
        # The allowlist narrows what is enabled at once, without touching the stored packs.
        narrowed = await here.set_allowed("support", PackNames(names=["core"]), INSTALLED, "user:root")
        assert (list(narrowed.enabled), list(narrowed.allowed)) == (["core"], ["core"])
        restored = await here.set_allowed("support", None, INSTALLED, "user:root")
        assert (list(restored.enabled), restored.allowed_stored) == (["agent", "core"], False)
        back = await here.set_enabled("support", None, INSTALLED, "user:a")
        assert (list(back.enabled), back.enabled_stored) == (["core", "judge"], False)
    finally:
        await here.close()
        await other.close()


async def test_a_set_is_refused_naming_the_field(store: SqlMetadataStore) -> None:
    live = await LivePacks(CONFIGURED, store).start()
    try:
        with pytest.raises(BadInputError, match=r"packs.names\[1\]: 'rgg' is not an installed pack; installed: "):
            await live.set_enabled("support", PackNames(names=["core", "rgg"]), INSTALLED, "user:a")
        with pytest.raises(ApiError) as refused:
            await live.set_enabled("support", PackNames(names=["core", "rag"]), INSTALLED, "user:a")
        assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert str(refused.value).startswith(
            "packs.names: rag not in the allowed packs of project 'support' (agent, core, judge); the owner allows "
            "packs with SetPackAllowlist")
        with pytest.raises(BadInputError, match=r"allowed_packs\.names: 129 packs exceed the limit of 128"):
            await live.set_allowed("support", PackNames(names=["core"] * 129), INSTALLED, "user:root")
        assert await store.list_project_packs() == []  # nothing written by a refusal
    finally:
        await live.close()
    with pytest.raises(ApiError, match="no metadata store to keep packs in"):
        await LivePacks(CONFIGURED).set_enabled("support", PackNames(names=["core"]), INSTALLED, "user:a")
