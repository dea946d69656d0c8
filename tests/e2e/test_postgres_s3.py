"""The same run on the production backends: a real PostgreSQL and a real S3 server (SeaweedFS)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import postgres_and_s3

import evalsi
from evalsi.testing.services import PostgresServer, SeaweedS3
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"


@pytest.fixture
def backends() -> Iterator[tuple[PostgresServer, SeaweedS3]]:
    with postgres_and_s3("evalsi-e2e") as both:
        yield both


def test_a_run_on_postgres_and_s3_equals_the_embedded_run(tmp_path: Path, backends) -> None:  # type: ignore[no-untyped-def]
    from evalsi.runs.embedded import run_embedded
    from evalsi.runs.spec import load_eval_run

    postgres, s3 = backends
    stack = Stack(tmp_path, metadata_url=postgres.dsn, objects_url=s3.url("objects")).start()
    try:
        with evalsi.Client(stack.http) as client:
            served = client.runs.create(SPEC).wait()
            results = list(client.runs.results(served.id, project=served.project))
        assert served.state == RUN_STATE_SUCCEEDED, served.message + stack.logs()
        embedded = asyncio.run(run_embedded(load_eval_run(SPEC), base_dir=SPEC.parent)).run
        assert [(s.metric, s.n, s.mean, s.ci.low, s.ci.high) for s in served.summaries] == [
            (s.metric, s.n, s.mean, s.ci.low, s.ci.high) for s in embedded.summaries
        ]
        assert len(results) == 30 * 5
    finally:
        stack.stop()

    async def dataset_objects(objects, run) -> list[str]:
        from evalsi.datasets.run_records import DATASET_LABEL
        from evalsi.datasets.shards import read_manifest

        manifest = await read_manifest(objects, run.labels[DATASET_LABEL])
        return [run.labels[DATASET_LABEL], *(shard.key for shard in manifest.shards)]

    async def stored() -> tuple[int, bool]:
        from evalsi.stores import open_metadata_store, open_object_store

        store = await open_metadata_store(postgres.dsn)
        objects = await open_object_store(s3.url("objects"))
        try:
            run = await store.get_run(served.project, served.id)
            assert run is not None
            return len(
                [r async for batch in store.iter_results(run.project, run.id) for r in batch]
            ), all([await objects.exists(key) for key in await dataset_objects(objects, run)])
        finally:
            await store.close()
            await objects.close()

    count, dataset_in_s3 = asyncio.run(stored())
    assert count == 150 and dataset_in_s3
