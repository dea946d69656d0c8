"""Stored datasets: named, versioned record sets in the object store (``datasets/name@version`` in run specs).

A version is the records themselves (a serialized ``TaskRecords``, so trajectories and metadata survive),
stored content-addressed; its id is ``dataset_version`` of those records. A dataset's index (a named object,
``datasets/<project>/<name>``) lists its versions oldest first and is only ever replaced by a conditional write,
so two writers racing cannot lose a version. Appending never mutates a version: it writes a new one holding the
previous records plus the new ones (a record whose id is already there is not added twice).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.errors import BadInputError, InfraError
from evalsi.stores.objects import ConflictError, ObjectStore
from evalsi.v1alpha1.record_pb2 import Record

from .loader import Dataset, dataset_version

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_REF = re.compile(r"^datasets/(?P<name>[^@\s/]+)(@(?P<version>[^@\s]+))?$")
REF_FORM = "datasets/<name> (the latest version) or datasets/<name>@<version>"


@dataclass(frozen=True)
class DatasetVersion:
    name: str
    version: str  # sha256 of the records (dataset_version)
    key: str  # where the records are in the object store
    records: int
    created_at: float


def parse_ref(ref: str) -> tuple[str, str]:
    """``datasets/name[@version]`` → (name, version or "" for the latest)."""
    match = _REF.match(ref.strip())
    if match is None or not _NAME.match(match.group("name")):
        raise BadInputError(f"dataset ref {ref!r}: expected {REF_FORM}")
    return match.group("name"), match.group("version") or ""


class DatasetStore:
    def __init__(self, objects: ObjectStore, clock: Callable[[], float] = time.time) -> None:
        self._objects = objects
        self._clock = clock

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

    async def append(self, project: str, name: str, records: Sequence[Record], *, attempts: int = 10) -> (
            DatasetVersion | None):
        """A new version with ``records`` added after the latest; None when every record was already there."""
        if not _NAME.match(name):
            raise BadInputError(f"dataset name {name!r}: 1 to 128 letters, digits, '.', '_' or '-'")
        for _ in range(attempts):
            versions, etag = await self._read_index(project, name)
            previous = await self._records(versions[-1]) if versions else []
            known = {record.id for record in previous}
            added = [record for record in records if record.id not in known]
            if not added:
                return None
            combined = [*previous, *added]
            data = TaskRecords(records=combined).SerializeToString()
            key = await self._objects.put(data)
            version = DatasetVersion(name, dataset_version(combined), key, len(combined), self._clock())
            document = {"versions": [_as_dict(v) for v in [*versions, version]]}
            body = json.dumps(document, sort_keys=True).encode()
            try:
                if etag is None:
                    await self._objects.put_named(self._index_name(project, name), body, if_none_match=True)
                else:
                    await self._objects.put_named(self._index_name(project, name), body, if_match=etag)
            except ConflictError:
                continue  # another writer added a version first: build on theirs
            return version
        raise InfraError(f"dataset {name}: the index kept changing; {attempts} attempts to add a version failed")

    async def load(self, project: str, ref: str) -> Dataset:
        """The records of ``datasets/name[@version]`` (a version may be given by a unique prefix)."""
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
        records = await self._records(chosen)
        for record in records:
            record.provenance.dataset = f"datasets/{name}@{chosen.version}"
        return Dataset(records=records, version=chosen.version, source=f"datasets/{name}", format="stored")

    async def _records(self, version: DatasetVersion) -> list[Record]:
        return list(TaskRecords.FromString(await self._objects.get(version.key)).records)


def _as_dict(version: DatasetVersion) -> dict[str, object]:
    return {"version": version.version, "key": version.key, "records": version.records,
            "created_at": version.created_at}
