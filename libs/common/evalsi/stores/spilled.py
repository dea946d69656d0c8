"""A run store for an embedded run beyond its memory budget: the run, its tasks, usage and leases in memory, as in
``MemoryRunStore`` (they grow with shards, not records, and the per-call usage meter needs them there), and its
results in a SQL metadata store (SQLite in a local directory), where they are written and read back in pages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from evalsi.stores.memory import MemoryRunStore
from evalsi.stores.metadata import ResultRow
from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.score_pb2 import EvaluationResult


class SpilledRunStore(MemoryRunStore):
    """``MemoryRunStore`` whose results live in ``results`` (same upsert rule and reading order: the SQL store's)."""

    def __init__(self, results: SqlMetadataStore) -> None:
        super().__init__()
        self.results = results

    async def upsert_results(self, project: str, run_id: str, results: Sequence[EvaluationResult]) -> None:
        await self.results.upsert_results(project, run_id, results)

    async def upsert_result_rows(self, project: str, run_id: str, rows: Sequence[ResultRow]) -> None:
        await self.results.upsert_result_rows(project, run_id, rows)

    async def iter_results(
        self, project: str, run_id: str, *, batch_size: int = 5000
    ) -> AsyncIterator[list[EvaluationResult]]:
        async for batch in self.results.iter_results(project, run_id, batch_size=batch_size):
            yield batch

    async def count_results(self, project: str, run_id: str) -> dict[int, int]:
        return await self.results.count_results(project, run_id)

    def take_results(self, run_id: str, *, batch_size: int = 5000) -> Iterator[list[EvaluationResult]]:
        raise TypeError("a spilled run's results stay in its SQL store; read them with iter_results")
