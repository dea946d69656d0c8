"""Promotion: a trace whose online scores match ``promote.when`` joins a stored dataset as a new version."""

from __future__ import annotations

from evalsi.datasets.stored import DatasetStore, parse_ref
from evalsi.v1alpha1.record_pb2 import Record


class DatasetPromoter:
    def __init__(self, datasets: DatasetStore) -> None:
        self._datasets = datasets

    async def promote(self, project: str, dataset: str, record: Record) -> None:
        """Add the trace's record (its id is the trace id, so a re-evaluated trace is not added twice)."""
        name, _ = parse_ref(dataset)
        promoted = Record()
        promoted.CopyFrom(record)
        promoted.id = record.provenance.trace_id or record.id
        await self._datasets.append(project, name, [promoted])
