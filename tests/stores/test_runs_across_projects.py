"""The two reads the api's loopback-only views need, on SQLite and a real Postgres: every project's runs, paged,
and the project that holds a run id."""

from __future__ import annotations

import pytest

from evalsi.errors import BadInputError
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, RUN_STATE_SUCCEEDED, Run


def run_in(project: str, run_id: str, created_s: int, state: int = RUN_STATE_SUCCEEDED) -> Run:
    run = Run(id=run_id, project=project, name=f"qa {run_id}", state=state)
    run.create_time.FromSeconds(created_s)
    return run


async def test_every_project_s_runs_page_newest_first(metadata_store: SqlMetadataStore) -> None:
    for index, project in enumerate(["alpha", "beta", "alpha", "gamma", "beta"]):
        await metadata_store.create_run(run_in(project, f"r{index}", 1_700_000_000 + index,
                                               RUN_STATE_RUNNING if index == 3 else RUN_STATE_SUCCEEDED))
    seen, token = [], ""
    while True:
        page, token = await metadata_store.list_runs("alpha", page_size=2, page_token=token, all_projects=True)
        seen += [(run.id, run.project) for run in page]
        if not token:
            break
    assert seen == [("r4", "beta"), ("r3", "gamma"), ("r2", "alpha"), ("r1", "beta"), ("r0", "alpha")]
    running, _ = await metadata_store.list_runs("", state=RUN_STATE_RUNNING, all_projects=True)
    assert [run.id for run in running] == ["r3"]
    assert [run.id for run in (await metadata_store.list_runs("alpha"))[0]] == ["r2", "r0"]
    # A cursor of one scope never continues the other.
    _, one_project_token = await metadata_store.list_runs("alpha", page_size=1)
    with pytest.raises(BadInputError):
        await metadata_store.list_runs("alpha", page_size=1, page_token=one_project_token, all_projects=True)


async def test_the_project_of_a_run_id(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(run_in("quickstart", "run-a", 1_700_000_000))
    assert await metadata_store.run_project("run-a") == "quickstart"
    assert await metadata_store.run_project("run-missing") is None
