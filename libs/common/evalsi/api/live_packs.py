"""The packs policy the api applies now: evalsi.yaml's evaluators: section with the lists stored through the API
(CatalogService.SetProjectPacks and SetPackAllowlist) over each project's own, re-read every ``refresh_s`` so a
change made on another replica applies within that, and at once on the replica that made it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Sequence

import grpc
import structlog

from evalsi.api.errors import ApiError
from evalsi.errors import BadInputError
from evalsi.pack_policy import MAX_PACKS, PackPolicy
from evalsi.stores.project_packs import ProjectPacksStore, StoredPacks
from evalsi.v1alpha1.catalog_service_pb2 import PackNames, ProjectPacks

log = structlog.get_logger("evalsi.api")


class LivePacks:
    """``current()`` is what Evaluate, CreateRun, ApplyPolicy and ListEvaluators apply; without a store it is
    evalsi.yaml's section alone."""

    def __init__(self, configured: PackPolicy, store: ProjectPacksStore | None = None, *, refresh_s: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.configured = configured
        self._current = configured
        self._stored: dict[str, StoredPacks] = {}
        self._store = store
        self._refresh_s = refresh_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    def current(self) -> PackPolicy:
        return self._current

    async def reload(self) -> None:
        if self._store is None:
            return
        stored = {row.project: row for row in await self._store.list_project_packs()}
        self._stored = stored
        self._current = self.configured.with_stored(
            (row.project, row.packs, row.allowed_packs) for row in stored.values())

    async def start(self) -> LivePacks:
        await self.reload()
        if self._store is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._refresh(), name="packs-refresh")
        return self

    async def close(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def set_enabled(self, project: str, packs: PackNames | None, installed: dict[str, bool],
                          by: str) -> ProjectPacks:
        """Store ``project``'s enabled packs (None: back to evalsi.yaml's); each must be installed and allowed."""
        names = _names(packs, installed, "packs.names")
        if names is not None:
            allowed = self._current.allowed(project, installed)
            outside = [name for name in names if name not in allowed]
            if outside:
                raise ApiError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"packs.names: {', '.join(outside)} not in the allowed packs of project {project!r} "
                               f"({', '.join(sorted(allowed)) or 'none'}); the owner allows packs with "
                               "SetPackAllowlist (evalsi catalog allow-packs) or evalsi.yaml's evaluators:")
        await self._writable().set_enabled_packs(project, names, at=self._clock(), by=by)
        await self.reload()
        return self.describe(project, installed)

    async def set_allowed(self, project: str, packs: PackNames | None, installed: dict[str, bool],
                          by: str) -> ProjectPacks:
        """Store ``project``'s allowlist (None: back to evalsi.yaml's); each pack must be installed."""
        names = _names(packs, installed, "allowed_packs.names")
        await self._writable().set_allowed_packs(project, names, at=self._clock(), by=by)
        await self.reload()
        return self.describe(project, installed)

    def describe(self, project: str, installed: dict[str, bool]) -> ProjectPacks:
        stored = self._stored.get(project)
        return ProjectPacks(
            project=project, enabled=sorted(self._current.enabled(project, installed)),
            allowed=sorted(self._current.allowed(project, installed)),
            enabled_stored=stored is not None and stored.packs is not None,
            allowed_stored=stored is not None and stored.allowed_packs is not None,
        )

    def _writable(self) -> ProjectPacksStore:
        if self._store is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION,
                           "this api has no metadata store to keep packs in; set them in evalsi.yaml's evaluators:")
        return self._store

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                await self.reload()
            except Exception as exc:  # the store is down: keep applying what was loaded last
                log.warning("could not reload the packs stored per project", error=str(exc))


def _names(packs: PackNames | None, installed: Collection[str], where: str) -> tuple[str, ...] | None:
    if packs is None:
        return None
    names: Sequence[str] = packs.names
    if len(names) > MAX_PACKS:
        raise BadInputError(f"{where}: {len(names)} packs exceed the limit of {MAX_PACKS}")
    for index, name in enumerate(names):
        if name not in installed:
            raise BadInputError(f"{where}[{index}]: {name!r} is not an installed pack; installed: "
                                f"{', '.join(sorted(installed))}")
    return tuple(dict.fromkeys(names))
