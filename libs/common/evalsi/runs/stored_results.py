"""The results of an embedded run kept in a local store (``runs.local.run_locally`` beyond the memory budget),
read back a page at a time by code that is not async (``EvaluationResults``: iteration, ``save``, ``to_pandas``).

The store is the SQLite metadata store the run wrote, opened again for each reading on a thread of its own with its
own event loop: the caller may be inside a running loop (a notebook) or outside any, and a page is handed over
through a queue of two, so memory holds a few pages whatever the run's size. The directory is removed by
:meth:`StoredResults.close` (or when the handle is collected, or at exit) unless it is the caller's to keep.
"""

from __future__ import annotations

import asyncio
import queue
import shutil
import threading
import weakref
from collections.abc import Generator, Iterator
from pathlib import Path

from evalsi.stores.sql import SqlMetadataStore
from evalsi.v1alpha1.score_pb2 import EvaluationResult

RESULTS_DB = "results.sqlite"
PAGE_SIZE = 5000
_END = object()
_POLL_S = 0.1  # how often a producer blocked on a full queue looks whether the reader went away


class StoredResults:
    """A run's results in ``<directory>/results.sqlite``; ``count`` of them, read back in (evaluator, record, trial)
    order."""

    def __init__(self, directory: Path, project: str, run_id: str, count: int, *, keep: bool) -> None:
        self.directory = directory
        self.path = directory / RESULTS_DB
        self.project, self.run_id, self.count, self.keep = project, run_id, count, keep
        self._cleanup = None if keep else weakref.finalize(self, shutil.rmtree, directory, True)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[EvaluationResult]:
        for page in self.pages():
            yield from page

    def pages(self, page_size: int = PAGE_SIZE) -> Generator[list[EvaluationResult], None, None]:
        """The results ``page_size`` at a time, in order."""
        if self._cleanup is not None and not self._cleanup.alive:
            raise ValueError(f"the results of run {self.run_id} were closed (their directory is removed)")
        handoff: queue.Queue[object] = queue.Queue(maxsize=2)
        stop = threading.Event()
        reader = threading.Thread(
            target=self._read, args=(handoff, stop, page_size), name="evalsi-stored-results", daemon=True
        )
        reader.start()
        try:
            while True:
                item = handoff.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                assert isinstance(item, list)
                yield item
        finally:
            stop.set()  # a reader that stopped early lets the thread end at its next page
            reader.join()

    def _read(self, handoff: queue.Queue[object], stop: threading.Event, page_size: int) -> None:
        def hand(item: object) -> bool:
            while not stop.is_set():
                try:
                    handoff.put(item, timeout=_POLL_S)
                    return True
                except queue.Full:
                    continue
            return False

        async def read() -> None:
            store = await SqlMetadataStore.open_sqlite(self.path)
            try:
                async for page in store.iter_results(self.project, self.run_id, batch_size=page_size):
                    if not hand(page):
                        return
            finally:
                await store.close()

        try:
            asyncio.run(read())
        except BaseException as exc:  # handed to the reader, raised there
            hand(exc)
            return
        hand(_END)

    def close(self) -> None:
        """Remove the directory now (nothing when it is kept)."""
        if self._cleanup is not None:
            self._cleanup()

    @property
    def closed(self) -> bool:
        return self._cleanup is not None and not self._cleanup.alive
