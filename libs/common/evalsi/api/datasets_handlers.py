"""Stored datasets over the API: upload a dataset file (streamed, never held whole) and list a dataset's versions.

``UploadDataset`` is a client stream of chunks over gRPC; over HTTP the file is the raw body of
``POST /v1alpha1/datasets/{name}:upload`` (a file is not a protobuf JSON message, so that route is the one the
HTTP server adds by hand, turning the body into the same chunks). The chunks are spooled to a temporary file
while their size is counted against the limit, then read back a record at a time into shards
(:meth:`DatasetStore.push`): memory stays one shard whatever the file's size.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from google.protobuf.timestamp_pb2 import Timestamp
from multidict import MultiMapping

from evalsi.api.errors import too_large
from evalsi.datasets import EXTENSIONS, stream_dataset
from evalsi.datasets.stored import DatasetStore, check_name
from evalsi.datasets.stored import DatasetVersion as StoredVersion
from evalsi.errors import BadInputError
from evalsi.limits import MAX_DATASET_UPLOAD_BYTES
from evalsi.stores.objects import ObjectStore
from evalsi.v1alpha1.run_service_pb2 import DatasetVersion, UploadDatasetRequest

UPLOAD_RPC = "evalsi.v1alpha1.RunService/UploadDataset"
UPLOAD_ROUTE = "/v1alpha1/datasets/{name}:upload"
UPLOAD_CHUNK_BYTES = 1 << 20
LIMIT_NAME = "max_dataset_upload_bytes"


class DatasetHandlers:
    """The dataset RPCs of RunService, over a :class:`DatasetStore`."""

    def __init__(self, objects: ObjectStore, *, max_upload_bytes: int = MAX_DATASET_UPLOAD_BYTES) -> None:
        self._store = DatasetStore(objects)
        self.max_upload_bytes = max_upload_bytes

    async def upload(
        self, project: str, first: UploadDatasetRequest, chunks: AsyncIterator[UploadDatasetRequest]
    ) -> DatasetVersion:
        """Store the uploaded file (``first`` names it; ``chunks`` carry the rest of its bytes) as a new version of
        its dataset, or the latest version when that holds the same records."""
        name = check_name(first.name)
        filename = _display_name(first.filename)
        fmt = first.format or _format_of(filename)
        with tempfile.TemporaryDirectory(prefix="evalsi-upload-") as spool:
            path = Path(spool) / "upload"
            await self._spool(first, chunks, path)
            if first.limit < 0:
                raise BadInputError(f"limit: {first.limit} must be positive (or 0: every record)")
            stream = stream_dataset(
                path, format=fmt, name=filename, mapping=dict(first.mapping) or None, limit=first.limit or None
            )
            stored = await self._store.push(project, name, stream, format=stream.format)
        return as_message(stored)

    async def _spool(self, first: UploadDatasetRequest, rest: AsyncIterator[UploadDatasetRequest], path: Path) -> None:
        handle: BinaryIO = await asyncio.to_thread(path.open, "wb")
        size = 0
        try:
            chunk: UploadDatasetRequest | None = first
            while chunk is not None:
                size += len(chunk.data)
                if size > self.max_upload_bytes:
                    raise too_large(f"the dataset file ({LIMIT_NAME})", None, self.max_upload_bytes)
                if chunk.data:
                    await asyncio.to_thread(handle.write, chunk.data)
                chunk = await anext(rest, None)
        finally:
            await asyncio.to_thread(handle.close)

    async def versions(self, project: str, name: str) -> list[DatasetVersion]:
        return [as_message(version) for version in await self._store.versions(project, check_name(name))]


def upload_request(name: str, query: MultiMapping[str]) -> UploadDatasetRequest:
    """The first chunk of an HTTP upload, from its path and query (filename, format, project, limit, map=t=s)."""
    limit = query.get("limit", "0")
    if not limit.isdigit() or len(limit) > 18:
        raise BadInputError(f"limit: expected a non-negative integer, got {limit!r}")
    mapping: dict[str, str] = {}
    for item in query.getall("map", []):
        target, sep, source = item.partition("=")
        if not sep or not target or not source:
            raise BadInputError(f"map: expected target=source, got {item!r}")
        mapping[target] = source
    return UploadDatasetRequest(
        name=name, filename=query.get("filename", ""), format=query.get("format", ""),
        project=query.get("project", ""), limit=int(limit), mapping=mapping,
    )


def as_message(version: StoredVersion) -> DatasetVersion:
    created = Timestamp()
    created.FromNanoseconds(int(version.created_at * 1e9))
    return DatasetVersion(
        name=version.name, version=version.version, ref=version.ref, records=version.records, create_time=created
    )


def _display_name(filename: str) -> str:
    """The client's file name without its folders (they are the client's business), for messages."""
    base = os.path.basename(filename.replace("\\", "/")).strip()
    if not base or len(base) > 255 or any(ord(c) < 32 for c in base):
        return "upload"
    return base


def _format_of(filename: str) -> str:
    fmt = EXTENSIONS.get(Path(filename).suffix.lower())
    if fmt is None:
        raise BadInputError(
            f"{filename}: cannot tell the format; give the file's name with its extension (filename) or the "
            f"format (one of {', '.join(sorted(set(EXTENSIONS.values())))})"
        )
    return fmt
