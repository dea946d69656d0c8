"""SandboxService's handlers: each RPC to the manager (``evalsi.sandbox.manager``), in the project the gate admitted.

Errors become statuses the client reads back: no such sandbox or snapshot → NOT_FOUND; the cap reached →
RESOURCE_EXHAUSTED naming it; no rung meeting the minimum → FAILED_PRECONDITION whose message starts with
``SANDBOX_UNAVAILABLE`` (nothing ran); a rung without snapshots → FAILED_PRECONDITION; bad input (a spec field, a
path that leaves the workspace or is a planted link) → INVALID_ARGUMENT naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.errors import BadInputError
from evalsi.sandbox.ladder import check_ladder
from evalsi.sandbox.manager import Sandbox, SandboxBusy, SandboxManager, SandboxNotFound, SnapshotUnsupported
from evalsi.sandbox.model import DEFAULT_RESOURCES, DEFAULT_ROOT, Level, Resources, RootFilesystem, SandboxUnavailable
from evalsi.sandbox.v1alpha1 import sandbox_pb2 as pb
from evalsi.sandbox.wire import (
    MAX_LADDER,
    check_env,
    egress_to_proto,
    network_from_proto,
    report_to_proto,
    result_to_proto,
    spec_from_proto,
    verdict_to_proto,
)

# Output is streamed in messages of at most this size (a chunk a driver hands over may be larger).
OUTPUT_CHUNK = 64 * 1024
OUTPUT_QUEUE = 64
MAX_ARGV = 4096
MAX_ARGV_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Defaults:
    """What a request leaves unset: the server's ladder minimum and bounds, where image roots may lie, and the root
    every sandbox gets unless it names an image under those (sandbox.root: the runtime image by default; a request
    can never choose the host's /usr)."""

    min_isolation: Level = Level.NAMESPACED
    resources: Resources = DEFAULT_RESOURCES
    image_roots: tuple[Path, ...] = ()
    root: RootFilesystem = DEFAULT_ROOT


@contextlib.contextmanager
def _statuses() -> Iterator[None]:
    try:
        yield
    except SandboxNotFound as exc:
        raise NotFoundError(str(exc)) from None
    except SandboxBusy as exc:
        raise ApiError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), http_status=429) from None
    except SandboxUnavailable as exc:
        raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None
    except SnapshotUnsupported as exc:
        raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from None


def _created(manager: SandboxManager, sandbox: Sandbox) -> pb.CreateResponse:
    response = pb.CreateResponse(sandbox_id=sandbox.id, isolation=report_to_proto(sandbox.isolation))
    response.lease_expires.FromNanoseconds(int(manager.lease_expires_at(sandbox) * 1e9))
    return response


def _check_argv(argv: list[str]) -> list[str]:
    if not argv:
        raise BadInputError("argv: expected a command line, such as ['python3', 'test.py']")
    if len(argv) > MAX_ARGV or sum(len(arg) for arg in argv) > MAX_ARGV_BYTES:
        raise BadInputError(f"argv: at most {MAX_ARGV} arguments and {MAX_ARGV_BYTES} characters in all")
    return argv


