"""ListRuns' creation-time bounds in the store, on SQLite and a real Postgres: created_after inclusive,
created_before exclusive, combined with the other filters, paged, and a page token bound to its bounds."""

from __future__ import annotations

import pytest

from evalsi.errors import BadInputError
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.run_pb2 import RUN_STATE_FAILED, RUN_STATE_SUCCEEDED, Run

BASE_S = 1_700_000_000
SECOND_US = 1_000_000


def run_at(run_id: str, created_s: int, *, project: str = "alpha", state: int = RUN_STATE_SUCCEEDED) -> Run:
    run = Run(id=run_id, project=project, name=f"qa {run_id}", state=state)
    run.create_time.FromSeconds(created_s)
    return run


async def all_pages(store: SqlMetadataStore, page_size: int, **filters: object) -> tuple[list[str], int]:
    """Every run id the filters select, following page tokens, and how many pages that took."""
    seen: list[str] = []
    token, pages = "", 0
    while True:
        runs, token = await store.list_runs("alpha", page_size=page_size, page_token=token,
                                            **filters)  # type: ignore[arg-type]
        seen += [run.id for run in runs]
        pages += 1
        if not token:
            return seen, pages


async def test_the_bounds_are_inclusive_then_exclusive(metadata_store: SqlMetadataStore) -> None:
    for i in range(6):
        await metadata_store.create_run(run_at(f"r{i}", BASE_S + i))
    await metadata_store.create_run(run_at("other", BASE_S + 2, project="beta"))

    after = (BASE_S + 2) * SECOND_US
    before = (BASE_S + 4) * SECOND_US
    assert (await all_pages(metadata_store, 50, created_after_us=after))[0] == ["r5", "r4", "r3", "r2"]
    assert (await all_pages(metadata_store, 50, created_before_us=before))[0] == ["r3", "r2", "r1", "r0"]
    assert (await all_pages(metadata_store, 50, created_after_us=after, created_before_us=before))[0] == ["r3", "r2"]
    # A microsecond past a run's creation leaves it out of "after" and in "before".
    assert (await all_pages(metadata_store, 50, created_after_us=after + 1))[0] == ["r5", "r4", "r3"]
    assert (await all_pages(metadata_store, 50, created_before_us=after + 1))[0] == ["r2", "r1", "r0"]


async def test_bounded_pages_hold_only_runs_in_range(metadata_store: SqlMetadataStore) -> None:
    for i in range(12):
        state = RUN_STATE_FAILED if i % 3 == 0 else RUN_STATE_SUCCEEDED
        await metadata_store.create_run(run_at(f"r{i:02d}", BASE_S + 10 * i, state=state))

    bounds = {"created_after_us": (BASE_S + 20) * SECOND_US, "created_before_us": (BASE_S + 100) * SECOND_US}
    seen, pages = await all_pages(metadata_store, 3, **bounds)
    # r02..r09, newest first, over three pages of three (the last page has two), none outside the range.
    assert seen == [f"r{i:02d}" for i in range(9, 1, -1)]
    assert pages == 3
    failed, _ = await all_pages(metadata_store, 2, state=RUN_STATE_FAILED, **bounds)
    assert failed == ["r09", "r06", "r03"]


async def test_a_page_token_continues_only_its_own_bounds(metadata_store: SqlMetadataStore) -> None:
    for i in range(4):
        await metadata_store.create_run(run_at(f"r{i}", BASE_S + i))
    bounded = {"created_after_us": (BASE_S + 1) * SECOND_US}
    _, token = await metadata_store.list_runs("alpha", page_size=1, **bounded)
    assert token
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_runs("alpha", page_size=1, page_token=token)
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_runs("alpha", page_size=1, page_token=token,
                                       created_after_us=(BASE_S + 2) * SECOND_US)
    _, unbounded_token = await metadata_store.list_runs("alpha", page_size=1)
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_runs("alpha", page_size=1, page_token=unbounded_token,
                                       created_before_us=(BASE_S + 3) * SECOND_US)
    second, _ = await metadata_store.list_runs("alpha", page_size=1, page_token=token, **bounded)
    assert [run.id for run in second] == ["r2"]
