"""A served run's records (``runs.ports.RunRecords``): the dataset's shards in the object store, via its manifest.

The api stores a run with the key of its dataset's manifest in the run label :data:`DATASET_LABEL`; nothing else
about the records is in the run. A task of shard ``i`` carries the dataset's shard ``i`` key as it is (the plan
and the store cut shards alike), so the scheduler never reads or rewrites records to publish work.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.errors import InfraError
from evalsi.stores.objects import ObjectStore
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run

from .shards import DatasetManifest, read_manifest, read_shard

DATASET_LABEL = "evals.si/dataset-manifest"
"""The run label holding the object key of the run's dataset manifest (set by the api, reserved)."""
_CACHED_MANIFESTS = 64  # manifests are small (about 100 bytes a shard); a few runs' worth is plenty


class StoredRunRecords:
    """Record access for runs whose dataset is a manifest in ``objects``."""

    def __init__(self, objects: ObjectStore) -> None:
        self._objects = objects
        self._manifests: OrderedDict[str, DatasetManifest] = OrderedDict()

    async def manifest(self, run: Run) -> DatasetManifest:
        key = run.labels.get(DATASET_LABEL, "")
        if not key:
            raise InfraError(f"run {run.id} has no dataset manifest (label {DATASET_LABEL})")
        manifest = self._manifests.get(key)
        if manifest is None:
            manifest = await read_manifest(self._objects, key)
            self._manifests[key] = manifest
            if len(self._manifests) > _CACHED_MANIFESTS:
                self._manifests.popitem(last=False)
        else:
            self._manifests.move_to_end(key)
        return manifest

    async def record_count(self, run: Run) -> int:
        return (await self.manifest(run)).records

    async def shard_ref(self, run: Run, start: int, stop: int) -> str:
        manifest = await self.manifest(run)
        try:
            return manifest.shard_at(start, stop).key
        except ValueError:
            # A plan cut differently from the store (another shard size): store that range once.
            return await self.put_outputs(run, await self.shard_records(run, start, stop))

    async def shard_records(self, run: Run, start: int, stop: int) -> list[Record]:
        manifest = await self.manifest(run)
        size = manifest.shard_size
        records: list[Record] = []
        for index in range(start // size, min(-(-stop // size), len(manifest.shards))):
            shard = await read_shard(self._objects, manifest.shards[index].key)
            first = index * size
            records.extend(shard[max(start - first, 0) : stop - first])
        return records

    async def put_outputs(self, run: Run, records: Sequence[Record]) -> str:
        return await self._objects.put(TaskRecords(records=records).SerializeToString())

    async def outputs(self, ref: str) -> list[Record]:
        return await read_shard(self._objects, ref)