class SandboxHandlers:
    """The handler object of the SandboxService table (``evalsi.api.table.HandlerTable``)."""

    def __init__(self, manager: SandboxManager, defaults: Defaults) -> None:
        self.manager = manager
        self.defaults = defaults

    async def probe(self, request: pb.ProbeRequest, ctx: CallContext) -> pb.ProbeResponse:
        names = tuple(request.ladder)
        if len(names) > MAX_LADDER:
            raise BadInputError(f"ladder: at most {MAX_LADDER} driver names, got {len(names)}")
        if names:  # registered drivers only: verdicts are cached per name, so made-up names must not reach the cache
            check_ladder(names, "ladder")
        with _statuses():
            verdicts = await self.manager.opener.probe_all(names or None)
        return pb.ProbeResponse(verdicts=[verdict_to_proto(v) for v in verdicts])

    async def create(self, request: pb.CreateRequest, ctx: CallContext) -> pb.CreateResponse:
        spec = spec_from_proto(request.spec, default_level=self.defaults.min_isolation,
                               default_resources=self.defaults.resources, image_roots=self.defaults.image_roots,
                               default_root=self.defaults.root)
        wait = ctx.time_remaining()
        with _statuses():
            sandbox = await self.manager.create(spec, ctx.project, request.lease_s,
                                                wait_s=None if wait is None else max(wait - 1.0, 0.0))
        return _created(self.manager, sandbox)

    async def exec(self, request: pb.ExecRequest, ctx: CallContext) -> AsyncIterator[pb.ExecEvent]:
        argv = _check_argv(list(request.argv))
        env = check_env(request.env, "env")
        if request.timeout_s < 0 or request.timeout_s != request.timeout_s:
            raise BadInputError(f"timeout_s {request.timeout_s}: seconds, 0 for the sandbox's own")
        # Bounded: a caller that reads slowly slows the program's output down (its pipe fills), instead of sandboxd
        # holding up to the output cap (1 GiB at most) per execution in memory.
        chunks: asyncio.Queue[pb.ExecEvent | None] = asyncio.Queue(maxsize=OUTPUT_QUEUE)

        async def on_output(stream: str, data: bytes) -> None:
            kind = pb.OUTPUT_STREAM_STDOUT if stream == "stdout" else pb.OUTPUT_STREAM_STDERR
            for start in range(0, len(data), OUTPUT_CHUNK):
                await chunks.put(pb.ExecEvent(output=pb.Output(stream=kind, data=data[start:start + OUTPUT_CHUNK])))

        async def run() -> pb.ExecEvent:
            try:
                with _statuses():
                    result = await self.manager.exec(request.sandbox_id, ctx.project, argv, stdin=request.stdin,
                                                     env=env or None, timeout_s=request.timeout_s or None,
                                                     on_output=on_output)
                return pb.ExecEvent(result=result_to_proto(result))
            finally:
                await chunks.put(None)

        task = asyncio.ensure_future(run())
        try:
            while (event := await chunks.get()) is not None:
                yield event
            yield await task
        finally:
            if not task.done():  # the caller went away: the execution is cancelled (the driver kills it)
                task.cancel()
                while not task.done():  # its last put may wait for room in the queue
                    with contextlib.suppress(asyncio.QueueEmpty):
                        chunks.get_nowait()
                    await asyncio.sleep(0)
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def write_files(self, request: pb.WriteFilesRequest, ctx: CallContext) -> pb.WriteFilesResponse:
        files = {item.path: item.content for item in request.files}
        if len(files) != len(request.files):
            raise BadInputError("files: a path appears twice")
        with _statuses():
            written = await self.manager.write_files(request.sandbox_id, ctx.project, files)
        return pb.WriteFilesResponse(bytes_written=written)

    async def read_files(self, request: pb.ReadFilesRequest, ctx: CallContext) -> pb.ReadFilesResponse:
        with _statuses():
            contents = await self.manager.read_files(request.sandbox_id, ctx.project, list(request.paths),
                                                     request.max_bytes)
        return pb.ReadFilesResponse(files=[pb.File(path=path, content=data) for path, data in contents.items()])

    async def snapshot(self, request: pb.SnapshotRequest, ctx: CallContext) -> pb.SnapshotResponse:
        with _statuses():
            snapshot_id, size = await self.manager.snapshot(request.sandbox_id, ctx.project)
        return pb.SnapshotResponse(snapshot_id=snapshot_id, size_bytes=size)

    async def restore(self, request: pb.RestoreRequest, ctx: CallContext) -> pb.CreateResponse:
        network = network_from_proto(request.network, "network") if request.HasField("network") else None
        with _statuses():
            sandbox = await self.manager.restore(request.snapshot_id, ctx.project, network=network,
                                                 lease_s=request.lease_s)
        return _created(self.manager, sandbox)

    async def stats(self, request: pb.StatsRequest, ctx: CallContext) -> pb.StatsResponse:
        with _statuses():
            sandbox, stats = self.manager.stats(request.sandbox_id, ctx.project)
        response = pb.StatsResponse(execs=stats.execs, cpu_s=stats.cpu_s, wall_s=stats.wall_s,
                                    max_rss_bytes=stats.max_rss_bytes,
                                    egress=[egress_to_proto(event) for event in stats.egress],
                                    isolation=report_to_proto(sandbox.isolation))
        response.created.FromNanoseconds(int(sandbox.created * 1e9))
        response.lease_expires.FromNanoseconds(int(self.manager.lease_expires_at(sandbox) * 1e9))
        return response

    async def destroy(self, request: pb.DestroyRequest, ctx: CallContext) -> pb.DestroyResponse:
        with _statuses():
            await self.manager.destroy(request.sandbox_id, ctx.project)
        return pb.DestroyResponse()
