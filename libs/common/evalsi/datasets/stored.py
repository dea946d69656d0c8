"""Stored datasets: named, versioned record sets in the object store (``datasets/name@version`` in run specs).

A version is a dataset manifest and its shards (:mod:`evalsi.datasets.shards`): records are written as they are
read, so neither adding nor reading a version holds more than one shard of it. Its id is ``dataset_version`` of
the records. A dataset's index (a named object, ``datasets/<project>/<name>``) lists its versions oldest first,
each by its manifest's key, and is only ever replaced by a conditional write, so two writers racing cannot lose a
version. Appending never mutates a version: it writes a new one holding the previous records plus the new ones (a
record whose id is already there is not added twice), reusing the previous version's full shards.

The format is this one only (alpha): an index written before versions were manifests does not load.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from evalsi.errors import BadInputError, InfraError
from evalsi.stores.objects import ConflictError, ObjectStore
from evalsi.v1alpha1.record_pb2 import Record

from .loader import Dataset
from .shards import (
    DEFAULT_SHARD_SIZE,
    DatasetManifest,
    ShardRef,
    ShardWriter,
    iter_shards,
    put_manifest,
    read_manifest,
    read_shard,
    write_dataset,
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_REF = re.compile(r"^datasets/(?P<name>[^@\s/]+)(@(?P<version>[^@\s]+))?$")
REF_FORM = "datasets/<name> (the latest version) or datasets/<name>@<version>"
NAME_RULE = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"


@dataclass(frozen=True)
class DatasetVersion:
    name: str
    version: str  # sha256 of the records (dataset_version)
    key: str  # the version's manifest in the object store
    records: int
    created_at: float

    @property
    def ref(self) -> str:
        return f"datasets/{self.name}@{self.version}"


def parse_ref(ref: str) -> tuple[str, str]:
    """``datasets/name[@version]`` → (name, version or "" for the latest)."""
    match = _REF.match(ref.strip())
    if match is None or not _NAME.match(match.group("name")):
        raise BadInputError(f"dataset ref {ref!r}: expected {REF_FORM}")
    return match.group("name"), match.group("version") or ""


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise BadInputError(f"dataset name {name!r}: {NAME_RULE}")
    return name


class DatasetStore:
    def __init__(
        self, objects: ObjectStore, clock: Callable[[], float] = time.time, *, shard_size: int = DEFAULT_SHARD_SIZE
    ) -> None:
        self._objects = objects
        self._clock = clock
        self._shard_size = shard_size

    @staticmethod
    def _index_name(project: str, name: str) -> str:
        return f"datasets/{project}/{name}"

    async def versions(self, project: str, name: str) -> list[DatasetVersion]:
        """Every version, oldest first; empty when the dataset does not exist."""
        versions, _ = await self._read_index(project, name)
        return versions

    async def _read_index(self, project: str, name: str) -> tuple[list[DatasetVersion], str | None]:
        try:
            data, etag = await self._objects.get_named(self._index_name(project, name))
        except (KeyError, FileNotFoundError):
            return [], None
        document = json.loads(data)
        return [DatasetVersion(name=name, **item) for item in document["versions"]], etag

    async def push(self, project: str, name: str, records: Iterable[Record], *, format: str) -> (
            DatasetVersion):
        """A new version holding exactly ``records`` (read and stored a shard at a time); the latest version
        when it already holds the same records."""
        check_name(name)
        manifest = await write_dataset(
            self._objects, records, source=f"datasets/{name}", format=format, shard_size=self._shard_size
        )
        return await self._add_version(project, name, manifest, same_as_latest=True)

    async def append(self, project: str, name: str, records: Sequence[Record], *, attempts: int = 10) -> (
            DatasetVersion | None):
        """A new version with ``records`` added after the latest; None when every record was already there."""
        check_name(name)
        for _ in range(attempts):
            versions, etag = await self._read_index(project, name)
            previous = await read_manifest(self._objects, versions[-1].key) if versions else None
            manifest = await self._appended(previous, records, source=f"datasets/{name}")
            if manifest is None:
                return None
            version = DatasetVersion(name, manifest.version, await put_manifest(self._objects, manifest),
                                     manifest.records, self._clock())
            try:
                await self._write_index(project, name, [*versions, version], etag)
            except ConflictError:
                continue  # another writer added a version first: build on theirs
            return version
        raise InfraError(f"dataset {name}: the index kept changing; {attempts} attempts to add a version failed")

    async def _appended(self, previous: DatasetManifest | None, records: Sequence[Record], *, source: str) -> (
            DatasetManifest | None):
        """The manifest of ``previous`` plus the records it does not hold yet; its full shards are kept as they
        are (only re-read, to hash them and to drop records already there)."""
        added = {record.id: record for record in records}
        writer = ShardWriter(shard_size=self._shard_size)
        shards: list[ShardRef] = []

        async def add(record: Record) -> None:
            before = writer.records - writer.waiting
            data = writer.add(record)
            if data is not None:
                shards.append(ShardRef(await self._objects.put(data), writer.records - before, len(data)))

        reusable = previous is not None and previous.shard_size == self._shard_size
        for shard in previous.shards if previous is not None else ():
            shard_records = await read_shard(self._objects, shard.key)
            for record in shard_records:
                added.pop(record.id, None)
            if reusable and shard.records == self._shard_size and not writer.waiting:
                writer.adopt(shard_records)
                shards.append(shard)
            else:
                for record in shard_records:
                    await add(record)
        if not added:
            return None
        for record in added.values():
            await add(record)
        data = writer.flush()
        if data is not None:
            shards.append(ShardRef(await self._objects.put(data), writer.records - sum(s.records for s in shards),
                                   len(data)))
        return DatasetManifest(writer.version, source, "stored", writer.records, self._shard_size, tuple(shards))

    async def _add_version(self, project: str, name: str, manifest: DatasetManifest, *, same_as_latest: bool,
                           attempts: int = 10) -> DatasetVersion:
        key = await put_manifest(self._objects, manifest)
        for _ in range(attempts):
            versions, etag = await self._read_index(project, name)
            if same_as_latest and versions and versions[-1].version == manifest.version:
                return versions[-1]
            version = DatasetVersion(name, manifest.version, key, manifest.records, self._clock())
            try:
                await self._write_index(project, name, [*versions, version], etag)
            except ConflictError:
                continue
            return version
        raise InfraError(f"dataset {name}: the index kept changing; {attempts} attempts to add a version failed")

    async def _write_index(self, project: str, name: str, versions: list[DatasetVersion], etag: str | None) -> None:
        body = json.dumps({"versions": [_as_dict(v) for v in versions]}, sort_keys=True).encode()
        if etag is None:
            await self._objects.put_named(self._index_name(project, name), body, if_none_match=True)
        else:
            await self._objects.put_named(self._index_name(project, name), body, if_match=etag)

    async def resolve(self, project: str, ref: str) -> tuple[DatasetVersion, DatasetManifest]:
        """The version ``datasets/name[@version]`` names (a version may be given by a unique prefix) and its
        manifest."""
        name, wanted = parse_ref(ref)
        versions = await self.versions(project, name)
        if not versions:
            raise BadInputError(f"dataset ref {ref!r}: project {project!r} has no dataset {name!r}")
        if not wanted or wanted == "latest":
            chosen = versions[-1]
        else:
            matches = [v for v in versions if v.version.startswith(wanted)]
            if len(matches) != 1:
                known = ", ".join(v.version[:12] for v in versions)
                why = "matches several versions" if matches else "is not a version of it"
                raise BadInputError(f"dataset ref {ref!r}: {wanted!r} {why}; versions: {known}")
            chosen = matches[0]
        return chosen, await read_manifest(self._objects, chosen.key)

    async def load(self, project: str, ref: str) -> Dataset:
        """Every record of a version in memory: for small datasets and inspection; runs read shards instead."""
        chosen, manifest = await self.resolve(project, ref)
        records: list[Record] = []
        async for shard in iter_shards(self._objects, manifest):
            for record in shard:
                record.provenance.dataset = chosen.ref
            records.extend(shard)
        return Dataset(records=records, version=chosen.version, source=f"datasets/{chosen.name}", format="stored")


def _as_dict(version: DatasetVersion) -> dict[str, object]:
    return {"version": version.version, "key": version.key, "records": version.records,
            "created_at": version.created_at}
